"""The compare stage with a cell whose batch check found items answered otherwise one at a time (its
predictions' `invariance.differing`): the comparison file names that model in each compared pair, as the
report marks
it."""

import json

import pyarrow.parquet as pq
from helpers.compare import tiny_grid  # noqa: F401 (a fixture)

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.predictions import METADATA_KEY


def record_check(path, differing: list[str]) -> None:
    """The predictions file's metadata with a batch check that found `differing`, its rows as they are."""
    table = pq.read_table(path)
    metadata = json.loads(table.schema.metadata[METADATA_KEY])
    metadata["invariance"] = {
        "checked": 4,
        "same": 4 - len(differing),
        "differing": differing,
        "max_logprob_delta": None,
        "batch_size": 8,
    }
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()}), path)


def test_the_comparison_file_names_the_models_whose_answers_depend_on_the_batch(tiny_grid):  # noqa: F811
    data, config = tiny_grid
    record_check(paths.predictions_path(data["results_dir"], "fair", "tiny"), ["q2"])
    record_check(paths.predictions_path(data["results_dir"], "good", "tiny"), [])
    assert main(["compare", "tiny", "--config", str(config)]) == 0
    result = json.loads(paths.comparison_path(data["results_dir"], "tiny").read_text())
    pairs = {(p["model_a"], p["model_b"]): p for p in result["pairs"]}
    # fair's cell is marked, as in the main table; good's check found nothing; a pair without numbers has no
    # mark
    assert pairs[("good", "fair")]["batch_dependent"] == ["fair"]
    assert (
        "batch_dependent" not in pairs[("good", "broken")] and "batch_dependent" not in pairs[("fair", "na")]
    )
