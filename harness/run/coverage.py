"""Coverage bridge: an AFL++ edge map read after each target run, fed to libFuzzer.

A binary built with ``afl-clang-fast`` / ``afl-clang-fast++`` (AFL++) attaches
the System V shared-memory segment named by ``__AFL_SHM_ID`` at start-up and
counts every edge it takes there, one byte per edge.  No fork server is
involved: each run is an ordinary process started by the runner, with
:attr:`CoverageBridge.env` merged into its environment.

Per run (``start_run`` / the target runs / ``finish_run``):

* ``finish_run`` copies the map once, finds its non-zero bytes with C-level
  passes (``bytes.translate``, ``split``, ``accumulate``: no Python-level loop
  over the map or the hits),
  and turns each hit edge ``e`` with hit count ``h`` into the feature
  ``8*e + bucket(h)``, ``bucket`` being AFL's classes 1, 2, 3, 4-7, 8-15,
  16-31, 32-127, 128+ (0..7), the same classes libFuzzer uses for its own
  counters.  Each feature is reported once through atheris' counter API,
  ``atheris._trace_branch(base + index)``, where ``base`` starts a block of
  counters reserved with ``atheris._reserve_counter()`` when the bridge is
  opened (before ``atheris.Fuzz()``).  libFuzzer sees one more 8-bit counter
  set to 1 per feature, i.e. a new feature exactly when AFL would see a new
  (edge, bucket) pair.  The dirty part of the map is zeroed right away.
* The counter block has ``N = min(next_pow2(8 * map_size), max_counters)``
  counters (default cap 2**19: AFL's default 64 KiB map gets one counter per
  feature).  When ``8 * map_size <= N`` every feature has its own counter;
  otherwise features fold: index = feature mod N (edges ``e`` and
  ``e + N/8`` share counters).  Why a cap: libFuzzer scans and clears every
  registered counter after each run (about 30 us per 2**19 counters here),
  and atheris allocates 2**20 counters in all, shared with its Python
  instrumentation and the fuzz target's grammar features.
* ``atheris._trace_branch`` is looked up on the ``atheris`` module at every
  ``finish_run``: atheris 3.0.0 replaces that attribute when ``Fuzz()``
  starts (the function bound at import time is a no-op stub).

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
crash or by Ctrl-C.  ``open_bridge`` checks that a second attach still works
and otherwise keeps the segment until ``close()`` (registered with
``atexit`` and on SIGINT/SIGTERM), marking it with a ``0x4C46xxxx`` key so
that the next bridge removes segments left by dead harnesses.

Set ``LOOMFUZZ_COVERAGE_LOG=PATH`` to have each bridge append one line (pid,
shm id, map size, counters) to PATH: the tests use it to follow workers.
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
from collections import deque
from itertools import accumulate, repeat
from operator import add, and_

__all__ = [
    "CoverageBridge",
    "CoverageUnavailable",
    "DEFAULT_MAX_COUNTERS",
    "ENV_MAP_SIZE",
    "ENV_SHM_ID",
    "KINDS",
    "bucket_of",
    "open_bridge",
    "probe_map_size",
    "reap_stale_segments",
    "require_map",
]

KINDS = ("afl",)
ENV_SHM_ID = "__AFL_SHM_ID"
ENV_MAP_SIZE = "AFL_MAP_SIZE"
LOG_ENV = "LOOMFUZZ_COVERAGE_LOG"
DEFAULT_MAX_COUNTERS = 1 << 19  # a 64 KiB map (AFL's default) gets one counter per feature
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


# ------------------------------------------------------------- AFL buckets


def bucket_of(hits: int) -> int:
    """AFL's hit-count class (0..7) for a non-zero 8-bit edge count."""
    if hits <= 3:
        return hits - 1
    if hits <= 7:
        return 3
    if hits <= 15:
        return 4
    if hits <= 31:
        return 5
    if hits <= 127:
        return 6
    return 7


_NONZERO = bytes([0] + [1] * 255)  # hit -> 1
_BUCKET1 = bytes([0] + [bucket_of(v) + 1 for v in range(1, 256)])  # hit -> bucket + 1
_ONE = b"\x01"
_INC = (1).__add__
_MUL8 = (8).__mul__


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


