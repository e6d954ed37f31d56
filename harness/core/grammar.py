"""A probabilistic grammar compiled once: what every other part of the core reads.

A grammar is fuzzingbook's format: a dict nonterminal -> list of expansions,
an expansion being a string or ``(string, options)``; nonterminals are
``<[^<> ]*>``.  Options are plain dicts (fuzzingbook's ``opts`` builds them),
drawn from this small vocabulary, the only things the grammar says beyond a
context-free language:

=========== ===============================================================
``prob``    the expansion's probability (fuzzingbook's meaning: the
            unspecified ones share what is left of 1)
``counter`` ``NAME``: expanding this alternative takes the next value of the
            module-wide counter NAME (0, 1, 2, ... in emission order);
            ``$NAME`` in a terminal below it reads the innermost such value
``indent``  N: every line that the nonterminals of this expansion derive is
            moved N columns right (terminals of the expansion itself are not)
``label``   a short name for the alternative in summaries and tables
``define``, ``bind``, ``scope``, ``use``
            values in scope: an alternative introduces named, typed values
            (``$0``, ``$1``... print their names) and another refers to one
            defined earlier (``$^K``); see :mod:`harness.core.scope`
=========== ===============================================================

MLIR's own angle brackets cannot appear in fuzzingbook terminals (they would
read as nonterminals), so terminals spell them ``‹`` and ``›``; compiling
turns them back.  A grammar file may also define ``RENDERINGS``: other
terminal texts for the same derivation trees (``{"oracle": {nonterminal:
[expansion, ...]}}``, each expansion with the same nonterminals as the one
it replaces).

:func:`compile_grammar` validates the grammar (one :class:`GrammarError`
naming the nonterminal and what is wrong) and computes, per nonterminal:

* the cheapest expansion (fewest nodes) and the shallowest one, used when
  input or a depth budget runs out;
* how many derivation trees it has (``None`` when recursive) and its width
  in the choice-sequence layout (:mod:`harness.core.codec`);
* for a finite language of at most :data:`~harness.core.grammar_analysis.TABLE_LIMIT` trees, the whole
  language as a table of trees with their probabilities: the random walk
  picks a whole subtree with one draw, and the renderer caches their text.

What it makes, a :class:`~harness.core.compiled.CompiledGrammar`, and the
types it holds live in :mod:`harness.core.compiled`; derivation trees are
plain tuples ``(nonterminal id, alternative, children)`` (:mod:`harness.core.tree`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Any, Mapping

from harness.core.compiled import Alternative, CompiledGrammar, CounterRef, GrammarError
from harness.core.grammar_analysis import byte_table, languages, min_sizes, reachability, tables
from harness.core.recursion import allow_trees_of_depth
from harness.core.scope import OPTIONS as SCOPE_OPTIONS
from harness.core.scope import NameRef, UseRef, parse_binding, unscoped_use

NONTERMINAL = re.compile(r"(<[^<> ]*>)")
PLACEHOLDER = re.compile(r"\$(?:([A-Z][A-Z0-9_]*)|(\^?)([0-9]+))")
COUNTER_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
OPTIONS = frozenset({"prob", "counter", "indent", "label", *SCOPE_OPTIONS})
_UNESCAPE = str.maketrans({"\u2039": "<", "\u203a": ">"})

#: Depth budget of a walk when the grammar does not set ``MAX_DEPTH``.
DEFAULT_MAX_DEPTH = 40

# ----------------------------------------------------------------- loading


def _line_of(source_text: str, symbol: str) -> int | None:
    """The line where ``symbol`` is defined (as a dict key), else first mentioned."""
    key = re.compile(r"""["']""" + re.escape(symbol) + r"""["']\s*:""")
    lines = source_text.splitlines()
    for pattern in (key, None):
        for number, line in enumerate(lines, 1):
            if (pattern.search(line) if pattern else symbol in line):
                return number
    return None


def _error(source: str, source_text: str, symbol: str | None, what: str) -> GrammarError:
    where = source
    if symbol is not None and source_text:
        line = _line_of(source_text, symbol)
        if line is not None:
            where = f"{source}:{line}"
    return GrammarError(f"{where}: {symbol + ': ' if symbol else ''}{what}")


META_KEYS = ("CONTRACT", "PROFILE", "SUFFIX")
SUFFIX = re.compile(r"\.[A-Za-z0-9_-]+")


