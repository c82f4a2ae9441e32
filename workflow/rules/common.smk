# Helpers shared by the rules. The config is checked against workflow/schemas/config.schema.yaml and every
# name it uses is checked against the registries before any job starts.
import json
import re

from vlmgrid import paths
from vlmgrid.config import prompt_file_hashes, validate_config
from vlmgrid.errors import VlmgridError


def _config_path():
    # The file the CLI reads: the last --configfile given, else the Snakefile's own. Snakemake lists the
    # Snakefile's `configfile:` after the command line's in workflow.configfiles, so ask for the latter.
    given = list(workflow.config_settings.configfiles or [])
    if given:
        return str(given[-1])
    return workflow.configfiles[-1] if workflow.configfiles else "config/config.yaml"


CONFIG_FILE = _config_path()
if workflow.config_settings.config:
    # The jobs' `vlmgrid` commands read the config file, so an override here would not reach them.
    raise WorkflowError(
        "--config overrides are not supported: put the change in a config file and pass it with --configfile"
    )
try:
    GRID = validate_config(config, source=CONFIG_FILE)
except VlmgridError as error:
    raise WorkflowError(str(error)) from None

DATA = str(GRID.data_dir)
RESULTS = str(GRID.results_dir)
NAME = "[a-z0-9][a-z0-9_.-]*"


wildcard_constraints:
    bench=NAME,
    model=NAME,


def get_model_settings(model):
    """The model's settings as text: a change reruns exactly that model's jobs."""
    return json.dumps(GRID.model(model), sort_keys=True)


def get_model_source(model):
    return json.dumps(GRID.model(model).get("source"), sort_keys=True)


def get_prompt_hashes():
    """{file name: sha256} of the config's prompt sets as text: editing a prompt reruns inference."""
    return json.dumps(prompt_file_hashes(GRID.prompts_dir), sort_keys=True)


def get_benchmark_settings(bench):
    """The benchmark's data settings as text. `shards` only splits its inference jobs: changing it must not
    prepare the data again (and so rerun every cell)."""
    return json.dumps({key: value for key, value in GRID.benchmark(bench).items() if key != "shards"}, sort_keys=True)


def get_bench_pattern(sharded):
    """A wildcard pattern matching exactly the defined benchmarks whose cells are (or are not) split into
    shards, so that `infer` and `merge_shards`, which make the same predictions path, never both match."""
    names = [name for name in GRID.data["benchmarks"] if (GRID.shards(name) > 1) == sharded]
    return "|".join(re.escape(name) for name in names) or "(?!)"  # (?!) matches nothing


def get_shard_files(wildcards):
    """The shard files of a sharded cell; none for a cell that cannot run (merge-shards records that alone)."""
    if GRID.not_applicable(wildcards.model, wildcards.bench) is not None:
        return []
    count = GRID.shards(wildcards.bench)
    return [str(paths.shard_path(RESULTS, wildcards.model, wildcards.bench, index, count))
            for index in range(1, count + 1)]


def get_gpus(model):
    from vlmgrid.models import BACKENDS

    settings = GRID.model(model)
    return int(BACKENDS.get(settings["backend"]).uses_gpu and settings.get("device") != "cpu")


def get_score_files():
    return [str(paths.score_path(RESULTS, cell.model, cell.benchmark)) for cell in GRID.cells]


def get_benchmark_kinds():
    return {bench: GRID.benchmark(bench)["kind"] for bench in GRID.benchmarks}


def get_report_outputs():
    """Every file `vlmgrid report` writes: the main tables and figure, and the paper tables of the grid's kinds."""
    return [str(path) for path, _ in paths.report_files(RESULTS, get_benchmark_kinds())]


def get_report_files():
    """The same files, each shown in the Snakemake report with its caption (workflow/report/<caption>.rst)."""
    files = paths.report_files(RESULTS, get_benchmark_kinds())
    # (a line may not start with the word `report`: Snakemake reads that as its `report:` directive)
    return [report(str(path), caption=f"../report/{caption}.rst",
                   category="Figures" if path.parent.name == "figures" else "Tables") for path, caption in files]


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