# ------------------------------------------------------------------ bridge

_OPEN: "set[CoverageBridge]" = set()
_OPEN_LOCK = threading.Lock()
_PREVIOUS_HANDLERS: dict[int, object] = {}


def _close_all() -> None:
    with _OPEN_LOCK:
        bridges = list(_OPEN)
    for bridge in bridges:
        bridge.close()


def _on_signal(signum: int, frame) -> None:
    # Only segments that are not yet marked for removal need anything here
    # (the fallback path); marked ones vanish with this process anyway, and
    # detaching them would break runs if the program carries on after Ctrl-C.
    with _OPEN_LOCK:
        bridges = [b for b in _OPEN if not b.removed]
    for bridge in bridges:
        bridge.close()
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


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class CoverageBridge:
    """One AFL++ map in shared memory, read after each run into atheris counters.

    Use ``env`` in the environment of every target run, ``start_run()``
    before it and ``finish_run()`` after it.  Not thread-safe: one bridge per
    worker process, one run at a time.
    """

    kind = "afl"

    def __init__(
        self,
        binary: str,
        map_size: int,
        *,
        max_counters: int = DEFAULT_MAX_COUNTERS,
        early_removal: bool = True,
    ) -> None:
        import atheris  # the pinned 3.0.0; checked by open_bridge

        self.binary = binary
        self.map_size = map_size
        self.edges_seen = 0
        self.runs = 0
        self.removed = False  # marked IPC_RMID
        self.closed = False
        self.shm_id = -1
        self._atheris = atheris
        self._addr: int | None = None
        self._seen: set[int] = set()
        self._unfinished = False
        self._last = b""

        # The counter block, reserved contiguously before fuzzing starts.
        features = 8 * map_size
        n = min(_next_pow2(features), max(8, _next_pow2(max_counters)))
        base = atheris._reserve_counter()
        reserve = atheris._reserve_counter
        for _ in range(n - 2):
            reserve()
        last = reserve() if n > 1 else base
        if last - base != n - 1:
            raise CoverageUnavailable(
                "atheris counters were not reserved contiguously (another thread reserving?)"
            )
        self.counters = n
        self.counter_base = base
        self.direct = features <= n
        self._mask = n - 1

        self._create(early_removal)
        self.env: dict[str, str] = {ENV_SHM_ID: str(self.shm_id), ENV_MAP_SIZE: str(map_size)}
        with _OPEN_LOCK:
            _OPEN.add(self)
        _install_handlers()
        log = os.environ.get(LOG_ENV)
        if log:
            try:
                with open(log, "a", encoding="ascii") as f:
                    f.write(
                        f"pid={os.getpid()} shm_id={self.shm_id} map_size={map_size} "
                        f"counters={n} removed={int(self.removed)}\n"
                    )
            except OSError:
                pass

    # -- shared memory -----------------------------------------------------

    def _create(self, early_removal: bool) -> None:
        libc = _libc()
        reap_stale_segments()
        size = self.map_size
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
        self._addr = addr
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
        self._addr = None
        self._create(early_removal=False)

    def _zero(self, start: int, end: int) -> None:
        if self._addr is not None and end > start:
            ctypes.memset(self._addr + start, 0, end - start)

    # -- per run -----------------------------------------------------------

    def start_run(self) -> None:
        """Make the map clean for the next run (normally already is)."""
        if self._unfinished:
            # the last run was never read (an exception in between): all of it
            self._zero(0, self.map_size)
        self._unfinished = True

    def finish_run(self) -> int:
        """Report this run's (edge, hit-count bucket) features; returns how many."""
        self._unfinished = False
        addr = self._addr
        if addr is None:
            return 0
        self.runs += 1
        data = ctypes.string_at(addr, self.map_size)
        self._last = data
        parts = data.translate(_NONZERO).split(_ONE)
        hits = len(parts) - 1
        if not hits:
            return 0
        parts.pop()
        # 1-based positions of the non-zero bytes: p_k = sum_{j<=k} (len_j + 1)
        positions = list(accumulate(map(_INC, map(len, parts))))
        first = positions[0] - 1
        ctypes.memset(addr + first, 0, positions[-1] - first)
        # bucket + 1 of each hit, in map order (zeros deleted)
        buckets = data.translate(_BUCKET1, b"\x00")
        # 8 * p_k + (bucket_k + 1) == 8 * edge + bucket + 9
        features = map(add, map(_MUL8, positions), buckets)
        if self.direct:
            indices = map(add, features, repeat(self.counter_base - 9))
        else:
            indices = map(
                add,
                map(and_, map(add, features, repeat(-9)), repeat(self._mask)),
                repeat(self.counter_base),
            )
        deque(map(self._atheris._trace_branch, indices), maxlen=0)
        seen = self._seen
        seen.update(positions)
        self.edges_seen = len(seen)
        return hits

    # -- introspection (tests, stats) ----------------------------------------

    def last_hits(self) -> dict[int, int]:
        """{edge index: hit count} of the last finished run."""
        data = self._last
        return {i: v for i, v in enumerate(data) if v}

    def feature_indices(self, hits: dict[int, int]) -> list[int]:
        """The counter indices ``finish_run`` reports for ``hits`` (reference)."""
        out = []
        for edge in sorted(hits):
            feature = 8 * edge + bucket_of(hits[edge])
            out.append(self.counter_base + (feature if self.direct else feature & self._mask))
        return out

    # -- clean-up ------------------------------------------------------------

    def close(self) -> None:
        """Detach and remove the map; idempotent."""
        if self.closed:
            return
        self.closed = True
        with _OPEN_LOCK:
            _OPEN.discard(self)
        libc = _libc()
        if self._addr is not None:
            libc.lib.shmdt(self._addr)
            self._addr = None
        if not self.removed and self.shm_id >= 0:
            libc.lib.shmctl(self.shm_id, _IPC_RMID, None)
            self.removed = True

    def __enter__(self) -> "CoverageBridge":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"CoverageBridge(binary={self.binary!r}, shm_id={self.shm_id}, "
            f"map_size={self.map_size}, counters={self.counters}, "
            f"{'direct' if self.direct else 'folded'}, edges_seen={self.edges_seen})"
        )

    def describe(self) -> str:
        """One line for the user."""
        mode = "one counter per feature" if self.direct else f"features folded mod {self.counters}"
        return (
            f"coverage: AFL++ map of {self.map_size} edges in shm {self.shm_id}, "
            f"{self.counters} atheris counters ({mode})"
        )


