"""The batch check: a sample of each cell's items answered again one at a time must match its batched answers.

A tiny LLaVA padded on the wrong side (`padding_side: right`, the known bug of batched decoder-only inference)
must be flagged in its score file, the main table, the cells table, the report's HTML table and the inspect
page; the same model padded on the left (the default grid's) must not; with the check off nothing changes.
"""

from __future__ import annotations

import copy
import json

import pyarrow.parquet as pq
import pytest

from vlmgrid import paths
from vlmgrid.cellrun import invariance
from vlmgrid.cellrun.cell import Cell
from vlmgrid.config import validate_config
from vlmgrid.report import build_report
from vlmgrid.report.tables.format import BATCH_MARK
from vlmgrid.stages import infer as infer_module
from vlmgrid.stages.fetch import fetch_model
from vlmgrid.stages.prepare import prepare_benchmark
from vlmgrid.stages.score import score_grid_cell

BENCH = "scienceqa-fixture"  # questions of different lengths: a batch pads most of them


# --- the pure parts -----------------------------------------------------------------------------------------


def test_the_sample_is_fixed_seeded_and_at_most_the_items():
    first = invariance.sample_positions("pope-fixture", [1] * 900, 32)
    assert first == invariance.sample_positions("pope-fixture", [1] * 900, 32) == sorted(set(first))
    assert len(first) == 32 and all(0 <= p < 900 for p in first)
    assert first != invariance.sample_positions("mme-fixture", [1] * 900, 32)
    assert invariance.sample_positions("pope-fixture", [1] * 900, 0) == []


def test_the_sample_asks_at_most_a_tenth_of_the_cells_requests():
    # 90 items: 9 of them; 18 classification items of 20 requests each (360): one, as 2 would ask 40
    assert len(invariance.sample_positions("pope-fixture", [1] * 90, 32)) == 9
    assert len(invariance.sample_positions("caltech101", [20] * 18, 32)) == 1
    assert invariance.sample_positions("caltech101", [20] * 9, 32) == []  # too small a copy: no item fits
    # items of varying requests: taken in the seeded order while the sum stays within the tenth
    requests = [1, 50, 2, 3, 1, 40, 1, 1, 2, 5] * 10
    sample = invariance.sample_positions("dance", requests, 32)
    assert sample and sum(requests[p] for p in sample) * 10 <= sum(requests)
    # a sample within the tenth is the same whatever k above its size, and a prefix of it below
    assert invariance.sample_positions("pope-fixture", [1] * 90, 100) == invariance.sample_positions(
        "pope-fixture", [1] * 90, 9
    )
    assert set(invariance.sample_positions("pope-fixture", [1] * 90, 4)) <= set(
        invariance.sample_positions("pope-fixture", [1] * 90, 9)
    )


def test_the_sample_weighs_each_item_by_its_cost_answered_alone():
    # 90 letter questions, each answered alone at 1.5x a batched forward's time: 6 fit the tenth (9), not 9
    assert len(invariance.sample_positions("pope-fixture", [1] * 90, 32, [1.5] * 90)) == 6
    # 12 short answers, each 27x alone: none fits 1.2 requests' time
    assert invariance.sample_positions("textvqa-fixture", [1] * 12, 32, [27.0] * 12) == []
    # varying costs: the sum of the sample's costs stays within the tenth of the requests
    requests = [1, 2, 1, 3] * 50
    costs = [1.4, 30.0, 1.4, 4.2] * 50
    sample = invariance.sample_positions("dance", requests, 32, costs)
    assert sample and sum(costs[p] for p in sample) * 10 <= sum(requests)
    assert len(sample) < len(invariance.sample_positions("dance", requests, 32))


def _row(item_id, variant="default", raw=None, index=0, scores=None, error=None):
    return {
        "id": item_id,
        "variant": variant,
        "raw": raw,
        "prediction": None if error else str(index),
        "prediction_index": index,
        "scores": scores,
        "topk": None,
        "error": error,
    }


