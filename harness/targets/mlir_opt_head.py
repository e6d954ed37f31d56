"""``mlir-opt-head``: an ``mlir-opt`` over the MLIR Python bindings of LLVM's development
head with every upstream pass (:mod:`harness.targets.head_torch_mlir`).

It takes what loom-fuzz and a person reproducing a finding use of ``mlir-opt``, with the same
spelling and output:

* an input file, or ``-``/nothing for stdin; ``-o FILE`` (written only when every chunk
  succeeded, as mlir-opt does);
* ``--pass-pipeline=PIPELINE``, or passes as flags (``--sccp``,
  ``--arith-int-range-narrowing=int-bitwidths-supported=16``), not both;
* ``--allow-unregistered-dialect``;
* ``--split-input-file[=MARKER]``: chunks cut at lines starting with ``// -----``, each parsed
  and run on its own, their outputs joined by the marker line, diagnostics located in the
  whole input (``<stdin>:LINE:COL``), exit 1 when a chunk failed;
* ``--version``: the LLVM version and llvm-project commit read from the bindings' library,
  and the wheel it comes from; ``--help``: the options and every pass the library registers,
  read from it (:mod:`harness.targets.head_library`), never a list kept here.

Anything else is refused as mlir-opt refuses an unknown option (exit 1).  Without the wheel,
every use is one line saying how to install it, exit 2.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from harness.targets.head_bindings import HeadNotInstalled, format_error
from harness.targets.head_torch_mlir import EVERY_PASS

__all__ = ["ToolOptions", "main", "parse_args", "split_chunks", "version_text"]

PROG = EVERY_PASS.tool
DEFAULT_MARKER = "// -----"
_OPTIONS = (
    ("--allow-unregistered-dialect", "Allow operation with no registered dialects"),
    ("--help", "Display available options"),
    ("-o <filename>", "Output filename"),
    ("--pass-pipeline=<string>", "A textual description of a pass pipeline to run"),
    ("--split-input-file[=<string>]", "Split the input file into chunks using the given or default marker "
                                      "and process each chunk independently"),
    ("--version", "Display the version of this program"),
)


class UsageError(Exception):
    """A command line mlir-opt would refuse (its message)."""


@dataclass
class ToolOptions:
    input: str = "-"
    output: str | None = None
    pipeline: str | None = None
    pass_flags: list[str] = field(default_factory=list)  # "sccp", "narrowing{int-bitwidths-supported=16}"
    allow_unregistered: bool = False
    split_marker: str | None = None
    version: bool = False
    help: bool = False

    def pass_pipeline(self) -> str:
        if self.pipeline is not None:
            return self.pipeline
        return f"builtin.module({','.join(self.pass_flags)})"


def parse_args(argv: list[str]) -> ToolOptions:
    """mlir-opt's spelling (``-x`` or ``--x``, ``=VALUE`` or the next argument for ``-o``)."""
    options, inputs, rest = ToolOptions(), [], list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "-" or not arg.startswith("-"):
            inputs.append(arg)
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if name in ("help", "help-hidden", "help-list", "h"):
            options.help = True
        elif name == "version":
            options.version = True
        elif name == "o":
            if not eq:
                if not rest:
                    raise UsageError("Not enough positional command line arguments specified! (-o needs a file)")
                value = rest.pop(0)
            options.output = value
        elif name == "pass-pipeline":
            if not eq:
                if not rest:
                    raise UsageError("Not enough positional command line arguments specified! "
                                     "(--pass-pipeline needs a value)")
                value = rest.pop(0)
            options.pipeline = value
        elif name == "allow-unregistered-dialect":
            options.allow_unregistered = value.lower() not in ("false", "0") if eq else True
        elif name == "split-input-file":
            options.split_marker = value if eq and value else DEFAULT_MARKER
        elif re.fullmatch(r"[a-z][a-z0-9-]*", name):
            options.pass_flags.append(f"{name}{{{value}}}" if eq else name)  # verified when parsed
        else:
            raise UsageError(f"Unknown command line argument '{arg}'.  Try: '{PROG} --help'")
    if len(inputs) > 1:
        raise UsageError(f"Too many positional arguments specified! Can specify at most 1 positional "
                         f"argument: See: {PROG} --help")
    if inputs:
        options.input = inputs[0]
    if options.pipeline is not None and options.pass_flags:
        raise UsageError("'--pass-pipeline' option can't be used with individual pass options")
    return options


