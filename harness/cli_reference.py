"""The command-line reference (docs/reference/cli.md), written from ``loomfuzz``'s
own argparse parsers, so it cannot drift from them: every command, its usage,
description, options (with their defaults, choices and help) and epilog.

    python -m harness.cli_reference > docs/reference/cli.md

tests/test_docs.py fails when the page differs from this module's output.
"""

from __future__ import annotations

import argparse
import html
import sys

from harness import cli

REGENERATE = "python -m harness.cli_reference > docs/reference/cli.md"
WIDTH = 80  # usage lines are wrapped at a fixed width, whatever the terminal


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser, configured (``loomfuzz`` configures only the one it runs)."""
    return {name: cli.command_parser(cli._parser(name), name) for name in cli.COMMANDS}


def _text(text: str) -> str:
    """Help text as Markdown inline text: no HTML, no table breaks, no emphasis."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    metavar = action.metavar or (action.dest.upper() if takes_value else None)
    if action.choices is not None and takes_value and action.metavar is None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    return ", ".join(f"`{o} {metavar}`" if takes_value else f"`{o}`" for o in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = parser.formatter_class(prog=parser.prog)._expand_help(action) if action.help else ""
    extra = []
    if action.choices is not None and action.metavar is not None:  # else the name shows them
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.nargs in ("*", "+") and not action.option_strings:
        extra.append("any number" if action.nargs == "*" else "one or more")
    if action.required and action.option_strings:
        extra.append("required")
    return "; ".join([_text(text)] * bool(text) + extra)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, []):
        return ""
    return f"`{action.default}`"


def command_page(name: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"## `loomfuzz {name}`", "", _text(parser.description or ""), "", "```text", _usage(parser), "```", ""]
    exclusive = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        if not actions:
            continue
        lines += [f"**{_text(group.title or 'options')}**", "", "| option | default | meaning |", "|---|---|---|"]
        for action in actions:
            meaning = _help(parser, action)
            group_of = exclusive.get(id(action))
            if group_of is not None:
                others = [o for a in group_of._group_actions if a is not action for o in a.option_strings[:1]]
                meaning += f" (not with {', '.join(f'`{o}`' for o in others)})"
            lines.append(f"| {_names(action)} | {_default(action)} | {meaning} |")
        lines.append("")
    if parser.epilog:
        if parser.formatter_class is argparse.RawDescriptionHelpFormatter:
            lines += ["```text", parser.epilog.strip("\n"), "```", ""]
        else:
            lines += [_text(parser.epilog), ""]
    return lines


def reference() -> str:
    """The whole page (Markdown)."""
    top = cli._parser(None)
    lines = [
        "# Command-line reference",
        "",
        f"<!-- Generated from harness/cli.py's parsers by `{REGENERATE}`; do not edit by hand. -->",
        "",
        _text(top.description or ""),
        "Every command takes `-h`/`--help`, which prints the same as its section here.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{name}`](#loomfuzz-{name}) | {_text(summary)} |" for name, summary in cli.COMMANDS.items()]
    lines.append("")
    for name, parser in command_parsers().items():
        lines += command_page(name, parser)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
