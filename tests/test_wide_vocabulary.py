"""The wide profile's vocabulary of issue 23: division and remainder, shifts, comparisons and
select, min/max, overflow flags, data-driven loops, aliasing memory, depth 4.

Every construct must be *defined for every input*.  That is judged here by an analysis of
the program text that knows nothing of the grammar: value ranges (signed and unsigned
intervals, odd values, and "x <=u y" from minui) flow through each region body from its
constants, and every division, shift and overflow flag must be safe for every value of
the region's operands.  The same analysis evaluates the trip counts of data-driven loops
whose bounds come from constants.  Validity against P1-P24 and mlir-opt-22 is in
tests/test_wide.py (10,000 programs through the checker, 2,000 oracle renderings).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field

import pytest

from harness.contract import load_grammar
from harness.core.codec import decode, encode, max_input_length
from harness.core.engine import generate
from harness.core.mutate import Mutator
from harness.core.reduce import minimize
from harness.core.render import render
from harness.core.walk import random_trees
from harness.targets.expectations import builtin_expectations

COUNT = 10_000
INT_MIN, INT_MAX, UMAX = -(2**31), 2**31 - 1, 2**32 - 1


@dataclass(frozen=True)
class Range:
    """What is known of an i32 for every input: signed and unsigned bounds, oddness."""

    slo: int = INT_MIN
    shi: int = INT_MAX
    ulo: int = 0
    uhi: int = UMAX
    odd: bool = False

    @staticmethod
    def exact(value: int) -> "Range":
        value = (value + 2**31) % 2**32 - 2**31
        return Range(value, value, value % 2**32, value % 2**32, bool(value & 1))

    @staticmethod
    def signed(lo: int, hi: int, odd: bool = False) -> "Range":
        if lo < INT_MIN or hi > INT_MAX:
            return Range()
        ulo, uhi = (lo, hi) if lo >= 0 else (lo + 2**32, hi + 2**32) if hi < 0 else (0, UMAX)
        return Range(lo, hi, ulo, uhi, odd)

    @staticmethod
    def unsigned(lo: int, hi: int) -> "Range":
        if lo < 0 or hi > UMAX:
            return Range()
        slo, shi = (lo, hi) if hi <= INT_MAX else (lo - 2**32, hi - 2**32) if lo > INT_MAX else (INT_MIN, INT_MAX)
        return Range(slo, shi, lo, hi)

    @property
    def value(self) -> int | None:
        return self.slo if self.slo == self.shi else None

    @property
    def nonzero(self) -> bool:
        return self.ulo >= 1 or self.odd

    @property
    def may_be_minus_one(self) -> bool:
        return self.slo <= -1 <= self.shi and self.uhi == UMAX

    @property
    def may_be_int_min(self) -> bool:
        return self.slo == INT_MIN and not self.odd and self.ulo <= 2**31 <= self.uhi


_LINE = re.compile(r"^\s*(?:(%[\w]+(?:, %[\w]+)*) = )?([a-z_]+\.[a-z_.]+)\b ?(.*)$")
_FLAGS = re.compile(r" overflow<([a-z, ]+)>")
SIGNED_DIVISIONS = {"divsi", "remsi", "ceildivsi", "floordivsi"}
UNSIGNED_DIVISIONS = {"divui", "remui"}
SHIFTS = {"shli", "shrsi", "shrui"}
FLAGGED = {"addi", "subi", "muli"}


@dataclass
class Analysis:
    """Undefined behaviour found and the reach of the vocabulary, over many programs."""

    problems: list = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)  # arith.X
    predicates: Counter = field(default_factory=Counter)
    flags: Counter = field(default_factory=Counter)  # (op, "nsw" | "nuw" | "nsw, nuw")
    trips: Counter = field(default_factory=Counter)  # trip counts of data-driven loops (known ones)
    carried: Counter = field(default_factory=Counter)  # iter_args per data-driven loop
    aliasing: Counter = field(default_factory=Counter)  # two-%mem regions: accesses through both?
    store_load: Counter = field(default_factory=Counter)  # "same"/"other" index, "other memref"
    # range-known values (issue 35): (producing op, edge value) for results known to lie in at
    # most NARROW values (signed or unsigned) holding that edge value; sign: results whose sign is known
    narrow: Counter = field(default_factory=Counter)
    sign: Counter = field(default_factory=Counter)  # (op, "set" | "clear")


NARROW = 16
#: The edge values a range-known operand should reach (powers of two apart).
EDGES = {"INT_MIN": INT_MIN, "INT_MIN+1": INT_MIN + 1, "-1": -1, "0": 0, "1": 1, "2": 2, "INT_MAX-1": INT_MAX - 1,
         "INT_MAX": INT_MAX}


def _pinned(a: Range, b: Range) -> Range | None:
    """x | c (and x ^ c) where x is in [0, M], M + 1 a power of two and c has none of M's bits:
    only M's bits vary, so the result is in [c, c + M]; None if that does not apply."""
    if b.value is None or a.slo < 0:
        a, b = b, a
    if b.value is None or a.slo < 0:
        return None
    mask = (1 << a.shi.bit_length()) - 1
    return Range.signed(b.value, b.value + mask) if b.value & mask == 0 else None


