"""What the end-to-end tests of the workflow share: which stages a DVC run ran and which Snakemake jobs its
grid stage ran, and a small grid of local models in a workflow copy."""

import re
from collections import Counter

import yaml

from helpers.common import REPO, run
from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture


def changed_stages(status: str) -> set[str]:
    """The stages `dvc status` lists as changed."""
    return {line.strip().rstrip(":") for line in status.splitlines() if line and not line.startswith("\t")}


# The stamp of the sources and settings (a local source's files, each model's settings) is taken on every `dvc
# repro`: `dvc status` always lists that stage, and only it, when nothing else is to do, and `dvc repro` runs
# it alone.
UP_TO_DATE = {"stamp_sources"}
# What a `dvc repro` of a grid that has something to do runs: the stamps, then Snakemake over the whole grid.
GRID_RUN = {"stamp_sources", "grid"}


def stages_run(output: str) -> set[str]:
    """The stages a `dvc repro` ran, from DVC's log (its stdout)."""
    return set(re.findall(r"^Running stage '([^']+)'", output, re.M))


def job_stats(output: str) -> dict[str, int]:
    """{rule: jobs} of the "Job stats" table of every Snakemake run in `output` (a `dvc repro`'s stdout and
    stderr together: Snakemake logs to stderr), `all` and the total left out; {} when none had a job to run. A
    run's first table is its plan (a dry run prints it again at its end)."""
    counts: Counter = Counter()
    for part in output.split("Building DAG of jobs...")[1:]:
        if "Job stats:" not in part:
            continue
        table = part.split("Job stats:", 1)[1].split("\n\n", 1)[0]
        for rule, count in re.findall(r"^(\w+)\s+(\d+)\s*$", table, re.M):
            if rule not in ("all", "total"):
                counts[rule] += int(count)
    return dict(counts)


def jobs_run(output: str) -> Counter:
    """The jobs Snakemake ran, from its log in `output`: a count per (rule, wildcards), wildcards as Snakemake
    writes them ("model=random, bench=pope-fixture"; "" for a rule with none, such as report)."""
    jobs: Counter = Counter()
    for rule, details in re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):\n((?:    .*\n)*)", output, re.M):
        if rule != "all":
            wildcards = re.search(r"^    wildcards: (.*)$", details, re.M)
            jobs[(rule, wildcards.group(1) if wildcards else "")] += 1
    return jobs


DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def local_grid(tmp_path):
    """A grid of a local checkpoint folder and the baseline on a local MMBench TSV: (grid, checkpoint,
    TSV)."""
    run(["vlmgrid", "make-tiny-models", str(tmp_path / "ckpts"), "--families", "llava"], tmp_path)
    checkpoint = tmp_path / "ckpts" / "llava"
    tsv = mmbench_fixture.write_tsv_fixture(tmp_path / "eval", {"seed": 0, "size": 2, "corrupt": 0})
    items = sum(1 for line in tsv.read_text().splitlines()[1:] if line.strip())
    grid = {
        **{key: DEFAULT[key] for key in ("title", "bootstrap", "infer")},
        "data_dir": "data",
        "results_dir": "results",
        "benchmarks": {
            "mmbench-mine": {
                "kind": "mmbench",
                "source": {"type": "local", "path": str(tsv), "expected_items": items},
            }
        },
        "models": {
            "mine": {
                "backend": "hf",
                "source": {"type": "local", "path": str(checkpoint)},
                "precision": "fp32",
                "batch_size": 4,
            },
            "random": DEFAULT["models"]["random"],
        },
        "grid": {"models": ["mine", "random"], "benchmarks": ["mmbench-mine"]},
    }
    return grid, checkpoint, tsv
