"""The tool under test: what a build is and how it is found, before any program runs.

``identity.py`` asks a binary once what it is (family, LLVM release, capabilities,
passes); ``target.py`` makes a name or a path a :class:`~harness.targets.target.Target`
(command line, rendering, limits, the build's identity); ``expectations.py`` is what the
target is expected to do with each program (the rules its crash oracle judges by, the
built-in sets in ``expectations_data/``); ``head_*.py``, ``heads.py`` and
``mlir_opt_head.py`` make LLVM's development head from PyPI wheels a build
(``mlir-opt-head``: every upstream pass, over the torch-mlir wheel's bindings;
itself a tool under test).  Runners (:mod:`harness.run`) take a Target; nothing
here runs a program through one.
"""