def test_compare_names_the_items_whose_answer_changed():
    batched = [
        _row("a", scores=[-1.0, -2.0]),
        _row("b", raw="yes"),
        _row("c", variant="v1", index=1),
        _row("c", variant="v2", index=0),
    ]
    single = [
        _row("a", scores=[-1.0 + 1e-6, -2.0]),
        _row("b", raw="yes, it is"),
        _row("c", variant="v1", index=1),
        _row("c", variant="v2", index=1),
    ]
    result = invariance.compare(batched, single, ["a", "b", "c"], 16)
    assert result == {
        "checked": 3,
        "same": 1,
        "differing": ["b", "c"],
        "max_logprob_delta": pytest.approx(1e-6),
        "batch_size": 16,
    }
    # a score that moves in its last digits is recorded, never a difference; a missing row is one
    assert invariance.compare(batched[:1], [], ["a"], 1)["differing"] == ["a"]


def test_shards_merge_into_the_unsharded_result():
    one = {"checked": 2, "same": 1, "differing": ["x"], "max_logprob_delta": 0.5, "batch_size": 8}
    two = {"checked": 3, "same": 3, "differing": [], "max_logprob_delta": None, "batch_size": 8}
    assert invariance.merge([one, two]) == {
        "checked": 5,
        "same": 4,
        "differing": ["x"],
        "max_logprob_delta": 0.5,
        "batch_size": 8,
    }
    assert invariance.merge([]) is None


# --- a broken and a sound model -----------------------------------------------------------------------------


def _config(small_config, check_items=8):
    data = copy.deepcopy(small_config)
    data["infer"] = {"part_size": 64, "threads": 1, "invariance_items": check_items}
    data["benchmarks"] = {BENCH: data["benchmarks"][BENCH]}
    data["models"] = {
        "llava-tiny": data["models"]["llava-tiny"],
        "llava-right": {**data["models"]["llava-tiny"], "padding_side": "right"},
    }
    data["grid"] = {"models": ["llava-tiny", "llava-right"], "benchmarks": [BENCH]}
    config = validate_config(data)
    prepare_benchmark(BENCH, config.benchmark(BENCH), paths.bench_dir(config.data_dir, BENCH))
    return config


def _infer(config, model):
    fetch_model(model, config.model(model), paths.model_dir(config.data_dir, model))
    return infer_module.run_inference(
        model_settings=config.model(model),
        bench_dir=paths.bench_dir(config.data_dir, BENCH),
        model_dir=paths.model_dir(config.data_dir, model),
        cell=Cell.in_results(config.results_dir, model, BENCH),
        part_size=64,
        threads=1,
        progress=False,
        check_items=int(config.infer["invariance_items"]),
    )


@pytest.fixture
def checked_grid(small_config):
    config = _config(small_config)
    for model in config.models:
        _infer(config, model)
        score_grid_cell(config, model, BENCH)
    return config


def _score(config, model):
    return json.loads(paths.score_path(config.results_dir, model, BENCH).read_text())


def test_right_padding_is_flagged_and_left_padding_is_not(checked_grid):
    broken, sound = (
        _score(checked_grid, "llava-right")["invariance"],
        _score(checked_grid, "llava-tiny")["invariance"],
    )
    # 8 asked, 2 checked: a tenth of the fixture's 40 questions' time, each answered alone at 1.4x a batched
    # forward's (the plan's throughput table)
    assert broken["checked"] == 2 and broken["differing"] and broken["same"] + len(broken["differing"]) == 2
    assert broken["batch_size"] == 16
    assert sound == {**sound, "checked": 2, "same": 2, "differing": [], "batch_size": 16}
    assert sound["max_logprob_delta"] < 1e-3  # float noise of another batch shape, nothing more


def test_the_tables_and_the_report_mark_the_broken_cell(checked_grid, tmp_path):
    files = {
        (model, BENCH): paths.score_path(checked_grid.results_dir, model, BENCH)
        for model in checked_grid.models
    }
    out = tmp_path / "report"
    build_report(files, list(checked_grid.models), [BENCH], out / "tables", out / "figures")
    main = (out / "tables" / "main.md").read_text(encoding="utf-8")
    broken_row = next(line for line in main.splitlines() if line.startswith("| llava-right"))
    sound_row = next(line for line in main.splitlines() if line.startswith("| llava-tiny"))
    assert BATCH_MARK in broken_row and BATCH_MARK not in sound_row
    assert f"{BATCH_MARK}: answers depend on the batch" in main and "llava-right on scienceqa-fixture" in main
    assert BATCH_MARK in (out / "tables" / "main.html").read_text(encoding="utf-8")  # the Snakemake report's
    assert r"$^{\neq}$" in (out / "tables" / "main.tex").read_text(encoding="utf-8")
    cells = (out / "tables" / "cells.csv").read_text(encoding="utf-8").splitlines()
    assert cells[0].endswith("batch_checked,batch_differing,batch_dependent")
    assert cells[1].endswith(",2,0,False") and cells[2].split(",")[-1] == "True"
    assert "differ" + BATCH_MARK in (out / "tables" / "cells.md").read_text(encoding="utf-8")


