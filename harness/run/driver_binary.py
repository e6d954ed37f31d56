"""Which persistent driver binary runs a target: where ``.ci/setup`` builds the
drivers (one per MLIR release, and the development head's), the variables that
name another one, and the driver whose LLVM release is the target's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from harness.run.driver_protocol import DriverError
from harness.run.identity import BuildIdentity, IdentityError, identify, which

__all__ = [
    "DRIVER_ENV",
    "DRIVER_NAME",
    "HEAD_DRIVER_NAME",
    "LOOM_DRIVER_ENV",
    "default_driver_path",
    "driver_candidates",
    "find_driver",
    "release_driver_path",
]

DRIVER_ENV = "LOOMFUZZ_MLIR_DRIVER"  # the upstream driver (native/build/loomfuzz-mlir-driver)
LOOM_DRIVER_ENV = "LOOMFUZZ_LOOM_DRIVER"  # the same driver built inside loom's tree
DRIVER_NAME = "loomfuzz-mlir-driver"
HEAD_DRIVER_NAME = "loomfuzz-head-driver"  # harness/run/head_driver.py (console script)


def default_driver_path() -> Path:
    """Where ``.ci/setup`` builds the driver: ``native/build/`` in the source tree."""
    import harness

    return Path(harness.__file__).resolve().parent.parent / "native" / "build" / DRIVER_NAME


def release_driver_path(major: int) -> Path:
    """Where ``.ci/setup`` builds the driver for another MLIR release (19: against
    Debian's libmlir-19, unpacked beside it; no ``--exec``)."""
    return default_driver_path().with_name(f"{DRIVER_NAME}-{major}")


def driver_candidates() -> list[str]:
    """The upstream drivers this checkout has, the default first: the MLIR 22 driver,
    one per other release (``loomfuzz-mlir-driver-19``), and the development head's
    (``loomfuzz-head-driver``, over the head extra's bindings; found beside this Python)."""
    default = default_driver_path()
    found = [str(default)] if default.is_file() and os.access(default, os.X_OK) else []
    for path in sorted(default.parent.glob(f"{DRIVER_NAME}-*")):
        if path.is_file() and os.access(path, os.X_OK) and not path.name.endswith(".tmp"):
            found.append(str(path))
    head = which(HEAD_DRIVER_NAME)
    if head:
        found.append(head)
    return found


def find_driver(target_name: str, build: BuildIdentity | None = None) -> Optional[str]:
    """The driver binary for a target, or None.

    ``mlir-opt``: ``$LOOMFUZZ_MLIR_DRIVER``, else the driver of
    :func:`driver_candidates` built from the target's release (``build``): the one
    whose ``--version`` names the same LLVM release; without a build, or when none
    does, the default ``native/build/loomfuzz-mlir-driver`` (whose release then
    differs: :func:`harness.run.runners.driver_mismatch` says so).
    ``loom-opt``: ``$LOOMFUZZ_LOOM_DRIVER`` (the driver built in loom's tree
    with ``-DLOOMFUZZ_WITH_LOOM=ON``; README: Persistent targets).
    A variable naming a missing or non-executable file raises ``DriverError``.
    """
    env = DRIVER_ENV if target_name == "mlir-opt" else LOOM_DRIVER_ENV
    given = os.environ.get(env)
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise DriverError(f"{env}={given}: no such executable file")
        return os.path.abspath(given)
    if target_name != "mlir-opt":
        return None
    candidates = driver_candidates()
    if build is not None and build.version:
        for candidate in candidates:
            try:
                if identify(candidate).version == build.version:
                    return candidate
            except IdentityError:
                continue
    default = default_driver_path()
    return str(default) if str(default) in candidates else None
