"""Triage reports: per-bucket files, ``report.md`` and ``report.json``.

Written by ``loomfuzz triage`` into ``--out DIR`` (default ``triage/``) from
the database, for every bucket it holds (old ones included, with their
status)::

    DIR/report.md                 a table of the buckets, then the inputs that did not reproduce
    DIR/report.json               the same, machine readable (schema below)
    DIR/report.html               the same as one page for a browser (harness.triage.report_html)
    DIR/bucket-N/minimized.mlir   the minimized program, as the target reads it
    DIR/bucket-N/regression.mlir  a lit test for loom's test/ tree (RUN line + CHECK lines + program)
    DIR/bucket-N/stderr.txt       the full stderr of one reproduction (of the minimized program)
    DIR/bucket-N/text-reduced.mlir   only with --text-reduce: the line-reduced text
    DIR/bucket-N/reference.txt    a wrong-code bucket: what the minimized program prints (reference)
    DIR/bucket-N/observed.txt     the same after optimization (the target's values)
    DIR/bucket-N/input.mlir       a divergence bucket: what both builds read
    DIR/bucket-N/reproduce.sh     a divergence bucket: both builds on input.mlir, diffed

A crash bucket's program files (minimized, regression, text-reduced) end in the
grammar's suffix (``.mlir``, or its ``SUFFIX``: :func:`harness.contract.program_suffix`).

A bucket of another oracle (wrong code: ``oracle`` ``differential``) has the
same files but ``stderr.txt``; its regression test is the lit test that
oracle's triage stored (RUN: optimizer | lowering | runner | FileCheck,
CHECK lines with the reference values: it fails while the optimizer changes
the values).  A divergence bucket (two builds of one tool: ``oracle``
``divergence``) has no regression test: ``reference.txt`` and
``observed.txt`` are the reference build's and this build's output
(normalised, with diagnostics and, where executed, printed values), and
``reproduce.sh`` runs the ready command its triage stored (``details``:
``reproduce``), from its own folder.

Every file is written to a temporary name and renamed, so a killed run never
leaves half a report.  A crash bucket's regression test is made by
:mod:`harness.triage.regression` (what its RUN and CHECK lines say is there);
``report.md`` by :mod:`harness.triage.report_markdown`.

``report.json`` (``"schema": "loom-fuzz-triage-report/1"``)::

    {
      "schema": "loom-fuzz-triage-report/1",
      "generated": "2026-12-02T11:00:00Z",        // UTC
      "database": "triage.db",
      "run": {                                    // the run that wrote the report (null if none)
        "id": 3, "started": "...", "finished": "...", "status": "complete",
        "resumed": 0, "inputs": 412, "new_members": 400, "new_buckets": 3,
        "target": {"name": "loom-opt", "argv": ["/path/loom-opt", "--loom-lower-for-to-graph"],
                   "render": "canonical", "timeout": 10.0, "memory_mb": 4096,
                   "expectations": "builtin:loom-opt"},
        "repeat": 3,                              // --repeat: the most runs of an input
        "runs_per_input": {"1": 380, "3": 20}     // inputs this run judged, by their runs
      },
      "totals": {"buckets": 4, "bugs": 2,         // bugs: buckets that are no duplicate
                 "members": 412, "reproducing": 40, "flaky": 5,
                 "not_reproducing": 372, "files": 430, "runs": 3},
      "buckets": [
        {
          "id": 1,
          "signature": "crash:assert | ... | frame1 | frame2 | frame3",
          "kind": "crash",                        // crash | timeout | oom | unexpected-rejection |
                                                  // unexpected-acceptance | wrong-diagnostic | wrong-output
          "type": "assert",                       // assert | llvm-error | unreachable | sanitizer | SIGxxx | exit-N | ""
          "message": "normalised message",
          "frames": ["top", "three", "frames"],
          "status": "new",                        // new | known | fixed | regressed
          "first_seen": "...", "last_seen": "...", "first_run": 1, "last_run": 3,
          "members": 12,                          // distinct programs in the bucket
          "profile": "conventions",               // the grammar profile of its first member
                                                  // (edge, break, break:P7 for --break P7)
          "reproduction": "always",               // always | sometimes (flaky): of the minimized
                                                  // program once minimized, of the members before
          "duplicate_of": null,                   // the bucket of the same bug this one is folded
                                                  // under (the end of the chain), or null
          "duplicate_reason": null,               // why: the links harness.triage.dedup found
          "duplicate_by": null,                   // "auto" (triage) | "user" (triage mark) | null
          "duplicates": [3, 4],                   // buckets folded under this one
          "symptoms": {"crash:...": {"runs": 40, "inputs": 12}, "": {...}},
                                                  // crash buckets: its members' runs per signature
                                                  // (n runs of m members; "": no finding), or null
          "bug": {                                // a bucket no duplicate of another (else null):
            "symptoms": {...},                    // the symptoms of it and its duplicates together
            "aliases": ["crash:SIGSEGV | ..."],   // its duplicates' signatures: later findings with
                                                  // one of them join this bug
            "inputs": 30                          // members of it and its duplicates
          },
          "minimized": {                          // null until minimized
            "path": "bucket-1/minimized.mlir",
            "in_shape": true,                     // false: kept as text (no member in the shape)
            "tree": "t0[for:freeze]",             // harness.core.tree.describe, null for text
            "bytes": "0a1b",                      // hex of the fuzz input (harness.core.codec.encode), null for text
            "lines": 31, "sites": 1,
            "target_runs": 5,                     // target runs spent minimizing
            "verified": {"hits": 3, "attempts": 3},  // runs of the result that gave the signature;
                                                  // the bucket's "reproduction" comes from these
            "candidates_tested": 4,
            "seconds": 0.02,
            "steps": ["drop thread 0", "drop site 0.1"],
            "note": null,
            "contract": "none",                   // what the minimized program breaks: none (its
                                                  // contract holds), "edge: while, name-empty", "P7", or
                                                  // the checker's P<n>s for text
            "signatures": {"crash:...": 4, "": 1} // the verification runs per signature ("": no
                                                  // finding): the evidence deduplication reads
            "text": "..."                         // oracle buckets only: the minimized program
          },
          "text_reduced": null | {"path": "bucket-1/text-reduced.mlir", "lines": 9, "target_runs": 120},
          "regression_test": "bucket-1/regression.mlir",
          "stderr": "bucket-1/stderr.txt",        // null for an oracle bucket
          "oracle": "crash",                      // crash | differential (wrong code) | ...
          "culprit": null,                        // oracle buckets: the pass the bisection blames
          "reference_output": null,               // oracle buckets: bucket-1/reference.txt, or null
          "observed_output": null,                // oracle buckets: bucket-1/observed.txt, or null
          "details": null,                        // oracle buckets: the oracle's facts, e.g.
                                                  // {"pipeline": "builtin.module(canonicalize,cse)",
                                                  //  "first_difference": "...", "reference_value": "3",
                                                  //  "observed_value": "-3"}; a wrong-code or
                                                  // executor-disagreement bucket's also "found_pipeline"
                                                  // (the whole pipeline) and "releases": one record per
                                                  // build judged (harness.triage.releases): {"name":
                                                  // "MLIR 19", "binary", "version": "19.1.7", "result":
                                                  // "correct", "detail", "same_first_difference",
                                                  // "under_test"}; a divergence's:
                                                  // {"this_build", "reference_build", "compare",
                                                  //  "aspect", "kinds", "first_difference", "reproduce"}
          "build_input": null,                    // divergence buckets: bucket-1/input.mlir
          "reproduce": null,                      // divergence buckets: bucket-1/reproduce.sh
          "inputs": [                             // the bucket's members
            {"sha256": "...", "paths": ["artifacts/crash-ab12"], "form": "tree",
             "tree": "t0[...] t1[...]", "sites": 3, "lines": 80,
             "reproduction": "always", "hits": 3, "attempts": 3,
             "outcome": "crash", "not_in_shape": null,
             "profile": "break", "contract": "P7",   // the member's profile and what it breaks
             "signatures": {"crash:...": 3}}         // its runs per signature ("": no finding)
          ]
        }
      ],
      "not_reproducing": [                        // inputs with no finding in any of their runs
        {"sha256": "...", "paths": ["..."], "form": "tree", "tree": "...", "sites": 2, "lines": 60,
         "reproduction": "never", "hits": 0, "attempts": 3,
         "outcome": "accepted", "reason": "exit status 0", "not_in_shape": null}
      ]
    }
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from harness.triage.crashdb import TriageDB, now
from harness.triage.regression import regression_test, regression_tool_dirs
from harness.triage.report_markdown import report_markdown
from harness.triage.symptoms import merge_symptoms

__all__ = ["REPORT_SCHEMA", "bucket_suffix", "report_data", "write_reports"]

REPORT_SCHEMA = "loom-fuzz-triage-report/1"


def _write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    if mode is not None:  # a script: executable when it appears
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def _member_json(db: TriageDB, row, *, with_reason: bool = False) -> dict:
    d = {
        "sha256": row["sha256"],
        "paths": db.files_of(row["id"]),
        "form": row["form"],
        "tree": row["tree"],
        "sites": row["sites"],
        "lines": row["lines"],
        "reproduction": row["reproduction"],
        "hits": row["hits"],
        "attempts": row["attempts"],
        "outcome": row["outcome"],
        "not_in_shape": row["not_in_shape"],
        "profile": row["profile"],
        "contract": row["contract"],
        "signatures": json.loads(row["signatures"]) if row["signatures"] else None,
    }
    if with_reason:
        d["reason"] = row["reason"]
    return d


def _bug(rows, primary: dict[int, int], symptoms: dict[int, dict | None], bucket_id: int) -> dict:
    """A bug seen from its primary bucket: the symptoms of its buckets together, its aliases."""
    group = [b for b in rows if primary[b["id"]] == bucket_id]
    return {
        "symptoms": merge_symptoms(symptoms[b["id"]] for b in group),
        "aliases": [b["signature"] for b in group if b["id"] != bucket_id],
        "inputs": sum(b["count"] for b in group),
    }


def report_data(db: TriageDB, *, suffix: str, run_id: int | None = None) -> dict:
    """The content of report.json; a crash bucket's program files end in ``suffix`` (the
    grammar's, :func:`harness.contract.program_suffix`)."""
    run = db.run(run_id) if run_id is not None else db.last_run()
    run_json = None
    if run is not None:
        run_json = {
            k: run[k]
            for k in ("id", "started", "finished", "status", "resumed", "inputs", "new_members",
                      "new_buckets", "repeat")
        }
        run_json["target"] = json.loads(run["target"]) if run["target"] else None
        # how many times the inputs this run judged were run (not --repeat: most run once)
        run_json["runs_per_input"] = {str(attempts): inputs for attempts, inputs in db.conn.execute(
            "SELECT attempts, COUNT(*) FROM members WHERE run_id = ? GROUP BY attempts ORDER BY attempts", (run["id"],))}
    buckets = []
    rows = db.buckets()
    primary = {b["id"]: db.primary_of(b["id"]) for b in rows}
    symptoms = {b["id"]: json.loads(b["symptoms"]) if b["symptoms"] else None for b in rows}
    for b in rows:
        d = f"bucket-{b['id']}"
        own = bucket_suffix(b, suffix)
        minimized = None
        if b["minimized_text"] is not None:
            minimized = {
                "path": f"{d}/minimized{own}",
                "in_shape": bool(b["minimized_in_shape"]),
                "tree": b["minimized_tree"],
                "bytes": b["minimized_data"].hex() if b["minimized_data"] is not None else None,
                "lines": b["minimized_lines"],
                "sites": b["minimized_sites"],
                "target_runs": b["min_runs"],
                "verified": {"hits": b["minimized_hits"], "attempts": b["minimized_attempts"]},
                "candidates_tested": b["min_evaluations"],
                "seconds": b["min_seconds"],
                "steps": json.loads(b["min_steps"] or "[]"),
                "note": b["note"],
                "contract": b["minimized_contract"],
                "signatures": json.loads(b["verify_counts"]) if b["verify_counts"] else None,
            }
        text_reduced = None
        if b["text_reduced"] is not None:
            text_reduced = {
                "path": f"{d}/text-reduced{own}",
                "lines": b["text_reduced_lines"],
                "target_runs": b["text_runs"],
            }
        oracle = b["oracle"] != "crash"
        if oracle and minimized:  # its report shows the program (a crash bucket's: its file)
            minimized["text"] = b["minimized_text"]
        regression = None
        if minimized and (not oracle or b["lit_test"]):
            regression = f"{d}/regression{own}"
        buckets.append(
            {
                "id": b["id"],
                "signature": b["signature"],
                "kind": b["kind"],
                "type": b["type"],
                "message": b["message"],
                "frames": json.loads(b["frames"] or "[]"),
                "status": b["status"],
                "first_seen": b["first_seen"],
                "last_seen": b["last_seen"],
                "first_run": b["first_run"],
                "last_run": b["last_run"],
                "members": b["count"],
                "profile": b["profile"],
                "reproduction": b["reproduction"],
                "duplicate_of": primary[b["id"]] if b["duplicate_of"] is not None else None,
                "duplicate_reason": b["duplicate_reason"],
                "duplicate_by": b["duplicate_by"],
                "duplicates": [k for k, p in primary.items() if p == b["id"] and k != b["id"]],
                "symptoms": symptoms[b["id"]],
                "bug": _bug(rows, primary, symptoms, b["id"]) if primary[b["id"]] == b["id"] else None,
                "minimized": minimized,
                "text_reduced": text_reduced,
                "regression_test": regression,
                "stderr": None if oracle else f"{d}/stderr.txt",
                "oracle": b["oracle"],
                "culprit": b["culprit"],
                "reference_output": f"{d}/reference.txt" if b["reference_output"] is not None else None,
                "observed_output": f"{d}/observed.txt" if b["observed_output"] is not None else None,
                "details": json.loads(b["details"]) if b["details"] else None,
                "build_input": f"{d}/input.mlir" if b["oracle"] == "divergence" else None,
                "reproduce": f"{d}/reproduce.sh" if b["oracle"] == "divergence" else None,
                "inputs": [_member_json(db, m) for m in db.members(b["id"])],
            }
        )
    return {
        "schema": REPORT_SCHEMA,
        "generated": now(),
        "database": db.path,
        "run": run_json,
        "totals": db.counts(),
        "buckets": buckets,
        "not_reproducing": [_member_json(db, m, with_reason=True) for m in db.members(None)],
    }


