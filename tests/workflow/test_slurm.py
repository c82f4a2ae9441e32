"""The Slurm profile: the config's `cluster` section becomes the jobs' resources, and a small grid of the
default grid's cells (helpers.common.SLURM_GRID: a two-GPU model, a one-GPU model and the baseline, every kind
of job) run through profiles/slurm on a real single-node Slurm (tests/helpers/slurm_cluster.py) gives the
local run's tables, every job having gone through Slurm with what the config asks for (the two-GPU model's
jobs: gres gpu:2)."""

import math
import re
import time
from types import SimpleNamespace

import pytest
import yaml
from helpers.common import REPO, SLURM_GRID, copy_workflow, run, small_grid_config, workflow_env
from helpers.slurm_cluster import ClusterUnavailable, start_cluster

from vlmgrid.stages import cost

FORWARD = cost.load_throughput()["lvlm"]["rates"]["forward"]["rate"]

PROFILE = "profiles/slurm"
# The profile's documented switch for a cluster without accounting (sacct would never see a job end); the
# first status check after 1 s instead of 40 s (and after each job that ends) keeps the run short: the checks
# come 1, 11, 21 ... s apart while no job ends, and the small grid's jobs take seconds.
NO_ACCOUNTING = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1"]
# GPUs per infer job: backends that use a GPU take one unless the model says more; the random baseline none
GPU_MODELS = {"clip-tiny": 1, "llava-tiny": 2}


def set_cluster(root, **changes):
    """Change the `cluster` section of the workspace's config; return the whole config."""
    path = root / "config" / "config.yaml"
    data = yaml.safe_load(path.read_text())
    data["cluster"].update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def dry_run_resources(root) -> dict[str, str]:
    """{rule: its resources line} from a dry run of the workspace's grid (the target rule `all` left out)."""
    output = run(["snakemake", "-n", "--cores", "2"], root).stdout
    resources = dict(
        re.findall(r"^(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    resources: (.*)$", output, re.M)
    )
    resources.pop("all", None)
    return resources


