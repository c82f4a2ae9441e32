"""Two prediction sets of one prepared fixture benchmark that differ in known ways, for the diff tests."""

from __future__ import annotations

import pandas as pd

from vlmgrid.benchmarks import load_benchmark
from vlmgrid.predictions import rows_to_table, write_table
from vlmgrid.protocols.parsing import parse
from vlmgrid.stages.prepare import prepare_benchmark


def _prepare(root, kind: str, name: str, **source):
    bench_dir = root / "data" / name
    prepare_benchmark(name, {"kind": kind, "source": {"type": "fixture", "seed": 0, **source}}, bench_dir)
    return load_benchmark(bench_dir)


def _rows(bench, answers: dict, parser: str) -> list[dict]:
    """Prediction rows as a tool that reads with `parser` writes them: {id: raw text, or ("error",
    message)}."""
    options = dict(zip(bench.records["id"], bench.records["options"]))
    rows = []
    for item_id, raw in answers.items():
        if isinstance(raw, tuple):  # a failed request: no text, no reading
            rows.append(
                {
                    "id": item_id,
                    "variant": "default",
                    "raw": None,
                    "prediction": None,
                    "prediction_index": -1,
                    "error": raw[1],
                }
            )
            continue
        parsed = parse(parser, raw, list(options[item_id]))
        rows.append(
            {
                "id": item_id,
                "variant": "default",
                "raw": raw,
                "prediction": parsed.prediction,
                "prediction_index": parsed.index,
                "error": None,
            }
        )
    return rows


def _write(path, bench, frame: pd.DataFrame) -> str:
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    metadata = {
        "model": "m",
        "benchmark": bench.name,
        "data_fingerprint": bench.manifest["fingerprint"],
        "strategy": "generate",
        "applicable": True,
    }
    write_table(path, rows_to_table(rows, metadata))
    return str(path)


def _config(tmp_path, write_config, benchmark: str, models=()) -> str:
    data = {
        "data_dir": str(tmp_path / "data"),
        "results_dir": str(tmp_path / "results"),
        "benchmarks": {
            benchmark: {
                "kind": {"scienceqa-fixture": "scienceqa_img"}.get(benchmark, "pope"),
                "source": {"type": "fixture", "seed": 0},
            }
        },
        "models": {name: {"backend": "baseline", "seed": 0} for name in models}
        or {"random": {"backend": "baseline", "seed": 0}},
        "grid": {"models": list(models) or ["random"], "benchmarks": [benchmark]},
    }
    return str(write_config(data))
