"""The wrong-code hunt: differential campaigns per (build, pipeline) until each has its CPU-minutes.

Each *cell* is one build under test and one pass pipeline.  The hunt runs chunks of
``loomfuzz run --oracle differential --profile wide --twins 1`` (one process each,
niced), always the cell furthest from its goal next, so an interrupted hunt has
spread its time evenly; each chunk's CPU time is that of the ``loomfuzz`` process
and every process below it (the drivers and their forked workers, the optimizer
and runner processes), read from a cgroup of its own (v1 ``cpuacct``, which counts a
driver that outlives its parent too); where no cgroup can be made, ``RUSAGE_CHILDREN``
around the chunk, which misses what the harness did not wait for (each row says which).  Chunk ``k`` of a cell uses seed
``--seed + k``: a chunk is reproduced by its row's command.

Everything is kept in ``--state`` (default ``hunt/``), resumable:

``hunt.jsonl``      one row per finished chunk (cell, seed, programs, CPU and wall
                    seconds, findings by kind, the command)
``CELL/chunk-K/``   the chunk's findings (``loomfuzz run``'s artifacts)
``CELL/triage/``    with ``--triage``: the cell's findings triaged into buckets
                    (``loomfuzz triage run``, report.json)

``--report`` prints the table (programs, CPU-minutes, findings, buckets and their
signatures per cell); which bucket is a real bug and which a false alarm is
decided by hand (docs/reference/upstream-bugs.md says how each was confirmed).

    python benchmarks/bench_hunt.py --cpu-minutes 30            # hunt (resumes)
    python benchmarks/bench_hunt.py --report --triage           # triage and the table
    python benchmarks/bench_hunt.py --cells head --cpu-minutes 30 --state hunt-head   # the head's cells
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOOMFUZZ = ROOT / ".venv" / "bin" / "loomfuzz"
IREE_OPT = ROOT / ".venv" / "bin" / "iree-opt"
#: LLVM's development head with every upstream pass (the head extra's torch-mlir bindings)
MLIR_OPT_HEAD = ROOT / ".venv" / "bin" / "mlir-opt-head"


@dataclass(frozen=True)
class Cell:
    """One build under test and one pipeline (its folder name: ``slug``)."""

    target: str
    pipeline: str

    @property
    def slug(self) -> str:
        build = Path(self.target).name
        passes = re.sub(r"[^A-Za-z0-9]+", "-", self.pipeline.removeprefix("builtin.module(")).strip("-")
        return f"{build}--{passes}"


#: The current release (mlir-opt-22): the range analyses, the folders, loop motion;
#: the development head (the wheel's iree-opt, which has no sccp or int-range passes).
DEFAULT_CELLS = (
    Cell("mlir-opt-22", "builtin.module(int-range-optimizations,canonicalize)"),
    Cell("mlir-opt-22", "builtin.module(arith-int-range-narrowing{int-bitwidths-supported=8,16,32},canonicalize)"),
    Cell("mlir-opt-22", "builtin.module(canonicalize,cse,sccp)"),
    Cell("mlir-opt-22", "builtin.module(loop-invariant-code-motion,canonicalize)"),
    Cell(str(IREE_OPT), "builtin.module(canonicalize,cse)"),
    Cell(str(IREE_OPT), "builtin.module(loop-invariant-code-motion,canonicalize)"),
    Cell(str(IREE_OPT), "builtin.module(inline,canonicalize,cse)"),
    Cell(str(IREE_OPT), "builtin.module(lower-affine,canonicalize,symbol-dce)"),
)
#: The hunt on the head with every pass (issue 50): the passes iree-opt lacks, each followed by
#: canonicalize as they run in practice; the narrowing with both width sets the hunts used.
HEAD_CELLS = tuple(Cell(str(MLIR_OPT_HEAD), f"builtin.module({passes})") for passes in (
    "int-range-optimizations,canonicalize",
    "arith-int-range-narrowing{int-bitwidths-supported=8,16,32},canonicalize",
    "canonicalize,arith-int-range-narrowing{int-bitwidths-supported=8,16}",
    "arith-unsigned-when-equivalent,canonicalize",
    "sccp,canonicalize",
    "remove-dead-values,canonicalize",
    "canonicalize,cse",
))
CELL_SETS = {"default": DEFAULT_CELLS, "head": HEAD_CELLS}


def chunk_command(cell: Cell, seed: int, programs: int, artifacts: Path) -> list[str]:
    return [str(LOOMFUZZ), "run", "--oracle", "differential", "--profile", "wide", "--twins", "1",
            "--target", cell.target, "--pipeline", cell.pipeline, "--runner", "persistent",
            "-n", str(programs), "--seed", str(seed), "--artifacts", str(artifacts), "--no-progress"]


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def chunk_cgroup(name: str) -> Path | None:
    """A cpuacct cgroup for one chunk (None where cgroups cannot be made: not root, v2 only)."""
    group = CPUACCT / name
    try:
        group.mkdir(exist_ok=True)
        (group / "cpuacct.usage").write_text("0")
    except OSError:
        return None
    return group


def run_measured(command: list[str], group: Path | None, *, cwd: Path = ROOT,
                 env: dict | None = None) -> tuple[subprocess.CompletedProcess, float, str]:
    """Run ``command`` (in ``cwd``, with ``env``: None, this process's); (its result, the CPU
    seconds of it and everything below it, the method)."""
    cpu0 = children_cpu()
    enter = None
    if group is not None:
        tasks = str(group / "tasks")

        def enter() -> None:  # in the child, before exec: it and all it starts are counted
            with open(tasks, "w") as out:
                out.write(str(os.getpid()))

    done = subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=enter, env=env)
    if group is None:
        return done, children_cpu() - cpu0, "rusage"
    time.sleep(0.5)  # a driver killed at the chunk's end is still being charged
    return done, int((group / "cpuacct.usage").read_text()) / 1e9, "cpuacct"


def findings_of(artifacts: Path) -> Counter:
    """Findings by kind: each finding's sidecar (``*.json`` with a ``finding_kind``)."""
    kinds: Counter = Counter()
    for sidecar in artifacts.glob("*.json"):
        try:
            record = json.loads(sidecar.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("finding"):
            kinds[record.get("finding_kind") or "finding"] += 1
    return kinds


def printed_rate(stdout: str) -> bool:
    """Whether ``loomfuzz run`` printed its rate line (it ran its programs)."""
    return "programs/s over" in stdout


def ran(row: dict) -> bool:
    """Whether the chunk's ``loomfuzz run`` ran its programs (rows before ``ran`` was recorded:
    its summary's last lines hold the rate line)."""
    return row.get("ran", printed_rate("\n".join(row.get("summary", []))))


def load_rows(state: Path) -> list[dict]:
    """The finished chunks' rows (a chunk that failed to start is left out of every sum)."""
    path = state / "hunt.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if ran(row)]


def hunt(cells: tuple[Cell, ...], state: Path, goal_s: float, programs: int, seed: int, niceness: int) -> None:
    state.mkdir(parents=True, exist_ok=True)
    rows = load_rows(state)
    spent = Counter()
    chunks = Counter()
    for row in rows:
        spent[row["cell"]] += row["cpu_s"]
        chunks[row["cell"]] += 1
    while True:
        open_cells = [c for c in cells if spent[c.slug] < goal_s]
        if not open_cells:
            break
        cell = min(open_cells, key=lambda c: spent[c.slug])
        k = chunks[cell.slug]
        artifacts = state / cell.slug / f"chunk-{k}"
        command = chunk_command(cell, seed + k, programs, artifacts)
        wall0 = time.monotonic()
        group = chunk_cgroup(f"loomfuzz-hunt-{os.getpid()}")
        done, cpu, method = run_measured(["nice", "-n", str(niceness), *command], group)
        wall = time.monotonic() - wall0
        kinds = findings_of(artifacts)
        summary = done.stdout.strip().splitlines()[-12:]
        row = {"cell": cell.slug, "target": cell.target, "pipeline": cell.pipeline, "chunk": k,
               "seed": seed + k, "programs": programs, "cpu_s": round(cpu, 1), "cpu_method": method, "wall_s": round(wall, 1),
               "returncode": done.returncode, "findings": dict(kinds), "command": shlex.join(command),
               "summary": summary, "stderr_tail": done.stderr.strip().splitlines()[-5:],
               "ran": printed_rate(done.stdout)}  # many findings push the rate line out of the summary
        if not ran(row):  # a chunk that does not start would fail the same way forever
            reason = row["stderr_tail"][-1] if row["stderr_tail"] else f"exit {done.returncode}, no output"
            raise SystemExit(f"bench_hunt: {cell.slug} chunk {k} did not run: {reason}")
        with open(state / "hunt.jsonl", "a") as out:
            out.write(json.dumps(row) + "\n")
        spent[cell.slug] += cpu
        chunks[cell.slug] += 1
        total = sum(spent[c.slug] for c in cells)
        print(f"[{time.strftime('%H:%M:%S')}] {cell.slug} chunk {k} seed {seed + k}: {cpu / 60:.1f} CPU-min, "
              f"rc {done.returncode}, findings {dict(kinds) or 0}; this cell {spent[cell.slug] / 60:.1f} of "
              f"{goal_s / 60:.0f}, all {total / 60:.1f} of {goal_s * len(cells) / 60:.0f}", flush=True)


def triage_cell(cell: Cell, state: Path) -> dict | None:
    """Triage every finding of the cell's chunks (one database per cell); its report.json."""
    inputs = sorted(str(p) for p in (state / cell.slug).glob("chunk-*") if findings_of(p))
    if not inputs:
        return None
    out = state / cell.slug / "triage"
    command = [str(LOOMFUZZ), "triage", "run", *inputs, "--oracle", "differential", "--profile", "wide",
               "--target", cell.target, "--pipeline", cell.pipeline, "--releases", "auto",
               "--db", str(out / "triage.db"), "--out", str(out)]
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    report = out / "report.json"
    return json.loads(report.read_text()) if report.exists() else None


def buckets_of(report: dict | None) -> list[str]:
    if not report:
        return []
    lines = []
    for bucket in report.get("buckets", []):
        members = bucket.get("members") or bucket.get("count") or ""
        size = len(members) if isinstance(members, list) else members
        lines.append(f"{bucket.get('kind', '?')} x{size}: {bucket.get('signature', '')[:90]}")
    return lines


def report(cells: tuple[Cell, ...], state: Path, triage: bool) -> None:
    rows = load_rows(state)
    print("| build | pipeline | chunks | programs | CPU-min | findings | buckets |")
    print("|---|---|---:|---:|---:|---|---|")
    details = []
    for cell in cells:
        mine = [r for r in rows if r["cell"] == cell.slug]
        if not mine:
            continue
        kinds: Counter = Counter()
        for r in mine:
            kinds.update(r["findings"])
        buckets = buckets_of(triage_cell(cell, state)) if triage else []
        build = Path(cell.target).name
        passes = cell.pipeline.removeprefix("builtin.module(").removesuffix(")")
        found = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
        print(f"| {build} | `{passes}` | {len(mine)} | {sum(r['programs'] for r in mine)} | "
              f"{sum(r['cpu_s'] for r in mine) / 60:.1f} | {found} | {len(buckets) if triage else '-'} |")
        details += [f"{cell.slug}: {b}" for b in buckets]
    if details:
        print()
        print("\n".join(details))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--state", type=Path, default=ROOT / "hunt", help="the hunt's folder (default hunt/)")
    parser.add_argument("--cpu-minutes", type=float, default=30.0, help="goal per cell (default 30)")
    parser.add_argument("--programs", type=int, default=2000, help="programs per chunk (default 2000)")
    parser.add_argument("--seed", type=int, default=1000, help="chunk k's seed is SEED + k (default 1000)")
    parser.add_argument("--nice", type=int, default=15, help="niceness of each chunk (default 15)")
    parser.add_argument("--cells", choices=sorted(CELL_SETS), default="default",
                        help="default: the eight cells on 22 and iree-opt; head: the seven on the head "
                             "with every pass (mlir-opt-head)")
    parser.add_argument("--cell", action="append", default=None, metavar="TARGET:PIPELINE",
                        help="a cell instead of --cells (repeatable)")
    parser.add_argument("--report", action="store_true", help="print the table instead of hunting")
    parser.add_argument("--triage", action="store_true", help="with --report: triage each cell's findings")
    args = parser.parse_args(argv)
    cells = CELL_SETS[args.cells]
    if args.cell:
        cells = tuple(Cell(*spec.split(":", 1)) for spec in args.cell)
    if args.report:
        report(cells, args.state, args.triage)
    else:
        hunt(cells, args.state, args.cpu_minutes * 60, args.programs, args.seed, args.nice)
    return 0


if __name__ == "__main__":
    sys.exit(main())