def test_cluster_section_becomes_the_rules_resources(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    set_cluster(
        root,
        partition="cpu",
        infer={"partition": "gpu", "cpus_per_gpu": 3, "mem_mb": 5000},
        score={"runtime": 7},
    )
    resources = dry_run_resources(root)
    assert {"prepare", "fetch_model", "infer", "score", "report"} <= set(resources)
    infer = resources["infer"]
    # cluster.infer gave three keys; runtime comes from the schema defaults, gpu from the model's backend
    for item in ("cpus_per_gpu=3", "mem_mb=5000", "runtime=720", "slurm_partition=gpu"):
        assert item in infer
    assert re.search(r"\bgpu=[01]\b", infer)
    score = resources["score"]
    for item in ("cpus_per_task=1", "mem_mb=8000", "runtime=7", "slurm_partition=cpu"):
        assert item in score
    assert "slurm_partition=cpu" in resources["prepare"] and "slurm_account" not in resources["prepare"]


def dry_run_jobs(root) -> dict[tuple[str, str], str]:
    """{(rule, its wildcards): its resources line} of every job of a dry run of the workspace's grid."""
    output = run(["snakemake", "-n", "--cores", "2"], root).stdout
    jobs = re.findall(
        r"^(?:rule|checkpoint) (\w+):\n(?:    .*\n)*?    wildcards: (.*)\n(?:    .*\n)*?"
        r"    resources: (.*)$",
        output,
        re.M,
    )
    return {(rule, wildcards): resources for rule, wildcards, resources in jobs}


POPE_HUB = {
    "kind": "pope",
    "source": {
        "type": "hf_hub",
        "repo": "lmms-lab/POPE",
        "config": "Full",
        "revision": "4db1276663dfa5eb8ad16a52d24c31a09e470896",
    },
}
QWEN_72B = {
    "backend": "hf",
    "source": {
        "type": "hf_hub",
        "repo": "Qwen/Qwen2.5-VL-72B-Instruct",
        "revision": "89c86200743eec961a297729e7990e8f2ddbc4c5",
    },
}


def test_infer_runtime_from_the_cost_plan(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    path = root / "config" / "config.yaml"
    data = yaml.safe_load(path.read_text())
    # Not prepared, and never fetched: the plan counts POPE's published 9,000 questions and Flowers102's
    # 6,149 images of its kind's 102 classes; a 72B model by its repo's name
    data["benchmarks"].update(
        {
            "pope": POPE_HUB,
            "pope-sharded": {**POPE_HUB, "shards": 2},
            "flowers": {"kind": "flowers102", "source": {"type": "url"}},
        }
    )
    data["models"]["qwen-72b"] = QWEN_72B
    # the same model served by vLLM on four GPUs: timed at the hf rates, its GPU-hours spread over its GPUs
    data["models"]["qwen-72b-vllm"] = yaml.safe_load((root / "config" / "models.yaml").read_text())["models"][
        "qwen2.5-vl-72b-vllm"
    ]
    data["grid"] = {
        "models": ["qwen-72b", "qwen-72b-vllm", "llava-tiny", "random"],
        "benchmarks": ["pope", "pope-sharded", "flowers", "pope-fixture"],
    }
    data["cluster"]["infer"] = {**data["cluster"]["infer"], "runtime": 45, "runtime_from_plan": True}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    runtimes = {
        job: int(re.search(r"\bruntime=(\d+)", line).group(1))
        for job, line in dry_run_jobs(root).items()
        if job[0] in ("infer", "infer_shard")
    }
    assert len(runtimes) == 4 * 4 + 4  # one job per cell, two for each sharded one

    # one forward per question at the 7B rate x 7/72; twice the GPU-hours, in minutes
    hours = 9000 / (FORWARD * 7 / 72) / 3600
    assert runtimes["infer", "model=qwen-72b, bench=pope"] == math.ceil(
        2 * hours * 60
    )  # 61 at the H200's rate
    for shard in (1, 2):  # half the questions each
        assert runtimes[
            "infer_shard", f"model=qwen-72b, bench=pope-sharded, shard={shard}, shards=2"
        ] == math.ceil(2 * hours / 2 * 60)
    assert (
        runtimes["infer", "model=qwen-72b, bench=pope-fixture"] == cost.RUNTIME_FLOOR_MINUTES
    )  # 90 questions
    # served on four GPUs, letters scored by logprobs: four times the GPU-hours, the same hours on the clock
    for (rule, wildcards), minutes in runtimes.items():
        if wildcards.startswith("model=qwen-72b-vllm,") and "flowers" not in wildcards:
            assert minutes == runtimes[rule, wildcards.replace("qwen-72b-vllm", "qwen-72b")], wildcards
    # no estimate: a model of unknown size; no GPU-hours: the baseline
    flat = {job for job, minutes in runtimes.items() if minutes == 45}
    assert flat == {
        job for job in runtimes if not job[1].startswith(("model=qwen-72b,", "model=qwen-72b-vllm,"))
    }
    assert {("infer", "model=llava-tiny, bench=flowers"), ("infer", "model=random, bench=pope")} <= flat
    assert runtimes["infer", "model=qwen-72b, bench=flowers"] > 45  # 6,149 images x 20 templates at 72B


def test_without_a_partition_the_jobs_name_none(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    set_cluster(root, account="proj42")
    resources = dry_run_resources(root)
    assert all(
        "slurm_partition" not in line and "slurm_account=proj42" in line for line in resources.values()
    )


def test_the_profile_keeps_sacct_and_takes_resources_from_the_config():
    profile = yaml.safe_load((REPO / PROFILE / "config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["slurm-status-command"] == "sacct"
    assert "default-resources" not in profile and "set-resources" not in profile


def test_without_slurm_the_harness_says_what_is_missing(monkeypatch, tmp_path):
    from helpers import slurm_cluster

    monkeypatch.setattr(
        slurm_cluster, "find", lambda binary: None if binary in ("munged", "sbatch") else binary
    )
    with pytest.raises(ClusterUnavailable, match=r"missing: munged, sbatch\); install the Debian packages"):
        start_cluster(tmp_path)
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    try:
        cluster = start_cluster(tmp_path_factory.mktemp("slurm"))
    except ClusterUnavailable as error:
        pytest.skip(f"no Slurm to test against: {error}")
    try:
        yield cluster
    finally:
        cluster.stop()


def scontrol_jobs(cluster) -> dict[str, dict[str, str]]:
    """{job id: its fields} of every job Slurm still knows (finished ones for MinJobAge)."""
    output = cluster.run("scontrol", "show", "job", "--oneliner").stdout
    jobs = [
        dict(re.findall(r"(\S+?)=(\S*)", line)) for line in output.splitlines() if line.startswith("JobId=")
    ]
    return {job["JobId"]: job for job in jobs}


@pytest.fixture(scope="module")
def slurm_run(slurm, tmp_path_factory):
    """SLURM_GRID through the Slurm profile, in a copy of the repo whose config names the test partition.
    That partition is not the cluster's default, so a job without it could not be submitted."""
    root = copy_workflow(tmp_path_factory.mktemp("wf-slurm") / "repo")
    path = root / "config" / "config.yaml"
    data = small_grid_config(SLURM_GRID, yaml.safe_load(path.read_text()))
    data["models"]["llava-tiny"]["gpus"] = GPU_MODELS["llava-tiny"]
    # Infer jobs timed by the cost plan, which takes clip-tiny for the ViT-B-32 its description names
    # (llava-tiny's size it does not know, and the baseline holds no GPU: the flat runtime); the jobs' own
    # parse on the node runs with the plan switched on
    data["models"]["clip-tiny"]["description"] = (
        "a tiny open_clip model, timed by the cost plan as a ViT-B-32"
    )
    data["cluster"]["infer"]["runtime_from_plan"] = True
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # two GPUs x cpus_per_gpu CPUs must fit the test machine's cores (two on CI)
    config = set_cluster(
        root, partition=slurm.partition, infer={**data["cluster"]["infer"], "cpus_per_gpu": 1}
    )
    # the config's requests must fit the test machine, or Slurm refuses the jobs
    assert all(
        job["mem_mb"] <= slurm.memory_mb for job in config["cluster"].values() if isinstance(job, dict)
    )
    started = time.monotonic()
    result = run(
        ["snakemake", "--profile", PROFILE, *NO_ACCOUNTING, "--slurm-keep-successful-logs"],
        root,
        env=slurm.env(workflow_env()),
    )
    seconds = time.monotonic() - started
    print(f"small grid through Slurm: {seconds:.0f} s")
    return SimpleNamespace(
        root=root,
        config=config,
        log=result.stdout + result.stderr,
        seconds=seconds,
        jobs=scontrol_jobs(slurm),
    )


@pytest.mark.integration
def test_slurm_run_gives_the_local_tables(slurm_run, tmp_path):
    # The same grid through a local Snakemake, from scratch in a copy of its own: the Slurm tests then need no
    # other test's workspace, and run beside the default grid's tests rather than after them.
    root = copy_workflow(tmp_path / "repo")
    config = root / "config" / "small.yaml"
    config.write_text(yaml.safe_dump(small_grid_config(SLURM_GRID), sort_keys=False))
    run(["snakemake", "--cores", "2", "--configfile", str(config)], root)
    local = root / "results" / "tables"
    tables = slurm_run.root / "results" / "tables"
    names = sorted(path.name for path in local.iterdir())
    assert sorted(path.name for path in tables.iterdir()) == names
    for name in names:
        assert (tables / name).read_bytes() == (local / name).read_bytes(), name


@pytest.mark.integration
def test_every_job_went_through_slurm_with_the_configs_resources(slurm_run, slurm):
    submitted = dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", slurm_run.log))
    total = int(re.search(r"^total\s+(\d+)$", slurm_run.log, re.M).group(1))
    assert len(submitted) == total - 1  # all but the target rule `all`, which runs in Snakemake itself
    jobs = {job_id: slurm_run.jobs[job_id] for job_id in submitted.values()}
    assert {job["JobState"] for job in jobs.values()} == {"COMPLETED"}
    assert {job["Partition"] for job in jobs.values()} == {slurm.partition}
    for job_id in jobs:
        assert list((slurm_run.root / ".snakemake" / "slurm_logs").glob(f"*/**/{job_id}.log")), job_id

    cluster = slurm_run.config["cluster"]
    gpu_requests = {}
    for job in jobs.values():
        # the executor's comment: rule_<rule>_wildcards_<model>_<bench>
        rule, _, wildcards = job["Comment"].removeprefix("rule_").partition("_wildcards_")
        wanted = cluster["infer" if rule == "infer_shard" else rule]
        assert job["MinMemoryNode"] == f"{wanted['mem_mb']}M", job["Comment"]
        runtime = wanted["runtime"]
        if rule in ("infer", "infer_shard") and wildcards.startswith("clip-tiny_"):
            runtime = cost.RUNTIME_FLOOR_MINUTES  # the plan's: a ViT-B-32 embeds POPE's 90 images in seconds
        assert job["TimeLimit"] == f"{runtime // 60:02d}:{runtime % 60:02d}:00", job["Comment"]
        if rule in ("infer", "infer_shard"):
            model = wildcards.split("_")[0]
            gpu_requests[model] = job.get("TresPerJob")
            cpus = (
                wanted["cpus_per_gpu"] * GPU_MODELS[model]
                if model in GPU_MODELS
                else slurm_run.config["infer"]["threads"]
            )
        else:
            cpus = wanted["cpus_per_task"]
        assert job["NumCPUs"] == str(cpus), job["Comment"]
    assert gpu_requests == {
        model: f"gres:gpu:{GPU_MODELS[model]}" if model in GPU_MODELS else None
        for model in slurm_run.config["grid"]["models"]
    }


@pytest.mark.integration
def test_job_status_came_from_squeue_not_sacct(slurm_run, slurm):
    # Without accounting, sacct knows no job and Snakemake would wait forever (the plugin only calls it to
    # guess an account, which fails and is harmless)
    status_queries = [call for call in slurm.sacct_calls() if "--name" in call]
    assert status_queries == []