def _check_atheris() -> None:
    try:
        import atheris
    except ImportError as e:
        raise CoverageUnavailable(f"--coverage afl needs atheris: {e}") from None
    missing = [n for n in ("_reserve_counter", "_trace_branch") if not hasattr(atheris, n)]
    if missing:
        version = getattr(atheris, "__version__", "this version")
        raise CoverageUnavailable(
            f"atheris ({version}) has no {' or '.join(missing)}: --coverage afl needs "
            "the counter API of atheris 3.0.0"
        )


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


def open_bridge(
    kind: str,
    binary: str,
    *,
    map_size: int | None = None,
    max_counters: int = DEFAULT_MAX_COUNTERS,
    early_removal: bool = True,
) -> CoverageBridge:
    """A bridge for ``binary``'s coverage; call before ``atheris.Fuzz()``.

    ``kind`` is ``"afl"`` (an AFL++-instrumented binary).  The map size is the
    larger of the binary's own (probed once) and ``map_size`` or
    ``$AFL_MAP_SIZE``.  Raises :class:`CoverageUnavailable` with a one-line
    message when the binary has no AFL++ map, atheris lacks the counter API
    or shared memory fails.
    """
    if kind not in KINDS:
        raise CoverageUnavailable(f"unknown coverage kind {kind!r} (known: {', '.join(KINDS)})")
    _check_atheris()
    wanted = require_map(binary)
    if map_size is None and os.environ.get(ENV_MAP_SIZE, "").strip().isdigit():
        map_size = int(os.environ[ENV_MAP_SIZE])
    if map_size:
        wanted = max(wanted, map_size)
    size = max(MAP_ALIGN, -(-wanted // MAP_ALIGN) * MAP_ALIGN)
    return CoverageBridge(binary, size, max_counters=max_counters, early_removal=early_removal)