def split_chunks(text: str, marker: str | None) -> list[tuple[str, int]]:
    """The chunks of ``text`` and the number of lines before each: the whole text, or the
    pieces between lines starting with ``marker``."""
    if marker is None:
        return [(text, 0)]
    chunks, current, start = [], [], 0
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.startswith(marker):
            chunks.append(("".join(current), start))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append(("".join(current), start))
    return chunks


def version_text() -> str:
    """What ``--version`` prints: LLVM's layout, the version and commit read from the library."""
    from importlib import metadata

    from harness.targets.head_library import library_facts

    facts = library_facts(EVERY_PASS)
    try:
        wheel = f"{EVERY_PASS.wheel} {metadata.version(EVERY_PASS.wheel)}"
    except metadata.PackageNotFoundError:
        wheel = EVERY_PASS.wheel
    commit = f" (llvm-project {facts.commit})" if facts.commit else ""
    return (f"LLVM (http://llvm.org/):\n  LLVM version {facts.version}{commit}\n"
            f"  MLIR Python bindings of the {wheel} wheel: {facts.library}\n")


def help_text() -> str:
    """What ``--help`` prints: the options, then every pass read from the library."""
    from harness.targets.head_library import library_facts

    facts = library_facts(EVERY_PASS)
    width = max(len(flag) for flag, _ in _OPTIONS) + 4
    lines = [f"OVERVIEW: MLIR modular optimizer driver over the MLIR Python bindings of LLVM "
             f"{facts.version} (every registered pass)", "", f"USAGE: {PROG} [options] <input file>", "",
             "OPTIONS:", ""]
    lines += [f"  {flag:<{width}}- {what}" for flag, what in _OPTIONS]
    lines += ["  Compiler passes to run (each also takes --NAME or --NAME=OPTIONS;",
              f"  the {len(facts.passes)} names the bindings' PassManager.parse accepts):"]
    lines += [f"    --{name}" for name in facts.passes]
    return "\n".join(lines) + "\n"


def _run(options: ToolOptions) -> int:
    ir, passmanager = EVERY_PASS.load()
    if options.input == "-":
        text, buffer = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(options.input, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as error:
            sys.stderr.write(f"{PROG}: Could not open input file '{options.input}': {error.strerror}\n")
            return 1
        buffer = options.input
    context = ir.Context()
    context.allow_unregistered_dialects = options.allow_unregistered
    pipeline = options.pass_pipeline()
    try:
        manager = passmanager.PassManager.parse(pipeline, context)
    except Exception as error:  # noqa: BLE001 - MLIR's one exception type for every parse error
        unknown = re.search(r"'([^']+)' does not refer to a registered pass", str(error))
        if options.pipeline is None and unknown:  # a flag that is no pass: mlir-opt's word for it
            sys.stderr.write(f"{PROG}: Unknown command line argument '--{unknown[1]}'.  Try: '{PROG} --help'\n")
        else:
            sys.stderr.write(f"{str(error).rstrip()}\n")
        return 1
    lines = text.splitlines()
    outputs, failed = [], False
    for chunk, offset in split_chunks(text, options.split_marker):
        try:
            module = ir.Module.parse(chunk, context)
            manager.run(module.operation)
            outputs.append(f"{module}\n")
        except ir.MLIRError as error:
            sys.stderr.write(format_error(error, lines, buffer, offset))
            outputs.append("")
            failed = True
    printed = f"{options.split_marker}\n".join(outputs) if options.split_marker else outputs[0]
    if options.output is None or options.output == "-":
        sys.stdout.write(printed)
    elif not failed:
        with open(options.output, "w", encoding="utf-8") as handle:
            handle.write(printed)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """``mlir-opt-head [options] [input]`` (see the module docstring)."""
    try:
        options = parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 1
    try:
        if options.help:
            sys.stdout.write(help_text())
            return 0
        if options.version:
            sys.stdout.write(version_text())
            return 0
        return _run(options)
    except HeadNotInstalled as error:
        sys.stderr.write(f"{error}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
