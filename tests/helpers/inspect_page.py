"""A small grid for the inspect tests: a prepared ScienceQA-IMG fixture (four options per question) and two
models whose predictions the test writes itself: `alpha` answers every item right but one (wrong) and
`beta` answers every item right but one (a format error: an answer the parser could not read). A third
model, `clip`, is marked not applicable, as inference marks a cell that cannot run."""

from __future__ import annotations

import copy

import pandas as pd
import yaml

from vlmgrid import paths
from vlmgrid.config import load_config
from vlmgrid.predictions import rows_to_table
from vlmgrid.predictions import write_predictions as write_file
from vlmgrid.stages.prepare import prepare

BENCH = "scienceqa-fixture"


def _row(item_id: str, raw: str, options, index: int) -> dict:
    return {
        "id": item_id,
        "variant": "default",
        "raw": raw,
        "prediction": options[index] if index >= 0 else None,
        "prediction_index": index,
        "scores": None,
        "topk": None,
        "error": None,
    }


def write_predictions(config, model: str, rows: list[dict], fingerprint: str) -> None:
    metadata = {"model": model, "benchmark": BENCH, "data_fingerprint": fingerprint, "applicable": True}
    write_file(paths.predictions_path(config.results_dir, model, BENCH), rows_to_table(rows), metadata)


def make_grid(default_config_data: dict, tmp_path, size: int = 6):
    """The config and records of the grid; returns (config, records, wrong id of alpha, error id of beta)."""
    data = copy.deepcopy(default_config_data)
    data["data_dir"], data["results_dir"] = str(tmp_path / "data"), str(tmp_path / "results")
    data["benchmarks"] = {
        BENCH: {"kind": "scienceqa_img", "source": {"type": "fixture", "seed": 0, "size": size}}
    }
    data["models"] = {
        "alpha": {"backend": "baseline", "strategy": "first"},
        "beta": {"backend": "baseline", "strategy": "random"},
        "clip": data["models"]["clip-tiny"],
    }
    data["grid"] = {"models": ["alpha", "beta", "clip"], "benchmarks": [BENCH]}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(config_path)
    manifest = prepare(config, BENCH)
    records = pd.read_parquet(paths.bench_dir(config.data_dir, BENCH) / "records.parquet")
    ids = list(records["id"])
    wrong_id, error_id = ids[1], ids[2]
    alpha, beta = [], []
    for item_id, options, gold in zip(ids, records["options"], records["answer_index"]):
        options = list(options)
        other = (gold + 1) % len(options)
        alpha.append(
            _row(
                item_id,
                f"The answer is {'ABCD'[other if item_id == wrong_id else gold]}.",
                options,
                other if item_id == wrong_id else gold,
            )
        )
        beta.append(
            _row(
                item_id,
                "I cannot tell <b>which</b>" if item_id == error_id else "ABCD"[gold],
                options,
                -1 if item_id == error_id else gold,
            )
        )
    write_predictions(config, "alpha", alpha, manifest["fingerprint"])
    write_predictions(config, "beta", beta, manifest["fingerprint"])
    not_applicable = {
        "model": "clip",
        "benchmark": BENCH,
        "applicable": False,
        "reason": 'model "clip" cannot run it (a test reason)',
    }
    write_file(paths.predictions_path(config.results_dir, "clip", BENCH), rows_to_table([]), not_applicable)
    return config, config_path, records, wrong_id, error_id
