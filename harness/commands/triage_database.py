"""``loomfuzz triage``'s actions on a triage database: ``list``, ``show``, ``mark``, ``report`` and
``report-upstream`` (``triage run``, which fills the database, is :mod:`harness.commands.triage`)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from harness.commands import grammar_from_args
from harness.targets.folders import ARTIFACTS_ROOT

ACTIONS = ("run", "list", "show", "mark", "report", "report-upstream")
PROG = "loomfuzz triage"
DB_NAME = "triage.db"


def fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 1


def database_action(args: argparse.Namespace, action: str, words: list[str]) -> int:
    """``action`` (one of :data:`ACTIONS` but ``run``) on the database ``--db``, or the one
    ``--out`` holds, or the one ``artifacts/*/triage/`` holds."""
    if args.out is None and args.db is None:
        found = sorted(ARTIFACTS_ROOT.glob(f"*/triage/{DB_NAME}"))
        if len(found) != 1:
            return fail("no triage database in artifacts/*/triage/: triage first, or pass --out DIR"
                          if not found else "a triage database per build (" + ", ".join(
                              str(f.parent) for f in found) + "): pass --out DIR, one of them")
        args.out = str(found[0].parent)
    if args.db is None:
        args.db = str(Path(args.out) / DB_NAME)
    if args.out is None:
        args.out = str(Path(args.db).parent)
    if action == "list":
        return _list(args, words)
    if action == "show":
        return _show(args, words)
    if action == "mark":
        return _mark(args, words)
    if action == "report-upstream":
        return _report_upstream(args, words)
    return _report(args, words)


# ---------------------------------------------------------- list/show/mark


def _open(args: argparse.Namespace):
    from harness.triage.crashdb import TriageDB

    return TriageDB(args.db, create=False)


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(lines)


def _list(args: argparse.Namespace, words: list[str]) -> int:
    import json

    if words:
        return fail(f"list takes no arguments (got {' '.join(words)!r})")
    with _open(args) as db:
        buckets = db.buckets()
        folded: dict[int, list] = {}
        for b in buckets:
            if b["duplicate_of"] is not None:
                folded.setdefault(db.primary_of(b["id"]), []).append(b)

        def row(b, label: str) -> list:
            minimized = "-"
            if b["minimized_text"] is not None:
                minimized = b["minimized_tree"] or f"text, {b['minimized_lines']} lines"
            signature = b["signature"]
            if len(signature) > 100:
                signature = signature[:97] + "..."
            group = [b] if label.startswith("└") else [b, *folded.get(b["id"], [])]
            symptoms = {key for r in group for key in json.loads(r["symptoms"] or "{}") if key}
            return [label, b["status"], b["kind"], b["culprit"] or "-", b["count"],
                    "always" if b["reproduction"] == "always" else "flaky", len(symptoms) or "-", minimized,
                    signature]

        rows = []
        for b in buckets:
            if b["duplicate_of"] is None:
                rows.append(row(b, str(b["id"])))
                rows.extend(row(d, f"└ {d['id']}") for d in folded.get(b["id"], []))
        if rows:
            print(_table(rows, ["ID", "STATUS", "KIND", "CULPRIT", "MEMBERS", "REPRO", "SYMPTOMS", "MINIMIZED",
                                "SIGNATURE"]))
        counts = db.counts()
        print(
            f"{counts['bugs']} bug(s) in {counts['buckets']} bucket(s) (└: a duplicate, folded under its "
            f"bug); {counts['members']} input program(s), {counts['not_reproducing']} not reproducing; "
            f"{counts['runs']} triage run(s)"
        )
    return 0


def _bucket_id(words: list[str], what: str) -> int:
    if not words:
        raise ValueError(f"{what} needs a BUCKET id (see `loomfuzz triage list`)")
    word = words[0].removeprefix("bucket-")
    if not word.isdigit():
        raise ValueError(f"BUCKET must be a bucket id (a number), not {words[0]!r}")
    return int(word)


