"""The compare stage: one benchmark's predictions of every model of the grid -> its comparison file.

Per pair of models (or each model against `report.reference_model`): the difference of their headlines with a
paired bootstrap CI and a paired sign-flip permutation test (`vlmgrid.metrics.paired`), recomputed from the
predictions with the score's samples and seed, so the resamples are the score files' own, and the minimum
detectable difference (MDD, 5% two-sided at 80% power) over the units the test flips. A pair one of whose
cells cannot run, hides its labels or failed gets no comparison, only the reason in words. Holm's correction
spans benchmarks and so is the report's (`vlmgrid.report.comparisons`). A cell that answers a subset of the
benchmark (an imported MME eval-tool folder) is not compared either, unless `report.partial_cells` is
"include": then its pairs are compared on the items both models answered, and the entry's `coverage` says how
many.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from vlmgrid import __version__, paths
from vlmgrid.codeversion import running_version
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file, write_json
from vlmgrid.metrics.base import LabelsHidden
from vlmgrid.metrics.power import ALPHA as MDD_ALPHA
from vlmgrid.metrics.power import POWER as MDD_POWER
from vlmgrid.predictions import (
    answered_records,
    check_against_records,
    check_data_fingerprint,
    read_metadata,
    read_predictions,
    recorded_not_applicable,
)
from vlmgrid.report.comparisons import comparison_pairs
from vlmgrid.stages.score import applicable_items, check_variants, partial_copy

log = logging.getLogger(__name__)

DECIMALS = 4


def _r(x: float) -> float:
    return round(float(x), DECIMALS)


def compare_benchmark(config: Config, benchmark: str) -> dict:
    """`vlmgrid compare BENCH`: write `<results_dir>/comparisons/<bench>.json` and log one line per pair."""
    if benchmark not in config.benchmarks:
        raise VlmgridError(
            f'benchmark "{benchmark}" is not in the grid of {config.path}; the grid has '
            f"{', '.join(config.benchmarks)}"
        )
    reference = config.report.get("reference_model")
    out_path = paths.comparison_path(config.results_dir, benchmark)
    result = compare_cells(
        benchmark=benchmark,
        bench_dir=paths.bench_dir(config.data_dir, benchmark),
        predictions={
            model: paths.predictions_path(config.results_dir, model, benchmark) for model in config.models
        },
        pairs=comparison_pairs(config.models, reference),
        reference_model=reference,
        samples=int(config.bootstrap["samples"]),
        seed=int(config.bootstrap["seed"]),
        out_path=out_path,
        partial_cells=config.report.get("partial_cells", "exclude"),
    )
    for pair in result["pairs"]:
        name = f"{pair['model_a']} - {pair['model_b']} on {benchmark}"
        if pair["comparable"]:
            log.info(f"{name}: {compared_line(result['metric'], pair)}")
        else:
            log.info(f"{name}: no comparison ({pair['reason']})")
    log.info(f"wrote {out_path}")
    return result


def _over(unit: str) -> str:
    """What the resamples and sign flips draw: "items", or the groups the metric scores ("pair_id groups")."""
    return "items" if unit == "item" else f"{unit} groups"


def compared_line(metric: str, pair: dict) -> str:
    """One compared pair in words that name the metric and the tests: "accuracy +30.0 [12.0, 48.0] (95% CI:
    paired bootstrap over items), p = 0.11 (two-sided paired sign-flip permutation test over items, 2000
    permutations; exact McNemar p = 0.109), MDD 44.3 (5% two-sided, 80% power): the difference is below
    it"."""
    low, high = pair["ci95"]
    over = _over(pair["unit"])
    mcnemar = pair.get("mcnemar")
    exact = "" if mcnemar is None else f"; exact McNemar p = {mcnemar['p_value']:.3g}"
    below = ": the difference is below it" if abs(pair["difference"]) < pair["mdd"] else ""
    return (
        f"{metric} {pair['difference']:+.1f} [{low:.1f}, {high:.1f}] (95% CI: paired bootstrap over {over}), "
        f"p = {pair['p_value']:.3g} (two-sided {pair['test']} test over {over}, {pair['permutations']} "
        f"permutations{exact}), MDD {pair['mdd']:.1f} ({MDD_ALPHA:.0%} two-sided, {MDD_POWER:.0%} power)"
        f"{below}"
    )


def _cell(model: str, bench, path: Path, partial_cells: str) -> tuple[pd.DataFrame | None, str | None, bool]:
    """The model's predictions, or why the cell has none to compare (it cannot run the benchmark, or answers a
    subset of it while `partial_cells` is "exclude"), and whether it is batch-dependent
    (`_batch_dependent`)."""
    hint = f"rerun `vlmgrid infer {model} {bench.name}` to rebuild it"
    predictions = read_predictions(path, hint)
    metadata = read_metadata(path)
    dependent = _batch_dependent(metadata)
    reason = recorded_not_applicable(metadata)
    if reason is not None:
        return None, f"{model} cannot run {bench.name}: {reason}", dependent
    check_data_fingerprint(metadata, bench.manifest.get("fingerprint"), path, hint)
    records, coverage = answered_records(metadata, predictions, bench.records, path)
    check_against_records(predictions, records, path, classes=len(bench.classes or []))
    check_variants(bench, predictions, path, hint)
    records, predictions, coverage = applicable_items(
        bench, metadata.get("strategy"), records, predictions, coverage
    )
    if not len(records):
        return None, f"{model} cannot answer any item of {bench.name}: {coverage['reason']}", dependent
    if coverage is not None and partial_cells != "include":
        why = coverage.get("reason") or "a partial import"
        return (
            None,
            (
                f"{model} answers {coverage['answered']:,} of the {coverage['total']:,} items of "
                f"{bench.name} ({why}; report.partial_cells: include compares it on the items both answered)"
            ),
            dependent,
        )
    return predictions, None, dependent


