"""The inspect stage: one benchmark's items and the grid models' answers ->
`results/inspect/<bench>/index.html`.

It reads the prepared records (`data/<bench>/records.parquet`; classification: the class names) and the
predictions file of every model of the grid on the benchmark, judges each answer by the benchmark's rule at
item level (`ITEM_RULES`, one per metric: the answer equals the gold one, a soft score for VQA and DANCE, a
format error shown as such) and hands the rows to the page builder (`vlmgrid.report.inspect_page`). Each item
shows what its prompt showed: the question, the options, and the record fields the protocol's prompt adds
(`Protocol.prompt_fields`: MMBench's and ScienceQA's context).

A model that cannot run the benchmark (its predictions file is marked not applicable) is said once on the
page. A predictions file that is missing, stale or does not fit the records stops the stage with one sentence:
the page never shows an answer that was not given.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vlmgrid import paths
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import write_text
from vlmgrid.images import ImageError, open_rgb
from vlmgrid.predictions import (
    answered_records,
    check_against_records,
    check_data_fingerprint,
    read_metadata,
    read_predictions,
    recorded_not_applicable,
)
from vlmgrid.protocols.base import shown_text
from vlmgrid.registry import Registry
from vlmgrid.report.inspect_page import (
    FORMAT_ERROR,
    NO_GOLD,
    PARTIAL,
    RIGHT,
    WRONG,
    Answer,
    InspectPage,
    Item,
    option_label,
    render_page,
)
from vlmgrid.report.labels import counted

log = logging.getLogger(__name__)

DEFAULT_MAX_ITEMS = 500
THUMBNAIL_PX = 160
THUMBNAIL_QUALITY = 80


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _text(value: Any) -> str | None:
    return None if _is_null(value) else str(value)


def _index(value: Any) -> int:
    return -1 if _is_null(value) else int(value)


def _strings(values: Any) -> list[str]:
    """A list column's value (an array, a list, or null) as strings."""
    return (
        [] if values is None or _is_null(values) else [str(value) for value in values if not _is_null(value)]
    )


# ------------------------------------------------------------------------------------------ item rules


class IndexRule:
    """Multiple choice and classification: right when the chosen option (class) index is the gold one."""

    rule = "An answer is right when the option it reads as is the gold option."

    def __init__(self, name: str, labels: str = "letters", rule: str = "") -> None:
        self.name = name  # the metric it judges for
        self.labels = labels  # how the page labels the options (inspect_page.option_label)
        self.rule = rule or self.rule

    def gold(self, record: dict) -> str:
        index = _index(record["answer_index"])
        if index < 0:
            return _text(record["answer"]) or "hidden"
        return self._option(index, str(record["answer"]))

    def _option(self, index: int, text: str) -> str:
        return option_label(index, self.labels) + text

    def judge(self, record: dict, row: dict) -> tuple[str, str]:
        gold = _index(record["answer_index"])
        if gold < 0:
            return NO_GOLD, ""
        return (RIGHT if _index(row["prediction_index"]) == gold else WRONG), ""

    def reading(self, row: dict) -> str | None:
        text, index = _text(row["prediction"]), _index(row["prediction_index"])
        return self._option(index, text) if text is not None and index >= 0 else text

    def key(self, row: dict) -> Any:
        return _index(row["prediction_index"])


class YesNoRule(IndexRule):
    """POPE, MME: right when the answer reads as the gold "yes" or "no" (case-insensitive)."""

    rule = 'An answer is right when it reads as the gold "yes" or "no"; anything else is a format error.'

    def __init__(self, name: str) -> None:
        super().__init__(name, labels="none")

    def gold(self, record: dict) -> str:
        return str(record["answer"])

    def judge(self, record: dict, row: dict) -> tuple[str, str]:
        said = (_text(row["prediction"]) or "").strip().lower()
        return (RIGHT if said == str(record["answer"]).strip().lower() else WRONG), ""

    def reading(self, row: dict) -> str | None:
        return _text(row["prediction"])

    def key(self, row: dict) -> Any:
        return (_text(row["prediction"]) or "").strip().lower()


