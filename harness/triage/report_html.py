"""``report.html``: the triage report as one page a person opens in a browser.

Written beside ``report.md`` from the same data (``report.json``'s content)
and the bucket files :func:`harness.triage.report.write_reports` has just
written.  One self-contained file: CSS and JavaScript inline, the chart an
inline SVG, nothing fetched at view time.  It shows

* the run and the totals;
* a chart of the new buckets of every triage run;
* the buckets as a table sortable by any column (click a header; the page
  also opens sorted when its address ends in ``#sort=COLUMN`` or
  ``#sort=-COLUMN``, e.g. ``report.html#sort=-members``);
* per bucket: the signature, the minimized program and its lit test with
  syntax colouring, the members, the stderr of one reproduction.

Syntax colouring is done here (a small MLIR/lit tokenizer), not by a script
in the page: the text is readable with scripts off.  The page's script sets
``data-ready`` on ``<html>`` once it has run, and reports any error in the
page into ``#page-errors`` (tests read both back from a real browser).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Optional

from harness.triage.report_markdown import release_summary, runs_sentence
from harness.triage.symptoms import symptom_lines

__all__ = ["highlight_mlir", "report_html"]

_TOKENS = re.compile(
    r"""
    (?P<comment>//[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<ssa>%[\w$.\#-]+)
  | (?P<symbol>@[\w$.-]+)
  | (?P<label>\^[\w$.-]+)
  | (?P<op>\b[a-z_][\w]*\.[a-z_][\w.]*\b)
  | (?P<type>!\w+(?:\.\w+)*|\b(?:i\d+|f16|f32|f64|bf16|index|memref|tensor|vector|none)\b)
  | (?P<keyword>\b(?:module|func|return|to|step|iter_args|attributes|private|true|false|dense)\b)
  | (?P<number>\b\d+(?:\.\d+)?\b)
    """,
    re.VERBOSE,
)
_DIRECTIVE = re.compile(r"^(//\s*)((?:RUN|[A-Z][A-Z0-9_-]*(?:-(?:NEXT|SAME|NOT|DAG|LABEL|EMPTY|COUNT-\d+))?):)(.*)$")


def highlight_mlir(text: str) -> str:
    """HTML of ``text`` (MLIR, or a lit test) with ``<span class="...">`` per token kind."""
    out, position = [], 0
    for match in _TOKENS.finditer(text):
        out.append(html.escape(text[position:match.start()]))
        kind, token = match.lastgroup, match.group()
        if kind == "comment":
            directive = _DIRECTIVE.match(token)
            if directive:
                lead, name, rest = directive.groups()
                out.append(f'<span class="comment">{html.escape(lead)}</span>'
                           f'<span class="directive">{html.escape(name)}</span>'
                           f'<span class="check">{html.escape(rest)}</span>')
                position = match.end()
                continue
        out.append(f'<span class="{kind}">{html.escape(token)}</span>')
        position = match.end()
    out.append(html.escape(text[position:]))
    return "".join(out)


def _read(path: Path, limit: Optional[int] = None) -> Optional[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if limit is not None and len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters in {path.name})"
    return text


def _new_buckets_per_run(data: dict) -> tuple[list[str], list[int]]:
    runs = max([data["totals"].get("runs") or 0, *(b.get("first_run") or 0 for b in data["buckets"])])
    counts = [0] * runs
    for bucket in data["buckets"]:
        if bucket.get("first_run"):
            counts[bucket["first_run"] - 1] += 1
    return [str(r + 1) for r in range(runs)], counts


def _chart(data: dict) -> str:
    labels, counts = _new_buckets_per_run(data)
    if not labels:
        return "<p>No triage run recorded yet.</p>"
    from harness.plots import bar_chart_svg

    svg = bar_chart_svg(labels, counts, title="New buckets per triage run", xlabel="run", ylabel="new buckets")
    return f'<figure id="new-buckets" data-runs="{len(labels)}" data-new="{",".join(map(str, counts))}">{svg}</figure>'


def _size(bucket: dict) -> tuple[str, int]:
    """(shown, sort key) of the minimized program's size."""
    m = bucket.get("minimized")
    if not m:
        return "not minimized", 1 << 30
    sites = m.get("sites")
    shown = f"{m['lines']} lines / " + (f"{sites} site{'s' if sites != 1 else ''}" if sites is not None else "text")
    return shown, int(m["lines"] or 0)


def _reproduction(bucket: dict) -> str:
    m = bucket.get("minimized") or {}
    verified = m.get("verified") or {}
    if bucket["reproduction"] == "always":
        return "always"
    if verified.get("attempts"):
        return f"flaky ({verified['hits']}/{verified['attempts']})"
    return "flaky"


_COLUMNS = (  # (key, header, numeric)
    ("id", "bucket", True), ("status", "status", False), ("kind", "kind", False),
    ("signature", "signature", False), ("members", "members", True), ("first", "first seen", False),
    ("last", "last seen", False), ("reproduction", "reproduction", False), ("size", "minimized size", True),
)


def _table(data: dict) -> str:
    e = html.escape
    head = "".join(
        f'<th data-key="{key}" data-type="{"number" if numeric else "text"}" tabindex="0">{e(title)}</th>'
        for key, title, numeric in _COLUMNS
    )
    rows = []
    for b in data["buckets"]:
        size, size_key = _size(b)
        folded = (f' <small>duplicate of <a href="#bucket-{b["duplicate_of"]}">{b["duplicate_of"]}</a></small>'
                  if b.get("duplicate_of") is not None else "")
        cells = [
            (b["id"], f'<a href="#bucket-{b["id"]}">{b["id"]}</a>{folded}'),
            (b["status"], e(b["status"])),
            (b["kind"], e(b["kind"])),
            (b["signature"], f"<code>{e(b['signature'])}</code>"),
            (b["members"], str(b["members"])),
            (b["first_seen"], e(f"{b['first_seen']} (run {b['first_run']})")),
            (b["last_seen"], e(f"{b['last_seen']} (run {b['last_run']})")),
            (_reproduction(b), e(_reproduction(b))),
            (size_key, e(size)),
        ]
        rows.append(f'<tr class="bucket" id="row-{b["id"]}">'
                    + "".join(f'<td data-sort="{e(str(key))}">{shown}</td>' for key, shown in cells) + "</tr>")
    return (f'<table id="buckets"><thead><tr>{head}</tr></thead><tbody>\n' + "\n".join(rows)
            + "\n</tbody></table>")


def _oracle_facts(b: dict, out_dir: Path) -> str:
    """An oracle bucket's culprit pass, shortest pipeline, first difference and both values
    (a divergence bucket's: both builds, the first difference, the reproduction, both outputs)."""
    e = html.escape
    details = b.get("details") or {}
    if b.get("oracle") == "divergence":
        rows = [("this build", f"<code>{e(details.get('this_build') or '')}</code>"),
                ("reference build", f"<code>{e(details.get('reference_build') or '')}</code>"),
                ("compared", e(str(details.get("compare")))),
                ("reproduce", f"<code>{e(details.get('reproduce') or '')}</code> (<a href=\"{e(b.get('reproduce') or '')}\">"
                              f"{e(b.get('reproduce') or '')}</a>, from its folder)")]
        outputs = (("observed_output", "This build's output"), ("reference_output", "The reference build's output"))
    else:
        rows = [("culprit pass", f"<code>{e(b.get('culprit') or '(whole pipeline)')}</code>")]
        outputs = (("reference_output", "Reference values (before optimization)"),
                   ("observed_output", "Observed values (after optimization)"))
    if details.get("pipeline"):
        rows.append(("shortest pipeline", f"<code>{e(details['pipeline'])}</code>"))
    if details.get("first_difference"):
        rows.append(("first difference", e(details["first_difference"])))
    if "reference_value" in details:
        rows.append(("values", f"reference <code class=\"reference\">{e(str(details['reference_value']))}</code>, "
                               f"observed <code class=\"observed\">{e(str(details['observed_value']))}</code>"))
    if details.get("stage"):
        rows.append(("failure", e(f"{details['stage']}: {details.get('detail', '')}")))
    table = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    out = [f'<table class="oracle-facts">{table}</table>']
    for key, title in outputs:
        if b.get(key):
            text = _read(out_dir / b[key], 20_000)
            out.append(f'<details class="{key}"><summary>{e(title)} (<a href="{e(b[key])}">{e(b[key])}</a>)'
                       f'</summary><pre>{e(text or "(file missing)")}</pre></details>')
    if details.get("releases"):
        out.append(_releases_table(details))
    return "\n".join(out)


def _releases_table(details: dict) -> str:
    """The builds a bucket's program was judged on (harness.triage.releases), one row each."""
    e = html.escape
    rows = "".join(
        f'<tr class="release {e(r["result"].replace(" ", "-"))}"><td>{e(r["name"])}'
        + (" <small>(under test)</small>" if r.get("under_test") else "")
        + f'</td><td><code>{e(r["binary"])}</code></td><td>{e(r.get("version") or "-")}</td>'
        f'<td>{e(r["result"])}</td><td>{e(r.get("detail") or "")}</td></tr>'
        for r in details["releases"])
    return (f'<h3>Reproduces on <small>(under <code>{e(str(details.get("found_pipeline")))}</code>; the reference '
            f'values the interpreter\'s)</small></h3><table class="releases"><tr><th>build</th><th>binary</th>'
            f'<th>LLVM</th><th>result</th><th>detail</th></tr>{rows}</table>')


def _releases_summary(data: dict) -> str:
    """Per bucket judged on releases, the releases it reproduces on (one line each)."""
    e = html.escape
    items = "".join(f'<li><a href="#bucket-{b["id"]}">bucket {b["id"]}</a>: '
                    f'{e(release_summary(b["details"]["releases"]))}</li>'
                    for b in data["buckets"] if (b.get("details") or {}).get("releases"))
    return f'<p>Releases each bucket\'s program was judged on:</p><ul id="releases">{items}</ul>' if items else ""


def _bucket_section(bucket: dict, out_dir: Path) -> str:
    e = html.escape
    b = bucket
    parts = [f'<section class="bucket-detail" id="bucket-{b["id"]}">',
             f"<h2>Bucket {b['id']}: {e(b['kind'])} ({e(b['status'])})</h2>",
             f"<p class=\"signature\"><code>{e(b['signature'])}</code></p>"]
    if b.get("duplicate_of") is not None:
        why = "marked by hand" if b.get("duplicate_by") == "user" else b.get("duplicate_reason") or ""
        parts.append(f'<p class="duplicate">Duplicate of <a href="#bucket-{b["duplicate_of"]}">bucket '
                     f'{b["duplicate_of"]}</a>: {e(why)}</p>')
    if b.get("duplicates"):
        parts.append('<p class="duplicates">Duplicates folded under this bug: '
                     + ", ".join(f'<a href="#bucket-{k}">bucket {k}</a>' for k in b["duplicates"]) + "</p>")
    bug = b.get("bug")
    if bug and bug["symptoms"] and (len(bug["symptoms"]) > 1 or bug["aliases"]):
        parts.append(f"<p>Symptoms of this bug (the runs of its {bug['inputs']} input(s)):</p><ul class=\"seen\">"
                     + "".join(f"<li>{e(line)}</li>" for line in symptom_lines(bug["symptoms"])) + "</ul>")
    if b.get("oracle", "crash") != "crash":
        parts.append(_oracle_facts(b, out_dir))
    seen = (b.get("minimized") or {}).get("signatures")
    if seen:
        parts.append("<p>Signatures over the runs of the minimized program:</p><ul class=\"seen\">" + "".join(
            f"<li>{n} &times; <code>{e(key) if key else 'no finding'}</code></li>"
            for key, n in sorted(seen.items(), key=lambda kv: -kv[1])) + "</ul>")
    m = b.get("minimized")
    if m:
        program = _read(out_dir / m["path"], 200_000)
        shape = m["tree"] if m.get("in_shape") else "text, not in the program shape"
        parts.append(f"<h3>Minimized program <small>({e(str(shape))}; {m['lines']} lines; "
                     f"{m['target_runs']} target runs; <a href=\"{e(m['path'])}\">{e(m['path'])}</a>)</small></h3>")
        parts.append(f'<pre class="code program">{highlight_mlir(program or "(file missing)")}</pre>')
        if b.get("regression_test"):
            lit = _read(out_dir / b["regression_test"], 200_000)
            parts.append(f"<h3>Lit test <small>(<a href=\"{e(b['regression_test'])}\">"
                         f"{e(b['regression_test'])}</a>)</small></h3>")
            parts.append(f'<pre class="code lit">{highlight_mlir(lit or "(file missing)")}</pre>')
    else:
        parts.append("<p>Not minimized yet.</p>")
    stderr = _read(out_dir / b["stderr"], 20_000) if b.get("stderr") else None
    if stderr:
        parts.append(f"<details><summary>stderr of one reproduction</summary><pre>{e(stderr)}</pre></details>")
    members = b.get("inputs") or []
    items = "".join(
        f"<li><code>{e(', '.join(member['paths'][:3]))}</code> {e(member['reproduction'])} "
        f"({member['hits']}/{member['attempts']})</li>"
        for member in members[:20]
    )
    more = f"<li>... {len(members) - 20} more in report.json</li>" if len(members) > 20 else ""
    parts.append(f"<details><summary>{len(members)} member(s)</summary><ul>{items}{more}</ul></details>")
    parts.append("</section>")
    return "\n".join(parts)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 110em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
th { background: #eef; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td code { font-size: 0.85em; word-break: break-all; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
.comment { color: #6a737d; } .directive { color: #d73a49; font-weight: bold; } .check { color: #6f42c1; }
.string { color: #032f62; } .ssa { color: #e36209; } .symbol { color: #005cc5; font-weight: bold; }
.label { color: #22863a; } .type { color: #22863a; } .op { color: #6f42c1; font-weight: bold; }
.keyword { color: #d73a49; } .number { color: #005cc5; }
#page-errors:empty { display: none; } #page-errors { color: #b00; border: 1px solid #b00; padding: 0.5em; }
section.bucket-detail { border-top: 2px solid #ccd; margin-top: 1.5em; }
figure { margin: 0.5em 0; }
"""

# The page's own script: error capture first, then sorting.
_JS = """
(function () {
  var errors = document.getElementById("page-errors");
  function report(text) { var li = document.createElement("li"); li.textContent = text; errors.appendChild(li); }
  window.addEventListener("error", function (event) { report("error: " + event.message); });
  window.addEventListener("unhandledrejection", function (event) { report("rejection: " + event.reason); });
  var table = document.getElementById("buckets");
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  function sortBy(key, descending) {
    var index = headers.findIndex(function (th) { return th.dataset.key === key; });
    if (index < 0) { return false; }
    var numeric = headers[index].dataset.type === "number";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].dataset.sort, y = b.cells[index].dataset.sort;
      var order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      if (order === 0) { order = Number(a.cells[0].dataset.sort) - Number(b.cells[0].dataset.sort); }
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    headers.forEach(function (th, i) {
      if (i === index) { th.setAttribute("aria-sort", descending ? "descending" : "ascending"); }
      else { th.removeAttribute("aria-sort"); }
    });
    return true;
  }
  headers.forEach(function (th) {
    function toggle() { sortBy(th.dataset.key, th.getAttribute("aria-sort") === "ascending"); }
    th.addEventListener("click", toggle);
    th.addEventListener("keydown", function (event) { if (event.key === "Enter") { toggle(); } });
  });
  var wanted = /^#sort=(-?)([a-z]+)$/.exec(window.location.hash);
  if (wanted) { sortBy(wanted[2], wanted[1] === "-"); }
  document.documentElement.dataset.ready = "yes";
})();
"""


def report_html(data: dict, out_dir: str | Path) -> str:
    """The page, from report.json's content and the bucket files in ``out_dir``."""
    e = html.escape
    out = Path(out_dir)
    totals = data["totals"]
    count = len(data["buckets"])
    title = f"loom-fuzz triage: {count} bucket{'s' if count != 1 else ''}"
    run = data.get("run")
    lines = []
    if run:
        argv = " ".join((run.get("target") or {}).get("argv") or [])
        lines.append(f"<p>Run {run['id']} ({e(str(run['status']))}), {e(str(run['started']))} - "
                     f"{e(str(run['finished'] or '...'))}; target <code>{e(argv)}</code>. "
                     f"{e(runs_sentence(run))}</p>")
    lines.append(
        f"<p id=\"totals\">{totals['buckets']} bucket(s); {totals['members']} distinct input program(s): "
        f"{totals['reproducing']} reproducing ({totals['flaky']} flaky), "
        f"{totals['not_reproducing']} not reproducing; {totals['runs']} triage run(s).</p>"
    )
    sections = "\n".join(_bucket_section(b, out) for b in data["buckets"])
    nr = data.get("not_reproducing") or []
    not_reproducing = "".join(
        f"<li><code>{e(', '.join(m['paths'][:3]))}</code>: {e(str(m['outcome']))} ({e(str(m.get('reason') or ''))})</li>"
        for m in nr[:50]
    ) + (f"<li>... {len(nr) - 50} more in report.json</li>" if len(nr) > 50 else "")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>\n"
        f"<h1>{e(title)}</h1>\n<ul id=\"page-errors\"></ul>\n"
        f"<p><small>Generated {e(str(data.get('generated')))} from <code>{e(str(data.get('database')))}</code>"
        "; the same data as report.json.</small></p>\n"
        + "\n".join(lines) + "\n" + _chart(data) + "\n<h2>Buckets</h2>\n"
        + _table(data) + "\n" + _releases_summary(data) + "\n" + sections
        + f"\n<h2>Not reproducing ({len(nr)})</h2><ul>{not_reproducing}</ul>\n"
        + f"<script>{_JS}</script>\n</body></html>\n"
    )
