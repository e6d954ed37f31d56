"""What a head wheel's bindings library is, read from the library itself: its LLVM version,
the llvm-project commit it was built from, and every pass it registers.

* The version: the library's exported ``LLVMGetVersion`` (LLVM's C API) gives the numbers;
  the suffix (``git``) and the commit come from the version string LLVM compiles in
  (``LLVM version 24.0.0git (10dbfc48...``), used only where its numbers are ``LLVMGetVersion``'s.
* The passes: MLIR keeps no list a C API can read, so every name that could be one is tried:
  each NUL-terminated lowercase string of the library's ``.rodata`` and each of its suffixes
  (the linker merges ``cse`` into the tail of ``early-cse``), verified one by one with
  ``PassManager.parse("builtin.module(NAME)")``, which refuses a name that is no registered
  pass or pipeline with ``does not refer to a registered pass``.  About 2 s, so the answer
  is cached (``$XDG_CACHE_HOME/loomfuzz``), keyed on the library's path, size and
  modification time: an upgraded wheel is read again.

Only the standard library and the bindings are imported: it is a start-up path.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import re
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.targets.head_bindings import HeadBindings

__all__ = ["LibraryFacts", "library_facts", "registered_passes"]

_CACHE_FORMAT = 2
_NAME = re.compile(rb"[a-z][a-z0-9-]{1,79}(?=\0)")
_VERSION_AND_COMMIT = re.compile(rb"LLVM version (\d+)\.(\d+)\.(\d+)(\w*) \(([0-9a-f]{40})")
_NOT_A_PASS = "does not refer to a registered pass"


@dataclass(frozen=True)
class LibraryFacts:
    """A bindings library as it describes itself."""

    library: str
    version: str  # "24.0.0git"
    commit: str | None  # the llvm-project commit, where the library names one
    passes: tuple[str, ...]  # every pass and pass pipeline it registers, sorted


def _rodata(data: mmap.mmap) -> bytes:
    """The ``.rodata`` section of an ELF64 shared library (all of it when there is none)."""
    if data[:5] != b"\x7fELF\x02":
        return data[:]
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(k: int) -> tuple[int, int, int]:
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + k * shentsize)
        return name, offset, size

    strings = section(shstrndx)[1]
    for k in range(shnum):
        name, offset, size = section(k)
        start = strings + name
        if data[start:data.find(b"\0", start)] == b".rodata":
            return data[offset:offset + size]
    return data[:]


def _candidates(rodata: bytes) -> set[str]:
    found: set[str] = set()
    for word in set(_NAME.findall(rodata)):
        for k in range(len(word) - 1):
            tail = word[k:]
            if 97 <= tail[0] <= 122 and not tail.endswith(b"-") and b"--" not in tail:
                found.add(tail.decode())
    return found


def registered_passes(bindings: HeadBindings, rodata: bytes) -> tuple[str, ...]:
    """Every candidate name of ``rodata`` that the bindings' ``PassManager.parse`` takes."""
    ir, passmanager = bindings.load()
    context = ir.Context()
    passes = []
    for name in sorted(_candidates(rodata)):
        try:
            passmanager.PassManager.parse(f"builtin.module({name})", context)
        except Exception as error:  # noqa: BLE001 - MLIR's one exception type for every parse error
            if _NOT_A_PASS in str(error):
                continue  # anything else (an anchor it cannot nest on) is still a registered pass
        passes.append(name)
    return tuple(passes)


def _version(library: Path, rodata: bytes) -> tuple[str, str | None]:
    numbers = [ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()]
    ctypes.CDLL(str(library)).LLVMGetVersion(*(ctypes.byref(n) for n in numbers))
    version = ".".join(str(n.value) for n in numbers)
    for match in _VERSION_AND_COMMIT.finditer(rodata):
        if ".".join(g.decode() for g in match.groups()[:3]) == version:
            return version + match[4].decode(), match[5].decode()
    return version, None


def _cache_file(library: Path) -> Path:
    stat = library.stat()
    key = f"{_CACHE_FORMAT}:{library}:{stat.st_size}:{stat.st_mtime_ns}".encode()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "loomfuzz" / f"head-{hashlib.sha256(key).hexdigest()[:20]}.json"


def library_facts(bindings: HeadBindings) -> LibraryFacts:
    """The bindings library's version, commit and passes (cached; see the module docstring).
    Raises :class:`harness.targets.head_bindings.HeadNotInstalled`."""
    library = bindings.library_path().resolve()
    cache = _cache_file(library)
    try:
        saved = json.loads(cache.read_text())
        return LibraryFacts(saved["library"], saved["version"], saved["commit"], tuple(saved["passes"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with open(library, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        rodata = _rodata(data)
    version, commit = _version(library, rodata)
    facts = LibraryFacts(str(library), version, commit, registered_passes(bindings, rodata))
    try:  # written whole or not at all: a concurrent reader never sees half of it
        cache.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=cache.parent, delete=False, suffix=".tmp") as out:
            json.dump(facts.__dict__ | {"passes": list(facts.passes)}, out)
        os.replace(out.name, cache)
    except OSError:
        pass  # no cache: read again next time
    return facts
