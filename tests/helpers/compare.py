"""A hand-built benchmark and grid for the compare and report tests: its records, predictions,
comparisons and score files."""

import json

import pandas as pd
import pytest

from vlmgrid import paths
from vlmgrid.benchmarks.dataset import fingerprint
from vlmgrid.fileio import sha256_file
from vlmgrid.predictions import rows_to_table, write_predictions

# 20 items, gold 0: both right on 5, only "good" on 8, only "fair" on 2, both wrong on 5; "broken" answers
# none.
GOOD = [0] * 13 + [1] * 7
FAIR = [0] * 5 + [1] * 8 + [0] * 2 + [1] * 5


def write_bench(bench_dir, n=20):
    bench_dir.mkdir(parents=True)
    records = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "image": None,
            "question": "Which?",
            "options": [["yes", "no"]] * n,
            "answer": "yes",
            "answer_index": 0,
        }
    )
    records.to_parquet(bench_dir / "records.parquet")
    files = {"records.parquet": sha256_file(bench_dir / "records.parquet")}
    manifest = {
        "kind": "scienceqa_img",
        "benchmark": bench_dir.name,
        "files": files,
        "fingerprint": fingerprint(files),
    }
    (bench_dir / "manifest.json").write_text(json.dumps(manifest))
    return manifest["fingerprint"]


def write_preds(path, indices, data_fingerprint):
    rows = [
        {
            "id": f"q{i}",
            "variant": "default",
            "raw": None,
            "prediction": None if k < 0 else ["yes", "no"][k],
            "prediction_index": k,
            "scores": None,
            "topk": None,
            "error": None,
        }
        for i, k in enumerate(indices)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_predictions(path, rows_to_table(rows), {"applicable": True, "data_fingerprint": data_fingerprint})


def write_not_applicable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    write_predictions(path, rows_to_table([]), {"applicable": False, "reason": "it cannot answer yes or no"})


def grid_data(tmp_path, models) -> dict:
    """A grid of baseline `models` on one prepared fixture benchmark, "tiny", bootstrapped 2,000 times."""
    return {
        "data_dir": str(tmp_path / "data"),
        "results_dir": str(tmp_path / "results"),
        "bootstrap": {"samples": 2000, "seed": 0},
        "benchmarks": {"tiny": {"kind": "scienceqa_img", "source": {"type": "fixture"}}},
        "models": {name: {"backend": "baseline", "seed": 0} for name in models},
        "grid": {"models": list(models), "benchmarks": ["tiny"]},
    }


@pytest.fixture
def tiny_grid(tmp_path, write_config):
    data = grid_data(tmp_path, ["good", "fair", "broken", "na"])
    data_fp = write_bench(tmp_path / "data" / "tiny")
    results = tmp_path / "results"
    write_preds(paths.predictions_path(results, "good", "tiny"), GOOD, data_fp)
    write_preds(paths.predictions_path(results, "fair", "tiny"), FAIR, data_fp)
    write_preds(paths.predictions_path(results, "broken", "tiny"), [-1] * 20, data_fp)
    write_not_applicable(paths.predictions_path(results, "na", "tiny"))
    return data, write_config(data)


def write_score(results, model, bench, value, sha):
    path = paths.score_path(results, model, bench)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "model": model,
                "benchmark": bench,
                "applicable": True,
                "metric": "accuracy",
                "value": value,
                "ci95": [value - 5, value + 5],
                "n": 20,
                "n_valid": 20,
                "format_error_rate": 0.0,
                "metrics": {},
                "breakdown": {},
                "bootstrap": {"samples": 3, "seed": 0, "draws": [value - 1, value, value + 1]},
                "inputs": {"predictions_sha256": sha},
            }
        )
    )
    return path


def write_comparison(results, bench, reference, pairs, shas=None, mdd=1.0):
    """A comparison file of (model A, model B, difference, p) pairs, each with the minimum detectable
    difference `mdd`."""
    path = paths.comparison_path(results, bench)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = []
    for a, b, difference, p in pairs:
        entries.append(
            {
                "model_a": a,
                "model_b": b,
                "comparable": True,
                "value_a": 50 + difference,
                "value_b": 50.0,
                "difference": difference,
                "ci95": [difference - 3, difference + 3],
                "p_value": p,
                "test": "paired sign-flip permutation",
                "unit": "item",
                "units": 20,
                "permutations": 999,
                "mcnemar": None,
                "mdd": mdd,
                "mdd_from": "unit differences",
            }
        )
    path.write_text(
        json.dumps(
            {
                "benchmark": bench,
                "metric": "accuracy",
                "reference_model": reference,
                "pairs": entries,
                "inputs": {"predictions_sha256": shas or {}},
            }
        )
    )
    return path