def _show(args: argparse.Namespace, words: list[str]) -> int:
    try:
        bucket_id = _bucket_id(words, "show")
    except ValueError as error:
        return fail(str(error))
    if len(words) > 1:
        return fail(f"show takes one BUCKET (got {' '.join(words)!r})")
    from harness.contract import program_suffix
    from harness.triage.report import bucket_suffix

    suffix = program_suffix(grammar_from_args(args))
    with _open(args) as db:
        b = db.bucket(bucket_id)
        if b is None:
            return fail(f"{args.db}: no bucket {bucket_id}")
        import json

        print(f"bucket {b['id']}: {b['kind']} ({b['status']})")
        print(f"signature:    {b['signature']}")
        if b["message"]:
            print(f"message:      {b['message']}")
        frames = json.loads(b["frames"] or "[]")
        if frames:
            print(f"frames:       {frames[0]}")
            for frame in frames[1:]:
                print(f"              {frame}")
        print(f"members:      {b['count']} ({'always' if b['reproduction'] == 'always' else 'flaky'})")
        if b["oracle"] == "divergence":
            _show_divergence(args, b)
        elif b["oracle"] != "crash":
            details = json.loads(b["details"] or "{}")
            print(f"culprit:      {b['culprit'] or '(whole pipeline)'} (shortest pipeline: {details.get('pipeline')})")
            if "reference_value" in details:
                print(f"values:       reference {details['reference_value']}, observed {details['observed_value']}")
            if details.get("releases"):
                from harness.triage.report_markdown import release_summary

                print(f"releases:     {release_summary(details['releases'])} (under {details.get('found_pipeline')})")
            if b["lit_test"]:
                print(f"lit test:     {args.out}/bucket-{b['id']}/regression.mlir")
        if b["duplicate_of"] is not None:
            by = "by hand" if b["duplicate_by"] == "user" else "found by triage"
            print(f"duplicate of: bucket {db.primary_of(b['id'])} ({by}: {b['duplicate_reason']}); "
                  f"undo with `loomfuzz triage mark {b['id']} distinct`")
        duplicates = [d["id"] for d in db.buckets() if d["duplicate_of"] is not None
                      and db.primary_of(d["id"]) == b["id"]]
        if duplicates:
            print(f"duplicates:   {', '.join(f'bucket {d}' for d in duplicates)}")
        _show_symptoms(db, b, duplicates)
        if b["verify_counts"]:
            counts = json.loads(b["verify_counts"])
            runs = sum(counts.values())
            print(f"minimized program, {runs} runs:")
            for key, n in sorted(counts.items(), key=lambda kv: -kv[1]):
                print(f"  {n:>4} x  {key or 'no finding'}")
        print(f"first seen:   {b['first_seen']} (run {b['first_run']}); last seen {b['last_seen']} (run {b['last_run']})")
        if b["minimized_text"] is not None:
            shape = b["minimized_tree"] or "text, not in the shape"
            print(
                f"minimized:    {shape}, {b['minimized_lines']} lines, {b['min_runs']} target runs"
                f" ({args.out}/bucket-{b['id']}/minimized{bucket_suffix(b, suffix)})"
            )
        else:
            print("minimized:    not yet")
        if b["note"]:
            print(f"note:         {b['note']}")
        rows = []
        for m in db.members(bucket_id):
            paths = db.files_of(m["id"])
            rows.append([
                m["id"], f"{m['reproduction']} {m['hits']}/{m['attempts']}", m["form"],
                m["tree"] or "-", paths[0] + (f" (+{len(paths) - 1})" if len(paths) > 1 else ""),
            ])
        print()
        print(_table(rows, ["MEMBER", "REPRO", "FORM", "TREE", "PATH"]))
        if b["minimized_text"] is not None:
            print()
            sys.stdout.write(b["minimized_text"])
    return 0


def _show_symptoms(db, b, duplicates: list[int]) -> None:
    """The symptoms of a bucket's members (a bug's: with its duplicates') and the aliases."""
    import json

    from harness.triage.symptoms import merge_symptoms, symptom_lines

    group = [b, *(db.bucket(d) for d in duplicates)]
    symptoms = merge_symptoms(json.loads(r["symptoms"]) for r in group if r["symptoms"])
    if symptoms:
        print(f"symptoms:     ({'of the bug: this bucket and its duplicates' if duplicates else 'of its members'})")
        for line in symptom_lines(symptoms):
            print(f"  {line}")
    if duplicates:
        print("aliases:      " + "\n              ".join(r["signature"] for r in group[1:]))


