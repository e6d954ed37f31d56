"""The mutator's source of randomness and its pure-Python byte mutation."""

from __future__ import annotations

_MASK64 = (1 << 64) - 1
_INV53 = 1.0 / (1 << 53)


class FastRandom:
    """A 64-bit LCG (Knuth's MMIX constants): cheap to reseed, deterministic."""

    __slots__ = ("state",)

    def __init__(self, seed: int = 0) -> None:
        self.state = 0
        self.seed(seed)

    def seed(self, seed: int) -> None:
        # splitmix64 finaliser: nearby seeds give unrelated streams.
        z = (seed + 0x9E3779B97F4A7C15) & _MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        self.state = z ^ (z >> 31)

    def random(self) -> float:
        s = self.state = (self.state * 6364136223846793005 + 1442695040888963407) & _MASK64
        return (s >> 11) * _INV53

    def below(self, n: int) -> int:
        """An int in ``[0, n)``."""
        s = self.state = (self.state * 6364136223846793005 + 1442695040888963407) & _MASK64
        return ((s >> 32) * n) >> 32


def python_byte_mutate(data: bytes, max_size: int, rng: FastRandom) -> bytes:
    """libFuzzer-like byte mutations, in pure Python (deterministic per ``rng``)."""
    limit = max_size
    if limit <= 0:
        return b""
    buf = bytearray(data[:limit])
    kind = rng.below(7)
    if not buf or kind == 0:  # set one byte to a random value (growing with zeros)
        at = rng.below(min(limit, len(buf) + 8))
        if len(buf) <= at:
            buf.extend(bytes(at + 1 - len(buf)))
        buf[at] = rng.below(256)
    elif kind == 1:  # flip one bit
        at = rng.below(len(buf))
        buf[at] ^= 1 << rng.below(8)
    elif kind == 2:  # add or subtract a small delta
        at = rng.below(len(buf))
        buf[at] = (buf[at] + (rng.below(70) - 35)) & 0xFF
    elif kind == 3:  # insert a random byte
        buf.insert(rng.below(len(buf) + 1), rng.below(256))
    elif kind == 4:  # erase a byte
        del buf[rng.below(len(buf))]
    elif kind == 5:  # swap two bytes
        i, j = rng.below(len(buf)), rng.below(len(buf))
        buf[i], buf[j] = buf[j], buf[i]
    else:  # copy a run of bytes over another place
        n = 1 + rng.below(3)
        src, dst = rng.below(len(buf)), rng.below(min(limit, len(buf) + 1))
        chunk = buf[src:src + n]
        end = min(dst + len(chunk), limit)
        if len(buf) < end:
            buf.extend(bytes(end - len(buf)))
        buf[dst:end] = chunk[: end - dst]
    return bytes(buf[:limit])
