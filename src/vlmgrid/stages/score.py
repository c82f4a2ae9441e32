"""The score stage: records + predictions -> the score JSON (docs/formats.md). No model, no torch.

The number is the kind's metric (`vlmgrid.metrics`) on the answers as the authors' scorer reads them; where
the kind has a more lenient reading, its figure is scored beside the headline under its own name, and so is
the publishing tool's own reading of imported answers (`tool_reading`: its verdicts, or its rule).

A predictions file imported from a format that answers a subset by construction (its metadata's `coverage`)
is scored on the items it answers, and the score file's `coverage` ({answered, total}) says so; any other file
that lacks items is refused. The items the file's strategy cannot answer at all (its protocol's `scopes`: a
contrastive model and Kaleidoscope's text-only questions) are not applicable, not wrong: the score is over the
others, and its `coverage` adds the `reason`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from vlmgrid import __version__, paths
from vlmgrid.codeversion import running_version
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import atomic_path, sha256_file, write_json
from vlmgrid.metrics.base import LabelsHidden
from vlmgrid.predictions import (
    GIVEN_HINT,
    answered_records,
    check_against_records,
    check_data_fingerprint,
    read_metadata,
    read_predictions,
    recorded_not_applicable,
)

log = logging.getLogger(__name__)


def score_grid_cell(
    config: Config, model: str, benchmark: str, *, predictions: str | None = None, out: str | None = None
) -> dict:
    """`vlmgrid score`: score the cell's predictions file (or the `predictions` file the user names) and write
    its score file (or `out`); logs the headline, or why there is none."""
    predictions_path = (
        Path(predictions) if predictions else paths.predictions_path(config.results_dir, model, benchmark)
    )
    out_path = Path(out) if out else paths.score_path(config.results_dir, model, benchmark)
    score = score_cell(
        model_name=model,
        bench_dir=paths.bench_dir(config.data_dir, benchmark),
        predictions_path=predictions_path,
        out_path=out_path,
        samples=int(config.bootstrap["samples"]),
        seed=int(config.bootstrap["seed"]),
        given=bool(predictions),
    )
    if not score.get("applicable", True):
        log.info(f"{model} on {benchmark}: not applicable ({score['reason']}) -> {out_path}")
    elif score.get("labels_hidden"):
        files = ", ".join(score["submission"].values())
        log.info(
            f"{model} on {benchmark}: the labels are hidden, so there is no score; the leaderboard's "
            f"submission files are in {out_path.parent} ({files}) -> {out_path}"
        )
    else:
        low, high = score["ci95"]
        coverage = score.get("coverage")
        of = (
            ""
            if coverage is None
            else (f" of {coverage['total']} items ({coverage.get('reason') or 'a partial import'})")
        )
        tool = score.get("tool_reading")
        theirs = (
            ""
            if tool is None
            else (f"; {tool['tool']} reads {tool['value']:.1f} ({tool['n_read_by_judge']:,} by its judge)")
        )
        log.info(
            f"{model} on {benchmark}: {score['metric']} {score['value']:.1f} [{low:.1f}, {high:.1f}] "
            f"(n={score['n']}{of}{copy_words(score.get('partial_copy'))}, format errors "
            f"{score['format_error_rate']:.1f}%{theirs}) -> {out_path}"
        )
    return score


def _generation(metadata: dict) -> dict:
    """The decoding settings the model ran with (the provenance's, a preset already expanded), so a table can
    say whether answers were sampled; {} when the predictions file does not record them."""
    provenance = metadata.get("provenance")
    generation = provenance.get("generation") if isinstance(provenance, dict) else None
    return dict(generation) if isinstance(generation, dict) else {}


def _answerer(metadata: dict) -> dict:
    """The model's backend and the id it recorded ("baseline:random" for the random baseline), so a table can
    tell a reference baseline from a model; null when the predictions file does not record them."""
    settings, provenance = metadata.get("model_settings"), metadata.get("provenance")
    backend = settings.get("backend") if isinstance(settings, dict) else None
    model_id = provenance.get("model_id") if isinstance(provenance, dict) else None
    if backend is None and isinstance(provenance, dict):
        backend = provenance.get("backend")
    return {
        "backend": backend if isinstance(backend, str) else None,
        "model_id": model_id if isinstance(model_id, str) else None,
    }


def lenient_predictions(
    kind, records: pd.DataFrame, predictions: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, str]] | None:
    """The predictions with every generated answer read again by the kind's lenient parser, and
    {variant: parser}.

    Rows without raw text (answered by log-likelihood or similarity) or with an `error` stay as they are. None
    when the kind has no lenient reading or no row was read by one.
    """
    if not kind.lenient_parsers:
        return None
    return read_again(records, predictions, kind.lenient_parsers)


def read_again(
    records: pd.DataFrame, predictions: pd.DataFrame, parsers: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, str]] | None:
    """The predictions with every generated answer read again by the parser `parsers` names for its variant
    ("*": any variant), and {variant: parser}. Rows without raw text or with an `error` stay as they are; None
    when no row was read again."""
    from vlmgrid.protocols.parsing import PARSERS

    if "raw" not in predictions.columns or not len(predictions):
        return None
    variants = (
        predictions["variant"].fillna("default").astype(str)
        if "variant" in predictions.columns
        else pd.Series("default", index=predictions.index)
    )
    errors = (
        predictions["error"].notna()
        if "error" in predictions.columns
        else pd.Series(False, index=predictions.index)
    )
    options = dict(zip(records["id"].astype(str), records["options"]))
    texts = predictions["prediction"].astype(object).to_numpy(copy=True)
    indices = predictions["prediction_index"].to_numpy(copy=True)
    used: dict[str, str] = {}
    rows = zip(predictions["id"].astype(str), predictions["raw"], variants, errors)
    for position, (item_id, raw, variant, failed) in enumerate(rows):
        name = parsers.get(variant, parsers.get("*"))
        if name is None or failed or not isinstance(raw, str):
            continue
        parsed = PARSERS.get(name)(raw, [str(option) for option in options.get(item_id, [])])
        texts[position], indices[position] = parsed.prediction, parsed.index
        used[variant] = name
    if not used:
        return None
    return predictions.assign(prediction=texts, prediction_index=indices), dict(sorted(used.items()))


def _lenient_figure(
    bench, records: pd.DataFrame, metric, predictions: pd.DataFrame, samples: int, seed: int
) -> dict | None:
    """The headline under the kind's lenient reading (score-JSON `lenient`), or None when it has none."""
    from vlmgrid.metrics import score_predictions

    reread = lenient_predictions(bench.kind, records, predictions)
    if reread is None:
        return None
    frame, parsers = reread
    result = score_predictions(bench.kind.metric, records, frame, samples=samples, seed=seed)
    return {
        "metric": f"{metric.headline}_lenient",
        "value": result["value"],
        "ci95": result["ci95"],
        "format_error_rate": result["format_error_rate"],
        "parsers": parsers,
    }


def _tool_figure(
    bench,
    metadata: dict,
    records: pd.DataFrame,
    predictions: pd.DataFrame,
    samples: int,
    seed: int,
    where: str,
) -> dict | None:
    """The headline as the publishing tool reads the answers (score-JSON `tool_reading`), from its recorded
    verdicts or its rule (`stages.tool_reading`); None when the predictions carry neither."""
    from vlmgrid.metrics import score_predictions
    from vlmgrid.stages.tool_reading import reading, score_entry

    read = reading(bench.kind.name, metadata, records, predictions, where)
    if read is None:
        return None
    result = score_predictions(bench.kind.metric, records, read.frame, samples=samples, seed=seed)
    return score_entry(
        read, result["value"], {name: figure["value"] for name, figure in result["metrics"].items()}
    )


def _write_submission(metric, records, predictions, out_path: Path, hidden: LabelsHidden) -> dict[str, str]:
    """Write the metric's submission table per variant beside the score file; {variant: file name}."""
    tables = metric.submission(records, predictions)
    if not tables:
        raise hidden
    files = {}
    for variant, table in tables.items():
        path = paths.submission_path(out_path, variant)
        with atomic_path(path) as tmp:
            table.to_csv(tmp, index=False, lineterminator="\n")
        files[variant] = path.name
    return files


def check_variants(bench, predictions: pd.DataFrame, path: Path, hint: str) -> None:
    """Refuse a file that holds some of the prediction variants whose mean is the benchmark's headline (its
    protocol's variant_sets) but not all: its mean over those would stand for the benchmark's, unmarked."""
    from vlmgrid.protocols import PROTOCOLS

    sets = PROTOCOLS.get(bench.kind.protocol).variant_sets
    if sets is None or not len(predictions):
        return
    held = frozenset(
        predictions["variant"].fillna("default").astype(str)
        if "variant" in predictions.columns
        else ["default"]
    )
    whole = sets(bench)
    if held in whole:
        return
    closest = max(whole, key=lambda variants: len(variants & held))
    missing, other = sorted(closest - held), sorted(held - closest)
    said = " and ".join(
        [f"lacks the variant(s) {', '.join(missing)}"] * bool(missing)
        + [f"holds the variant(s) {', '.join(other)}"] * bool(other)
    )
    raise VlmgridError(
        f"predictions file {path} {said} of {bench.kind.name}, whose headline is the mean over "
        f"{', '.join(sorted(closest))}; a part of them is never scored as the whole: {hint}"
    )


def applicable_items(
    bench, strategy: str | None, records: pd.DataFrame, predictions: pd.DataFrame, coverage: dict | None
) -> tuple[pd.DataFrame, pd.DataFrame, dict | None]:
    """The records and predictions left once the items the strategy cannot answer at all (its protocol's
    scope) are taken out, and the coverage that says so ({answered, total, reason}); as given when it can
    answer them all. An item it cannot answer is not applicable, never a wrong answer."""
    from vlmgrid.protocols import PROTOCOLS

    scope = PROTOCOLS.get(bench.kind.protocol).scopes.get(strategy or "")
    if scope is None:
        return records, predictions, coverage
    keep = [bool(flag) for flag in scope.applies(records)]
    if all(keep):
        return records, predictions, coverage
    subset = records[keep].reset_index(drop=True)
    answered = predictions["id"].astype(str).isin(set(subset["id"].astype(str)))
    total = coverage["total"] if coverage is not None else int(len(bench.records))
    return (
        subset,
        predictions[answered].reset_index(drop=True),
        {"answered": int(len(subset)), "total": int(total), "reason": scope.reason},
    )


def partial_copy(bench) -> dict | None:
    """The prepared copy's item count beside the published benchmark's, where the copy holds fewer (score-JSON
    `partial_copy`: {items, published_items, source}): a fixture's generated stand-ins, or a copy whose
    source's `expected_items` lets it hold fewer. The report marks every number scored on it. None for a whole
    copy (a published variant's count included) or a kind without a published count (DANCE)."""
    published = bench.kind.variants.get(bench.manifest.get("variant"), bench.kind.expected_count)
    # A copy of a published variant's count is that variant, whether its source's `expected_items` named the
    # count (the manifest then names no variant) or the count alone told it
    if not published or len(bench.records) >= published or len(bench.records) in bench.kind.variants.values():
        return None
    source = bench.manifest.get("source")
    return {
        "items": int(len(bench.records)),
        "published_items": int(published),
        "source": source.get("type") if isinstance(source, dict) else None,
    }


def copy_words(copy: dict | None) -> str:
    """ ", a copy of 24 of the benchmark's 2,374 items" for a log line ("" for a whole copy)."""
    if copy is None:
        return ""
    if copy["source"] == "fixture":
        return (
            f", a fixture: {copy['items']:,} items standing in for the benchmark's "
            f"{copy['published_items']:,}"
        )
    return f", a copy of {copy['items']:,} of the benchmark's {copy['published_items']:,} items"


def score_cell(
    *,
    model_name: str,
    bench_dir: Path,
    predictions_path: Path,
    out_path: Path,
    samples: int,
    seed: int,
    given: bool = False,
) -> dict:
    """`given`: the predictions file is one the user named (`--predictions`), not the grid's own: an error
    about it says how to fix the file, not to rerun inference."""
    from vlmgrid.benchmarks import load_benchmark
    from vlmgrid.metrics import METRICS, score_predictions

    bench = load_benchmark(bench_dir)
    hint = GIVEN_HINT if given else f"rerun `vlmgrid infer {model_name} {bench.name}` to rebuild it"
    predictions = read_predictions(predictions_path, hint, given)
    metadata = read_metadata(predictions_path)
    metric = METRICS.get(bench.kind.metric)
    inputs = {
        "data_fingerprint": bench.manifest.get("fingerprint"),
        "predictions_sha256": sha256_file(predictions_path),
    }
    reason = recorded_not_applicable(metadata)
    if reason is not None:
        if len(predictions):
            raise VlmgridError(
                f"predictions file {predictions_path} is marked not applicable but holds {len(predictions)} "
                f"rows; {hint}"
            )
        # No numbers: the model cannot run this benchmark, and the report shows the cell as n/a.
        score = {
            "model": model_name,
            "benchmark": bench.name,
            "applicable": False,
            "reason": reason,
            "metric": metric.headline,
            "strategy": None,
            "inputs": inputs,
            "vlmgrid_version": __version__,
            "code_version": running_version(),
        }
        write_json(out_path, score)
        return score
    check_data_fingerprint(metadata, bench.manifest.get("fingerprint"), predictions_path, hint)
    records, coverage = answered_records(metadata, predictions, bench.records, predictions_path)
    check_against_records(predictions, records, predictions_path, given, len(bench.classes or []))
    check_variants(bench, predictions, predictions_path, hint)
    records, predictions, coverage = applicable_items(
        bench, metadata.get("strategy"), records, predictions, coverage
    )
    if not len(records):
        # not one item the strategy can answer: the cell has no number, as one whose model cannot run it
        score = {
            "model": model_name,
            "benchmark": bench.name,
            "applicable": False,
            "reason": coverage["reason"],
            "metric": metric.headline,
            "strategy": metadata.get("strategy"),
            "inputs": inputs,
            "vlmgrid_version": __version__,
            "code_version": running_version(),
        }
        write_json(out_path, score)
        return score
    # The items the file answers, when it answers a subset by construction (an MME eval-tool folder).
    covered = {} if coverage is None else {"coverage": coverage}
    # The copy it was scored on, when that holds fewer items than the published benchmark.
    copy = partial_copy(bench)
    copied = {} if copy is None else {"partial_copy": copy}
    # How the answers were obtained (likelihood, generate, embed) and with which decoding, so a table can say.
    answered = {
        "strategy": metadata.get("strategy"),
        "generation": _generation(metadata),
        **_answerer(metadata),
    }
    if metadata.get("fallback"):  # answer_mode auto answered another way than the entry asked first
        answered["fallback"] = metadata["fallback"]
    if isinstance(metadata.get("invariance"), dict):  # the batch check's result, as inference recorded it
        answered["invariance"] = metadata["invariance"]
    try:
        result = score_predictions(
            bench.kind.metric,
            records,
            predictions,
            breakdown_by=bench.kind.breakdown_by,
            samples=samples,
            seed=seed,
        )
    except LabelsHidden as hidden:
        # No numbers either: the leaderboard scores the submission tables, and the report shows "hidden".
        score = {
            "model": model_name,
            "benchmark": bench.name,
            "applicable": True,
            "labels_hidden": True,
            "reason": str(hidden),
            "metric": metric.headline,
            "n": int(len(records)),
            **covered,
            "submission": _write_submission(metric, records, predictions, out_path, hidden),
            **answered,
            "inputs": inputs,
            "vlmgrid_version": __version__,
            "code_version": running_version(),
        }
        write_json(out_path, score)
        return score
    lenient = _lenient_figure(bench, records, metric, predictions, samples, seed)
    if lenient is not None:
        # A second, named figure: the headline stays the authors' reading.
        result["metrics"][lenient["metric"]] = {"value": lenient["value"], "ci95": lenient["ci95"]}
        result["lenient"] = lenient
    tool = _tool_figure(bench, metadata, records, predictions, samples, seed, str(predictions_path))
    if tool is not None:  # the tool's own reading, beside the headline, never in its place
        result["tool_reading"] = tool
    score = {
        "model": model_name,
        "benchmark": bench.name,
        "applicable": True,
        **result,
        **covered,
        **copied,
        **answered,
        "inputs": inputs,
        "vlmgrid_version": __version__,
        "code_version": running_version(),
    }
    write_json(out_path, score)
    return score
