"""Models bigger than one GPU in the workflow: a model's `gpus: N` takes N of Snakemake's `gpu` resource, a
model that could never start here is refused before anything runs, and jobs of two- and one-GPU models
launched together share pretended GPUs (VLMGRID_GPU_COUNT) through their locks and give the default grid's
predictions."""

import re

import pyarrow.parquet as pq
import pytest
import yaml
from helpers.common import copy_workflow, run, small_grid_config, workflow_env

GRID = {"models": ["llava-tiny", "clip-tiny", "random"], "benchmarks": ["pope-fixture", "mme-fixture"]}


def two_gpu_llava(root, grid=GRID):
    """The workspace's config cut down to `grid`, its tiny LLaVA holding two GPUs per job."""
    path = root / "config" / "config.yaml"
    data = small_grid_config(grid, yaml.safe_load(path.read_text()))
    data["models"]["llava-tiny"]["gpus"] = 2
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def infer_gpus(output: str) -> dict[str, set[str]]:
    """{model: the gpu resource of its infer jobs} from a dry run's listing."""
    found: dict[str, set[str]] = {}
    for model, resources in re.findall(
        r"^rule infer:\n(?:    .*\n)*?    wildcards: model=([\w.-]+), bench=.*\n"
        r"(?:    .*\n)*?    resources: (.*)$",
        output,
        re.M,
    ):
        gpu = re.search(r"\bgpu=(\d+)", resources)
        found.setdefault(model, set()).add(gpu.group(1) if gpu else "none")
    return found


def rows(path):
    return pq.read_table(path).replace_schema_metadata(None)


@pytest.fixture
def workflow(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    two_gpu_llava(root)
    return root


def test_a_two_gpu_model_takes_two_of_the_gpu_resource(workflow):
    output = run(
        ["snakemake", "-n", "--cores", "2"], workflow, env=workflow_env({"VLMGRID_GPU_COUNT": "2"})
    ).stdout
    assert infer_gpus(output) == {"llava-tiny": {"2"}, "clip-tiny": {"1"}, "random": {"0"}}


@pytest.mark.parametrize(
    "gpus, resources, said",
    [
        (
            "1",
            [],
            r'model "llava-tiny" cannot run here: it needs 2 GPUs at once, but this machine shows only 1 '
            r"\(0\), so it would wait forever; give it fewer gpus in config/config.yaml",
        ),
        (
            "4",
            ["--resources", "gpu=1"],
            r'model "llava-tiny" cannot run: it needs 2 GPUs at once, but --resources '
            r"gpu=1 lets all running jobs hold only 1, so it would never start; allow "
            r"--resources gpu=2 or more",
        ),
    ],
)
def test_a_model_that_could_never_start_is_refused_before_anything_runs(workflow, gpus, resources, said):
    result = run(
        ["snakemake", "--cores", "2", *resources],
        workflow,
        check=False,
        env=workflow_env({"VLMGRID_GPU_COUNT": gpus}),
    )
    assert result.returncode != 0
    assert re.search(said, result.stdout + result.stderr)
    assert not (workflow / "data").exists() and not (workflow / "results").exists()  # nothing ran


def test_without_gpus_a_two_gpu_model_plans_its_jobs_for_the_cpu(workflow):
    # no GPU at all (a login node, CI): nothing would wait, the jobs run on the CPU as device: auto says
    result = run(["snakemake", "-n", "--cores", "2"], workflow)
    assert "llava-tiny" in result.stdout


@pytest.mark.integration
def test_two_and_one_gpu_jobs_launched_together_share_the_gpus_and_give_the_same_predictions(
    snakemake_copy, tmp_path
):
    root = snakemake_copy
    config = two_gpu_llava(root, {"models": ["llava-tiny", "clip-tiny"], "benchmarks": GRID["benchmarks"]})
    before = {
        path: rows(path)
        for path in sorted((root / "results" / "predictions").glob("*/*.parquet"))
        if path.parent.name in ("llava-tiny", "clip-tiny") and path.stem in GRID["benchmarks"]
    }
    assert len(before) == 4
    # Snakemake may start all four infer jobs at once (gpu=8 asks for no limit): three GPUs cannot hold both
    # LLaVA jobs (2 + 2), so the locks decide who waits.
    env = workflow_env({"VLMGRID_GPU_COUNT": "3", "VLMGRID_GPU_LOCK_DIR": str(tmp_path / "locks")})
    server_log = root / "results" / "logs" / "forkserver.log"
    server_log.unlink(missing_ok=True)  # the default grid's run, copied
    run(
        [
            "snakemake",
            "--cores",
            "8",
            "--resources",
            "gpu=8",
            "--forcerun",
            "infer",
            "--configfile",
            str(config),
        ],
        root,
        env=env,
    )
    # jobs that hold GPUs set CUDA_VISIBLE_DEVICES before torch is imported: no fork server, each its own
    # process
    assert not server_log.exists()
    logs = root / "results" / "logs" / "infer"
    for bench in GRID["benchmarks"]:
        assert re.search(
            r"^using GPUs [0-2], [0-2]$", (logs / "llava-tiny" / f"{bench}.log").read_text(), re.M
        )
        assert re.search(r"^using GPU [0-2]$", (logs / "clip-tiny" / f"{bench}.log").read_text(), re.M)
    for path, table in before.items():
        assert rows(path).equals(table), path  # the same rows; only the settings recorded differ
