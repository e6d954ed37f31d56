"""An AFL++ edge map: its System V shared-memory segment and the binary's map size.

A binary built with ``afl-clang-fast`` / ``afl-clang-fast++`` (AFL++) attaches
the segment named by ``__AFL_SHM_ID`` at start-up and counts every edge it
takes there, one byte per edge.  :class:`SharedMap` is that segment on the
harness's side (created, attached, zeroed, removed);
:class:`harness.run.coverage.CoverageBridge` reads it after each run into
atheris' counters.

The map's size follows the binary: ``AFL_DUMP_MAP_SIZE=1 BINARY`` (AFL++
prints ``__afl_final_loc`` and exits before ``main``), else the
``__afl_final_loc`` that ``AFL_DEBUG=1`` prints; an explicit size or
``AFL_MAP_SIZE`` in the environment only ever enlarges it.  Targets get
``AFL_MAP_SIZE`` too, so AFL++ never warns about a map larger than 64 KiB.

Clean-up.  The segment is marked for removal (``shmctl(IPC_RMID)``) right
after the bridge attaches it.  On Linux a segment marked for removal can
still be attached by id by the targets (``shmat(2)``: "Linux permits a
process to attach a shared memory segment that has already been marked for
deletion"); the kernel frees it when the last process detaches, which for
the harness is also its death by SIGKILL, by libFuzzer's ``_Exit`` after a
crash or by Ctrl-C.  :class:`SharedMap` checks that a second attach still works
and otherwise keeps the segment until ``close()`` (registered with
``atexit`` and on SIGINT/SIGTERM), marking it with a ``0x4C46xxxx`` key so
that the next bridge removes segments left by dead harnesses.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import random
import re
import signal
import subprocess
import threading

__all__ = [
    "CoverageUnavailable",
    "ENV_MAP_SIZE",
    "ENV_SHM_ID",
    "KEY_BASE",
    "KEY_MASK",
    "MAP_ALIGN",
    "SharedMap",
    "probe_map_size",
    "reap_stale_segments",
    "require_map",
]

ENV_SHM_ID = "__AFL_SHM_ID"
ENV_MAP_SIZE = "AFL_MAP_SIZE"
MAP_ALIGN = 64  # AFL++ map sizes are multiples of 64
PROBE_TIMEOUT = 60.0

# Segment keys 0x4C46xxxx ("LF"): only visible while a segment is not yet
# removed; Linux resets the key to IPC_PRIVATE on IPC_RMID.
KEY_BASE = 0x4C460000
KEY_MASK = 0xFFFF0000

_IPC_CREAT = 0o1000
_IPC_EXCL = 0o2000
_IPC_RMID = 0
_EEXIST = 17


class CoverageUnavailable(RuntimeError):
    """The bridge cannot run; the message is one line for the user."""


# ------------------------------------------------------------------- libc


class _Libc:
    def __init__(self) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        for name in ("shmget", "shmat", "shmdt", "shmctl"):
            if not hasattr(lib, name):
                raise CoverageUnavailable(f"no System V shared memory here (libc lacks {name})")
        lib.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
        lib.shmget.restype = ctypes.c_int
        lib.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        lib.shmat.restype = ctypes.c_void_p
        lib.shmdt.argtypes = [ctypes.c_void_p]
        lib.shmdt.restype = ctypes.c_int
        lib.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        lib.shmctl.restype = ctypes.c_int
        self.lib = lib

    def shmat(self, shm_id: int) -> int | None:
        addr = self.lib.shmat(shm_id, None, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return None
        return addr


_LIBC: _Libc | None = None


def _libc() -> _Libc:
    global _LIBC
    if _LIBC is None:
        _LIBC = _Libc()
    return _LIBC


def _errno_text() -> str:
    e = ctypes.get_errno()
    return os.strerror(e) if e else "unknown error"


# ----------------------------------------------------------- stale segments


def _segments() -> list[dict[str, int]]:
    """Rows of /proc/sysvipc/shm (Linux), as ints; [] where it does not exist."""
    try:
        with open("/proc/sysvipc/shm", encoding="ascii") as f:
            header = f.readline().split()
            rows = [line.split() for line in f]
    except OSError:
        return []
    out = []
    for row in rows:
        try:
            out.append({k: int(v) for k, v in zip(header, row)})
        except ValueError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale_segments() -> list[int]:
    """Remove segments that bridges of dead processes left behind.

    Only segments still carrying a ``0x4C46xxxx`` key (never removed: the
    fallback path), owned by this user, attached by nobody, and whose creator
    is gone.  Returns the removed shm ids.
    """
    removed = []
    uid = os.getuid()
    for seg in _segments():
        if (
            seg.get("key", 0) & KEY_MASK == KEY_BASE
            and seg.get("uid") == uid
            and seg.get("nattch", 1) == 0
            and not _alive(seg.get("cpid", 0))
        ):
            if _libc().lib.shmctl(seg["shmid"], _IPC_RMID, None) == 0:
                removed.append(seg["shmid"])
    return removed


# ------------------------------------------------------------ map size probe

_DEBUG_LOC = re.compile(rb"__afl_final_loc(?: =)? (\d+)")


def _probe_env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (ENV_SHM_ID, ENV_MAP_SIZE, "AFL_DEBUG", "AFL_DUMP_MAP_SIZE")
    }
    env.update(extra)
    return env


def probe_map_size(binary: str, timeout: float = PROBE_TIMEOUT) -> int | None:
    """Edges in ``binary``'s AFL++ map (``__afl_final_loc``); None if it has none."""

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(
                [binary],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=_probe_env(extra),
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return None
        except OSError as e:
            raise CoverageUnavailable(f"cannot run {binary}: {e.strerror}") from None

    # AFL++ prints the map size and exits(-1) before main().
    proc = run({"AFL_DUMP_MAP_SIZE": "1"})
    if proc is not None and proc.returncode == 255:
        out = proc.stdout.strip()
        if out.isdigit():
            return int(out)
    # Older runtimes: the init debug lines name __afl_final_loc.
    proc = run({"AFL_DEBUG": "1"})
    if proc is not None:
        found = [int(m) for m in _DEBUG_LOC.findall(proc.stderr)]
        if found:
            return max(found)
    return None


def require_map(binary: str) -> int:
    """``binary``'s edge count; CoverageUnavailable when it writes no AFL++ map."""
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise CoverageUnavailable(f"{binary} does not exist or is not executable")
    edges = probe_map_size(binary)
    if edges is None:
        raise CoverageUnavailable(
            f"{binary} has no AFL++ coverage map (build it with afl-clang-fast/afl-clang-fast++)"
        )
    return edges


# ----------------------------------------------------------------- segment

_OPEN: "set[SharedMap]" = set()
_OPEN_LOCK = threading.Lock()
_PREVIOUS_HANDLERS: dict[int, object] = {}


def _close_all() -> None:
    with _OPEN_LOCK:
        maps = list(_OPEN)
    for segment in maps:
        segment.close()


def _on_signal(signum: int, frame) -> None:
    # Only segments that are not yet marked for removal need anything here
    # (the fallback path); marked ones vanish with this process anyway, and
    # detaching them would break runs if the program carries on after Ctrl-C.
    with _OPEN_LOCK:
        maps = [m for m in _OPEN if not m.removed]
    for segment in maps:
        segment.close()
    previous = _PREVIOUS_HANDLERS.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_ATEXIT_REGISTERED = False


def _install_handlers() -> None:
    global _ATEXIT_REGISTERED
    if not _ATEXIT_REGISTERED:
        atexit.register(_close_all)
        _ATEXIT_REGISTERED = True
    if _PREVIOUS_HANDLERS or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous = signal.getsignal(signum)
            if previous is _on_signal:
                continue
            _PREVIOUS_HANDLERS[signum] = previous if previous is not None else signal.SIG_DFL
            signal.signal(signum, _on_signal)
        except (ValueError, OSError):
            pass


class SharedMap:
    """One map of ``size`` bytes in System V shared memory, attached here at ``addr``
    (``shm_id`` is what targets attach); marked for removal at once where the
    kernel still lets targets attach it (``removed``), else removed by
    :meth:`close` (at exit and on SIGINT/SIGTERM too)."""

    def __init__(self, size: int, *, early_removal: bool = True) -> None:
        self.size = size
        self.shm_id = -1
        self.addr: int | None = None
        self.removed = False  # marked IPC_RMID
        self.closed = False
        self._create(early_removal)
        with _OPEN_LOCK:
            _OPEN.add(self)
        _install_handlers()

    def _create(self, early_removal: bool) -> None:
        libc = _libc()
        reap_stale_segments()
        size = self.size
        rng = random.Random()
        for _ in range(64):
            key = KEY_BASE | rng.randrange(1, 1 << 16)
            shm_id = libc.lib.shmget(key, size, _IPC_CREAT | _IPC_EXCL | 0o600)
            if shm_id >= 0 or ctypes.get_errno() != _EEXIST:
                break
        if shm_id < 0:
            raise CoverageUnavailable(
                f"cannot create a {size}-byte shared-memory map: shmget: {_errno_text()}"
            )
        addr = libc.shmat(shm_id)
        if addr is None:
            err = _errno_text()
            libc.lib.shmctl(shm_id, _IPC_RMID, None)
            raise CoverageUnavailable(f"cannot attach the shared-memory map: shmat: {err}")
        self.shm_id = shm_id
        self.addr = addr
        if not early_removal:
            return
        # Mark it for removal now: it lives exactly as long as someone has it
        # attached.  Check that a later attach by id (what each target does)
        # still works; where it does not, keep it until close().
        if libc.lib.shmctl(shm_id, _IPC_RMID, None) != 0:
            return
        probe = libc.shmat(shm_id)
        if probe is not None:
            libc.lib.shmdt(probe)
            self.removed = True
            return
        # This kernel refuses to attach removed segments: start over without.
        libc.lib.shmdt(addr)
        self.addr = None
        self._create(early_removal=False)

    def zero(self, start: int, end: int) -> None:
        """Clear bytes ``start`` to ``end`` (the part a run dirtied)."""
        if self.addr is not None and end > start:
            ctypes.memset(self.addr + start, 0, end - start)

    def close(self) -> None:
        """Detach and remove the map; idempotent."""
        if self.closed:
            return
        self.closed = True
        with _OPEN_LOCK:
            _OPEN.discard(self)
        libc = _libc()
        if self.addr is not None:
            libc.lib.shmdt(self.addr)
            self.addr = None
        if not self.removed and self.shm_id >= 0:
            libc.lib.shmctl(self.shm_id, _IPC_RMID, None)
            self.removed = True
