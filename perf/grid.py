"""The default grid's cost from cold and with nothing to do, and where its time goes, rule by rule.

    python perf/grid.py                              # 3 cold runs, each in a fresh copy, then a no-op rerun
    python perf/grid.py --runs 1 --out perf/results/grid-cpu.md
    python perf/grid.py --render perf/results/grid-cpu.json   # the table again, from saved figures

Each run copies the repository's workflow (Snakefile, rules, configs) to a new temporary folder and runs
`snakemake --cores N` there, as a new user's first run does; the last copy then runs again with nothing to do.
For each run it takes the wall time, the CPU time (user + system) of Snakemake and of every job it started,
and the job count from Snakemake's own job table; per rule, the sum and the largest of its jobs' wall and CPU
seconds from their benchmark files (`<results_dir>/logs/benchmarks/<rule>/...tsv`, written by the rules'
`benchmark:`). Snakemake samples a job's CPU time about once a second, so a rule's CPU figures are a floor
(a job done before its first sample has none, and is counted apart); the run's own CPU time is exact. Jobs run
in the fork server (docs/speed.md) have their exact wall and CPU seconds in its log, read per rule as well.

Then a fresh copy made a git repository, as the workflow tests' DVC fixture makes it, runs the same grid
through `dvc repro` (its grid stage runs Snakemake with the same --cores), cold and again with nothing to do,
and its tables are compared byte for byte with the Snakemake run's. The table gives both doors' times side by
side and their ratio.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # perf/'s own modules, when loaded by path too
# (Run: what snakemake returns, imported for the tests)
from gridrun import REPO, Run, render_saved, save_results, snakemake, timed, tool_env, workflow_copy  # noqa: E402, F401

from vlmgrid.paths import logs_dir  # noqa: E402

BENCHMARKS_DIR = logs_dir(Path("results")) / "benchmarks"  # the default grid's (config/config.yaml: results)
FORKSERVER_LOG = logs_dir(Path("results")) / "forkserver.log"  # the jobs' fork server's (docs/speed.md)
# A job line of the fork server's log:
# "<date> <time> job <pid> exit <code> in <s> s (<cpu> s CPU): vlmgrid <argv>"
SERVED_JOB = re.compile(
    r"^\S+ \S+ job \d+ exit -?\d+ in ([0-9.]+) s \(([0-9.]+) s CPU\): vlmgrid (\S+)", re.M
)


def job_counts(stderr: str) -> dict[str, int]:
    """{rule: jobs} from the last job table in Snakemake's log ("Job stats:", a `job count` header, a rule of
    dashes, one row per rule and a `total` row)."""
    tables = stderr.split("Job stats:")
    if len(tables) < 2:
        return {}
    lines = tables[-1].splitlines()
    rows = next(
        (lines[at + 1 :] for at, line in enumerate(lines) if re.fullmatch(r"\s*-+\s+-+\s*", line)), []
    )
    counts: dict[str, int] = {}
    for line in rows:
        match = re.fullmatch(r"\s*(\S+)\s+(\d+)\s*", line)
        if not match:
            break
        counts[match[1]] = int(match[2])
    return counts


def read_benchmark(path: Path) -> tuple[float, float | None]:
    """(wall seconds, CPU seconds or None where Snakemake took no sample) of one job's benchmark file, whose
    columns it names in its first line (`s`, ..., `cpu_time`); a job run more than once is its first run."""
    with path.open(newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle, delimiter="\t"))
    cpu = row.get("cpu_time")
    return float(row["s"]), None if cpu in (None, "", "NA") else float(cpu)


def rule_times(benchmarks: Path) -> dict[str, dict]:
    """Per rule (the folder under `benchmarks`, or the file's name for a rule of one job; an infer job's
    shards are infer's), its jobs' count, the sum and largest of their wall and CPU seconds, and how many jobs
    have no CPU sample."""
    rules: dict[str, dict] = {}
    for path in sorted(benchmarks.rglob("*.tsv")):
        parts = path.relative_to(benchmarks).parts
        rule = parts[0] if len(parts) > 1 else path.stem  # a rule of one job: <rule>.tsv
        wall, cpu = read_benchmark(path)
        entry = rules.setdefault(
            rule,
            {"jobs": 0, "wall_sum": 0.0, "wall_max": 0.0, "cpu_sum": 0.0, "cpu_max": 0.0, "cpu_unsampled": 0},
        )
        entry["jobs"] += 1
        entry["wall_sum"] += wall
        entry["wall_max"] = max(entry["wall_max"], wall)
        if cpu is None:
            entry["cpu_unsampled"] += 1
        else:
            entry["cpu_sum"] += cpu
            entry["cpu_max"] = max(entry["cpu_max"], cpu)
    return dict(sorted(rules.items(), key=lambda item: -item[1]["wall_sum"]))


def served_times(log: str) -> dict[str, dict]:
    """Per rule (a job's command, `fetch-model` as fetch_model), the jobs that the fork server ran, the sum of
    their wall seconds and the sum and largest of their CPU seconds: the server's wait4 figures, exact, where
    a served job's benchmark file counts only its client."""
    rules: dict[str, dict] = {}
    for wall, cpu, command in SERVED_JOB.findall(log):
        entry = rules.setdefault(
            command.replace("-", "_"), {"jobs": 0, "wall_sum": 0.0, "cpu_sum": 0.0, "cpu_max": 0.0}
        )
        entry["jobs"] += 1
        entry["wall_sum"] += float(wall)
        entry["cpu_sum"] += float(cpu)
        entry["cpu_max"] = max(entry["cpu_max"], float(cpu))
    return dict(sorted(rules.items(), key=lambda item: -item[1]["cpu_sum"]))


def stages_run(output: str) -> int:
    """How many stages `dvc repro` ran, from its log ("Running stage '<name>':")."""
    return len(re.findall(r"^Running stage '[^']+':", output, re.M))


def dvc_runs(work: Path, cores: int) -> tuple[dict, Path]:
    """The default grid through DVC in a fresh git repository under `work`: `dvc repro` cold (its grid stage
    runs Snakemake with the same --cores), then again with nothing to do. Each run's wall and CPU seconds (the
    Snakemake run's and its jobs' and fork server's are DVC's children) and the stages it ran; returns them
    and the copy's root."""
    root = workflow_copy(work / "dvc")
    shutil.copy2(
        REPO / ".gitignore", root / ".gitignore"
    )  # results/ ignored but the metrics DVC keeps in git
    env = tool_env(
        VLMGRID_SNAKEMAKE_ARGS=f"--cores {cores}",
        DVC_NO_ANALYTICS="1",
        GIT_AUTHOR_NAME="perf",
        GIT_AUTHOR_EMAIL="perf@localhost",
        GIT_COMMITTER_NAME="perf",
        GIT_COMMITTER_EMAIL="perf@localhost",
    )
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "grid"]):
        timed(command, root, env)
    cold = timed(["dvc", "repro"], root, env)
    again = timed(["dvc", "repro"], root, env)
    figures = {
        "wall_s": cold.wall_s,
        "cpu_s": cold.cpu_s,
        "stages": stages_run(cold.stdout),
        "jobs": job_counts(cold.stdout + cold.stderr),
        "noop_wall": again.wall_s,
        "noop_cpu": again.cpu_s,
        "noop_stages": stages_run(again.stdout),
    }
    print(
        f"dvc repro cold: {cold.wall_s:.1f} s wall, {cold.cpu_s:.1f} s CPU, {figures['stages']} stages; "
        f"nothing to do: {again.wall_s:.1f} s",
        flush=True,
    )
    return figures, root


