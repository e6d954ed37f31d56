#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build script (runs inside base-builder-python,
# after the Dockerfile installed the package): bundles every
# fuzz_targets/*_fuzzer.py into $OUT with compile_python_fuzzer (PyInstaller
# --onefile).  The glob picks up new targets without editing this file.
#
# Extra PyInstaller flags:
#   --paths "$SRC/loom-fuzz"      the harness/ and grammars/ packages from the
#                                 source tree (also found when the package is
#                                 installed in editable mode, which PyInstaller
#                                 cannot follow)
#   --collect-data harness        the built-in expectations
#   --collect-submodules grammars the built-in grammars (profiles), which the
#                                 core imports by name (importlib), so
#                                 PyInstaller's import scan cannot see them
#                                 (harness/expectations/*.json), read through
#                                 importlib.resources
#   --exclude-module fuzzingbook  never imported by a fuzz target (only by
#                                 `loomfuzz generate --engine fuzzingbook`);
#                                 excluded so the bundle stays small and
#                                 cannot pull it in
#
# The bundles run a target binary at fuzz time (loom-opt, or mlir-opt with
# target "mlir-opt" in an options file, --options=FILE), found through the
# options' binary / LOOM_OPT / PATH; this script does not build one.

cd "$SRC/loom-fuzz"

shopt -s nullglob
fuzzers=(fuzz_targets/*_fuzzer.py)
if [ ${#fuzzers[@]} -eq 0 ]; then
  echo "build.sh: no fuzz_targets/*_fuzzer.py" >&2
  exit 1
fi

for fuzzer in "${fuzzers[@]}"; do
  # program_fuzzer.py is the same target for grammars with their own file suffix
  # (SUFFIX); bundled without an options file it would fuzz the default grammar
  # again, beside loom_opt_fuzzer.py
  [ "$(basename "$fuzzer")" = program_fuzzer.py ] && continue
  compile_python_fuzzer "$fuzzer" \
    --paths "$SRC/loom-fuzz" \
    --collect-data harness \
    --collect-submodules grammars \
    --exclude-module fuzzingbook
done
