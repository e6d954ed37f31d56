"""loom-fuzz: a grammar-based fuzzer for loom's MLIR optimizer.

Data flows one way: grammar -> engine -> tree -> renderer -> text -> runner ->
outcome -> triage.  No module imports one that stands later in that flow.
"""

__version__ = "0.1.0"