class VqaRule(YesNoRule):
    """TextVQA: the VQA soft score of the normalised answer against the ten human answers."""

    rule = (
        "An answer scores min(1, matching human answers / 3), averaged over the ten leave-one-out subsets "
        "(the VQA rule): 1 is right, 0 wrong, in between partly right."
    )

    def __init__(self) -> None:
        super().__init__("vqa_accuracy")

    def gold(self, record: dict) -> str:
        answers = _strings(record.get("answers"))
        counts = (
            pd.Series(answers, dtype=object).value_counts(sort=True) if answers else pd.Series(dtype=object)
        )
        listed = ", ".join(f"{answer} ×{n}" if n > 1 else str(answer) for answer, n in counts.items())
        return f"{record['answer']} (human answers: {listed})" if listed else str(record["answer"])

    def judge(self, record: dict, row: dict) -> tuple[str, str]:
        from vlmgrid.metrics.vqa import vqa_score
        from vlmgrid.metrics.vqa_normalise import normalise_answer

        gold = [normalise_answer(answer) for answer in _strings(record.get("answers"))]
        score = vqa_score(normalise_answer(_text(row["prediction"]) or ""), gold)
        return _soft(score), f"VQA score {score:.2f}"

    def key(self, row: dict) -> Any:
        from vlmgrid.metrics.vqa_normalise import normalise_answer

        return normalise_answer(_text(row["prediction"]) or "")


class RankingRule(IndexRule):
    """DANCE: the query's Acc@50, the share of its n positives that the model ranks within its top n."""

    rule = (
        "A query's answer is its ranking of the candidates: the share of its n positives ranked within the "
        "top n (Acc@50) is 1 right, 0 wrong, in between partly right; the reading is the candidate ranked "
        "first."
    )

    def __init__(self) -> None:
        super().__init__("dance", labels="numbers")

    def gold(self, record: dict) -> str:
        positives = [int(i) for i in record["positives"]]
        return (
            f"positives: {', '.join(f'#{i + 1}' for i in positives)} ({len(positives)} of "
            f"{len(record['options'])})"
        )

    def judge(self, record: dict, row: dict) -> tuple[str, str]:
        from vlmgrid.metrics.dance import rank_query

        score = rank_query(row["scores"], record["positives"])["acc_at_50"]
        return _soft(score), f"Acc@50 {score:.2f}"


def _soft(score: float) -> str:
    return RIGHT if score >= 1.0 else WRONG if score <= 0.0 else PARTIAL


ITEM_RULES: Registry[IndexRule] = Registry(
    "item rule",
    [
        IndexRule(
            "classification",
            labels="none",
            rule="An answer is right when the class it reads as (its top-1) is the gold class.",
        ),
        IndexRule("accuracy"),
        IndexRule("mmbench_circular"),
        IndexRule("cvbench"),
        IndexRule("mmvp"),
        IndexRule("kaleidoscope"),
        IndexRule("cvqa"),
        YesNoRule("pope"),
        YesNoRule("mme"),
        VqaRule(),
        RankingRule(),
    ],
)


# ------------------------------------------------------------------------------------------ the stage


def prompt_context(fields: Sequence[tuple[str, str]], record: dict) -> list[tuple[str, str]]:
    """(label, text) of each of the prompt's `fields` that the record has: what the model read beside the
    question."""
    shown = ((label, shown_text(record.get(column))) for column, label in fields)
    return [(label, text) for label, text in shown if text is not None]


def sample_positions(n: int, max_items: int, seed: int) -> np.ndarray:
    """The record positions on the page: all of them, or `max_items` drawn with the seed, in records order."""
    if n <= max_items:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_items, replace=False))


def thumbnail(path: Path) -> tuple[str | None, str]:
    """(a JPEG data URI at most THUMBNAIL_PX on a side, "") or (None, why there is none)."""
    try:
        image = open_rgb(path)
    except ImageError as exc:
        return None, f"image unreadable: {exc}"
    image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=THUMBNAIL_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"), ""


def _read_model(config: Config, model: str, bench) -> pd.DataFrame | str:
    """The model's prediction rows, or the reason it cannot run the benchmark (a not-applicable file); a file
    that answers a subset by construction (its metadata's `coverage`) holds rows for its answered items
    only."""
    path = paths.predictions_path(config.results_dir, model, bench.name)
    hint = f"run `vlmgrid infer {model} {bench.name}` (or snakemake) to make it"
    predictions = read_predictions(path, hint)
    metadata = read_metadata(path)
    reason = recorded_not_applicable(metadata)
    if reason is not None:
        return reason
    check_data_fingerprint(metadata, bench.manifest.get("fingerprint"), path, hint)
    records, coverage = answered_records(metadata, predictions, bench.records, path)
    check_against_records(predictions, records, path, classes=len(bench.classes or []))
    predictions.attrs["coverage"] = coverage
    # the batch check's items whose answers changed one at a time (the page can filter them)
    check = metadata.get("invariance")
    predictions.attrs["batch_dependent"] = (
        [str(item) for item in check.get("differing") or []] if isinstance(check, dict) else []
    )
    return predictions


