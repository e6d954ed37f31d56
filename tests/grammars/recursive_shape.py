"""The default grammar made recursive: any number of threads and of sites per
thread, as right-recursive lists (for the generic core's tests and benchmarks).
Every program still satisfies P1-P24."""

import copy

import grammars.program_shape as base
from grammars.program_shape import RENDERINGS, START, opts  # noqa: F401

CONTRACT = "P1-P24"
MAX_DEPTH = 60
GRAMMAR = copy.deepcopy(base.GRAMMAR)
GRAMMAR["<threads>"] = [("<thread><threads>", opts(prob=0.4)), ("<thread>", opts(prob=0.6))]
GRAMMAR["<sites>"] = [("<site><sites>", opts(prob=0.45)), ("<site>", opts(prob=0.55))]