def bucket_suffix(bucket, suffix: str) -> str:
    """The suffix of a bucket's program files: the grammar's (``suffix``) for a crash
    bucket; ``.mlir`` for the oracles' buckets, whose programs are MLIR by nature (the
    differential oracle and the build comparison run only loom's grammars)."""
    return suffix if bucket["oracle"] == "crash" else ".mlir"


_LIT_CONFIG = """\
# lit.cfg.py: `lit bucket-%(id)d` runs regression%(suffix)s (LLVM's lit, pip install lit)
import glob
import os
import shutil

import lit.formats

config.name = 'loomfuzz bucket %(id)d'
config.test_format = lit.formats.ShTest()
config.suffixes = [%(suffix)r]
config.excludes = ['minimized%(suffix)s', 'text-reduced%(suffix)s', 'input%(suffix)s']
config.test_source_root = config.test_exec_root = os.path.dirname(__file__)


def llvm_tools():
    \"\"\"not and FileCheck: on PATH, else the newest of Debian's /usr/lib/llvm-N/bin.\"\"\"
    if shutil.which('FileCheck') and shutil.which('not'):
        return []
    found = []
    for folder in glob.glob('/usr/lib/llvm-*/bin'):
        release = folder.split('llvm-')[1].split('/')[0]
        if release.isdigit() and all(os.path.exists(os.path.join(folder, t)) for t in ('FileCheck', 'not')):
            found.append((int(release), folder))
    return [max(found)[1]] if found else []


TOOL_DIRS = %(dirs)r  # the folder of the binary under test, as triage ran it
config.environment['PATH'] = os.pathsep.join(
    [d for d in TOOL_DIRS if os.path.isdir(d)] + llvm_tools() + [os.environ.get('PATH', '')])
"""


