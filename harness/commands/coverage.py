"""``loomfuzz coverage``: which alternatives and parent/child pairs of the grammar a corpus reaches;
with ``--edges``, which edge values reach which operands (:mod:`harness.execute.edge_coverage`); with
``--pass-effect``, what each pass of a pipeline does to them (:mod:`harness.run.pass_effect`)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.commands import add_grammar_arguments, grammar_from_args, share, with_examples

EPILOG = """\
CORPUS: fuzz inputs (raw bytes, decoded as the fuzz target does), .mlir files
(parsed back into programs of the grammar; '// -----' streams too) and
folders of them (.mlir files and files without a suffix, recursively).  A text
that is not a program of the grammar is skipped and listed.

k=1: every alternative of every nonterminal with a choice; k=2: every
alternative under every alternative of its nearest enclosing choice.

--edges (grammars in the P1-P24 contract): every program's exec rendering
(the differential oracle's; with constant twins for the --twins share of
programs, drawn by each program's text as the oracle draws them), and for each
operation and operand position, how many of its edge values (i32: 0, 1, -1, 2,
2^k, INT_MIN, INT_MIN+1, INT_MAX, INT_MAX-1; i1: false, true) reach it as a
compile-time constant, inside a narrow known range (2-16 values: an andi
mask, minsi/maxsi with a constant, a select of constants, extui of an i1,
...) and as a value at run time (the 24 rows of the input table).

--pass-effect (grammars in the P1-P24 contract): the same exec renderings
(twins as --edges draws them) through --mlir-opt, one pass of --pipeline at a
time, in order (their driver @main left out): per pass the share of programs whose printed module it
changed, in which it rewrote an operation other than a constant and in which
it folded one into a constant, and the operations it folded, replaced, removed
and added.
"""

EXAMPLES = (
    ("loomfuzz coverage fuzz-corpus/", "the k-path grammar coverage of a campaign's corpus"),
    ("loomfuzz coverage --edges programs/", "also which edge values reach which operands"),
    ("loomfuzz coverage --pass-effect --mlir-opt mlir-opt-19 programs/",
     "what each pass of mlir-opt-19's pipeline does to the programs"),
)


def configure(parser: argparse.ArgumentParser) -> None:
    from harness.execute.twins import DEFAULT_TWINS

    with_examples(parser, EXAMPLES, EPILOG)
    parser.add_argument("corpus", nargs="+", metavar="CORPUS", help="fuzz inputs, program files (the grammar's SUFFIX, default .mlir), folders")
    add_grammar_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--edges", action="store_true",
                        help="also the edge-value operand coverage of the programs' exec renderings: per "
                             "operation and operand, edge values reached as a constant, a narrow known range "
                             "and at run time")
    parser.add_argument("--twins", type=share, default=DEFAULT_TWINS, metavar="SHARE",
                        help=f"with --edges: the share of programs measured with constant twins, as the "
                             f"differential oracle's --twins (default {DEFAULT_TWINS:g}; 0: none)")
    parser.add_argument("--pass-effect", action="store_true",
                        help="also what each pass of --pipeline does to the programs' exec renderings, one "
                             "pass at a time through --mlir-opt: the share it changes, the operations it folds, "
                             "replaces, removes and adds")
    parser.add_argument("--pipeline", default=None,
                        help="with --pass-effect: the pass pipeline (default: mlir-opt's, "
                             "canonicalize,cse,sccp,symbol-dce)")
    parser.add_argument("--mlir-opt", metavar="PATH", default="mlir-opt-22",
                        help="with --pass-effect: the optimizer (default mlir-opt-22)")


def run(args: argparse.Namespace) -> int:
    from harness.fuzzing.grammar_coverage import corpus_coverage

    grammar = grammar_from_args(args)
    if args.edges or args.pass_effect:
        from harness.execute.exec_rendering import EXEC_STYLE, style_error

        problem = style_error(grammar, EXEC_STYLE)
        if problem:
            flag = "--edges" if args.edges else "--pass-effect"
            print(f"loomfuzz coverage: error: {flag} measures exec renderings: {problem}", file=sys.stderr)
            return 2
    try:
        result = corpus_coverage(args.corpus, grammar)
        modules = _exec_modules(args.corpus, grammar, args.twins) if args.edges or args.pass_effect else None
        edges = _edges(modules) if args.edges else None
        effect = _pass_effect(args, modules[0]) if args.pass_effect else None
    except FileNotFoundError as error:
        print(f"loomfuzz coverage: error: {error.filename}: no such file or folder", file=sys.stderr)
        return 1
    except ValueError as error:  # PassEffectError, TargetNotFound-like: one line
        print(f"loomfuzz coverage: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        report = result.as_json()
        if edges is not None:
            coverage, twinned, failed = edges
            report["edges"] = {"twins": args.twins, "twinned": twinned, "not_rendered": failed,
                               **coverage.as_json()}
        if effect is not None:
            report["pass_effect"] = {"twins": args.twins, "twinned": modules[1], "not_rendered": modules[2],
                                     **effect.to_json()}
        print(json.dumps(report, indent=2))
        return 0
    skipped = f", {len(result.skipped)} skipped" if result.skipped else ""
    print(f"loomfuzz coverage: {result.trees} programs ({result.fuzz_inputs} fuzz inputs, "
          f"{result.programs} from program text files){skipped}")
    print(result.report.summary())
    for line in result.report.lines():
        print(line)
    for name, why in result.skipped:
        print(f"skipped {name}: {why}")
    if edges is not None:
        _print_edges(*edges, args.twins)
    if effect is not None:
        print()
        print(effect.describe(f"pass effect on the exec modules ({modules[1]} with constant twins: "
                              f"--twins {args.twins:g})"))
    return 0


def _programs(paths, grammar):
    """The canonical text of every program of the corpus (what corpus_coverage counts)."""
    from harness.contract import program_suffix
    from harness.core.codec import decode
    from harness.core.parse import parse, split_programs
    from harness.core.render import renderer
    from harness.fuzzing.grammar_coverage import corpus_files

    canonical = renderer(grammar, "canonical").render
    for path, is_text in corpus_files(paths, program_suffix(grammar)):
        try:
            data = path.read_bytes()
            if not is_text:
                yield canonical(decode(data, grammar))
                continue
            pieces = [piece for piece in split_programs(data.decode("utf-8")) if piece.strip()]
        except (OSError, UnicodeDecodeError):
            continue  # listed as skipped by the grammar coverage
        for piece in pieces:
            tree = parse(piece, grammar).tree
            if tree is not None:
                yield canonical(tree)


def _exec_modules(paths, grammar, twins: float) -> tuple[list[str], int, int]:
    """(the corpus's exec modules, with constant twins for the ``twins`` share, how many have
    twins, how many programs have no exec rendering)."""
    from harness.execute.canonical_program import ExecRenderError
    from harness.execute.exec_rendering import exec_module
    from harness.execute.twins import plan_for, sampled, with_twins

    texts, twinned, failed = [], 0, 0
    for program in _programs(paths, grammar):
        try:
            text = exec_module(program)
            if sampled(program, twins):
                text = with_twins(text, plan_for(program))
                twinned += 1
        except ExecRenderError:
            failed += 1
            continue
        texts.append(text)
    return texts, twinned, failed


def _edges(modules: tuple[list[str], int, int]):
    """(EdgeCoverage, programs with twins, programs whose exec rendering failed)."""
    from harness.execute.edge_coverage import EdgeCoverage, module_coverage

    texts, twinned, failed = modules
    coverage = EdgeCoverage()
    for text in texts:
        coverage.merge(module_coverage(text))
    return coverage, twinned, failed


def _pass_effect(args: argparse.Namespace, texts: list[str]):
    """The pass effect of ``--pipeline`` through ``--mlir-opt`` on the exec modules; raises
    ``ValueError`` (one line) for an optimizer that is missing or whose passes cannot be told apart."""
    from harness.execute.exec_main import HARNESS_FUNCTIONS
    from harness.run.pass_effect import PassEffectSettings, measure
    from harness.targets.target import DEFAULT_MLIR_PIPELINE, TargetNotFound, resolve_target

    try:
        target = resolve_target(args.mlir_opt, pipeline=args.pipeline or DEFAULT_MLIR_PIPELINE)
    except TargetNotFound as error:
        raise ValueError(str(error)) from None
    return measure(target, texts, PassEffectSettings(runner="batch", skip=HARNESS_FUNCTIONS))  # the driver


def _print_edges(coverage, twinned: int, failed: int, twins: float) -> None:
    not_rendered = f", {failed} without an exec rendering" if failed else ""
    print(f"\nedge values at operands: {coverage.programs} exec modules ({twinned} with constant twins: "
          f"--twins {twins:g}){not_rendered}; edge values reached per operand, of its type's")
    print(f"  {'operation':<20} {'operand':>7} {'constant':>9} {'narrow':>7} {'run time':>9} {'of':>4}")
    for row in coverage.table():
        print(f"  {row.op:<20} {row.position:>7} {row.constant:>9} {row.narrow:>7} {row.run_time:>9} "
              f"{row.total:>4}")
    print(coverage.summary())
