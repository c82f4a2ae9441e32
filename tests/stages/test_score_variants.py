"""A benchmark whose headline is a mean over prediction variants (CVQA's four settings, a generative model's
classification templates) is scored only from a file that holds all of them: a part is never scored as the
whole."""

import pandas as pd
import pyarrow as pa
import pytest
from helpers.chain import infer_cell, prepared_grid

from vlmgrid import paths
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import SCHEMA
from vlmgrid.stages.score import score_cell


def given_file(predictions, keep, path):
    """The cell's rows whose variant `keep` accepts, as a file made elsewhere (no vlmgrid metadata)."""
    frame = pd.read_parquet(predictions)
    frame = frame[frame["variant"].map(keep)]
    pa.parquet.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), path)
    return path


def score(config, bench, path, tmp_path):
    return score_cell(
        model_name="random",
        bench_dir=paths.bench_dir(config.data_dir, bench),
        predictions_path=path,
        out_path=tmp_path / "score.json",
        samples=20,
        seed=0,
        given=True,
    )


@pytest.mark.parametrize("bench", ["cvqa-fixture", "imagenet-fixture"])
def test_a_file_holding_some_of_the_variants_of_the_headline_is_refused(small_config, tmp_path, bench):
    import pyarrow.parquet  # noqa: F401 (pa.parquet)

    config = prepared_grid(small_config, {bench: small_config["benchmarks"][bench]}, ["random"])
    predictions = infer_cell(config, "random", bench, part_size=1000)
    variants = sorted(pd.read_parquet(predictions)["variant"].unique())
    assert len(variants) == (4 if bench == "cvqa-fixture" else 20)
    whole = given_file(predictions, lambda variant: True, tmp_path / "whole.parquet")
    assert score(config, bench, whole, tmp_path)["n"] > 0

    part = given_file(predictions, lambda variant: variant == variants[0], tmp_path / "part.parquet")
    with pytest.raises(VlmgridError) as caught:
        score(config, bench, part, tmp_path)
    said = str(caught.value)
    assert said.startswith(f"predictions file {part} lacks the variant(s) {', '.join(variants[1:])} of ")
    assert (
        "whose headline is the mean over " in said and "a part of them is never scored as the whole" in said
    )

    renamed = given_file(predictions, lambda variant: True, tmp_path / "renamed.parquet")
    frame = pd.read_parquet(renamed)
    frame["variant"] = frame["variant"].replace(variants[0], "mine")
    pa.parquet.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), renamed)
    with pytest.raises(
        VlmgridError, match=f"lacks the variant\\(s\\) {variants[0]} and holds the variant\\(s\\) mine"
    ):
        score(config, bench, renamed, tmp_path)

    if bench == "imagenet-fixture":  # an embedding model's one classifier is whole by itself
        one = given_file(predictions, lambda variant: variant == variants[0], tmp_path / "one.parquet")
        frame = pd.read_parquet(one).assign(variant="default")
        pa.parquet.write_table(pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False), one)
        assert score(config, bench, one, tmp_path)["n"] > 0