def lit_config(bucket_id: int, tool_dirs: Sequence[str] = (), suffix: str = ".mlir") -> str:
    """The ``lit.cfg.py`` beside a bucket's ``regression.mlir``: ``lit bucket-N`` (the
    virtualenv's ``lit``) runs it, and nothing else of the folder, as LLVM's regression
    tests run, with no PATH change: ``tool_dirs`` (the folder of the binary the RUN line
    names by its basename) and the LLVM tools folder that holds ``not`` and ``FileCheck``
    (on PATH, else the newest ``/usr/lib/llvm-N/bin``: Debian's place) go before PATH;
    ``suffix``: the regression test's (the grammar's program suffix)."""
    return _LIT_CONFIG % {"id": bucket_id, "dirs": list(tool_dirs), "suffix": suffix}


def write_reports(db: TriageDB, out_dir: str | os.PathLike, *, suffix: str, run_id: int | None = None) -> dict:
    """Write every bucket's files, report.md, report.json and report.html; return the report
    data (``suffix``: the grammar's program suffix, :func:`bucket_suffix`)."""
    out = Path(out_dir)
    data = report_data(db, suffix=suffix, run_id=run_id)
    for b in db.buckets():
        d = out / f"bucket-{b['id']}"
        if b["oracle"] != "crash":  # its triage stored its lit test and values
            _write(d / "minimized.mlir", b["minimized_text"])
            for name, text in (("regression.mlir", b["lit_test"]), ("reference.txt", b["reference_output"]),
                               ("observed.txt", b["observed_output"])):
                if text is not None:
                    _write(d / name, text)
            if b["lit_test"] is not None:
                _write(d / "lit.cfg.py", lit_config(b["id"]))
            if b["oracle"] == "divergence":
                details = json.loads(b["details"] or "{}")
                _write(d / "input.mlir", details.get("input") or b["minimized_text"])
                _write(d / "reproduce.sh", f"#!/bin/bash\n# both builds on input.mlir, their outputs "
                       f"diffed\ncd \"$(dirname \"$0\")\"\n{details.get('reproduce', '')}\n", 0o755)
            continue
        if b["minimized_text"] is not None:
            _write(d / f"minimized{suffix}", b["minimized_text"])
            _write(d / f"regression{suffix}", regression_test(b))
            _write(d / "lit.cfg.py", lit_config(b["id"], regression_tool_dirs(b), suffix))
        stderr = b["minimized_stderr"]
        if stderr is None:
            rows = db.members(b["id"])
            stderr = next((r["stderr"] for r in rows if r["stderr"]), "")
        _write(d / "stderr.txt", stderr)
        if b["text_reduced"] is not None:
            _write(d / f"text-reduced{suffix}", b["text_reduced"])
    _write(out / "report.json", json.dumps(data, indent=2) + "\n")
    _write(out / "report.md", report_markdown(data))
    from harness.triage.report_html import report_html  # matplotlib: only when reports are written

    _write(out / "report.html", report_html(data, out))
    return data