def _answers(
    rule: IndexRule, metric, records: pd.DataFrame, predictions: pd.DataFrame, prompts: dict | None = None
) -> tuple[dict[str, list[Answer]], dict[str, frozenset]]:
    """For the items of `records`: {item id: its answers, one per variant, with what the model was handed
    (`prompts`, by item and variant)} and {item id: its readings over the variants}; a format error is no
    reading (a failure is not an answer to disagree with)."""
    prompts = prompts or {}
    variants = predictions["variant"].fillna("default").astype(str)
    answers: dict[str, list[Answer]] = {str(item_id): [] for item_id in records["id"]}
    keys: dict[str, set] = {str(item_id): set() for item_id in records["id"]}
    answered = records[
        records["id"].isin(set(predictions["id"]))
    ]  # a partial cell's others: no answer at all
    for variant in sorted(variants.unique()):
        rows = predictions[variants == variant].set_index("id").reindex(answered["id"]).reset_index()
        valid = metric.valid(answered, rows)  # the metric's own test of a format error
        for record, row, ok in zip(answered.to_dict("records"), rows.to_dict("records"), valid):
            item_id = str(record["id"])
            if ok:
                verdict, note = rule.judge(record, row)
                keys[item_id].add(rule.key(row))
            else:
                verdict = FORMAT_ERROR
                note = _text(row["error"]) or (
                    "nothing was read from the output"
                    if _is_null(row["prediction"])
                    else "not an answer the rule reads"
                )
            answers[item_id].append(
                Answer(
                    variant=variant,
                    raw=_text(row["raw"]),
                    reading=rule.reading(row),
                    verdict=verdict,
                    note=note,
                    prompt=prompts.get((item_id, variant)),
                )
            )
    return answers, {item_id: frozenset(readings) for item_id, readings in keys.items()}


def model_prompts(config: Config, model: str, bench, records: pd.DataFrame) -> tuple[dict, str | None]:
    """({(item id, variant): what the model was handed}, None), as `vlmgrid inputs` shows it, for the page's
    items; or ({}, why the page shows none) where the model's processor cannot be read here (its weights were
    fetched elsewhere); a model sent no prompt (it embeds) or reading none (a baseline) has none to show."""
    from vlmgrid.stages.inputs import SentNoPrompt, shown_prompts

    try:
        return shown_prompts(config, model, bench.name, bench, records), None
    except SentNoPrompt:
        return {}, None
    except VlmgridError as exc:
        return {}, f"{model}: the prompts are not shown ({exc})."