def test_the_inspect_page_filters_the_batch_dependent_items(checked_grid):
    from vlmgrid.report.inspect_page import render_page
    from vlmgrid.stages.inspect import build_page

    page = build_page(checked_grid, BENCH, max_items=4)
    differing = set(_score(checked_grid, "llava-right")["invariance"]["differing"])
    assert {item.item_id for item in page.items if item.batch} == differing  # every one is on the page
    assert all(item.batch == ("llava-right",) for item in page.items if item.batch)
    html = render_page(page)
    assert '<option value="batch">answers depend on the batch</option>' in html
    assert html.count('data-batch="1"') == len(differing)


def _counting(monkeypatch) -> dict:
    """{"run": Counter, "check": Counter} of what the hf backend is sent: requests, the continuations scored
    on their prefixes, and the passes those continuations take (chunks of a request's options)."""
    from collections import Counter

    from vlmgrid.models.hf_backend import Hf

    counts = {"run": Counter(), "check": Counter()}
    generate, score, batched = Hf.generate_results, Hf.score_results, Hf._batched

    def phase(model) -> Counter:
        return counts["check" if model._requests_alone else "run"]

    def generate_results(self, requests):
        phase(self)["requests"] += len(requests)
        return generate(self, requests)

    def score_results(self, requests):
        phase(self)["requests"] += len(requests)
        phase(self)["continuations"] += sum(len(r.options) for r in requests if not r.letters)
        return score(self, requests)

    def _batched(self, items, run, *, options=False):
        def counted(chunk):
            phase(self)["option passes"] += 1
            return run(chunk)

        return batched(self, items, counted if options else run, options=options)

    monkeypatch.setattr(Hf, "generate_results", generate_results)
    monkeypatch.setattr(Hf, "score_results", score_results)
    monkeypatch.setattr(Hf, "_batched", _batched)
    return counts


def _alone_as_batched(monkeypatch) -> None:
    """The plan's throughput table without its batch-1 rates: a request alone weighs what it does in a batch,
    so a small copy's check still takes an item (what these tests check is what the check sends, not its
    weights: a classification item's 10 answers alone cost 27x theirs in a batch)."""
    from vlmgrid.stages import cost

    table = cost.load_throughput()
    del table["lvlm"]["rates_alone"]
    monkeypatch.setattr(cost, "load_throughput", lambda: table)


def _classification_cell(small_config, size):
    bench = "caltech101-fixture"
    data = copy.deepcopy(small_config)
    data["benchmarks"] = {
        bench: {**data["benchmarks"][bench], "source": {**data["benchmarks"][bench]["source"], "size": size}}
    }
    data["models"] = {"llava-tiny": data["models"]["llava-tiny"]}
    data["grid"] = {"models": ["llava-tiny"], "benchmarks": [bench]}
    config = validate_config(data)
    prepare_benchmark(bench, config.benchmark(bench), paths.bench_dir(config.data_dir, bench))
    fetch_model("llava-tiny", config.model("llava-tiny"), paths.model_dir(config.data_dir, "llava-tiny"))
    out = infer_module.run_inference(
        model_settings=config.model("llava-tiny"),
        bench_dir=paths.bench_dir(config.data_dir, bench),
        model_dir=paths.model_dir(config.data_dir, "llava-tiny"),
        cell=Cell.in_results(config.results_dir, "llava-tiny", bench),
        part_size=64,
        threads=1,
        progress=False,
        check_items=32,
    )
    metadata = json.loads(pq.read_schema(out).metadata[b"vlmgrid"])
    return metadata["invariance"], pq.read_table(out).num_rows, config


