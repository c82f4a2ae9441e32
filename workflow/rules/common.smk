# Helpers shared by the rules. The grid is one config file: the one given with --configfile, else
# config/config.yaml (the Snakefile names none, so Snakemake merges nothing into it). It is checked against
# workflow/schemas/config.schema.yaml, and every name it uses against the registries, before any job starts;
# every job's `vlmgrid` command reads the same file.
import functools
import json
import os
import re
import shutil
import sys

from vlmgrid import paths
from vlmgrid.config import load_config, workflow_config_file
from vlmgrid.prompts import prompt_file_hashes
from vlmgrid.report.outputs import report_files
from vlmgrid.models import answer_settings
from vlmgrid.errors import VlmgridError
from vlmgrid.escaping import report_param
from vlmgrid.fileio import sha256_json
from vlmgrid.gpu import visible_gpus
from vlmgrid.stages import plan

if workflow.config_settings.config:
    # The jobs' `vlmgrid` commands read the config file, so an override here would not reach them.
    raise WorkflowError(
        "--config overrides are not supported: put the change in a config file and pass it with --configfile"
    )
try:
    CONFIG_FILE = str(workflow_config_file(workflow.config_settings.configfiles or [], sys.argv))
    if not os.path.isfile(CONFIG_FILE):
        raise VlmgridError(f"config file {CONFIG_FILE} not found; run in the repository root, or pass a grid "
                           f"config with --configfile")
    GRID = load_config(CONFIG_FILE)
except VlmgridError as error:
    raise WorkflowError(str(error)) from None

if workflow.is_main_process and getattr(workflow.output_settings, "dryrun", False) and os.environ.get("DVC_STAGE"):
    # DVC records a stage whose command ends well as run, with its outputs as they are: a dry run there would mark
    # missing or stale cells current in dvc.lock.
    raise WorkflowError(
        f"a dry run inside DVC's stage {os.environ['DVC_STAGE']} would be recorded as a run; take -n (or --dry-run) "
        "out of VLMGRID_SNAKEMAKE_ARGS, and run `snakemake -n` by itself for a dry run"
    )

if workflow.is_main_process and workflow.local_exec:
    # A job needing more GPUs than there are would wait forever: refuse it now. (A Slurm run leaves it to
    # sbatch, which refuses a request no node can meet; the jobs' own parse on a node sees only their GPUs.)
    _limit = getattr(workflow.global_resources.get("gpu"), "value", workflow.global_resources.get("gpu"))
    _needs_gpus = any(plan.gpus(GRID, model) > 1 for model in GRID.models)
    _problems = plan.gpu_problems(GRID, visible_gpus() if _needs_gpus else [],
                                  _limit if isinstance(_limit, int) else None)
    if _problems:
        raise WorkflowError(" ".join(_problems))

if workflow.is_main_process:
    # Another grid's data in a shared data_dir is refused before any job: Snakemake deletes a prepare job's
    # outputs (the manifest that names the grid config it was prepared for) before the job runs.
    _conflict = plan.data_conflict(GRID)
    if _conflict is not None:
        raise WorkflowError(_conflict)

DATA = str(GRID.data_dir)
RESULTS = str(GRID.results_dir)
# Each grid's job logs and benchmark (timing) files, beside its results: another grid's run never overwrites them.
LOGS = str(paths.logs_dir(GRID.results_dir))
NAME = "[a-z0-9][a-z0-9_.-]*"


wildcard_constraints:
    bench=NAME,
    model=NAME,


def get_model_settings(model, bench):
    """The settings the model runs the benchmark with, as text (its recipe's filled in, its `kinds` entry for
    the benchmark's kind laid over them): a change reruns exactly the jobs it touches. The values of serve.env
    (tokens) are left out: Snakemake keeps params in .snakemake/ and shows them in its report, and a new token
    reruns nothing. So are the settings of how the answers are computed, never what they are (a backend's
    `run_only`: worker counts, retries), whose change reruns nothing either."""
    return json.dumps(answer_settings(GRID.cell_settings(model, bench)), sort_keys=True)


