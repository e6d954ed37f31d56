"""The package's layers (issue 36): no import circle inside ``harness/`` and no
module importing a layer above its own.

Every module under ``harness/`` is read with ``ast`` (nothing is imported): all its
imports count, at module level, inside functions and under ``if TYPE_CHECKING:``,
since each is an edge a reader has to follow.  The layers, lowest first, are the
ones docs/explanation/design.md names: core and checker (the checker imports
nothing of core or grammars) < run < contract < execute < fuzzing, triage <
commands < cli.  ``harness/__init__.py`` (only ``__version__``) sits at the bottom,
``harness/plots.py`` with its importers (fuzzing, triage), ``harness/cli_reference.py``
above ``cli.py``, which it documents."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Lowest first; a module may import its own layer or one below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness", "harness.brackets", "harness.core", "harness.checker"),
    ("harness.targets",),
    ("harness.run",),
    ("harness.contract",),
    ("harness.execute",),
    ("harness.oracles",),
    ("harness.fuzzing", "harness.triage", "harness.plots"),
    ("harness.commands",),
    ("harness.cli",),
    ("harness.cli_reference",),
)
#: The checker is an independent oracle: it reads none of what makes the programs.
INDEPENDENT = {"harness.checker": ("harness.core", "grammars")}


@dataclass(frozen=True)
class Edge:
    source: str  # importing module
    target: str  # imported module (or the outside name, for INDEPENDENT)
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.path}:{self.line})"


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _placed_by(name: str, prefix: str) -> bool:
    # the bare package places only its __init__: a new harness/x.py must be placed by name
    return name == prefix if prefix == "harness" else _within(name, prefix)


def modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every module under root/harness."""
    found = {}
    for path in sorted((root / "harness").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def imports(root: Path) -> list[Edge]:
    """Every import of every module under root/harness, resolved to the module it names:
    ``from P import M`` is P.M when that is a module, else P; outside names are kept as
    written (``grammars.x``)."""
    found = modules(root)
    edges = []
    for name, (path, package) in found.items():
        here = name if package else name.rpartition(".")[0]
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in found else module
                           for alias in node.names]
            for target in targets:
                resolved = target
                while resolved not in found and "." in resolved:
                    resolved = resolved.rpartition(".")[0]
                if resolved in found:
                    target = resolved  # the module itself, or the package holding the name
                elif _within(target, "harness"):
                    continue  # no such module (a name the checks cannot place)
                if target != name:
                    edges.append(Edge(name, target, rel, node.lineno))
    return sorted(set(edges), key=lambda e: (e.source, e.target, e.line))


def circles(edges: list[Edge]) -> list[tuple[list[Edge], list[Edge]]]:
    """Per strongly connected group of modules (Tarjan): one cycle of edges, a path
    from its first module back to it, and every other import inside the group
    (each of which also has to go)."""
    graph: dict[str, list[Edge]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
        graph.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for edge in graph[v]:
            w = edge.target
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for group in groups:
        start = min(group)
        # breadth-first inside the group: the shortest way from start back to start
        paths = {start: []}
        frontier = [start]
        cycle = None
        while frontier and cycle is None:
            nxt = []
            for v in frontier:
                for edge in graph[v]:
                    if edge.target == start:
                        cycle = paths[v] + [edge]
                        break
                    if edge.target in group and edge.target not in paths:
                        paths[edge.target] = paths[v] + [edge]
                        nxt.append(edge.target)
                if cycle:
                    break
            frontier = nxt
        others = [e for v in sorted(group) for e in graph[v] if e.target in group and e not in cycle]
        cycles.append((cycle, others))
    return sorted(cycles, key=lambda c: c[0][0].source)


def layer_of(module: str) -> int | None:
    """The layer a module belongs to: its longest matching prefix's (None: unplaced)."""
    best = None
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if _placed_by(module, prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), number)
    return None if best is None else best[1]