def differing_tables(first: Path, second: Path) -> list[str]:
    """The report files (results/tables/) that are not byte-identical between two runs' copies, or in one
    only."""
    tables = Path("results") / "tables"
    names = {
        path.relative_to(root / tables).as_posix()
        for root in (first, second)
        for path in (root / tables).rglob("*")
        if path.is_file()
    }
    return sorted(
        name
        for name in names
        if not (first / tables / name).is_file()
        or not (second / tables / name).is_file()
        or (first / tables / name).read_bytes() != (second / tables / name).read_bytes()
    )


def summary(runs: list[dict], noop: dict) -> dict:
    """The median cold run (by wall time; the lower middle of an even count) and the no-op run, as figures."""
    ordered = sorted(runs, key=lambda run: run["wall_s"])
    median = ordered[(len(ordered) - 1) // 2]
    return {
        "runs": len(runs),
        "cold_wall_median": statistics.median(run["wall_s"] for run in runs),
        "cold_cpu_median": statistics.median(run["cpu_s"] for run in runs),
        "cold_walls": [run["wall_s"] for run in runs],
        "jobs": median["jobs"],
        "rules": median["rules"],
        "served": median.get("served", {}),
        "noop_wall": noop["wall_s"],
        "noop_cpu": noop["cpu_s"],
    }


def _s(value: float) -> str:
    return f"{value:.1f}"


def render_markdown(meta: dict, figures: dict) -> str:
    jobs = figures["jobs"]
    lines = [f"# vlmgrid default grid: {meta['cpus']} CPUs", ""]
    lines += [f"- {key}: {meta[key]}" for key in ("date", "cpus", "libraries", "command")]
    lines += [
        "",
        "| figure | wall s | CPU s (user + system) |",
        "|---|---:|---:|",
        f"| cold, median of {figures['runs']} (each: {', '.join(_s(w) for w in figures['cold_walls'])} s) "
        f"| {_s(figures['cold_wall_median'])} | {_s(figures['cold_cpu_median'])} |",
        f"| nothing to do | {_s(figures['noop_wall'])} | {_s(figures['noop_cpu'])} |",
        "",
        f"Jobs: {jobs.get('total', 0)} "
        f"({', '.join(f'{rule} {count}' for rule, count in jobs.items() if rule != 'total')}).",
        "",
        "Per rule, in the median cold run (jobs' benchmark files; CPU sampled about once a second, so a "
        "floor):",
        "",
        "| rule | jobs | wall sum s | wall max s | CPU sum s | CPU max s | jobs without a CPU sample |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for rule, entry in figures["rules"].items():
        lines.append(
            f"| {rule} | {entry['jobs']} | {_s(entry['wall_sum'])} | {_s(entry['wall_max'])} | "
            f"{_s(entry['cpu_sum'])} | {_s(entry['cpu_max'])} | {entry['cpu_unsampled']} |"
        )
    if figures.get("served"):
        lines += [
            "",
            "Per rule, the jobs run in the fork server, in the same run (its log; CPU exact):",
            "",
            "| rule | jobs | wall sum s | CPU sum s | CPU max s |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {rule} | {entry['jobs']} | {_s(entry['wall_sum'])} | {_s(entry['cpu_sum'])} | "
            f"{_s(entry['cpu_max'])} |"
            for rule, entry in figures["served"].items()
        ]
    if figures.get("dvc"):
        lines += ["", *render_dvc(figures)]
    notes = meta.get("notes") or []
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def render_dvc(figures: dict) -> list[str]:
    """The same grid through DVC, in the same run, beside Snakemake's median cold run."""
    dvc = figures["dvc"]
    differing = dvc["differing_tables"]
    return [
        "The same grid through DVC, in the same run (`dvc repro` in a fresh git repository: its grid stage "
        "runs Snakemake, whose jobs' and fork server's CPU time is counted in):",
        "",
        "| figure | wall s | CPU s (user + system) | DVC / Snakemake |",
        "|---|---:|---:|---:|",
        f"| Snakemake cold, median | {_s(figures['cold_wall_median'])} "
        f"| {_s(figures['cold_cpu_median'])} | |",
        f"| DVC cold ({dvc['stages']} stages, {dvc['jobs'].get('total', 0)} jobs) | {_s(dvc['wall_s'])} | "
        f"{_s(dvc['cpu_s'])} | {dvc['wall_s'] / figures['cold_wall_median']:.2f} wall, "
        f"{dvc['cpu_s'] / figures['cold_cpu_median']:.2f} CPU |",
        f"| DVC, nothing to do ({dvc['noop_stages']} stage run) | {_s(dvc['noop_wall'])} | "
        f"{_s(dvc['noop_cpu'])} | |",
        "",
        "Tables: "
        + (
            "every file of results/tables/ byte-identical between the two doors."
            if not differing
            else f"{len(differing)} file(s) of results/tables/ differ: {', '.join(differing)}."
        ),
    ]


def cold_run(work: Path, index: int, cores: int) -> tuple[dict, Path]:
    root = workflow_copy(work / f"grid-{index}")
    run = snakemake(["--cores", str(cores)], root)
    figures = {
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "jobs": job_counts(run.stderr),
        "rules": rule_times(root / BENCHMARKS_DIR),
    }
    if (root / FORKSERVER_LOG).is_file():
        figures["served"] = served_times((root / FORKSERVER_LOG).read_text(encoding="utf-8"))
    print(
        f"cold run {index}: {run.wall_s:.1f} s wall, {run.cpu_s:.1f} s CPU, "
        f"{figures['jobs'].get('total', 0)} jobs",
        flush=True,
    )
    return figures, root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="cold runs, each in a fresh copy (default 3)")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    parser.add_argument("--out", help="write the results here (Markdown; the same name with .json beside it)")
    parser.add_argument(
        "--render", metavar="JSON", help="measure nothing: write the Markdown of a results JSON"
    )
    args = parser.parse_args(argv)
    if args.render:
        return render_saved(
            args.render, args.out, lambda results: render_markdown(results["meta"], results["figures"])
        )
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: at least one cold run is needed")

    work = Path(tempfile.mkdtemp(prefix="vlmgrid-grid-"))
    load_before = os.getloadavg()[0]
    try:
        runs = []
        for index in range(1, args.runs + 1):
            figures, root = cold_run(work, index, args.cores)
            runs.append(figures)
            if index < args.runs:
                shutil.rmtree(root, ignore_errors=True)
        again = snakemake(["--cores", str(args.cores)], root)
        noop = {"wall_s": again.wall_s, "cpu_s": again.cpu_s}
        dvc, dvc_root = dvc_runs(work, args.cores)
        dvc["differing_tables"] = differing_tables(root, dvc_root)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    import dvc as dvc_package
    import snakemake as snakemake_package

    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "libraries": f"snakemake {snakemake_package.__version__}, dvc {dvc_package.__version__}, "
        f"python {platform.python_version()}",
        "command": "python perf/grid.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "notes": [
            f"load average (1 min) at the start {load_before:.1f}, at the end {os.getloadavg()[0]:.1f}, on "
            f"the CPUs above: a load above the CPU count means other work shared them, and the wall times "
            f"with it"
        ],
    }
    figures = {**summary(runs, noop), "dvc": dvc}
    text = render_markdown(meta, figures)
    print(text)
    if args.out:
        save_results(args.out, text, {"meta": meta, "figures": figures, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