def _show_divergence(args: argparse.Namespace, b) -> None:
    """A divergence bucket's both builds, each one's output (normalised) and how to reproduce it."""
    import json

    details = json.loads(b["details"] or "{}")
    print(f"this build:   {details.get('this_build')}")
    print(f"reference:    {details.get('reference_build')} (compared: {details.get('compare')})")
    if details.get("first_difference") and details["first_difference"] not in (b["message"] or ""):
        print(f"difference:   {details['first_difference']}")
    folder = f"{args.out}/bucket-{b['id']}"
    print(f"reproduce:    cd {shlex.quote(folder)} && {details.get('reproduce')}")
    print(f"              (or {folder}/reproduce.sh; both builds read input.mlir there, which "
          "`loomfuzz triage report` writes)")
    for title, key in (("this build's output", "observed_output"), ("the reference build's output", "reference_output")):
        if b[key]:
            print(f"--- {title} (normalised):")
            sys.stdout.write(b[key])
    print("---")


def _mark(args: argparse.Namespace, words: list[str]) -> int:
    from harness.triage.crashdb import STATUSES

    try:
        bucket_id = _bucket_id(words, "mark")
        other = _bucket_id(words[2:], "duplicate-of") if words[1:2] == ["duplicate-of"] else None
    except ValueError as error:
        return fail(str(error))
    usage = (f"mark needs BUCKET STATUS (one of {', '.join(STATUSES)}), BUCKET distinct "
             "or BUCKET duplicate-of OTHER")
    if len(words) == 3 and other is not None:
        action = "duplicate-of"
    elif len(words) == 2 and (words[1] in STATUSES or words[1] == "distinct"):
        action = words[1]
    else:
        return fail(usage)
    with _open(args) as db:
        try:
            if action == "duplicate-of":
                db.set_duplicate(bucket_id, other)
                said = f"a duplicate of bucket {db.primary_of(bucket_id)}"
            elif action == "distinct":
                db.set_duplicate(bucket_id, None)
                said = "a bug of its own (triage will not fold it again)"
            else:
                db.mark(bucket_id, action)
                said = action
        except KeyError as missing:
            return fail(f"{args.db}: no bucket {missing.args[0]}")
        except ValueError as invalid:
            return fail(str(invalid))
    print(f"bucket {bucket_id}: {said}")
    return 0


def _report(args: argparse.Namespace, words: list[str]) -> int:
    from harness.contract import program_suffix
    from harness.triage.report import write_reports

    if words:
        return fail(f"report takes no arguments (got {' '.join(words)!r})")
    with _open(args) as db:
        write_reports(db, args.out, suffix=program_suffix(grammar_from_args(args)))
    print(f"report: {args.out}/report.md", file=sys.stderr)
    return 0


def _report_upstream(args: argparse.Namespace, words: list[str]) -> int:
    """A bucket as the report an MLIR maintainer asks for (harness.triage.report_upstream),
    written only when its commands, run as written in a clean folder, reproduce the bug."""
    from harness.triage.crashdb import DatabaseError
    from harness.triage.report_upstream import check_report, upstream_report
    from harness.triage.upstream_report import ReportError, report_markdown

    try:
        bucket_id = _bucket_id(words, "report-upstream")
        if len(words) > 1:
            raise ValueError(f"report-upstream takes one BUCKET (got {' '.join(words)!r})")
        named = args.profile or args.grammar or args.break_precondition  # else the bucket's own profile
        report = upstream_report(args.db, bucket_id, grammar_from_args(args) if named else None)
    except (ValueError, ReportError, DatabaseError) as error:
        fail(str(error))
        return 2
    problems = check_report(report)
    if problems:
        for problem in problems:
            print(f"{PROG}: error: bucket {bucket_id}: the report's command does not reproduce the bug: "
                  f"{problem}", file=sys.stderr)
        return 1
    text = report_markdown(report)
    if args.output:
        Path(args.output).write_text(text)
        print(f"report-upstream: {args.output} (bucket {bucket_id}, {report.kind}; its {len(report.steps)} "
              "command(s) checked in a clean folder: they reproduce it)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