def upward(edges: list[Edge]) -> list[Edge]:
    """Edges from a module to a layer above its own."""
    out = []
    for edge in edges:
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is not None and target is not None and target > source:
            out.append(edge)
    return out


def crossings(edges: list[Edge]) -> list[Edge]:
    """Edges from an independent part to what it must not read."""
    return [edge for edge in edges for part, banned in INDEPENDENT.items()
            if _within(edge.source, part) and any(_within(edge.target, b) for b in banned)]


def _report(what: str, lines: list[str]) -> str:
    return f"{what}:\n" + "\n".join(f"    {line}" for line in lines)


def _cycle_text(circle: tuple[list[Edge], list[Edge]]) -> str:
    cycle, others = circle
    text = " -> ".join([cycle[0].source] + [f"{e.target} [{e.path}:{e.line}]" for e in cycle])
    return text + "".join(f"\n        also {e}" for e in others)


# ------------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def edges() -> list[Edge]:
    return imports(ROOT)


def test_every_module_has_a_layer(edges):
    unplaced = sorted(m for m in modules(ROOT) if layer_of(m) is None)
    assert not unplaced, _report("modules in no layer (add them to LAYERS and design.md)", unplaced)


def test_no_import_circle_inside_harness(edges):
    inside = [e for e in edges if _within(e.target, "harness")]
    found = circles(inside)
    assert not found, _report("import circles (each printed from its first module back to it)",
                              [_cycle_text(c) for c in found])


def test_no_module_imports_a_layer_above_its_own(edges):
    found = upward(edges)
    assert not found, _report("imports of a higher layer (lowest first: "
                              + " < ".join(", ".join(p) for p in LAYERS) + ")",
                              [f"{e}  (layer {layer_of(e.source)} imports layer {layer_of(e.target)})"
                               for e in found])


def test_the_checker_imports_nothing_of_core_or_grammars(edges):
    found = crossings(edges)
    assert not found, _report("the checker reads what makes the programs", [str(e) for e in found])


def test_every_kind_of_import_is_seen(edges):
    """Imports inside functions (make_executor's InProcessExecutor, the core's grammar registry)
    and the ``from PACKAGE import MODULE`` form are edges, resolved to modules."""
    pairs = {(e.source, e.target) for e in edges}
    assert ("harness.execute.executors", "harness.execute.inprocess") in pairs  # function-level
    assert ("harness.core.grammar", "grammars") in pairs  # the registry, read inside functions
    assert ("harness.cli_reference", "harness.cli") in pairs
    assert ("harness.oracles.differential_runner", "harness.execute.differential") in pairs  # multi-line from-import
    assert layer_of("harness.newthing") is None and layer_of("harness") == 0


# ------------------------------------------------------- the checks can fail


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_circle_through_a_function_and_type_checking_import_is_found(tmp_path):
    root = _package(tmp_path, {
        "harness/__init__.py": "",
        "harness/core/__init__.py": "",
        "harness/core/a.py": "from harness.core.b import thing\n\ndef g():\n    import harness.core.c\n",
        "harness/core/b.py": ("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n"
                              "    from harness.core import c\n"
                              "thing = 1\n"),
        "harness/core/c.py": "def f():\n    from . import a\n",
        "harness/core/d.py": "import harness.core.a\n",
    })
    found = circles(imports(root))
    assert len(found) == 1
    assert _cycle_text(found[0]).split("\n") == [
        "harness.core.a -> harness.core.c [harness/core/a.py:4] -> harness.core.a [harness/core/c.py:2]",
        "        also harness.core.a -> harness.core.b (harness/core/a.py:1)",
        "        also harness.core.b -> harness.core.c (harness/core/b.py:3)",  # under TYPE_CHECKING
    ]


