"""Files that appear whole or not at all: write a hidden temporary, then rename.

``write_atomically(path, data)`` writes ``.NAME.PID.partial`` beside ``path``
and renames it over ``path`` (``rename`` is atomic within a folder).  A
process killed mid-write leaves at most the hidden ``.partial`` file, which
no reader takes for a finding (triage and the campaign skip hidden files and
the ``.partial`` suffix) and :func:`remove_partials` clears on the next run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Union

__all__ = ["PARTIAL_SUFFIX", "remove_partials", "write_atomically"]

PARTIAL_SUFFIX = ".partial"
_PARTIAL = re.compile(r"^\..+\.\d+" + re.escape(PARTIAL_SUFFIX) + r"$")


def write_atomically(path: Union[str, Path], data: Union[str, bytes]) -> None:
    """Write ``data`` (text is UTF-8) to ``path`` through a hidden temporary."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}{PARTIAL_SUFFIX}")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remove_partials(folder: Union[str, Path]) -> int:
    """Delete the temporaries that killed writers left in ``folder`` (not
    recursive); returns how many.  Only names :func:`write_atomically` makes,
    and only those whose writer process is gone."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed = 0
    for entry in folder.iterdir():
        match = _PARTIAL.match(entry.name)
        if not match:
            continue
        pid = int(entry.name[: -len(PARTIAL_SUFFIX)].rsplit(".", 1)[1])
        if os.path.exists(f"/proc/{pid}"):
            continue  # its writer may still be at it
        try:
            entry.unlink()
            removed += 1
        except OSError:
            pass
    return removed