def load_grammar_file(path: str | Path) -> tuple[Mapping, str, Mapping, int, str, dict]:
    """(grammar, start, renderings, max_depth, source text, meta) from a .py or .json file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise GrammarError(f"{path}: cannot read: {error.strerror or error}") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise GrammarError(f"{path}:{error.lineno}: not JSON: {error.msg}") from None
        if not isinstance(data, dict):
            raise GrammarError(f"{path}: a grammar is a JSON object")
        if "GRAMMAR" in data:
            return (data["GRAMMAR"], data.get("START", "<start>"), data.get("RENDERINGS", {}),
                    int(data.get("MAX_DEPTH", DEFAULT_MAX_DEPTH)), text,
                    {k: data[k] for k in META_KEYS if k in data})
        return data, "<start>", {}, DEFAULT_MAX_DEPTH, text, {}
    spec = importlib.util.spec_from_file_location(f"loomfuzz_grammar_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise GrammarError(f"{path}: not a Python or JSON grammar file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 - any error in the user's file
        line = ""
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(path):
                line = f":{tb.tb_lineno}"
            tb = tb.tb_next
        raise GrammarError(f"{path}{line}: cannot load: {type(error).__name__}: {error}") from None
    if not hasattr(module, "GRAMMAR"):
        raise GrammarError(f"{path}: defines no GRAMMAR")
    return (module.GRAMMAR, getattr(module, "START", "<start>"), getattr(module, "RENDERINGS", {}),
            int(getattr(module, "MAX_DEPTH", DEFAULT_MAX_DEPTH)), text,
            {k: getattr(module, k) for k in META_KEYS if hasattr(module, k)})


# --------------------------------------------------------------- compiling


def _split(expansion: Any) -> tuple[str, dict]:
    if isinstance(expansion, str):
        return expansion, {}
    if isinstance(expansion, (tuple, list)) and expansion and isinstance(expansion[0], str):
        if len(expansion) == 1:
            return expansion[0], {}
        if len(expansion) == 2 and isinstance(expansion[1], dict):
            return expansion[0], expansion[1]
    raise TypeError(repr(expansion))


def _parts(text: str, ids: Mapping[str, int]) -> tuple[tuple, tuple[int, ...]]:
    parts: list = []
    kids: list[int] = []
    for piece in NONTERMINAL.split(text):
        if not piece:
            continue
        if NONTERMINAL.fullmatch(piece):
            parts.append(len(kids))
            kids.append(ids[piece])
            continue
        piece = piece.translate(_UNESCAPE)
        position = 0
        for match in PLACEHOLDER.finditer(piece):
            if match.start() > position:
                parts.append(piece[position:match.start()])
            if match.group(1):
                parts.append(CounterRef(match.group(1)))
            else:
                parts.append((UseRef if match.group(2) else NameRef)(str(int(match.group(3)))))
            position = match.end()
        if position < len(piece):
            parts.append(piece[position:])
    return tuple(parts), tuple(kids)


def _default_label(text: str) -> str:
    label = " ".join(NONTERMINAL.sub(lambda m: m.group(1)[1:-1], text).split())
    return label if len(label) <= 40 else label[:37] + "..."


def compile_grammar(
    grammar: Mapping[str, Any],
    start: str = "<start>",
    renderings: Mapping[str, Mapping[str, list]] | None = None,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    source: str = "<grammar>",
    source_text: str = "",
    meta: Mapping[str, Any] | None = None,
) -> CompiledGrammar:
    """Validate ``grammar`` and precompute everything the walk, codec and renderer need."""

    def fail(symbol: str | None, what: str) -> GrammarError:
        return _error(source, source_text, symbol, what)

    if not isinstance(grammar, Mapping) or not grammar:
        raise fail(None, "the grammar must be a non-empty dict of nonterminal -> expansions")
    for symbol in grammar:
        if not isinstance(symbol, str) or not NONTERMINAL.fullmatch(symbol):
            raise fail(str(symbol), "not a nonterminal name (fuzzingbook's <[^<> ]*>)")
    if start not in grammar:
        raise fail(start, "the start symbol is not defined")
    suffix = (meta or {}).get("SUFFIX")
    # one dot and a name: a finding's program is told from its other files (NAME.json,
    # NAME.exec.mlir) by having a single suffix (harness.fuzzing.findings.program_beside)
    if suffix is not None and (not isinstance(suffix, str) or not SUFFIX.fullmatch(suffix) or suffix == ".json"):
        raise fail(None, f"SUFFIX {suffix!r} is not a file suffix like \".calc\" (a dot and letters, "
                         "digits, _ or -; not .json)")
    names = list(grammar)
    ids = {name: i for i, name in enumerate(names)}

    alts: list[tuple[Alternative, ...]] = []
    counters: set[str] = set()
    for symbol in names:
        expansions = grammar[symbol]
        if not isinstance(expansions, (list, tuple)) or not expansions:
            raise fail(symbol, "has no expansion")
        parsed = []
        for expansion in expansions:
            try:
                text, options = _split(expansion)
            except TypeError:
                raise fail(symbol, f"bad expansion {expansion!r}: a string or (string, options)") from None
            for used in NONTERMINAL.findall(text):
                if used not in ids:
                    raise fail(symbol, f"uses undefined nonterminal {used}")
            unknown = set(options) - OPTIONS
            if unknown:
                raise fail(symbol, f"bad option {sorted(unknown)[0]!r} in {text!r} "
                                   f"(known: {', '.join(sorted(OPTIONS))})")
            prob = options.get("prob")
            if prob is not None and (not isinstance(prob, (int, float)) or isinstance(prob, bool)
                                     or not 0 <= prob <= 1 or math.isnan(prob)):
                raise fail(symbol, f"bad option 'prob': {prob!r} is not a probability in [0, 1]")
            counter = options.get("counter")
            if counter is not None and (not isinstance(counter, str) or not COUNTER_NAME.fullmatch(counter)):
                raise fail(symbol, f"bad option 'counter': {counter!r} is not a NAME ([A-Z][A-Z0-9_]*)")
            indent = options.get("indent", 0)
            if not isinstance(indent, int) or isinstance(indent, bool) or indent < 0:
                raise fail(symbol, f"bad option 'indent': {indent!r} is not a whole number")
            label = options.get("label")
            if label is not None and not isinstance(label, str):
                raise fail(symbol, f"bad option 'label': {label!r} is not a string")
            if counter:
                counters.add(counter)
            parts, kids = _parts(text, ids)
            try:
                binding = parse_binding(options, [p for p in parts if type(p) is NameRef],
                                        [p for p in parts if type(p) is UseRef], len(kids))
            except ValueError as error:
                raise fail(symbol, f"{error} in {text!r}") from None
            parsed.append((text, kids, parts, prob, counter, indent, label or _default_label(text),
                           binding))
        given = [p[3] for p in parsed]
        unspecified = given.count(None)
        rest = 1.0 - sum(p for p in given if p is not None)
        if unspecified == 0 and abs(rest) > 1e-6:
            raise fail(symbol, f"probabilities sum to {1 - rest:.6g}, not 1")
        if unspecified and rest < -1e-9:
            raise fail(symbol, f"probabilities sum to {1 - rest:.6g} (> 1) before the unspecified ones")
        share = max(rest, 0.0) / unspecified if unspecified else 0.0
        if unspecified and share <= 0 and len(parsed) > 1:
            raise fail(symbol, "the given probabilities leave nothing for the unspecified alternatives")
        texts = [p[0] for p in parsed]
        if len(set(texts)) != len(texts):
            raise fail(symbol, "two alternatives are the same expansion")
        alts.append(tuple(
            Alternative(text, kids, parts, p if p is not None else share, counter, indent, label, binding)
            for (text, kids, parts, p, counter, indent, label, binding) in parsed
        ))

    for n, symbol in enumerate(names):
        for alt in alts[n]:
            for part in alt.parts:
                if isinstance(part, CounterRef) and part not in counters:
                    raise fail(symbol, f"${part} names a counter that no expansion declares "
                                       f"(option counter={part!r})")

    g = CompiledGrammar(source=source, start=ids[start], names=names, ids=ids, alts=tuple(alts),
                        max_depth=max_depth, counters=tuple(sorted(counters)), meta=dict(meta or {}))
    g.alt_kids = [tuple(a.kids for a in alt_list) for alt_list in g.alts]
    reachability(g, fail)
    min_sizes(g, fail)
    unscoped = unscoped_use(names, g.alts, g.start)
    if unscoped is not None:
        n, types = unscoped
        raise fail(names[n], f"uses a value of type {types} where none is sure to be in scope "
                             "(no define or bind of that type on every way here)")
    languages(g)
    tables(g)
    for alt_list in g.alts:
        probs = [a.prob for a in alt_list]
        total = sum(probs) or 1.0
        g.cumulative.append(tuple(list(accumulate(p / total for p in probs))[:-1]) + (math.inf,))
        table = byte_table(probs)
        g.byte_table.append(table)
        g.smallest_byte.append(bytes(table.index(a) if a in table else 0 for a in range(len(probs))))
    g.renderings = {"canonical": [[a.parts for a in alt_list] for alt_list in g.alts]}
    for style, overrides in (renderings or {}).items():
        g.renderings[style] = _rendering(g, style, overrides, fail)
    # the one point where trees this deep become possible (harness.core.recursion)
    allow_trees_of_depth(g.max_depth if g.max_bytes is None else g.deepest[g.start])
    return g


def _rendering(g: CompiledGrammar, style: str, overrides: Mapping[str, list], fail) -> list[list[tuple]]:
    parts = [[a.parts for a in alt_list] for alt_list in g.alts]
    for symbol, expansions in overrides.items():
        if symbol not in g.ids:
            raise fail(symbol, f"rendering {style!r} overrides an undefined nonterminal")
        n = g.ids[symbol]
        if len(expansions) != len(g.alts[n]):
            raise fail(symbol, f"rendering {style!r} gives {len(expansions)} expansions for "
                               f"{len(g.alts[n])} alternatives")
        for a, expansion in enumerate(expansions):
            text, _ = _split(expansion)
            new_parts, kids = _parts(text, g.ids)
            if kids != g.alts[n][a].kids:
                raise fail(symbol, f"rendering {style!r}: alternative {a} must keep the nonterminals "
                                   f"of {g.alts[n][a].text!r}")
            b = g.alts[n][a].binding
            introduced = len(b.defines) + len(b.binds) if b else 0
            for p in new_parts:
                if (type(p) is NameRef and int(p) >= introduced) or (type(p) is UseRef and not (b and b.uses)):
                    raise fail(symbol, f"rendering {style!r}: alternative {a} prints {p.written}, which "
                                       f"{g.alts[n][a].text!r} does not introduce or use")
            parts[n][a] = new_parts
    return parts


# ------------------------------------------------------------------ profiles
# The built-in grammars are data: the ``grammars`` package's registry names them
# (``grammars.PROFILES``, ``grammars.DEFAULT_PROFILE``); the core looks them up by name.


def profile_names() -> list[str]:
    """The names of the built-in profiles (the registry's order)."""
    import grammars

    return list(grammars.PROFILES)


def default_profile() -> str:
    """The profile a command line that names no grammar uses (the registry says which)."""
    import grammars

    return grammars.DEFAULT_PROFILE


def _compile_module(module: Any, source: str) -> CompiledGrammar:
    text = ""
    file = getattr(module, "__file__", None)
    if file:
        try:
            text = Path(file).read_text()
        except OSError:
            pass
    return compile_grammar(module.GRAMMAR, getattr(module, "START", "<start>"),
                           getattr(module, "RENDERINGS", {}),
                           max_depth=int(getattr(module, "MAX_DEPTH", DEFAULT_MAX_DEPTH)),
                           source=file or source, source_text=text,
                           meta={k: getattr(module, k) for k in META_KEYS if hasattr(module, k)})


@lru_cache(maxsize=None)
def load_profile(name: str | None = None) -> CompiledGrammar:
    """A built-in profile's compiled grammar (cached); None: the default profile."""
    import grammars

    name = name or grammars.DEFAULT_PROFILE
    if name not in grammars.PROFILES:
        raise GrammarError(f"unknown profile {name!r}: choose one of {', '.join(grammars.PROFILES)}")
    return _compile_module(importlib.import_module(grammars.PROFILES[name]), name)


def load_file(path: str) -> CompiledGrammar:
    """A grammar file's compiled grammar: Python defining GRAMMAR (and START,
    RENDERINGS, MAX_DEPTH), or JSON of the grammar dict (or of those keys).

    Cached per version of the file (its path, modification time and size), so a
    file edited while the process runs is read again, never served stale."""
    try:
        status = os.stat(path)
        version: tuple[int, int] | None = (status.st_mtime_ns, status.st_size)
    except OSError:
        version = None  # load_grammar_file says what is wrong with the path
    return _load_file_version(str(path), version)


@lru_cache(maxsize=64)
def _load_file_version(path: str, version: tuple[int, int] | None) -> CompiledGrammar:
    grammar, start, renderings, max_depth, text, meta = load_grammar_file(path)
    return compile_grammar(grammar, start, renderings, max_depth=max_depth, source=str(path),
                           source_text=text, meta=meta)


def load(grammar: str | None = None, profile: str | None = None) -> CompiledGrammar:
    """``--grammar FILE`` wins over ``--profile NAME``; neither: the default profile."""
    if grammar:
        return load_file(str(grammar))
    return load_profile(profile)


def default_grammar() -> CompiledGrammar:
    """The default profile's compiled grammar (the registry's ``DEFAULT_PROFILE``)."""
    return load_profile(None)