def test_an_upward_import_and_a_checker_reading_core_are_found(tmp_path):
    root = _package(tmp_path, {
        "harness/__init__.py": "",
        "harness/run/__init__.py": "",
        "harness/run/judge.py": "def f():\n    from harness.fuzzing.campaign import go\n",
        "harness/fuzzing/__init__.py": "",
        "harness/fuzzing/campaign.py": "from harness.run import judge\ngo = 1\n",
        "harness/checker/__init__.py": "",
        "harness/checker/check.py": "import grammars.loom\nfrom harness.core.tree import Node\n",
        "harness/core/__init__.py": "",
        "harness/core/tree.py": "Node = tuple\n",
    })
    edges = imports(root)
    assert [str(e) for e in upward(edges)] == [
        "harness.run.judge -> harness.fuzzing.campaign (harness/run/judge.py:2)"]
    assert [str(e) for e in crossings(edges)] == [
        "harness.checker.check -> grammars.loom (harness/checker/check.py:1)",
        "harness.checker.check -> harness.core.tree (harness/checker/check.py:2)"]
    assert [_cycle_text(c) for c in circles(edges)] == [
        "harness.fuzzing.campaign -> harness.run.judge [harness/fuzzing/campaign.py:1] -> "
        "harness.fuzzing.campaign [harness/run/judge.py:2]"]


#: The runners a judging command may build only through harness.oracles.choice.oracle_runner.
RUNNER_CONSTRUCTORS = {"make_runner", "DifferentialRunner", "DivergenceRunner", "PersistentPool",
                       "ProcessRunner", "BatchRunner"}


def calls_outside(root: Path, names: set[str], rooms: tuple[str, ...]) -> list[str]:
    """Calls of a function or method named in ``names`` in a module outside ``rooms``."""
    found = []
    for path in sorted((root / "harness").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(rooms):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=relative)):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in names:
                    found.append(f"{relative}:{node.lineno} {name}(...)")
    return found


def runner_constructions(root: Path) -> list[str]:
    """Calls of a runner's constructor in a module above the runners' and oracles' own rooms."""
    return calls_outside(root, RUNNER_CONSTRUCTORS, ("harness/run/", "harness/oracles/"))


def test_every_judging_command_gets_its_runner_from_oracle_runner():
    """run, enumerate --run, fuzz and triage judge through one entry (harness/oracles/choice.py):
    none of them builds a runner of its own, so an oracle or runner added there reaches all."""
    found = runner_constructions(ROOT)
    assert not found, _report("runners built outside harness/oracles/choice.py", found)


#: The calls that judge with an executor (harness.execute) directly: only the oracles make them.
EXECUTOR_CALLS = {"executor", "judge_many", "make_executor"}


def executor_calls(root: Path) -> list[str]:
    """Calls of an executor's factory or its batch judgement above the oracles' room."""
    return calls_outside(root, EXECUTOR_CALLS, ("harness/execute/", "harness/oracles/"))


def test_triage_judges_one_program_through_the_oracles():
    """Wrong-code and divergence triage re-judge a finding with the oracle's own judge_alone
    (harness/oracles/): no module above the oracles reaches for an executor itself."""
    found = executor_calls(ROOT)
    assert not found, _report("executors used outside harness/execute and harness/oracles", found)


@pytest.mark.parametrize("scan, files, expected", [
    (runner_constructions, {
        "harness/fuzzing/campaign.py": "from harness.run import runners\nr = runners.ProcessRunner(None)\n",
        "harness/oracles/choice.py": "from harness.run.runners import make_runner\nr = make_runner(None, None)\n",
    }, ["harness/fuzzing/campaign.py:2 ProcessRunner(...)"]),
    (executor_calls, {
        "harness/triage/wrong_code.py": "def f(settings):\n    return settings.executor().judge('', None)\n",
        "harness/oracles/differential_runner.py": "def g(settings):\n    return settings.executor()\n",
    }, ["harness/triage/wrong_code.py:2 executor(...)"]),
], ids=["a runner built by hand", "an executor used by hand"])
def test_a_call_outside_its_room_is_seen(tmp_path, scan, files, expected):
    packages = {"harness/__init__.py": ""}
    packages.update({str(Path(name).parent / "__init__.py"): "" for name in files})
    root = _package(tmp_path, {**packages, **files})
    assert scan(root) == expected
