"""The score stage: records + predictions -> the score JSON (docs/formats.md). No model, no torch."""

from __future__ import annotations

from pathlib import Path

from vlmgrid import __version__
from vlmgrid.fileio import sha256_file, write_json
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import check_against_records, not_applicable_reason, read_metadata, read_predictions


def score_cell(*, model_name: str, bench_dir: Path, predictions_path: Path, out_path: Path,
               samples: int, seed: int) -> dict:
    from vlmgrid.benchmarks import load_benchmark
    from vlmgrid.metrics import METRICS, score_predictions

    bench = load_benchmark(bench_dir)
    hint = f"rerun `vlmgrid infer {model_name} {bench.name}` to rebuild it"
    predictions = read_predictions(predictions_path, hint)
    reason = not_applicable_reason(read_metadata(predictions_path))
    if reason is not None:
        if len(predictions):
            raise VlmgridError(
                f"predictions file {predictions_path} is marked not applicable but holds {len(predictions)} rows; "
                f"{hint}"
            )
        # No numbers: the model cannot run this benchmark, and the report shows the cell as n/a.
        score = {
            "model": model_name,
            "benchmark": bench.name,
            "applicable": False,
            "reason": reason,
            "metric": METRICS.get(bench.kind.metric).headline,
            "strategy": None,
            "inputs": {
                "data_fingerprint": bench.manifest.get("fingerprint"),
                "predictions_sha256": sha256_file(predictions_path),
            },
            "vlmgrid_version": __version__,
        }
        write_json(out_path, score)
        return score
    check_against_records(predictions, bench.records, predictions_path)
    result = score_predictions(
        bench.kind.metric, bench.records, predictions,
        breakdown_by=bench.kind.breakdown_by, samples=samples, seed=seed,
    )
    score = {
        "model": model_name,
        "benchmark": bench.name,
        "applicable": True,
        **result,
        # How the answers were obtained (likelihood, generate, embed), so a table can say which.
        "strategy": read_metadata(predictions_path).get("strategy"),
        "inputs": {
            "data_fingerprint": bench.manifest.get("fingerprint"),
            "predictions_sha256": sha256_file(predictions_path),
        },
        "vlmgrid_version": __version__,
    }
    write_json(out_path, score)
    return score