def get_model_source(model):
    """The model's source as text. A local checkpoint adds a fingerprint of its files (their sizes and contents'
    hashes, vlmgrid.stages.fetch.model_stamp): an edit there fetches (records) it again, and a changed record
    reruns the model's cells. Not their times: a file touched with the same bytes must not rerun inference."""
    source = GRID.model(model).get("source")
    if (source or {}).get("type") != "local":
        return json.dumps(source, sort_keys=True)
    from vlmgrid.stages.fetch import model_stamp  # the backends' modules: only a local checkpoint needs them

    return json.dumps({**source, "local_files": sha256_json(model_stamp(GRID.model(model)))}, sort_keys=True)


def get_prompt_hashes():
    """{file name: sha256} of the config's prompt sets as text: editing a prompt reruns inference."""
    return json.dumps(prompt_file_hashes(GRID.prompts_dir), sort_keys=True)


def get_benchmark_settings(bench):
    """The benchmark's data settings as text. `shards` only splits its inference jobs: changing it must not
    prepare the data again (and so rerun every cell). A local source adds a fingerprint of its files (their
    sizes and contents' hashes, vlmgrid.benchmarks.stamps.source_stamp): an edit there prepares the benchmark
    again, a touch with the same bytes does not. (Other sources add nothing, so their recorded params stay what
    they were.)"""
    settings = {key: value for key, value in GRID.benchmark(bench).items() if key != "shards"}
    if settings["source"].get("type") == "local":
        from vlmgrid.benchmarks.stamps import source_fingerprint  # every kind's module: only a local source needs them

        settings["local_files"] = source_fingerprint(settings)
    return json.dumps(settings, sort_keys=True)


def get_bench_pattern(sharded):
    """A wildcard pattern matching exactly the defined benchmarks whose cells are (or are not) split into
    shards, so that `infer` and `merge_shards`, which make the same predictions path, never both match."""
    names = [name for name in GRID.data["benchmarks"] if (GRID.shards(name) > 1) == sharded]
    return "|".join(re.escape(name) for name in names) or "(?!)"  # (?!) matches nothing


def get_shard_files(wildcards):
    """The shard files of a sharded cell; none for a cell that cannot run (merge-shards records that alone)."""
    if plan.not_applicable(GRID, wildcards.model, wildcards.bench) is not None:
        return []
    count = GRID.shards(wildcards.bench)
    return [str(paths.shard_path(RESULTS, wildcards.model, wildcards.bench, index, count))
            for index in range(1, count + 1)]


def get_gpus(model):
    return plan.gpus(GRID, model)


def get_predictions_files():
    return [str(paths.predictions_path(RESULTS, cell.model, cell.benchmark)) for cell in GRID.cells]


def get_score_files():
    return [str(paths.score_path(RESULTS, cell.model, cell.benchmark)) for cell in GRID.cells]


def get_comparison_files():
    """One comparison file per benchmark of the grid (`vlmgrid compare`)."""
    return [str(paths.comparison_path(RESULTS, bench)) for bench in GRID.benchmarks]


def get_comparison_predictions(wildcards):
    """The predictions files of every model of the grid on the benchmark: what its comparison file reads."""
    return [str(paths.predictions_path(RESULTS, model, wildcards.bench)) for model in GRID.models]


def get_benchmark_kinds():
    return {bench: GRID.benchmark(bench)["kind"] for bench in GRID.benchmarks}


def get_report_outputs():
    """Every file `vlmgrid report` writes: the main tables and figure, and the paper tables of the grid's kinds."""
    return [str(path) for path, _ in report_files(RESULTS, get_benchmark_kinds())]


def get_report_files():
    """The same files, each shown in the Snakemake report with its caption (workflow/report/<caption>.rst)."""
    files = report_files(RESULTS, get_benchmark_kinds())
    # (a line may not start with the word `report`: Snakemake reads that as its `report:` directive)
    return [report(str(path), caption=f"../report/{caption}.rst",
                   category="Figures" if path.parent.name == "figures" else "Tables") for path, caption in files]


def get_inspect_pages():
    """Every benchmark's inspect page (`vlmgrid inspect`)."""
    return [str(paths.inspect_page_path(RESULTS, bench)) for bench in GRID.benchmarks]


def get_inspect_page_output():
    """The inspect rule's page, shown in the Snakemake report with its caption (a self-contained HTML file)."""
    return report(str(paths.inspect_page_path(RESULTS, "{bench}")), caption="../report/inspect.rst",
                  category="Items", subcategory="{bench}")


