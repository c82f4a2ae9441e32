"""The batch check: a cell's answers must not depend on the batch they were computed in.

Batched inference pads the shorter prompts of a batch; done wrong (padding on the side the model reads its
next token from, absolute positions counted over the padding, an attention mask dropped on the way) the
answer to an item changes with its neighbours, which no score shows. The trackers of the common evaluation
harnesses hold many reports of it (numbers that move with the batch size, generations that go wrong only at
batch sizes above 1). So after the batched run a fixed, seeded sample of the cell's items (`infer.
invariance_items`, default 32; 0 turns the check off) is answered again one request at a time, through the
same protocol and model, and compared with the batched rows: the same answer text and chosen option, and, for
likelihood scoring, the largest difference of a log-probability (recorded, not judged: the batch size
changes the order of floating-point sums, so scores move in their last digits without any bug).

The check costs at most a tenth of the cell's answering (`SHARE`): the sample takes items in a seeded order
while their cost answered alone stays within a tenth of the cell's model requests, counted as the job counts
them (the requests that take a pass of their own). A request sent alone uses a GPU far less than one in a
batch, so each item's requests are weighted by how much longer they take alone (the plan's throughput table:
a letter forward 1.4x, a 16-token answer 27x; vlmgrid.stages.cost.check_costs). A small copy checks fewer
items (an 18-item Caltech-101 copy: one), and a copy in which one item alone costs more than the share checks
none (`skipped`, saying so). Within an item its requests go one at a time, which is what a batch can change (a
prompt padded to its neighbours'); the options scored on one request's prefix are chunked as in the batched
run (they follow their own tokens, where no pad reaches them).

The result goes into the predictions file's metadata and from there into the score file (`invariance`,
docs/formats.md); the report marks a cell with a differing item. The functions here are pure: the infer
stage answers, these draw the sample and compare.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence

import numpy as np

SHARE = 10  # the check costs at most 1/SHARE of the cell's answering


def sample_positions(
    benchmark: str, requests: Sequence[int], k: int, costs: Sequence[float] | None = None
) -> list[int]:
    """The record positions of the check's sample, in record order: records taken in an order drawn with a
    seed made from the benchmark's name, up to `k` of them, while their `costs` answered alone (each record's,
    in batched requests' time; its `requests` when None) stay within 1/SHARE of the cell's `requests` (each
    record's, as the job counts them). Every model of a benchmark that asks the same requests at the same
    costs (and every shard of a cell, which passes the whole benchmark's) checks the same items, run after
    run; the plan counts the check's requests from the same positions."""
    total = sum(requests)
    costs = requests if costs is None else costs
    if k <= 0 or not len(requests):
        return []
    seed = int.from_bytes(hashlib.sha256(f"invariance\0{benchmark}".encode()).digest()[:8], "big")
    chosen, spent = [], 0.0
    for position in np.random.default_rng(seed).permutation(len(requests)):
        if len(chosen) == k or (spent + costs[position]) * SHARE > total:
            break
        chosen.append(int(position))
        spent += costs[position]
    return sorted(chosen)


def too_small(requests: Sequence[int]) -> str:
    """Why a cell with records has no sample: its first item answered alone costs more than the check's
    share."""
    return (
        f"the copy is too small for a sample: one item answered alone costs more than a tenth of the cell's "
        f"{sum(requests)} requests in a batch ({len(requests)} items)"
    )


def _key(row: dict) -> tuple[str, str]:
    return str(row["id"]), str(row["variant"])


def _same(one: dict, other: dict) -> bool:
    """The same answer: the same error (or none), text, chosen option and, for generation, raw text."""
    return all(
        one.get(field) == other.get(field) for field in ("error", "raw", "prediction", "prediction_index")
    )


def _delta(one: dict, other: dict) -> float | None:
    """The largest |difference| between two rows' option scores; None when either has none to compare."""
    first, second = one.get("scores"), other.get("scores")
    if first is None or second is None or len(first) != len(second) or not len(first):
        return None
    deltas = [abs(a - b) for a, b in zip(first, second) if math.isfinite(a) and math.isfinite(b)]
    return max(deltas) if deltas else None


def compare(
    batched: Sequence[dict], single: Sequence[dict], ids: Sequence[str], batch_size: int | None
) -> dict:
    """The check's result (score-JSON `invariance`) for the items `ids` (in sample order): `batched` are their
    rows from the cell's run, `single` the same items answered one at a time; an item differs when any of its
    variants does, or a row is in one answer and not the other."""
    by_key = {_key(row): row for row in batched}
    again = {_key(row): row for row in single}
    differing, deltas = [], []
    for item in ids:
        keys = {key for key in by_key if key[0] == item} | {key for key in again if key[0] == item}
        same = bool(keys)
        for key in sorted(keys):
            one, other = by_key.get(key), again.get(key)
            if one is None or other is None or not _same(one, other):
                same = False
            elif (delta := _delta(one, other)) is not None:
                deltas.append(delta)
        if not same:
            differing.append(item)
    return {
        "checked": len(ids),
        "same": len(ids) - len(differing),
        "differing": differing,
        "max_logprob_delta": max(deltas) if deltas else None,
        "batch_size": batch_size,
    }


def skipped(reason: str) -> dict:
    """The result of a cell whose model does not batch its requests: nothing to check, and why."""
    return {
        "checked": 0,
        "same": 0,
        "differing": [],
        "max_logprob_delta": None,
        "batch_size": None,
        "skipped": reason,
    }


def merge(results: Iterable[dict]) -> dict | None:
    """The shards' results as one (their items, in shard order); None when no shard recorded a check."""
    results = [result for result in results if result is not None]
    if not results:
        return None
    reasons = [result["skipped"] for result in results if result.get("skipped")]
    if reasons:
        return skipped(reasons[0])
    deltas = [r["max_logprob_delta"] for r in results if r.get("max_logprob_delta") is not None]
    sizes = [r["batch_size"] for r in results if r.get("batch_size") is not None]
    return {
        "checked": sum(r["checked"] for r in results),
        "same": sum(r["same"] for r in results),
        "differing": [item for r in results for item in r["differing"]],
        "max_logprob_delta": max(deltas) if deltas else None,
        "batch_size": max(sizes) if sizes else None,
    }


def differs(result: dict | None) -> bool:
    """Whether a recorded check found an item whose answer depends on the batch."""
    return bool(result) and bool(result.get("differing"))
