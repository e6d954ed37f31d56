"""Counters and indentation: nested blocks numbered in emission order."""

START = "<start>"
MAX_DEPTH = 24


def opts(**options):
    return options


GRAMMAR = {
    "<start>": ["<block>"],
    # every block takes the next B; its statements move two columns right
    "<block>": [("block b$B {\n<stmts>}\n", opts(counter="B", indent=2))],
    "<stmts>": [("<stmt>", opts(prob=0.55)), ("<stmt><stmts>", opts(prob=0.45))],
    "<stmt>": [("v$V = $B\n", opts(prob=0.7, counter="V")), ("<block>", opts(prob=0.3))],
}
