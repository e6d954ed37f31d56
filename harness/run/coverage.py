"""Coverage bridge: an AFL++ edge map read after each target run, fed to libFuzzer.

A binary built with ``afl-clang-fast`` / ``afl-clang-fast++`` (AFL++) attaches
the System V shared-memory segment named by ``__AFL_SHM_ID`` at start-up and
counts every edge it takes there, one byte per edge (:mod:`harness.run.afl_map`).  No fork server is
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

The map itself (its shared-memory segment, its clean-up after any death of the
harness, the binary's map size) is :mod:`harness.run.afl_map`'s.

Set ``LOOMFUZZ_COVERAGE_LOG=PATH`` to have each bridge append one line (pid,
shm id, map size, counters) to PATH: the tests use it to follow workers.
"""

from __future__ import annotations

import ctypes
import os
from collections import deque
from itertools import accumulate, repeat
from operator import add, and_

from harness.run.afl_map import (
    ENV_MAP_SIZE,
    ENV_SHM_ID,
    MAP_ALIGN,
    CoverageUnavailable,
    SharedMap,
    require_map,
)

__all__ = ["CoverageBridge", "DEFAULT_MAX_COUNTERS", "KINDS", "bucket_of", "open_bridge"]

KINDS = ("afl",)
LOG_ENV = "LOOMFUZZ_COVERAGE_LOG"
DEFAULT_MAX_COUNTERS = 1 << 19  # a 64 KiB map (AFL's default) gets one counter per feature


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


# ------------------------------------------------------------------ bridge

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
        self.closed = False
        self._atheris = atheris
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

        self.segment = SharedMap(map_size, early_removal=early_removal)
        self.env: dict[str, str] = {ENV_SHM_ID: str(self.shm_id), ENV_MAP_SIZE: str(map_size)}
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

    @property
    def shm_id(self) -> int:
        return self.segment.shm_id

    @property
    def removed(self) -> bool:
        """Its segment is marked for removal (it goes with the last process attached)."""
        return self.segment.removed

    # -- per run -----------------------------------------------------------

    def start_run(self) -> None:
        """Make the map clean for the next run (normally already is)."""
        if self._unfinished:
            # the last run was never read (an exception in between): all of it
            self.segment.zero(0, self.map_size)
        self._unfinished = True

    def finish_run(self) -> int:
        """Report this run's (edge, hit-count bucket) features; returns how many."""
        self._unfinished = False
        addr = self.segment.addr
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
        self.segment.close()

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
