#!/usr/bin/env python3
"""atheris fuzz target: a grammar's programs through its target (a language other than MLIR).

``program_fuzzer.py [--options=FILE] [libFuzzer flags] [CORPUS_DIR ...]``;
``loomfuzz fuzz`` runs it for a grammar with a ``SUFFIX`` of its own
(harness.contract.fuzz_script).  The code and its documentation (``--help``)
are harness.fuzzing.program_target.
"""

import os
import sys

try:
    import harness  # noqa: F401  (installed: pip install -e .)
except ImportError:  # run from a source tree without the install
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.fuzzing.program_target import main  # noqa: E402

if __name__ == "__main__":
    main(sys.argv)
