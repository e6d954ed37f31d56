"""Values in scope: the binder behind the options ``define``, ``bind``, ``scope`` and ``use``.

A context-free grammar cannot say "an operand is a value defined earlier, of
the right type".  Four options say it, for any language:

=========== ===============================================================
``define``  ``"PREFIX:TYPE"`` (or a list): the alternative introduces a new
            value of TYPE, named PREFIX and a number (module-wide, per
            prefix, in emission order); ``$0``, ``$1``, ... in its terminals
            print the names.  The value is visible *after* the alternative,
            in the enclosing scope (so an operation cannot use its own result)
``bind``    the same, but visible only inside the alternative's *last*
            nonterminal (block arguments, induction variables); ``$k``
            counts the defined values first, then the bound ones
``scope``   ``True``: values defined inside the alternative are forgotten
            after it (a block); an alternative with ``bind`` is a scope too
``local``   ``True``: names made inside (bound ones included) are local to
            it: after it, numbering resumes as if they had not been made, so
            sibling alternatives reuse them (MLIR's sibling regions may); a
            local alternative is a scope
``use``     ``"TYPE"`` (or a list of types): the alternative is a reference;
            ``$^K`` in its terminals prints the K-th most recent visible
            value of one of those types, counting modulo how many there are
=========== ===============================================================

The pick is an ordinary choice: a use nonterminal has one alternative per
rank (``$^0``, ``$^1``, ...), so the walk draws it, the codec reads it from a
byte, mutation changes it and minimization lowers it like any other
decision, and the derivation tree stays a plain tree of the grammar.  Names
are not in the tree: the render pass (:class:`Scope`) resolves them.  After an
edit elsewhere a rank may point at another value, never at a missing one, and
never at one defined later: use before definition is impossible.

That a value of the type is always there is checked once, when the grammar
is compiled (:func:`unscoped_use`): every nonterminal gets the set of types
*guaranteed* visible wherever it can be expanded, and each use must be
among them.  Counting modulo the number visible then makes every tree of the
grammar render to a program whose uses are all defined.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["Binding", "NameRef", "Scope", "UseRef", "parse_binding", "unscoped_use"]

VALUE = re.compile(r"([^\s:]+):([^\s]+)")
OPTIONS = ("define", "bind", "scope", "use", "local")


class NameRef(str):
    """``$k`` in a defining alternative: the name of its k-th new value."""

    @property
    def written(self) -> str:
        return "$" + self


class UseRef(str):
    """``$^K`` in a use alternative: the K-th most recent visible value of its types."""

    @property
    def written(self) -> str:
        return "$^" + self


@dataclass(frozen=True)
class Binding:
    """What one alternative does to the values in scope."""

    defines: tuple[tuple[str, str], ...]  # (name prefix, type), visible after the alternative
    binds: tuple[tuple[str, str], ...]  # visible inside the alternative's last nonterminal
    scope: bool  # forget what is defined inside
    local: bool  # forget the names made inside (numbering resumes after)
    uses: tuple[str, ...]  # the types a use alternative accepts


def _values(option: str, value: Any) -> tuple[tuple[str, str], ...]:
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError(f"bad option {option!r}: {value!r} is not 'PREFIX:TYPE' or a list of them")
    out = []
    for entry in entries:
        match = VALUE.fullmatch(entry) if isinstance(entry, str) else None
        if match is None:
            raise ValueError(f"bad option {option!r}: {entry!r} is not 'PREFIX:TYPE' (e.g. '%v:i32')")
        out.append((match.group(1), match.group(2)))
    return tuple(out)


def parse_binding(options: dict, names: Sequence[str], uses: Sequence[str], kids: int) -> Binding | None:
    """The alternative's :class:`Binding` (``None`` without binder options), given the
    ``$k`` and ``$^K`` placeholders of its text; ``ValueError`` says what is wrong."""
    if not any(key in options for key in OPTIONS):
        if names or uses:
            raise ValueError(f"${(names or uses)[0]} needs the option "
                             f"{'define or bind' if names else 'use'}")
        return None
    defines = _values("define", options["define"]) if "define" in options else ()
    binds = _values("bind", options["bind"]) if "bind" in options else ()
    scope, local = options.get("scope", False), options.get("local", False)
    for key, flag in (("scope", scope), ("local", local)):
        if not isinstance(flag, bool):
            raise ValueError(f"bad option {key!r}: {flag!r} is not True or False")
    if binds and not kids:
        raise ValueError("option 'bind' needs a nonterminal to bind into (the alternative's last)")
    used: tuple[str, ...] = ()
    if "use" in options:
        value = options["use"]
        used = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else ()
        if not used or not all(isinstance(t, str) and t and not t.isspace() for t in used):
            raise ValueError(f"bad option 'use': {value!r} is not a type or a list of types")
        if defines or binds:
            raise ValueError("a use alternative cannot also define or bind values")
        if len(uses) != 1:
            raise ValueError(f"a use alternative prints exactly one $^K (found {len(uses)})")
    elif uses:
        raise ValueError(f"$^{uses[0]} needs the option use")
    for k in names:
        if int(k) >= len(defines) + len(binds):
            raise ValueError(f"${k} names no value: the alternative introduces "
                             f"{len(defines) + len(binds)}")
    return Binding(defines, binds, scope or local or bool(binds), local, used)


def unscoped_use(names: Sequence[str], alts: Sequence[Sequence[Any]], start: int) -> tuple[int, str] | None:
    """The first nonterminal with a use that some derivation cannot satisfy, and the
    type, or ``None``.  ``alts[n]`` are objects with ``kids`` and ``binding``.

    Two greatest fixpoints over the grammar: ``sure[n]``, the types every finite
    expansion of ``n`` leaves visible after it, and ``seen[n]``, the types visible
    wherever ``n`` is expanded (meet over every place it occurs)."""
    everything = frozenset(t for alt_list in alts for alt in alt_list if alt.binding
                           for t in (*(v[1] for v in alt.binding.defines + alt.binding.binds),
                                     *alt.binding.uses))
    if not any(alt.binding and alt.binding.uses for alt_list in alts for alt in alt_list):
        return None
    sure = [everything] * len(names)
    changed = True
    while changed:
        changed = False
        for n, alt_list in enumerate(alts):
            out = None
            for alt in alt_list:
                b = alt.binding
                left: frozenset = frozenset()
                if not (b and b.scope):
                    for kid in alt.kids:
                        left |= sure[kid]
                if b:
                    left |= {t for _, t in b.defines}
                out = left if out is None else out & left
            if out != sure[n]:
                sure[n], changed = out, True
    seen = [everything] * len(names)
    seen[start] = frozenset()
    changed = True
    while changed:
        changed = False
        meet: list[frozenset | None] = [None] * len(names)
        meet[start] = frozenset()
        for n, alt_list in enumerate(alts):
            for alt in alt_list:
                b = alt.binding
                here = seen[n]
                for i, kid in enumerate(alt.kids):
                    inside = here | {t for _, t in b.binds} if b and i == len(alt.kids) - 1 else here
                    meet[kid] = inside if meet[kid] is None else meet[kid] & inside
                    here = here | sure[kid]
        for n in range(len(names)):
            value = meet[n] if meet[n] is not None else everything
            if value != seen[n]:
                seen[n], changed = value, True
    for n, alt_list in enumerate(alts):
        for alt in alt_list:
            if alt.binding and alt.binding.uses and not seen[n] & set(alt.binding.uses):
                return n, "|".join(alt.binding.uses)
    return None


class Scope:
    """The values visible at the current point of a render (or parse): introduced by
    :meth:`open`, made visible or forgotten by :meth:`bind`/:meth:`close`, picked by
    :meth:`pick`.

    ``groups`` are the type sets the grammar's uses ask for: each keeps its own list
    of visible names, most recent last, so a pick is one index (it is on the
    generation hot path); other type sets are found by a scan."""

    __slots__ = ("visible", "numbers", "lists", "route")

    def __init__(self, groups: Sequence[tuple[str, ...]] = ()) -> None:
        self.visible: list[tuple[str, str]] = []  # (type, name), oldest first
        self.numbers: dict[str, int] = {}  # name prefix -> next number
        self.lists: dict[tuple[str, ...], list[str]] = {group: [] for group in groups}
        # type -> the lists a value of that type goes into
        self.route: dict[str, list[list[str]]] = {}
        for group, names in self.lists.items():
            for t in group:
                self.route.setdefault(t, []).append(names)

    def copy(self) -> "Scope":
        new = Scope.__new__(Scope)
        new.visible = list(self.visible)
        new.numbers = dict(self.numbers)
        new.lists = {group: list(names) for group, names in self.lists.items()}
        new.route = {}
        for group, names in new.lists.items():
            for t in group:
                new.route.setdefault(t, []).append(names)
        return new

    def open(self, binding: Binding) -> tuple[tuple[str, ...], tuple[int, dict | None]]:
        """Names for the alternative's new values, and the mark to :meth:`close` at."""
        names = [self._name(prefix) for prefix, _ in binding.defines]
        saved = dict(self.numbers) if binding.local else None  # the defined names stay outside
        names.extend(self._name(prefix) for prefix, _ in binding.binds)
        return tuple(names), (len(self.visible), saved)

    def _name(self, prefix: str) -> str:
        number = self.numbers.get(prefix, 0)
        self.numbers[prefix] = number + 1
        return f"{prefix}{number}"

    def _add(self, t: str, name: str) -> None:
        self.visible.append((t, name))
        for names in self.route.get(t, ()):
            names.append(name)

    def bind(self, binding: Binding, names: tuple[str, ...]) -> None:
        """The bound values become visible (before the last nonterminal)."""
        first = len(binding.defines)
        for i, (_, t) in enumerate(binding.binds):
            self._add(t, names[first + i])

    def close(self, binding: Binding, names: tuple[str, ...], mark: tuple[int, dict | None]) -> None:
        """End of the alternative: a scope forgets its inside; defined values appear."""
        visible, saved = mark
        if binding.scope and len(self.visible) > visible:
            route = self.route
            for t, _ in self.visible[visible:]:
                for lst in route.get(t, ()):
                    lst.pop()
            del self.visible[visible:]
        if saved is not None:
            self.numbers = saved
        for i, (_, t) in enumerate(binding.defines):
            self._add(t, names[i])

    def pick(self, types: tuple[str, ...], rank: int) -> str:
        """The ``rank``-th most recent visible value of one of ``types`` (modulo their number)."""
        candidates = self.lists.get(types)
        if candidates is None:
            candidates = [name for t, name in self.visible if t in types]
        if not candidates:  # only a grammar that skipped compile_grammar's check gets here
            raise LookupError(f"no value of type {'|'.join(types)} is in scope")
        return candidates[-1 - rank % len(candidates)]