def build_page(
    config: Config, benchmark: str, *, max_items: int = DEFAULT_MAX_ITEMS, seed: int = 0
) -> InspectPage:
    """The page's rows: the sampled items, each with every applicable model's answers judged by the rule."""
    from vlmgrid.benchmarks import load_benchmark
    from vlmgrid.metrics import METRICS
    from vlmgrid.protocols import PROTOCOLS

    models = [cell.model for cell in config.cells if cell.benchmark == benchmark]
    if not models:
        raise VlmgridError(
            f'benchmark "{benchmark}" is not in the grid (grid.benchmarks: '
            f"{', '.join(config.benchmarks)}); inspect one of those, or add it to the grid"
        )
    if max_items < 1:
        raise VlmgridError(f"--max-items must be at least 1, got {max_items}")
    bench = load_benchmark(paths.bench_dir(config.data_dir, benchmark))
    rule, metric = ITEM_RULES.get(bench.kind.metric), METRICS.get(bench.kind.metric)
    prompt_fields = PROTOCOLS.get(bench.kind.protocol).prompt_fields
    records = bench.records.reset_index(drop=True)
    read = {model: _read_model(config, model, bench) for model in models}
    batch_dependent = {
        model: set(predictions.attrs["batch_dependent"])
        for model, predictions in read.items()
        if not isinstance(predictions, str) and predictions.attrs["batch_dependent"]
    }
    positions = sample_positions(len(records), max_items, seed)
    # The items whose answers depend on the batch are always on the page, so its filter finds every one.
    flagged = set().union(*batch_dependent.values()) if batch_dependent else set()
    extra = sorted(set(np.flatnonzero(records["id"].astype(str).isin(flagged))) - set(positions.tolist()))
    shown = records.iloc[np.sort(np.concatenate([positions, np.array(extra, dtype=int)]))].reset_index(
        drop=True
    )

    answers, keys, not_applicable, partial, notes = {}, {}, {}, [], []
    for model in models:
        predictions = read[model]
        if isinstance(predictions, str):
            not_applicable[model] = predictions
            continue
        coverage = predictions.attrs.get("coverage")
        if coverage is not None:
            partial.append(f"{model}: {coverage['answered']:,} of {coverage['total']:,} answered")
        predictions = predictions[predictions["id"].isin(set(shown["id"]))]
        prompts, unshown = model_prompts(config, model, bench, shown)
        if unshown:
            notes.append(unshown)
        answers[model], keys[model] = _answers(rule, metric, shown, predictions, prompts)

    thumbnails: dict[str, tuple[str | None, str]] = {}
    items = []
    for record in shown.to_dict("records"):
        item_id, image = str(record["id"]), _text(record["image"])
        if image is None:
            thumbnails.setdefault("", (None, "text only"))
        elif image not in thumbnails:
            thumbnails[image] = thumbnail(bench.image_path(image))
        uri, image_note = thumbnails[image or ""]
        readings = {keys[model][item_id] for model in answers if keys[model][item_id]}
        items.append(
            Item(
                item_id=item_id,
                thumbnail=uri,
                image_note=image_note,
                context=prompt_context(prompt_fields, record),
                question=str(record["question"] or ""),
                options=[str(option) for option in record["options"]],
                labels=rule.labels,
                gold=rule.gold(record),
                answers={model: answers[model][item_id] for model in answers},
                disagree=len(readings) > 1,
                batch=tuple(model for model in answers if item_id in batch_dependent.get(model, ())),
            )
        )

    if partial:
        notes.append(
            f"{'; '.join(partial)} (a published answer file that lacks the others by construction): an "
            f'item it did not answer reads "not answered" here, and its scores leave the item out.'
        )
    verdicts = {answer.verdict for item in items for given in item.answers.values() for answer in given}
    if verdicts and verdicts <= {NO_GOLD, FORMAT_ERROR}:
        notes.append(
            "The gold answers are hidden (a leaderboard's test copy): no answer is right or wrong here."
        )
    sample_note = ""
    if len(shown) < len(records):
        added = f" and the {len(extra)} other item(s) whose answers depend on the batch" if extra else ""
        sample_note = (
            f"This page shows {len(shown)} of the {len(records)} items: a sample drawn with seed "
            f"{seed}{added}, in records order (`vlmgrid inspect {benchmark} --max-items N --seed S` draws "
            "another)."
        )
    if batch_dependent:
        listed = "; ".join(f"{model}: {len(ids)}" for model, ids in batch_dependent.items())
        notes.append(
            f"Answers that depend on the batch (the batch check answered these items again one at a time "
            f'and got other answers): {listed}; the filter "answers depend on the batch" shows them.'
        )
    return InspectPage(
        benchmark=benchmark,
        kind=bench.kind.name,
        metric=metric.headline,
        rule=rule.rule,
        models=[model for model in models if model in answers],
        not_applicable=not_applicable,
        batch_filter=bool(batch_dependent),
        items=items,
        n_items=len(records),
        sample_note=sample_note,
        notes=notes,
    )


def inspect_benchmark(
    config: Config, benchmark: str, *, max_items: int = DEFAULT_MAX_ITEMS, seed: int = 0
) -> Path:
    """`vlmgrid inspect`: write the benchmark's page (atomically) and return its path."""
    page = build_page(config, benchmark, max_items=max_items, seed=seed)
    out = paths.inspect_page_path(config.results_dir, benchmark)
    write_text(out, render_page(page))
    log.info(
        f"wrote {out} ({len(page.items)} of {counted(page.n_items, 'item')}, "
        f"{counted(len(page.models), 'model')})"
    )
    return out
