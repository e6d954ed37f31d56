"""What the render pass does at each alternative of one grammar in one style.

Both forms of the pass read these tables: the interpreter
(:class:`harness.core.render.Renderer`, which the parser drives part by part)
and the pass compiled to Python source (:mod:`harness.core.render_code`).
Computing them here, below both, keeps the two forms from importing each other.
"""

from __future__ import annotations

from harness.core.compiled import CompiledGrammar


class RenderSteps:
    """One grammar's render steps in one style (the tables both forms of the pass read)."""

    def __init__(self, grammar: CompiledGrammar, style: str = "canonical") -> None:
        if style not in grammar.renderings:
            raise ValueError(f"unknown rendering {style!r}: choose one of {', '.join(grammar.renderings)}")
        self.grammar = grammar
        self.style = style
        self.parts = grammar.renderings[style]
        self.counter_index = {name: i for i, name in enumerate(grammar.counters)}
        self.tables = grammar.tables
        # per (nonterminal, alternative): (parts, counter index or -1, indent, binding,
        # the kid before which bound values appear or -1, whether it opens a scope entry:
        # a use only reads)
        self.steps = [
            [(self.parts[n][a], self.counter_index[alt.counter] if alt.counter else -1, alt.indent,
              alt.binding, len(alt.kids) - 1 if alt.binding and alt.binding.binds else -1,
              bool(alt.binding and (alt.binding.defines or alt.binding.binds or alt.binding.scope)))
             for a, alt in enumerate(alt_list)]
            for n, alt_list in enumerate(grammar.alts)
        ]
        # a nonterminal that only passes its one child through renders as that child
        self.forward = [len(alt_list) == 1 and self.parts[n][0] == (0,) and not alt_list[0].counter
                        and not alt_list[0].indent and not alt_list[0].binding
                        for n, alt_list in enumerate(grammar.alts)]
        # a subtree that reads or changes the values in scope is not a cacheable text
        self.cacheable = [table is not None and not scoped for table, scoped
                          in zip(grammar.tables, touches_scope(grammar))]
        # the type sets uses ask for (each gets its own list in the Scope)
        self.use_groups = sorted({alt.binding.uses for alt_list in grammar.alts for alt in alt_list
                                  if alt.binding and alt.binding.uses})


def touches_scope(grammar: CompiledGrammar) -> list[bool]:
    """Per nonterminal: can its subtree define, bind or use a value in scope?"""
    touches = [any(alt.binding for alt in alt_list) for alt_list in grammar.alts]
    changed = any(touches)
    while changed:
        changed = False
        for n, alt_list in enumerate(grammar.alts):
            if not touches[n] and any(touches[k] for alt in alt_list for k in alt.kids):
                touches[n] = changed = True
    return touches


def pad(text: str, indent: int) -> tuple[str, str, bool]:
    """``text`` indented by ``indent`` columns: (mid-line, at a line start, ends a line)."""
    spaces = " " * indent
    lines = text.split("\n")
    middle = "\n".join([lines[0], *(spaces + line if line else "" for line in lines[1:])])
    start = spaces + middle if lines[0] else middle
    return middle, start, text[-1] == "\n"
