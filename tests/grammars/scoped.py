"""Values in scope (define, bind, scope, use): every use names a value defined earlier
in an enclosing block, of the right type, whatever the tree."""

START = "<start>"
MAX_DEPTH = 200  # deep enough that the budget never skews the weights


def opts(**options):
    return options


def uses(kind, ranks=4):
    return [(f"$^{k}", opts(use=kind)) for k in range(ranks)]


GRAMMAR = {
    "<start>": ["<block>"],
    # a block forgets what it defines; it starts with one int so that <int> always has one
    "<block>": [("{\n<seed><stmts>}\n", opts(scope=True, indent=2))],
    "<seed>": [("$0 = 1;\n", opts(define="x:int"))],
    "<stmts>": [("<stmt>", opts(prob=0.5)), ("<stmt><stmts>", opts(prob=0.5))],
    "<stmt>": [
        ("$0 = <int> + <int>;\n", opts(prob=0.45, define="x:int")),
        ("$0 = <int> < <int>;\n", opts(prob=0.15, define="b:bool")),
        ("print <int>;\n", opts(prob=0.15)),
        # i is visible in the body only; the bound is read before it exists
        ("for $0 in 0..<int> <block>", opts(prob=0.15, bind="i:int")),
        ("<block>", opts(prob=0.1)),
    ],
    "<int>": uses("int"),
}