def _batch_dependent(metadata: dict) -> bool:
    """Whether the predictions' batch check (their `metadata`) found items answered otherwise one at a time
    than in their batch (the report marks such a cell with the not-equal sign)."""
    check = metadata.get("invariance")
    return isinstance(check, dict) and bool(check.get("differing"))


def _common(
    records: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict | None]:
    """The records both predictions answer and the predictions of those, and the coverage of the pair
    ({answered, total}; None when both answer every item)."""
    both = set(a["id"].astype(str)) & set(b["id"].astype(str))
    if len(both) == len(records):
        return records, a, b, None
    keep = records[records["id"].astype(str).isin(both)].reset_index(drop=True)
    return (
        keep,
        a[a["id"].astype(str).isin(both)].reset_index(drop=True),
        b[b["id"].astype(str).isin(both)].reset_index(drop=True),
        {"answered": int(len(keep)), "total": int(len(records))},
    )


def compare_cells(
    *,
    benchmark: str,
    bench_dir: Path,
    predictions: dict[str, Path],
    pairs: list[tuple[str, str]],
    reference_model: str | None,
    samples: int,
    seed: int,
    out_path: Path,
    partial_cells: str = "exclude",
) -> dict:
    """Compare the models' predictions files ({model: path}) pair by pair on the prepared benchmark; write and
    return the comparison file's contents (docs/formats.md). `partial_cells`: "include" compares a cell that
    answers a subset on the items both models of a pair answered; "exclude" gives its pairs no comparison."""
    from vlmgrid.benchmarks import load_benchmark
    from vlmgrid.metrics import METRICS
    from vlmgrid.metrics.paired import NotComparable, paired_difference

    bench = load_benchmark(bench_dir)
    metric = METRICS.get(bench.kind.metric)
    models = list(dict.fromkeys(model for pair in pairs for model in pair))
    cells = {model: _cell(model, bench, predictions[model], partial_cells) for model in models}
    entries = []
    for a, b in pairs:
        entry = {"model_a": a, "model_b": b}
        reasons = [reason for _, reason, _ in (cells[a], cells[b]) if reason is not None]
        if reasons:
            entries.append({**entry, "comparable": False, "reason": "; ".join(reasons)})
            continue
        records, rows_a, rows_b, coverage = _common(bench.records, cells[a][0], cells[b][0])
        if coverage is not None:
            entry["coverage"] = coverage
        try:
            result = paired_difference(
                bench.kind.metric, records, rows_a, rows_b, samples=samples, seed=seed, names=(a, b)
            )
        except LabelsHidden:
            entries.append(
                {
                    **entry,
                    "comparable": False,
                    "reason": f"the labels of {benchmark} are hidden, so neither model has a score",
                }
            )
            continue
        except NotComparable as exc:
            entries.append({**entry, "comparable": False, "reason": str(exc)})
            continue
        # the models of the pair whose cell the report marks as batch-dependent, as in its tables
        dependent = [model for model in (a, b) if cells[model][2]]
        entries.append(
            {
                **entry,
                "comparable": True,
                "value_a": _r(result.value_a),
                "value_b": _r(result.value_b),
                "difference": _r(result.difference),
                "ci95": [_r(result.ci95[0]), _r(result.ci95[1])],
                "p_value": result.p_value,
                "test": result.test,
                "unit": result.unit,
                "units": result.units,
                "permutations": result.permutations,
                "mcnemar": None
                if result.mcnemar is None
                else {
                    "a_only": result.mcnemar.a_only,
                    "b_only": result.mcnemar.b_only,
                    "p_value": result.mcnemar.p_value,
                },
                "mdd": _r(result.mdd),
                "mdd_from": result.mdd_from,
                **({"batch_dependent": dependent} if dependent else {}),
            }
        )
    copy = partial_copy(bench)
    comparison = {
        "benchmark": benchmark,
        "metric": metric.headline,
        "reference_model": reference_model,
        "n": int(len(bench.records)),
        # the copy compared on, when that holds fewer items than the published benchmark (as in the score
        # files)
        **({} if copy is None else {"partial_copy": copy}),
        "samples": int(samples),
        "seed": int(seed),
        "mdd_alpha": MDD_ALPHA,
        "mdd_power": MDD_POWER,
        "pairs": entries,
        "inputs": {
            "data_fingerprint": bench.manifest.get("fingerprint"),
            "predictions_sha256": {model: sha256_file(predictions[model]) for model in models},
        },
        "vlmgrid_version": __version__,
        "code_version": running_version(),
    }
    write_json(out_path, comparison)
    return comparison
