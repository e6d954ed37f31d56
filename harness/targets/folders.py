"""Where a command's results go, keyed by the build under test and the command.

Results of different builds must never mix (issue 46: a stand-in triage bucketed 150
``mlir-opt-19`` findings; a ``fuzz --target mlir-opt`` overwrote the stand-in campaign's
``fuzz-options.json``; the ``run`` journal landed in the fuzz folder).  So:

* :func:`build_key` names a build in a folder name: ``mlir-opt-19`` for a release of an
  mlir-opt-like tool (its basename and major release), ``loom-opt-<digest>`` for a loom
  build (loom's ``--version`` names LLVM's release, not loom's: its content decides), and
  ``<basename>-<digest>`` for anything else (a development head, a tool of one's own);
* :func:`default_folder` is ``artifacts/<build>/<command>``, each command's default;
* :func:`claim_folder` stamps a folder with its build and command (``.loomfuzz-folder.json``,
  hidden, so triage's scan skips it) and refuses, in one line that says which and what to
  pass, a folder that holds another build's or another command's results (a folder written
  before the stamp: by its findings' records and its state files).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path

from harness.targets.identity import identify_named

__all__ = ["ARTIFACTS_ROOT", "FolderConflict", "STAMP", "build_key", "claim_folder", "default_folder",
           "recorded_key"]

#: The root of every default folder.
ARTIFACTS_ROOT = Path("artifacts")
#: The stamp of a folder: which build and which command write there.
STAMP = ".loomfuzz-folder.json"
#: A finding's record older than the stamps, read to tell the build of an unstamped folder.
_RECORDS_READ = 50
_DIGITS = re.compile(r"-\d+$")


class FolderConflict(Exception):
    """A folder holds another build's or another command's results (one line; exit 2)."""


@functools.lru_cache(maxsize=32)
def _digest(path: str, size: int, mtime_ns: int) -> str:  # size, mtime: the cache key
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:10]


def _content_digest(binary: str) -> str:
    real = os.path.realpath(binary)
    try:
        stat = os.stat(real)
        return _digest(real, stat.st_size, stat.st_mtime_ns)
    except OSError:
        return hashlib.sha256(real.encode()).hexdigest()[:10]  # gone: its path names it


def build_key(family: str, binary: str) -> str:
    """The folder name of the build ``binary`` judged as ``family`` (``loom-opt``,
    ``mlir-opt``, or a tool's own name): ``mlir-opt-19``, ``loom-opt-3fa2b1c09d``,
    ``iree-opt-77c0e1f2aa``.  Same build, same key; a rebuilt loom gets another."""
    identity = identify_named(binary)
    binary = identity.binary if identity else binary  # a name on PATH: the file it is
    name = _DIGITS.sub("", os.path.basename(binary)) or "build"
    if family == "loom-opt":
        return f"loom-opt-{_content_digest(binary)}"
    version = identity.version if identity else None
    if family == "mlir-opt" and version and re.fullmatch(r"\d+\.\d+\.\d+", version):
        return f"{name}-{identity.major}"  # a release: its number names it
    return f"{name}-{_content_digest(binary)}"


def default_folder(key: str, command: str) -> Path:
    """``artifacts/<build>/<command>``: where ``command`` writes for that build by default."""
    return ARTIFACTS_ROOT / key / command


def recorded_key(record: dict) -> str | None:
    """The build key a finding's JSON record names (``target.key``), or None (older records)."""
    target = record.get("target")
    return target.get("key") if isinstance(target, dict) else None


def _read_stamp(folder: Path) -> dict | None:
    try:
        stamp = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _unstamped_owner(folder: Path, binary: str, command: str) -> str | None:
    """Who wrote an unstamped folder, when it is not (``binary``, ``command``): one phrase."""
    if command != "fuzz" and (folder / "fuzz-options.json").exists():
        return "a fuzz campaign's state (fuzz-options.json)"
    if command == "fuzz" and any(folder.glob("sweep-*.jsonl")):
        return "a sweep's journal (sweep-*.jsonl)"
    real = os.path.realpath(binary)
    for k, path in enumerate(sorted(folder.glob("crash-*.json"))):
        if k == _RECORDS_READ:
            break
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        build = ((record.get("target") or {}).get("build") or {}) if isinstance(record, dict) else {}
        recorded = build.get("binary")
        if recorded and os.path.realpath(recorded) != real:
            return f"findings of {recorded} (e.g. {path.name})"
    return None


def claim_folder(folder: Path, option: str, key: str, binary: str, command: str, *,
                 write: bool = True) -> None:
    """Make ``folder`` the one of build ``key`` (its binary ``binary``) and ``command``, or
    raise :class:`FolderConflict` naming who holds it and what to pass (``option``: the
    command's option for it, e.g. ``--artifacts``).  Creates the folder and its stamp
    (``write=False``: only the check, before anything has run)."""
    stamp = _read_stamp(folder)
    default = default_folder(key, command)
    if stamp is not None:
        if stamp.get("build") == key and stamp.get("command") == command:
            return
        raise FolderConflict(
            f"{option} {folder} holds the {stamp.get('command')} results of {stamp.get('build')}, not "
            f"{command}'s of {key}: pass another {option} (the default, {default}, keeps each build's "
            "and each command's apart)")
    if folder.is_dir():
        owner = _unstamped_owner(folder, binary, command)
        if owner:
            raise FolderConflict(
                f"{option} {folder} holds {owner}, not {command}'s results of {key}: pass another "
                f"{option} (the default, {default}, keeps each build's and each command's apart)")
    if not write:
        return
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"build": key, "binary": os.path.realpath(binary), "command": command}, indent=2)
    # whole or absent, also when the shards of one sweep share the folder and start at once
    partial = folder / f"{STAMP}.{os.getpid()}.partial"
    partial.write_text(text + "\n", encoding="utf-8")
    os.replace(partial, folder / STAMP)
