"""A grammar of repetitions: a bounded list and a right-recursive list."""

START = "<start>"


def opts(**options):
    return options


GRAMMAR = {
    "<start>": ["[<items>] {<chain>}\n"],
    "<items>": [("", opts(prob=0.1)), ("<item>", opts(prob=0.3)), ("<item><item>", opts(prob=0.3)),
                ("<item><item><item>", opts(prob=0.3))],
    "<item>": [("a", opts(prob=0.5)), ("b", opts(prob=0.3)), ("c", opts(prob=0.2))],
    "<chain>": [("<link>,<chain>", opts(prob=0.6)), ("<link>", opts(prob=0.4))],
    "<link>": ["x", "y", "zz"],
}
