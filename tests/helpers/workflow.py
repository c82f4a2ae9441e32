"""What the end-to-end tests of the workflow share: which stages a DVC run ran, and a small grid of local
models in a workflow copy."""

import re

import yaml

from helpers.common import REPO, run
from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture


def changed_stages(status: str) -> set[str]:
    """The stages `dvc status` lists as changed."""
    return {line.strip().rstrip(":") for line in status.splitlines() if line and not line.startswith("\t")}


# The stamp of the benchmark sources (a local source's files) is taken on every `dvc repro`: `dvc status` always
# lists that stage, and only it, when nothing else is to do.
UP_TO_DATE = {"stamp_sources"}


def stages_run(output: str) -> set[str]:
    return set(re.findall(r"^Running stage '([^']+)'", output, re.M))


DEFAULT = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def local_grid(tmp_path):
    """A grid of a local checkpoint folder and the baseline on a local MMBench TSV: (grid, checkpoint, TSV)."""
    run(["vlmgrid", "make-tiny-models", str(tmp_path / "ckpts"), "--families", "llava"], tmp_path)
    checkpoint = tmp_path / "ckpts" / "llava"
    tsv = mmbench_fixture.write_tsv_fixture(tmp_path / "eval", {"seed": 0, "size": 2, "corrupt": 0})
    items = sum(1 for line in tsv.read_text().splitlines()[1:] if line.strip())
    grid = {
        **{key: DEFAULT[key] for key in ("title", "bootstrap", "infer")},
        "data_dir": "data",
        "results_dir": "results",
        "benchmarks": {"mmbench-mine": {"kind": "mmbench",
                                        "source": {"type": "local", "path": str(tsv), "expected_items": items}}},
        "models": {"mine": {"backend": "hf", "source": {"type": "local", "path": str(checkpoint)},
                            "precision": "fp32", "batch_size": 4},
                   "random": DEFAULT["models"]["random"]},
        "grid": {"models": ["mine", "random"], "benchmarks": ["mmbench-mine"]},
    }
    return grid, checkpoint, tsv