def narrow_edges(r: Range) -> list[str]:
    """The edge values inside r, if r holds at most NARROW values (signed or unsigned order)."""
    if r.shi - r.slo < NARROW:
        return [name for name, v in EDGES.items() if r.slo <= v <= r.shi]
    if r.uhi - r.ulo < NARROW:
        return [name for name, v in EDGES.items() if r.ulo <= v % 2**32 <= r.uhi]
    return []


def _binary(op: str, a: Range, b: Range, flags: str | None) -> tuple[Range, str | None]:
    """The result's range, and why a flag may not hold (None: it holds for every input)."""
    if op in ("ori", "xori") and (a.value is None or b.value is None) and _pinned(a, b) is not None:
        return _pinned(a, b), None
    if op == "xori" and a.value is not None and b.value is not None:
        return Range.exact(a.value ^ b.value), None
    if op == "select":  # either operand: the hull of both
        return Range(min(a.slo, b.slo), max(a.shi, b.shi), min(a.ulo, b.ulo), max(a.uhi, b.uhi),
                     a.odd and b.odd), None
    if op == "andi":
        if a.value is not None and b.value is not None:
            return Range.exact(a.value & b.value), None
        mask = a.value if a.value is not None else b.value
        return (Range.signed(0, mask) if mask is not None and mask >= 0 else Range()), None
    if op == "ori":
        if a.value is not None and b.value is not None:
            return Range.exact(a.value | b.value), None
        odd = a.odd or b.odd
        if a.slo >= 0 and b.slo >= 0:  # at least the larger, at most all bits of the larger set
            return Range.signed(max(a.slo, b.slo), (1 << max(a.shi, b.shi).bit_length()) - 1, odd), None
        c = a.value if a.value is not None else b.value
        if c is None:
            return Range(odd=odd), None
        signed = Range.signed(INT_MIN + c, INT_MAX) if c >= 0 else Range.signed(c, -1)
        return Range(signed.slo, signed.shi, c % 2**32, UMAX, bool(c & 1)), None
    if op == "maxsi":
        return Range.signed(max(a.slo, b.slo), max(a.shi, b.shi)), None
    if op == "minsi":
        return Range.signed(min(a.slo, b.slo), min(a.shi, b.shi)), None
    if op == "maxui":
        return Range.unsigned(max(a.ulo, b.ulo), max(a.uhi, b.uhi)), None
    if op == "minui":
        return Range.unsigned(min(a.ulo, b.ulo), min(a.uhi, b.uhi)), None
    if op in FLAGGED:
        sign = {"addi": lambda x, y: x + y, "subi": lambda x, y: x - y, "muli": lambda x, y: x * y}[op]
        corners = [sign(x, y) for x in (a.slo, a.shi) for y in (b.slo, b.shi)]
        ucorners = [sign(x, y) for x in (a.ulo, a.uhi) for y in (b.ulo, b.uhi)]
        signed_ok = INT_MIN <= min(corners) and max(corners) <= INT_MAX
        unsigned_ok = 0 <= min(ucorners) and max(ucorners) <= UMAX
        why = None
        if flags and "nsw" in flags and not signed_ok:
            why = f"{op} nsw may overflow: [{min(corners)}, {max(corners)}]"
        if flags and "nuw" in flags and not unsigned_ok:
            why = f"{op} nuw may wrap: [{min(ucorners)}, {max(ucorners)}]"
        return (Range.signed(min(corners), max(corners)) if signed_ok else Range()), why
    return Range(), None