def test_the_check_asks_at_most_a_tenth_of_the_cells_requests(small_config, monkeypatch):
    # A classification cell under CARPE's protocol: each item asks 20 templates, 10 of them scoring every
    # class name on the prompt's prefix. The check asks the sample's items again, one request at a time, and
    # scores each request's class names in the run's chunks, not one pass per name.
    from vlmgrid.stages.cost import cost_table

    counts = _counting(monkeypatch)
    _alone_as_batched(monkeypatch)
    check, rows, config = _classification_cell(small_config, size=4)
    items = rows // 20
    assert 10 <= items < 20 and check["checked"] == 1 and check["same"] == 1  # a tenth of the items: one
    run, again = counts["run"], counts["check"]
    assert again["requests"] == run["requests"] // items == 20
    for what in ("requests", "continuations", "option passes"):
        assert 0 < again[what] * 10 <= run[what], what
    assert (
        again["option passes"] * items == run["option passes"]
    )  # the same chunks as the item had in its run
    # `vlmgrid plan` counts what the check sends, and what the cell sends
    costs = cost_table(config)
    planned = costs[costs["per"] == "check"].set_index("unit")
    assert planned["items"].tolist() == [1, 1, 1]
    assert planned.loc["generate", "requests"] + planned.loc["forward", "requests"] == again["requests"]
    assert planned.loc["continuation", "requests"] == again["continuations"]
    own = costs[costs["per"] == "item"].set_index("unit")
    assert own.loc["generate", "requests"] + own.loc["forward", "requests"] == run["requests"]


def test_a_copy_too_small_for_a_tenth_skips_the_check_saying_so(small_config, monkeypatch):
    from vlmgrid.stages.cost import cost_table

    counts = _counting(monkeypatch)
    check, rows, config = _classification_cell(small_config, size=2)
    assert rows // 20 < 10 and check["checked"] == 0 and "too small" in check["skipped"]
    assert not counts["check"] and counts["run"]["requests"] == rows
    assert not (cost_table(config)["per"] == "check").any()  # and the plan counts no check


def test_the_check_off_writes_what_it_wrote_before(small_config):
    config = _config(small_config, check_items=0)
    metadata = json.loads(pq.read_schema(_infer(config, "llava-tiny")).metadata[b"vlmgrid"])
    assert "invariance" not in metadata
    score_grid_cell(config, "llava-tiny", BENCH)
    assert "invariance" not in _score(config, "llava-tiny")


def test_a_model_that_does_not_batch_is_skipped_with_a_reason(small_config):
    data = copy.deepcopy(small_config)
    data["infer"] = {"part_size": 64, "threads": 1, "invariance_items": 4}
    config = validate_config(data)
    prepare_benchmark(
        "pope-fixture", config.benchmark("pope-fixture"), paths.bench_dir(config.data_dir, "pope-fixture")
    )
    fetch_model("random", config.model("random"), paths.model_dir(config.data_dir, "random"))
    out = infer_module.run_inference(
        model_settings=config.model("random"),
        bench_dir=paths.bench_dir(config.data_dir, "pope-fixture"),
        model_dir=paths.model_dir(config.data_dir, "random"),
        cell=Cell.in_results(config.results_dir, "random", "pope-fixture"),
        part_size=64,
        threads=1,
        progress=False,
        check_items=4,
    )
    check = json.loads(pq.read_schema(out).metadata[b"vlmgrid"])["invariance"]
    assert check["checked"] == 0 and "baseline" in check["skipped"]


def test_the_plan_counts_the_check(default_config_data, tmp_path):
    from vlmgrid.stages.cost import cost_table

    data = copy.deepcopy(default_config_data)
    data["data_dir"], data["results_dir"] = str(tmp_path / "data"), str(tmp_path / "results")
    costs = cost_table(validate_config(data))
    checks = costs[costs["per"] == "check"]
    assert set(checks["model"]) == {"llava-tiny"}  # the batched model; clip-tiny and the baseline are skipped
    pope = checks[checks["benchmark"] == "pope-fixture"]
    assert pope["items"].tolist() == [4] and pope["requests"].tolist() == [4]  # the default grid checks 4
    data["infer"] = {"invariance_items": 32}  # the default elsewhere
    costs = cost_table(validate_config(data))
    pope = costs[(costs["per"] == "check") & (costs["benchmark"] == "pope-fixture")]
    # a tenth of its 90 questions' time, each answered alone at 1.4x a batched forward's: 6 of them
    assert pope["items"].tolist() == [6] and pope["requests"].tolist() == [6]
    assert not (checks["unit"] == "generate").any()  # an answer alone costs 27x: no fixture affords one
    data["infer"] = {"invariance_items": 0}
    assert not (cost_table(validate_config(data))["per"] == "check").any()
