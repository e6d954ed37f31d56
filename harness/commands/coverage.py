"""``loomfuzz coverage``: which alternatives and parent/child pairs of the grammar a corpus reaches;
with ``--edges``, which edge values reach which operands (:mod:`harness.execute.edge_coverage`)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.commands import add_grammar_arguments, grammar_from_args, share

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
"""


def configure(parser: argparse.ArgumentParser) -> None:
    from harness.execute.twins import DEFAULT_TWINS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
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


def run(args: argparse.Namespace) -> int:
    from harness.fuzzing.grammar_coverage import corpus_coverage

    grammar = grammar_from_args(args)
    if args.edges:
        from harness.execute.render_exec import EXEC_STYLE, style_error

        problem = style_error(grammar, EXEC_STYLE)
        if problem:
            print(f"loomfuzz coverage: error: --edges measures exec renderings: {problem}", file=sys.stderr)
            return 2
    try:
        result = corpus_coverage(args.corpus, grammar)
        edges = _edges(args.corpus, grammar, args.twins) if args.edges else None
    except FileNotFoundError as error:
        print(f"loomfuzz coverage: error: {error.filename}: no such file or folder", file=sys.stderr)
        return 1
    if args.json:
        report = result.as_json()
        if edges is not None:
            coverage, twinned, failed = edges
            report["edges"] = {"twins": args.twins, "twinned": twinned, "not_rendered": failed,
                               **coverage.as_json()}
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


def _edges(paths, grammar, twins: float):
    """(EdgeCoverage, programs with twins, programs whose exec rendering failed)."""
    from harness.execute.edge_coverage import EdgeCoverage, module_coverage
    from harness.execute.render_exec import ExecRenderError, exec_module
    from harness.execute.twins import plan_for, sampled, with_twins

    coverage, twinned, failed = EdgeCoverage(), 0, 0
    for program in _programs(paths, grammar):
        try:
            text = exec_module(program)
            if sampled(program, twins):
                text = with_twins(text, plan_for(program))
                twinned += 1
        except ExecRenderError:
            failed += 1
            continue
        coverage.merge(module_coverage(text))
    return coverage, twinned, failed


def _print_edges(coverage, twinned: int, failed: int, twins: float) -> None:
    not_rendered = f", {failed} without an exec rendering" if failed else ""
    print(f"\nedge values at operands: {coverage.programs} exec modules ({twinned} with constant twins: "
          f"--twins {twins:g}){not_rendered}; edge values reached per operand, of its type's")
    print(f"  {'operation':<20} {'operand':>7} {'constant':>9} {'narrow':>7} {'run time':>9} {'of':>4}")
    for row in coverage.table():
        print(f"  {row.op:<20} {row.position:>7} {row.constant:>9} {row.narrow:>7} {row.run_time:>9} "
              f"{row.total:>4}")
    print(coverage.summary())
