"""A recursive grammar: arithmetic expressions (for the generic core's tests)."""

START = "<start>"
MAX_DEPTH = 30


def opts(**options):
    return options


GRAMMAR = {
    "<start>": ["<expr>\n"],
    "<expr>": [("<term> + <expr>", opts(prob=0.25)), ("<term> * <expr>", opts(prob=0.15)),
               ("<term>", opts(prob=0.6))],
    "<term>": [("(<expr>)", opts(prob=0.2)), ("<number>", opts(prob=0.8))],
    "<number>": [("<digit>", opts(prob=0.7)), ("<digit><number>", opts(prob=0.3))],
    "<digit>": ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"],
}
