"""A small non-MLIR language for the generic core's tests: integer arithmetic.

Its own profile name, its own program file suffix, no contract (nothing
checks its programs beyond the grammar) and a rendering of its own: ``words``
spells the operators out.
``tests/fixtures/calc_target.py`` is its test-double target: it aborts on a
division by the literal ``0``.
"""

START = "<start>"
PROFILE = "calc"
SUFFIX = ".calc"
MAX_DEPTH = 40


def opts(**options):
    return options


GRAMMAR = {
    "<start>": ["<expr>\n"],
    "<expr>": [("<term>", opts(prob=0.6, label="term")),
               ("<term> <op> <expr>", opts(prob=0.4, label="binary"))],
    "<op>": [("+", opts(label="add")), ("-", opts(label="sub")), ("*", opts(label="mul")),
             ("/", opts(label="div"))],
    "<term>": [("<number>", opts(prob=0.8, label="number")), ("(<expr>)", opts(prob=0.2, label="group"))],
    "<number>": [("<digit>", opts(prob=0.8)), ("<digit><number>", opts(prob=0.2))],
    "<digit>": ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"],
}

#: ``words``: operators spelled out, and a full stop ends the expression.
RENDERINGS = {"words": {"<start>": ["<expr>.\n"], "<op>": ["plus", "minus", "times", "over"]}}
