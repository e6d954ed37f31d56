"""Which persistent driver binary runs a target: where ``.ci/setup`` builds the
drivers (one per MLIR release, and the development head's), the variables that
name another one, the driver whose LLVM release is the target's, and the one
binary each driver stands for (:func:`stands_for`): a driver is linked with one
build's library, so it is that build's own tool, never a wrapper around it or
another build that happens to print the same ``--version``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from harness.run.driver_protocol import DriverError
from harness.targets.heads import HEADS, head_of_driver
from harness.targets.identity import BuildIdentity, IdentityError, identify, which

__all__ = [
    "DRIVER_ENV",
    "DRIVER_NAME",
    "HEAD_DRIVER_NAMES",
    "LOOM_DRIVER_ENV",
    "default_driver_path",
    "driver_candidates",
    "find_driver",
    "release_driver_path",
    "stands_for",
]

DRIVER_ENV = "LOOMFUZZ_MLIR_DRIVER"  # the upstream driver (native/build/loomfuzz-mlir-driver)
LOOM_DRIVER_ENV = "LOOMFUZZ_LOOM_DRIVER"  # the same driver built inside loom's tree
DRIVER_NAME = "loomfuzz-mlir-driver"
#: the head wheels' persistent drivers (harness/run/head_driver.py, console scripts)
HEAD_DRIVER_NAMES = tuple(head.driver for head in HEADS)


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
    one per other release (``loomfuzz-mlir-driver-19``), and the development head's, one per
    head wheel (``loomfuzz-head-driver``, ``loomfuzz-mlir-opt-head-driver``: over the head
    extra's bindings; found beside this Python)."""
    default = default_driver_path()
    found = [str(default)] if default.is_file() and os.access(default, os.X_OK) else []
    for path in sorted(default.parent.glob(f"{DRIVER_NAME}-*")):
        if path.is_file() and os.access(path, os.X_OK) and not path.name.endswith(".tmp"):
            found.append(str(path))
    for name in HEAD_DRIVER_NAMES:
        head = which(name)
        if head:
            found.append(head)
    return found


def find_driver(target_name: str, build: BuildIdentity | None = None) -> Optional[str]:
    """The driver binary for a target, or None.

    ``mlir-opt``: ``$LOOMFUZZ_MLIR_DRIVER``, else the driver of
    :func:`driver_candidates` built from the target's release (``build``): the one
    whose ``--version`` names the same LLVM release, and of several such (the two head
    wheels are both ``24.0.0git``) the one that stands for the target's binary
    (:func:`stands_for`); without a build, or when none does, the default ``native/build/loomfuzz-mlir-driver`` (whose release then
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
        same = []
        for candidate in candidates:
            try:
                if identify(candidate).version == build.version:
                    same.append(candidate)
            except IdentityError:
                continue
        for candidate in same:
            if build.binary in (stands_for(candidate) or ()):
                return candidate
        if same:
            return same[0]
    default = default_driver_path()
    return str(default) if str(default) in candidates else None


def stands_for(driver: str) -> tuple[str, ...] | None:
    """The real paths of the binaries ``driver`` stands for, or None for a driver the user
    named (``$LOOMFUZZ_MLIR_DRIVER``, ``$LOOMFUZZ_LOOM_DRIVER``: they said which build it is).

    A driver ``.ci/setup`` built for release N is linked with Debian's libMLIR N, the
    library of ``mlir-opt-N``: it stands for that binary alone (empty where it is not
    installed).  A head's driver runs a head wheel's bindings: it stands for that head's
    tool (``iree-opt``: the binary beside the bindings and this environment's ``iree-opt``
    script, which runs it; ``mlir-opt-head``: the script over the bindings)."""
    real = os.path.realpath(driver)
    for env in (DRIVER_ENV, LOOM_DRIVER_ENV):
        given = os.environ.get(env)
        if given and os.path.realpath(given) == real:
            return None
    head = head_of_driver(driver)
    if head is not None:
        return head.stands_for()
    try:
        version = identify(driver).version
    except IdentityError:
        return ()
    major = version.split(".")[0] if version else ""
    tool = which(f"mlir-opt-{major}") if major.isdigit() else None
    return (os.path.realpath(tool),) if tool else ()
