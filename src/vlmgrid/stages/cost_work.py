"""What a cell asks of a model before it runs: a benchmark's counts, for the units of work its protocol sends.

The cost plan (vlmgrid.stages.cost) times and prices these counts.

Items come from the prepared benchmark (data/<bench>/, read as inference reads it) when its folder matches
the config ("prepared"); a fixture source not yet prepared is generated into a temporary folder and counted
("fixture"; fixtures are small and deterministic, so this is the exact count); otherwise the benchmark kind's
published count ("published"), or "unknown". A published benchmark's classes and options per item come from
its kind where the benchmark fixes them (`class_count`, `option_count`: ImageNet's 1,000 classes, yes/no's
two options); counts that vary with the data itself (options per question of ScienceQA, MMBench, CV-Bench;
DANCE's candidates) are known for prepared and fixture benchmarks only.

The units of work a model's protocol sends (`Work`, `cell_work`) are vlmgrid.cellrun.requests', the counts
that also cut an inference job into parts.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from vlmgrid import paths
from vlmgrid.cellrun.requests import Data
from vlmgrid.config import Config


def _scoring_units(bench) -> dict:
    """The prepared benchmark's scoring units (Data.units, Data.unit): its items, or its metric's groups."""
    from vlmgrid.metrics import METRICS
    from vlmgrid.metrics.grouped import GroupedMetric

    metric = METRICS.get(bench.kind.metric)
    if isinstance(metric, GroupedMetric):
        return {"units": int(len(set(metric.group_codes(bench.records).tolist()))), "unit": metric.group_by}
    return {"units": len(bench.records), "unit": "item"}


def _published_units(kind, items: int) -> dict:
    """An unprepared benchmark's scoring units: its items, or its groups where the kind fixes their size."""
    from vlmgrid.metrics import METRICS
    from vlmgrid.metrics.grouped import GroupedMetric

    metric = METRICS.get(kind.metric)
    if isinstance(metric, GroupedMetric):
        return {"units": items // kind.group_size if kind.group_size else None, "unit": metric.group_by}
    return {"units": items, "unit": "item"}


def _prepared(config: Config, benchmark: str):
    """The prepared benchmark, when its folder was prepared from the config's settings; else None."""
    import json

    from vlmgrid.benchmarks.dataset import load_benchmark
    from vlmgrid.benchmarks.folder import MANIFEST
    from vlmgrid.benchmarks.sources import data_settings

    bench_dir = paths.bench_dir(config.data_dir, benchmark)
    try:
        manifest = json.loads((bench_dir / MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    settings = config.benchmark(benchmark)
    if (not isinstance(manifest, dict) or manifest.get("kind") != settings["kind"]
            or data_settings(manifest.get("source") or {}) != data_settings(dict(settings["source"]))):
        return None  # a folder of other settings: its counts are not this benchmark's
    return load_benchmark(bench_dir)


def benchmark_data(config: Config, benchmark: str) -> Data:
    """The benchmark's counts: prepared, else a fixture generated for counting, else the published count."""
    from vlmgrid.benchmarks import BENCHMARKS
    from vlmgrid.benchmarks.dataset import load_benchmark
    from vlmgrid.stages.prepare import prepare_benchmark

    prepared = _prepared(config, benchmark)
    if prepared is not None:
        return replace(Data.of(prepared, "prepared"), **_scoring_units(prepared))
    settings = config.benchmark(benchmark)
    if settings["source"]["type"] == "fixture":
        with tempfile.TemporaryDirectory() as tmp:
            prepare_benchmark(benchmark, settings, Path(tmp) / benchmark)
            bench = load_benchmark(Path(tmp) / benchmark)
            return replace(Data.of(bench, "fixture"), **_scoring_units(bench))
    kind = BENCHMARKS.get(settings["kind"])
    published = settings["source"].get("expected_items") or kind.expected_count
    if not published:
        return Data(None, "unknown")
    # what the kind fixes for every copy: its classes, and its options where every item has the same number
    options = (kind.option_count,) * published if kind.option_count else None
    return Data(published, "published", classes=kind.class_count, options=options,
                **_published_units(kind, published))
