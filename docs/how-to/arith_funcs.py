"""Functions of i32 arithmetic for upstream mlir-opt: every operand is an
argument or a value defined before it, so every program verifies."""

START = "<start>"


def opts(**options):
    return options


GRAMMAR = {
    "<start>": [("<func>", opts(prob=0.6)), ("<func><func>", opts(prob=0.4))],
    # two arguments, visible in <body> only; local: the next function numbers its own from 0
    "<func>": [("func.func @f$F($0: i32, $1: i32) -> i32 {\n<body>}\n",
                opts(counter="F", bind=["%a:i32", "%a:i32"], local=True))],
    "<body>": ["<stmts>  return <operand> : i32\n"],
    "<stmts>": [("  <stmt>", opts(prob=0.5)), ("  <stmt><stmts>", opts(prob=0.5))],
    "<stmt>": [
        ("$0 = arith.addi <operand>, <operand> : i32\n", opts(define="%v:i32", label="addi")),
        ("$0 = arith.muli <operand>, <operand> : i32\n", opts(define="%v:i32", label="muli")),
        ("$0 = arith.constant <digit> : i32\n", opts(define="%v:i32", label="const")),
    ],
    "<digit>": ["0", "1", "7"],
    # one alternative per rank: the K-th most recent i32 in scope; the rank is a choice
    "<operand>": [(f"$^{k}", opts(use="i32")) for k in range(3)],
}

# --target mlir-opt reads the "oracle" rendering; these programs are upstream MLIR
# already, so it is the canonical text unchanged.
RENDERINGS = {"oracle": {}}