def get_inspect_predictions(wildcards):
    """The predictions files of the benchmark's cells, not-applicable ones too (the page names those)."""
    return [str(paths.predictions_path(RESULTS, cell.model, cell.benchmark)) for cell in GRID.cells
            if cell.benchmark == wildcards.bench]


def cluster_resources(job):
    """What one kind of job asks Slurm for, as rule resources: the config's `cluster.<job>` (prepare, infer,
    ...) plus the cluster-wide partition and account. The Slurm executor turns them into sbatch options; a
    local run sets no limit on them, so they never hold a local job back."""
    settings = dict(GRID.cluster[job])
    partition = settings.pop("partition", GRID.cluster.get("partition"))
    if partition:
        settings["slurm_partition"] = partition
    if GRID.cluster.get("account"):
        settings["slurm_account"] = GRID.cluster["account"]
    return settings


def infer_resources():
    """What an infer or infer_shard job asks Slurm for: cluster_resources("infer"), its runtime per job."""
    settings = cluster_resources("infer")
    del settings["runtime_from_plan"]
    settings["runtime"] = get_infer_runtime
    return settings


def get_infer_runtime(wildcards):
    """The job's runtime in minutes: with cluster.infer.runtime_from_plan, the cost plan's for its cell
    (vlmgrid.stages.cost.infer_job_runtime), else the flat cluster.infer.runtime. A job's own parse (on its
    node, under Slurm) takes the flat one: its time limit was set when it was submitted, and the plan would
    only delay its start."""
    if not GRID.cluster["infer"]["runtime_from_plan"] or not workflow.is_main_process:
        return GRID.cluster["infer"]["runtime"]
    from vlmgrid.stages import cost

    return cost.infer_job_runtime(GRID, get_cost_plan(), wildcards.model, wildcards.bench)


@functools.cache
def get_cost_plan():
    """The grid's cost plan (`vlmgrid plan`), made once per parse: it may generate fixtures to count them."""
    from vlmgrid.stages import cost

    return cost.cost_table(GRID)


# The jobs' warm start (docs/speed.md): where jobs run on this machine, a `vlmgrid forkserver` imports their
# modules once and runs each job's command in a forked child; the jobs find it through VLMGRID_FORKSERVER. Snakemake
# calls onstart only when there are jobs to run and not in a dry run. VLMGRID_FORKSERVER=off, or a cluster executor
# (its jobs run on other nodes), starts none: each job then imports its modules itself, as does a job that cannot
# reach the socket or whose environment differs from the server's (vlmgrid.forkserver).
FORKSERVER = {}


def check_results_dir():
    """Every job writes under results_dir, its log first: a folder that cannot be written is said once, before
    any job starts, rather than by every job."""
    import tempfile

    try:
        os.makedirs(LOGS, exist_ok=True)
        tempfile.TemporaryFile(dir=LOGS).close()
    except OSError as error:
        raise WorkflowError(f"{CONFIG_FILE}: results_dir {RESULTS} cannot be written ({error.strerror.lower()}: "
                            f"{error.filename or LOGS}); make it writable, or set results_dir to a folder that "
                            "is, and run again") from None


def start_forkserver():
    from vlmgrid import forkserver

    if not workflow.local_exec or os.environ.get("VLMGRID_FORKSERVER", "") != "":
        return  # a cluster's jobs, or off, or one that the caller started
    if visible_gpus():
        # A job that holds GPUs sets CUDA_VISIBLE_DEVICES before it imports torch, which a child of a server that
        # has imported it cannot do; beside a real model's load the imports are small.
        return
    try:
        server = forkserver.start(os.path.join(LOGS, "forkserver.log"))
    except VlmgridError as error:
        raise WorkflowError(str(error)) from None
    if server is not None:
        FORKSERVER["server"] = server
        os.environ["VLMGRID_FORKSERVER"] = server.socket_path  # the local jobs' commands inherit it


def stop_forkserver():
    from vlmgrid import forkserver

    server = FORKSERVER.pop("server", None)
    if server is not None:
        forkserver.stop(server)
        os.environ.pop("VLMGRID_FORKSERVER", None)
