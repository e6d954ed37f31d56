"""The atheris self-fuzz target: loom-fuzz's own grammar code.

Usage (``fuzz_targets/grammar_fuzzer.py`` runs :func:`main`)::

    grammar_fuzzer.py [--options=FILE] [libFuzzer flags] [CORPUS_DIR ...]

Every input (libFuzzer's, i.e. our mutator's output) must:

* decode to a derivation tree of the default grammar;
* render in both renderings, the canonical one accepted by the independent
  checker (``harness.checker.check_text``: no violation of P1-P24), the
  oracle one with one generic region per site;
* round-trip: ``decode(encode(tree)) == tree``, ``encode`` at most the
  grammar's whole choice sequence (17 bytes), bytes past it ignored;
* and, mutated and crossed over by ``harness.core.mutate`` (with the
  pure-Python byte mutation, seeded from the input), give non-empty outputs
  within ``max_size`` that decode to trees of the grammar, the same output
  for the same seed.  (The inputs libFuzzer runs are our mutator's outputs:
  the checker sees every one of those.)

A broken rule raises ``SelfCheckFailure`` (atheris writes ``crash-<sha1>``).
The ``harness`` and ``grammars`` modules are instrumented for coverage, except
the checker (the oracle; uninstrumented it is several times faster).
Of the options (``harness.fuzzing.options``: ``--options=FILE``, else
``$LOOMFUZZ_OPTIONS``) it reads ``artifacts`` (sets ``-artifact_prefix=DIR/``
unless given) and ``summary`` (where its summary record goes).
"""

from __future__ import annotations

import gc
import os
import sys
import time
import zlib

import atheris

from harness.fuzzing import stopping
from harness.fuzzing.libfuzzer import ensure_flag, has_flag
from harness.fuzzing.options import target_options
from harness.fuzzing.worker_summary import WorkerSummary, append_summary, register_exit_hooks

# The checker is the oracle, not the code under test: left uninstrumented (and fast).
from harness.checker import check_text  # noqa: E402

with atheris.instrument_imports(include=["harness", "grammars"]):
    from harness.core.codec import decode, encode
    from harness.core.codec import max_input_length
    from harness.core.grammar import default_grammar
    from harness.core.mutate import Mutator
    from harness.core.render import renderer
    from harness.core.tree import is_valid

GRAMMAR = default_grammar()
MAX_BYTES = max_input_length(GRAMMAR)
render_canonical = renderer(GRAMMAR, "canonical").render
render_oracle = renderer(GRAMMAR, "oracle").render

PROG = "grammar_fuzzer"
SPATIAL_REGION = '"loom.spatial_region"('


class SelfCheckFailure(AssertionError):
    """A rule of the grammar code broken by this input."""


def _fail(data: bytes, what: str) -> None:
    raise SelfCheckFailure(f"{what} (input {data.hex() or 'empty'})")


_accepted: set = set()  # trees whose canonical text the checker accepted
_checker = Mutator(GRAMMAR)  # pure-Python byte mutation: deterministic per seed
_mutator = Mutator(GRAMMAR)  # libFuzzer's own mutations through atheris.Mutate


def _check_tree(data: bytes, tree, what: str) -> None:
    if not is_valid(GRAMMAR, tree):
        _fail(data, f"{what}: not a derivation tree of the grammar: {tree!r}")


def _check_program(data: bytes, tree, what: str) -> None:
    if tree in _accepted:
        return
    _check_tree(data, tree, what)
    canonical = render_canonical(tree)
    violations = check_text(canonical)
    if violations:
        shown = "; ".join(v.format("<program>") for v in violations[:3])
        _fail(data, f"{what}: the checker rejects the canonical text: {shown}")
    oracle = render_oracle(tree)
    if oracle.count(SPATIAL_REGION) != canonical.count(SPATIAL_REGION):
        _fail(data, f"{what}: the oracle text has {oracle.count(SPATIAL_REGION)} regions, "
                    f"the canonical one {canonical.count(SPATIAL_REGION)}")
    if len(_accepted) > 200_000:
        _accepted.clear()
    _accepted.add(tree)


class Stats:
    executions = 0
    first = None
    last = 0.0
    summary_path = None  # the options' summary file


def test_one_input(data: bytes) -> None:
    stopping.exit_if_stopping()  # a stop request: leave here, between inputs
    now = time.monotonic()
    if Stats.first is None:
        Stats.first = now
    tree = decode(data, GRAMMAR)
    _check_program(data, tree, "decoded input")
    encoded = encode(tree, GRAMMAR)
    if len(encoded) > MAX_BYTES:
        _fail(data, f"encode gave {len(encoded)} bytes, more than {MAX_BYTES}")
    if decode(encoded, GRAMMAR) != tree:
        _fail(data, "decode(encode(tree)) != tree")
    if decode(data[:MAX_BYTES], GRAMMAR) != tree:
        _fail(data, "bytes past the whole choice sequence changed the program")

    seed = zlib.crc32(data)
    max_size = 1 + seed % (MAX_BYTES + 3)  # small sizes truncate
    mutant = _checker.mutate(data, max_size, seed)
    if not 0 < len(mutant) <= max_size:
        _fail(data, f"mutate gave {len(mutant)} bytes for max_size {max_size}")
    if _checker.mutate(data, max_size, seed) != mutant:
        _fail(data, f"mutate is not deterministic for seed {seed}")
    # Mutants and children are checked for shape here; libFuzzer runs the
    # ones it keeps through this function, where the checker sees them.
    _check_tree(data, decode(mutant, GRAMMAR), f"mutant (seed {seed}, max_size {max_size})")
    other = data[::-1]
    child = _checker.crossover(data, other, max_size, seed)
    if not 0 < len(child) <= max_size:
        _fail(data, f"crossover gave {len(child)} bytes for max_size {max_size}")
    _check_tree(data, decode(child, GRAMMAR), f"crossover child (seed {seed}, max_size {max_size})")
    Stats.executions += 1
    Stats.last = time.monotonic()


def _summary() -> None:
    if getattr(_summary, "done", False):
        return
    _summary.done = True
    seconds = (Stats.last - Stats.first) if Stats.first is not None else 0.0
    record = WorkerSummary(worker=f"pid-{os.getpid()}", executions=Stats.executions,
                           seconds=seconds, programs_checked=len(_accepted))
    if Stats.summary_path is not None:
        try:
            append_summary(Stats.summary_path, record)
        except OSError:  # the campaign then counts libFuzzer's lines
            pass
    try:
        print(record.line(), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def main(argv: list[str]) -> None:
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__)
        return
    options, flags = target_options(argv, PROG)
    Stats.summary_path = options.summary
    artifacts = options.artifacts
    if artifacts and not has_flag(flags, "artifact_prefix"):
        os.makedirs(artifacts, exist_ok=True)
        flags.append(f"-artifact_prefix={os.path.abspath(artifacts)}{os.sep}")
    ensure_flag(flags, "max_len", str(MAX_BYTES + 3))
    ensure_flag(flags, "len_control", "0")
    register_exit_hooks(_summary)
    stopping.guard(flags, _summary)  # signals and the campaign's end stop us whole
    atheris.Setup(flags, test_one_input, custom_mutator=_mutator.mutate,
                  custom_crossover=_mutator.crossover)
    _mutator.use_libfuzzer(lambda data, max_size: atheris.Mutate(data, max_size))
    gc.freeze()  # start-up objects out of the collector's way: cheaper full collections
    atheris.Fuzz()