_IF_OF_CONSTANTS = re.compile(
    r"^ *(%\w+) = scf\.if %\w+ -> \(i32\) \{\n *(%\w+) = arith\.constant (-?\d+) : i32\n *scf\.yield \2 : i32\n"
    r" *\} else \{\n *(%\w+) = arith\.constant (-?\d+) : i32\n *scf\.yield \4 : i32\n *\}$", re.M)


def _ifs_of_constants(text: str) -> dict[int, Range]:
    """Line number of each ``scf.if`` whose branches each yield one constant -> its result's
    range (the hull of the two)."""
    found = {}
    for m in _IF_OF_CONSTANTS.finditer(text):
        a, b = int(m.group(3)), int(m.group(5))
        found[text.count("\n", 0, m.start())] = _binary("select", Range.exact(a), Range.exact(b), None)[0]
    return found


def _record(into: Analysis, op: str, result: Range) -> None:
    for edge in narrow_edges(result):
        into.narrow[(op, edge)] += 1
    if result.value is None and (result.shi < 0 or result.slo >= 0):
        into.sign[(op, "set" if result.shi < 0 else "clear")] += 1


def analyse(text: str, into: Analysis) -> None:
    """Walk each region body line by line (names are unique within a region)."""
    ifs = _ifs_of_constants(text)
    ranges: dict[str, Range] = {}
    below: dict[str, set] = {}  # name -> names it is <=u of (minui)
    index: dict[str, int] = {}  # index constants and index_cast of exact values
    casts: set = set()
    memrefs: list[str] = []
    accessed: set = set()
    last_store: tuple[str, str] | None = None

    def end_region() -> None:
        if len(memrefs) == 2:
            into.aliasing["both" if accessed >= set(memrefs) else "one or none"] += 1

    for number, line in enumerate(text.split("\n")):
        if number in ifs:
            match = _LINE.match(line)
            ranges[match.group(1)] = ifs[number]
            _record(into, "scf.if", ifs[number])
            last_store = None
            continue
        if "^bb0(" in line:
            ranges, below, index, casts, accessed, last_store = {}, {}, {}, set(), set(), None
            memrefs = re.findall(r"(%\w+): memref", line)
            continue
        if line.lstrip().startswith("})"):
            end_region()
            memrefs = []
            continue
        match = _LINE.match(line)
        if not match:
            continue
        results = match.group(1).split(", ") if match.group(1) else []
        name, rest = match.group(2), match.group(3)
        if name not in ("arith.constant", "memref.load", "memref.store"):
            last_store = None  # store-then-load: only index constants between them
        operands = re.findall(r"%\w+", rest)
        if name.startswith("arith."):
            op = name[6:]
            into.kinds[name] += 1
            flags = _FLAGS.search(rest)
            if op == "constant":
                value = rest.split(" : ")[0]
                if rest.endswith(": index"):
                    index[results[0]] = int(value)
                elif rest.endswith(": i32"):
                    ranges[results[0]] = Range.exact(int(value))
                continue
            if op == "cmpi":
                into.predicates[rest.split(",")[0]] += 1
                continue
            if op == "index_cast":
                casts.add(results[0])
                source = ranges.get(operands[0], Range())
                if source.value is not None:
                    index[results[0]] = source.value
                continue
            a, b = (ranges.get(o, Range()) for o in operands[-2:])
            where = f"{line.strip()!r}"
            if op in SIGNED_DIVISIONS | UNSIGNED_DIVISIONS:
                if not b.nonzero:
                    into.problems.append(f"divisor may be 0: {where}")
                elif op in SIGNED_DIVISIONS and b.may_be_minus_one and a.may_be_int_min:
                    into.problems.append(f"INT_MIN / -1 possible: {where}")
                ranges[results[0]] = Range()
                continue
            if op in SHIFTS:
                if b.uhi > 31:
                    into.problems.append(f"shift amount may exceed 31: {where}")
                ranges[results[0]] = Range()
                continue
            if flags:
                into.flags[(op, flags.group(1))] += 1
            result, why = _binary(op, a, b, flags.group(1) if flags else None)
            if why and op == "subi" and flags and flags.group(1) == "nuw" and operands[0] in below.get(operands[1], ()):
                why = None  # a - b with b = minui(_, a) <= a
            if why:
                into.problems.append(f"{why}: {where}")
            if op == "minui":
                below[results[0]] = set(operands[:2])
            ranges[results[0]] = result
            _record(into, op, result)
        elif name == "scf.for" and "iter_args" in rest:
            bounds = re.match(r"%\w+ = (%\w+) to (%\w+) step (%\w+)", rest)
            if bounds and bounds.group(2) in casts:
                into.carried[rest.count(" = ") - 1] += 1
                lo, hi, step = (index.get(bounds.group(k)) for k in (1, 2, 3))
                if None not in (lo, hi, step):
                    into.trips[max(0, -(-(hi - lo) // step))] += 1
        elif name in ("memref.store", "memref.load"):
            ref, at = re.search(r"(%\w+)\[(%\w+)\]", rest).groups()
            accessed.add(ref)
            if name == "memref.load" and last_store is not None:
                into.store_load["same index" if index.get(at) == last_store[1] else "other index"] += 1
                if ref != last_store[0]:
                    into.store_load["other memref"] += 1
            last_store = (ref, index.get(at)) if name == "memref.store" else None


def problems_of(text: str) -> list[str]:
    analysis = Analysis()
    analyse(text, analysis)
    return analysis.problems


@pytest.fixture(scope="module")
def wide():
    return load_grammar(None, "wide")


@pytest.fixture(scope="module")
def analysis(wide) -> Analysis:
    result = Analysis()
    for tree in generate(wide, "fast", 11, COUNT):
        analyse(render(tree, wide), result)
    return result


def test_every_wide_program_is_defined_for_every_input(analysis):
    assert not analysis.problems, analysis.problems[:10]


def test_the_vocabulary_is_reached(analysis):
    print(f"\nreach of {COUNT} wide programs:")
    for name in ("kinds", "predicates", "flags", "trips", "carried", "aliasing", "store_load"):
        print(f"  {name:<11}", dict(sorted(getattr(analysis, name).items(), key=str)))
    new_kinds = {f"arith.{op}" for op in (*SIGNED_DIVISIONS, *UNSIGNED_DIVISIONS, *SHIFTS, "cmpi", "select",
                                          "maxsi", "minsi", "maxui", "minui", "index_cast")}
    assert new_kinds <= set(analysis.kinds)
    assert set(analysis.predicates) == {"eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"}
    assert set(analysis.flags) == {(op, f) for op in FLAGGED for f in ("nsw", "nuw", "nsw, nuw")}
    # data-driven loops that run 0, 1 and several times, carrying one or two values
    assert {0, 1} <= set(analysis.trips) and max(analysis.trips) >= 2
    assert set(analysis.carried) == {1, 2}
    # two-%mem regions accessed through both names, store-then-load in every combination
    assert analysis.aliasing["both"] >= 50
    assert min(analysis.store_load[k] for k in ("same index", "other index", "other memref")) >= 50


# ------------------------------------------------------------------ range-known operands (issue 35)

#: Each construct of range-known values, recognised in the text by its shape alone (the
#: constant operands written out: no grammar is read), and the edge values its result must
#: be known (by the analysis above) to lie next to, over the 10,000 programs.
RANGED_SHAPES = {
    "signed clamp": (re.compile(r"= arith\.constant (-?\d+) : i32\n *(%\w+) = arith\.maxsi %\w+, %\w+ : i32\n"
                                r" *%\w+ = arith\.constant (-?\d+) : i32\n *%\w+ = arith\.minsi \2, %\w+ : i32"),
                     "minsi", {"INT_MIN", "INT_MIN+1", "-1", "0", "1", "INT_MAX-1", "INT_MAX"}),
    "signed clamp, min first": (re.compile(r"(%\w+) = arith\.minsi %\w+, %\w+ : i32\n *%\w+ = arith\.constant "
                                           r"-?\d+ : i32\n *%\w+ = arith\.maxsi \1, %\w+ : i32"),
                                "maxsi", {"INT_MIN", "INT_MIN+1", "-1", "0", "1", "INT_MAX-1", "INT_MAX"}),
    "unsigned clamp": (re.compile(r"(%\w+) = arith\.maxui %\w+, %\w+ : i32\n *%\w+ = arith\.constant -?\d+ : "
                                  r"i32\n *%\w+ = arith\.minui \1, %\w+ : i32"),
                       "minui", {"INT_MIN", "INT_MIN+1", "1", "2", "INT_MAX-1", "INT_MAX"}),
    "pinned bits": (re.compile(r"(%\w+) = arith\.andi %\w+, %\w+ : i32\n *%\w+ = arith\.constant -?\d+ : i32\n"
                               r" *%\w+ = arith\.x?ori \1, %\w+ : i32"),
                    "ori", {"INT_MIN", "INT_MIN+1", "-1", "2", "INT_MAX-1", "INT_MAX"}),
    "select of constants": (re.compile(r"= arith\.constant -?\d+ : i32\n *(%\w+) = arith\.constant -?\d+ : i32\n"
                                       r" *%\w+ = arith\.select %c\d+, %\w+, \1 : i32"),
                            "select", {"INT_MIN", "INT_MIN+1", "-1", "0", "1", "2", "INT_MAX-1", "INT_MAX"}),
    "scf.if of constants": (_IF_OF_CONSTANTS, "scf.if", {"INT_MIN", "INT_MIN+1", "-1", "0", "1", "INT_MAX-1",
                                                         "INT_MAX"}),
}


def test_range_known_values_are_reached_narrow_and_defined(wide, analysis):
    """Every construct of issue 35 occurs, its result is known to lie in a few values next to
    each edge value, and programs holding it run defined through the reference interpreter."""
    from harness.execute.interpret import interpret_program

    print("\nnarrow results (op, edge value):", dict(sorted(analysis.narrow.items())))
    print("sign known:", dict(sorted(analysis.sign.items())))
    holding: dict[str, list[str]] = {name: [] for name in RANGED_SHAPES}
    for tree in generate(wide, "fast", 11, 2000):
        text = render(tree, wide)
        for name, (shape, _, _) in RANGED_SHAPES.items():
            if shape.search(text):
                holding[name].append(text)
    for name, (_, op, edges) in RANGED_SHAPES.items():
        assert len(holding[name]) >= 30, (name, len(holding[name]))
        reached = {edge for (o, edge), n in analysis.narrow.items() if o == op or (op == "ori" and o == "xori")}
        assert edges <= reached, (name, edges - reached)
        for text in holding[name][:5]:  # UndefinedBehaviour would be raised
            interpret_program(text)
    # the sign bit pinned (set by ori with INT_MIN, clear by andi with INT_MAX) on wide ranges
    assert analysis.sign[("ori", "set")] >= 50 and analysis.sign[("andi", "clear")] >= 50


#: Operand positions that must see edge values inside a narrow known range (edge_coverage's
#: compile-time walk, harness/execute/edge_coverage.py: not the grammar), and which values.
EXTREMES = {"INT_MIN", "INT_MIN+1", "INT_MAX-1", "INT_MAX"}
NARROW_AT = {
    **{(f"arith.{op}", pos): EXTREMES | {"-1"} for pos in (0, 1)
       for op in ("cmpi", "maxsi", "minsi", "maxui", "minui", "addi", "subi", "muli")},
    **{(f"arith.{op}", 0): {"INT_MAX-1", "INT_MAX"} for op in ("divsi", "divui", "shli", "shrsi", "shrui")},
    ("arith.divui", 1): {"INT_MAX-1", "INT_MAX", "-1"},  # a divisor y | INT_MIN or max(y, 1) of a ranged y
    ("arith.divsi", 1): {"INT_MAX-1", "INT_MAX"},  # max(y, 1) of y in [INT_MAX-3, INT_MAX]
}


def test_edge_values_reach_the_operands_as_narrow_ranges():
    """3,000 programs' exec modules (the benchmark's sample): the comparisons, min/max and
    flagged operations see INT_MIN, INT_MIN+1, -1, INT_MAX-1 and INT_MAX in narrow known
    ranges, dividends and shifted values the top edge, divisors what their guards let through."""
    from harness.core.render import renderer
    from harness.execute.edge_coverage import edge_coverage
    from harness.execute.exec_rendering import exec_module

    wide = load_grammar(None, "wide")
    render_text = renderer(wide, "canonical").render
    coverage = edge_coverage(exec_module(render_text(t)) for t in generate(wide, "fast", 5, 3000))
    print("\n" + coverage.summary())
    assert coverage.stopped_rows == 0
    missing = {key: sorted(edges - {c for o, p, c in coverage.narrow if (o, p) == key})
               for key, edges in NARROW_AT.items()}
    assert not {k: v for k, v in missing.items() if v}, missing
    assert len(coverage.narrow) >= 0.7 * len(coverage.possible), coverage.summary()


def test_decoded_mutated_crossed_and_minimized_programs_stay_defined(wide):
    rng = random.Random(5)
    width = max_input_length(wide, 4096)
    for _ in range(200):
        text = render(decode(rng.randbytes(rng.randrange(0, width)), wide), wide)
        assert not problems_of(text), text
    mutator = Mutator(wide)
    inputs = [encode(t, wide) for t in generate(wide, "fast", 17, 100)]
    for i in range(400):
        out = mutator.mutate(inputs[i % len(inputs)], width, i)
        assert not problems_of(render(decode(out, wide), wide)), i
    for i in range(150):
        out = mutator.crossover(inputs[i % 100], inputs[(i * 7 + 3) % 100], width, i)
        assert not problems_of(render(decode(out, wide), wide)), i

    def has_division(tree) -> bool:
        return bool(re.search(r"= arith\.(divsi|remui|floordivsi) ", render(tree, wide)))

    trees = [t for t in random_trees(wide, 18, 400) if has_division(t)][:4]
    assert len(trees) == 4
    for tree in trees:
        result = minimize(tree, wide, has_division).tree
        assert has_division(result) and not problems_of(render(result, wide)), render(result, wide)


# the analysis can fail: programs with a guard taken away are caught
UNGUARDED = [
    ("divisor without its guard", re.compile(r"(= arith\.(?:div|rem)[su]i %\w+, )(%\w+)"),
     lambda m, text: m.group(1) + re.search(r"\^bb0\((%\w+): i32", text).group(1)),
    ("shift by an unmasked amount", re.compile(r"(= arith\.shrsi %\w+, )(%\w+)"),
     lambda m, text: m.group(1) + re.search(r"\^bb0\((%\w+): i32", text).group(1)),
    ("flag on a value that may overflow", re.compile(r"(= arith\.addi (%\w+), )(%\w+)( overflow<nsw>)"),
     lambda m, text: m.group(1) + re.search(r"\^bb0\((%\w+): i32", text).group(1) + m.group(4)),
    ("mask wide enough to overflow",  # of operands the region reads (constants might fit)
     re.compile(r"(= arith\.constant )(255)( : i32\n.*arith\.andi %a\d+, .*\n.*arith\.andi %a\d+, .*\n.*arith\.muli)"),
     lambda m, text: m.group(1) + "2147483647" + m.group(3)),
]


@pytest.mark.parametrize("name, pattern, replace", UNGUARDED, ids=[u[0] for u in UNGUARDED])
def test_the_analysis_finds_a_guard_taken_away(wide, name, pattern, replace):
    broken = []
    for tree in generate(wide, "fast", 19, 3000):
        text = render(tree, wide)
        if "^bb0(%a0: i32" not in text:
            continue
        match = pattern.search(text)
        if match:
            broken.append(text[:match.start()] + replace(match, text) + text[match.end():])
        if len(broken) == 10:
            break
    assert len(broken) == 10, name
    assert all(problems_of(text) for text in broken), name


def test_loom_opt_expects_ceil_and_floor_division_rejected_and_the_rest_published(wide):
    expectations = builtin_expectations("loom-opt")
    seen = Counter()
    for tree in generate(wide, "fast", 23, 2000):
        text = render(tree, wide)
        if re.search(r"= (?:func|llvm)\.call |llvm\.freeze", text.replace("%icall = func.call", "")):
            continue
        rule = expectations.rule_for(text)
        non_actor = re.search(r"= arith\.(ceildivsi|floordivsi) ", text)
        seen[rule.expect] += 1
        assert rule.expect == ("rejected" if non_actor else "accepted"), (rule.name, text)
    assert seen["rejected"] >= 100 and seen["accepted"] >= 100
