"""``report.md``: the triage report as Markdown, from the report's data.

Reads only what :func:`harness.triage.report.report_data` returns (the content
of ``report.json``), as :mod:`harness.triage.report_html` does for the browser:
one row per bug with its duplicates folded under it, then each bucket's facts
and files, then the inputs that did not reproduce.
"""

from __future__ import annotations

import shlex

from harness.triage.symptoms import symptom_lines

__all__ = ["release_summary", "report_markdown"]


def release_summary(results: list[dict]) -> str:
    """``MLIR 19: correct; MLIR 22: reproduces; head (24.0.0git): rejects`` (the optimizer under
    test marked so), from a bucket's ``details["releases"]`` (harness.triage.releases)."""
    return "; ".join(f"{r['name']}{' (under test)' if r.get('under_test') else ''}: {r['result']}"
                     for r in results)


def _cell(text) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def _contract_words(contract: str | None) -> str:
    """harness.contract's contract in a sentence's words."""
    if contract is None:
        return "unknown"
    if contract == "none":
        return "none (its contract holds)"
    if contract.startswith("edge"):
        return f"an edge construct ({contract[len('edge: '):] or 'edge'})"
    return contract


def _seen(counts: dict) -> str:
    """``3 x `sig`, 1 x no finding``: how often each signature came, most often first."""
    return ", ".join(f"{n} x " + (f"`{_cell(key)}`" if key else "no finding")
                     for key, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _divergence_lines(b: dict) -> list[str]:
    """A divergence bucket's own facts: both builds, each one's output, the reproduction."""
    details = b.get("details") or {}
    lines = [f"- this build: `{_cell(details.get('this_build'))}`",
             f"- reference build: `{_cell(details.get('reference_build'))}` (compared: {details.get('compare')})"]
    if details.get("first_difference"):
        lines.append(f"- first difference: {_cell(details['first_difference'])}")
    for key, what in (("observed_output", "this build's output"), ("reference_output", "the reference's output")):
        if b.get(key):
            lines.append(f"- {what}: [{b[key]}]({b[key]})")
    lines += [f"- reproduce ([{b['reproduce']}]({b['reproduce']}), from its folder; both builds read "
              f"[{b['build_input']}]({b['build_input']})):", "", "```sh", details.get("reproduce", ""), "```", ""]
    return lines


def _releases_lines(details: dict) -> list[str]:
    """The table of the builds a bucket's program was judged on (harness.triage.releases)."""
    releases = details.get("releases")
    if not releases:
        return []
    lines = ["", f"Reproduces on (the minimized program under `{_cell(details.get('found_pipeline'))}`, "
             "the reference values the interpreter's):", "",
             "| build | binary | LLVM | result | detail |", "|---|---|---|---|---|"]
    for r in releases:
        name = r["name"] + (" (under test)" if r.get("under_test") else "")
        lines.append(f"| {_cell(name)} | `{_cell(r['binary'])}` | {_cell(r.get('version') or '-')} "
                     f"| {_cell(r['result'])} | {_cell(r.get('detail'))} |")
    return lines + [""]


def _oracle_lines(b: dict) -> list[str]:
    """An oracle bucket's own facts: culprit, shortest pipeline, values (report.md)."""
    if b["oracle"] == "divergence":
        return _divergence_lines(b)
    details = b.get("details") or {}
    lines = [f"- oracle: {b['oracle']}; culprit pass: `{b['culprit'] or '(whole pipeline)'}`"]
    if details.get("pipeline"):
        lines.append(f"- shortest pipeline that gives it: `{_cell(details['pipeline'])}`")
    if details.get("first_difference"):
        lines.append(f"- first difference: {_cell(details['first_difference'])}")
    if "reference_value" in details:
        lines.append(f"- reference value {details['reference_value']}, observed {details['observed_value']}")
    for key, what in (("reference_output", "reference values"), ("observed_output", "observed values")):
        if b.get(key):
            lines.append(f"- {what}: [{b[key]}]({b[key]})")
    return lines + _releases_lines(details)


def runs_sentence(run: dict) -> str:
    """How often this run ran its inputs, as it happened: most run once, a few up to
    ``--repeat`` times (docs/how-to/triage.md, "What it costs"); issue 46: the report said
    "each input run 3 times" above members that show 1/1."""
    counts = {int(k): v for k, v in (run.get("runs_per_input") or {}).items()}
    if not counts:
        return "This run ran no input: every input was in the database already."
    spread = ", ".join(f"{inputs} input(s) {runs} time{'s' if runs != 1 else ''}"
                       for runs, inputs in sorted(counts.items()))
    return (f"Inputs run once, again (up to {run['repeat']} times, --repeat) only when the first run "
            f"leaves doubt (a new signature, a flaky bucket's, no finding, a bare crash): {spread}.")


def report_markdown(data: dict) -> str:
    lines = ["# loom-fuzz triage report", ""]
    run = data.get("run")
    if run:
        target = run.get("target") or {}
        lines.append(
            f"Run {run['id']} ({run['status']}), {run['started']} - {run['finished'] or '...'}; "
            f"target `{shlex.join(target.get('argv') or [])}`. " + runs_sentence(run)
        )
        lines.append("")
    t = data["totals"]
    lines.append(
        f"{t['bugs']} bug(s) in {t['buckets']} bucket(s); {t['members']} distinct input program(s): "
        f"{t['reproducing']} reproducing ({t['flaky']} flaky), {t['not_reproducing']} not reproducing."
    )
    lines.append("")
    lines.append("One row per bug; a bucket found to be the same bug (a duplicate) is folded under it (↳).")
    lines.append("")
    lines.append("| bucket | status | kind | signature | members | reproduction | minimized (lines / sites) |")
    lines.append("|---|---|---|---|---|---|---|")
    by_id = {b["id"]: b for b in data["buckets"]}
    ordered = []
    for b in data["buckets"]:
        if b["duplicate_of"] is None:
            ordered.append((b, False))
            ordered.extend((by_id[k], True) for k in b["duplicates"])
    for b, folded in ordered:
        m = b["minimized"]
        size = "-"
        if m:
            size = f"{m['lines']} / {m['sites'] if m['sites'] is not None else 'text'}"
            if m["tree"]:
                size += f" `{m['tree']}`"
        repro = "always" if b["reproduction"] == "always" else "flaky"
        link = ("↳ " if folded else "") + f"[{b['id']}](bucket-{b['id']}/)"
        lines.append(
            f"| {link} | {b['status']} | {b['kind']} | `{_cell(b['signature'])}` | {b['members']} "
            f"| {repro} | {_cell(size)} |"
        )
    lines.append("")
    affected = [(b["id"], (b.get("details") or {}).get("releases")) for b in data["buckets"]]
    if any(found for _, found in affected):
        lines.append("Releases each bucket's program was judged on:")
        lines.append("")
        lines.extend(f"- [bucket {k}](#bucket-{k}): {_cell(release_summary(found))}" for k, found in affected if found)
        lines.append("")
    for b in data["buckets"]:
        lines.append(f'<a id="bucket-{b["id"]}"></a>')
        lines.append("")
        lines.append(f"## Bucket {b['id']}: {b['kind']} ({b['status']})"
                     + (f", duplicate of bucket {b['duplicate_of']}" if b["duplicate_of"] is not None else ""))
        lines.append("")
        lines.append(f"- signature: `{_cell(b['signature'])}`")
        if b["duplicate_of"] is not None:
            by = "marked by hand" if b["duplicate_by"] == "user" else _cell(b["duplicate_reason"])
            lines.append(f"- duplicate of [bucket {b['duplicate_of']}](#bucket-{b['duplicate_of']}) ({by}); "
                         f"undo: `loomfuzz triage mark {b['id']} distinct`")
        if b["duplicates"]:
            lines.append("- duplicates: " + ", ".join(f"[bucket {k}](#bucket-{k})" for k in b["duplicates"]))
        bug = b.get("bug")
        if bug and bug["symptoms"] and (len(bug["symptoms"]) > 1 or bug["aliases"]):
            lines.append(f"- symptoms of this bug (the runs of its {bug['inputs']} input(s)):")
            lines.extend(f"  - {_cell(line)}" for line in symptom_lines(bug["symptoms"]))
        if b.get("profile"):
            lines.append(f"- profile: {b['profile']}")
        if b["oracle"] != "crash":
            lines.extend(_oracle_lines(b))
        m = b["minimized"]
        if m:
            shape = m["tree"] if m["in_shape"] else "text, not in the shape"
            lines.append(
                f"- minimized: [{m['path']}]({m['path']}) ({shape}; {m['lines']} lines; "
                f"{m['target_runs']} target runs)"
            )
            lines.append(f"- contract the minimized program breaks: {_contract_words(m.get('contract'))}")
            if b["oracle"] != "crash":
                lines.extend(["", "```mlir", m["text"].rstrip(), "```", ""])
            if m.get("signatures"):
                runs = sum(m["signatures"].values())
                lines.append(f"- signatures of {runs} runs of the minimized program: " + _seen(m["signatures"]))
            if b["regression_test"]:
                lines.append(f"- regression test: [{b['regression_test']}]({b['regression_test']})")
        if b["text_reduced"]:
            tr = b["text_reduced"]
            lines.append(f"- text-reduced: [{tr['path']}]({tr['path']}) ({tr['lines']} lines)")
        if b["stderr"]:
            lines.append(f"- stderr: [{b['stderr']}]({b['stderr']})")
        lines.append(f"- inputs ({b['members']}):")
        for member in b["inputs"][:20]:
            paths = ", ".join(member["paths"][:3]) + (" ..." if len(member["paths"]) > 3 else "")
            seen = member.get("signatures") or {}
            lines.append(
                f"  - `{_cell(paths)}` {member['reproduction']} ({member['hits']}/{member['attempts']})"
                + (f" - signatures seen: {_seen(seen)}" if len(seen) > 1 else "")
                + (" - not in the shape" if member["form"] == "text" else "")
            )
        if len(b["inputs"]) > 20:
            lines.append(f"  - ... {len(b['inputs']) - 20} more in report.json")
        lines.append("")
    nr = data["not_reproducing"]
    lines.append(f"## Not reproducing ({len(nr)})")
    lines.append("")
    for member in nr[:50]:
        lines.append(
            f"- `{_cell(', '.join(member['paths'][:3]))}`: {member['outcome']} ({_cell(member['reason'])})"
        )
    if len(nr) > 50:
        lines.append(f"- ... {len(nr) - 50} more in report.json")
    lines.append("")
    return "\n".join(lines)
