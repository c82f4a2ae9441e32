"""A cell scored on a copy of its benchmark that holds fewer items than the published benchmark (a local
subset that the source's `expected_items` lets through, a fixture's generated stand-ins): its score file
records the copy's size (`partial_copy`), and every table, figure and note that shows its number marks it with
the pilcrow and names the count, so "sqa_img 20.0" is never read as a number on the whole benchmark."""

from __future__ import annotations

import json

import pytest
from helpers.common import heatmap_cells
from helpers.compare import grid_data, write_bench, write_comparison, write_preds
from helpers.report import (
    BENCHES,
    MODELS,
    _write,
    build,
    kaleidoscope_obj,
    latex_rows,
    md_rows,
    plain_latex,
    read_csv,
    write_scores,
)

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.report import build_report, load_grid
from vlmgrid.report.dvc_files import metrics
from vlmgrid.report.figures import main_heatmap, main_note

COPY = "\u00b6"
TEX_COPY = r"$^{\P}$"
LOCAL = "the benchmark's prepared copy holds fewer items than the published benchmark"
FIXTURE = "a fixture: generated stand-ins in the benchmark's format, none of its items"


# --- the score file -----------------------------------------------------------------------------------------


def tiny_copy(tmp_path, write_config, n: int, source: dict, models=("good",)) -> tuple[dict, list[str]]:
    """A grid of `models` on "tiny" (a scienceqa_img benchmark, 2,017 items published) prepared from `source`
    with `n` items, each model's predictions written (right on every item): the grid and its config
    options."""
    data = grid_data(tmp_path, list(models))
    bench_dir = paths.bench_dir(data["data_dir"], "tiny")
    data_fp = write_bench(bench_dir, n=n)
    manifest = json.loads((bench_dir / "manifest.json").read_text())
    (bench_dir / "manifest.json").write_text(json.dumps({**manifest, "source": source, "n_items": n}))
    for model in models:
        write_preds(paths.predictions_path(data["results_dir"], model, "tiny"), [0] * n, data_fp)
    return data, ["--config", str(write_config(data))]


def score_tiny(tmp_path, write_config, n: int, source: dict) -> dict:
    """One model's score on "tiny" (`tiny_copy`)."""
    data, config = tiny_copy(tmp_path, write_config, n, source)
    assert main(["score", "good", "tiny", *config]) == 0
    return json.loads(paths.score_path(data["results_dir"], "good", "tiny").read_text())


def test_the_score_file_records_a_copy_that_holds_fewer_items_than_the_benchmark(
    tmp_path, write_config, capsys
):
    source = {"type": "local", "path": "/data/scienceqa", "expected_items": 24}
    score = score_tiny(tmp_path, write_config, 24, source)
    assert score["partial_copy"] == {"items": 24, "published_items": 2017, "source": "local"}
    assert score["n"] == 24 and score["value"] == 100.0
    # the command's own line says it beside the number
    assert (
        "(n=24, a copy of 24 of the benchmark's 2,017 items, format errors 0.0%)" in capsys.readouterr().err
    )


def test_a_fixture_is_recorded_as_one_and_a_whole_copy_records_nothing(tmp_path, write_config):
    fixture = score_tiny(tmp_path / "f", write_config, 20, {"type": "fixture", "seed": 0})
    assert fixture["partial_copy"] == {"items": 20, "published_items": 2017, "source": "fixture"}
    whole = score_tiny(tmp_path / "w", write_config, 2017, {"type": "hf_hub", "revision": "abc"})
    assert "partial_copy" not in whole


def test_the_comparison_file_records_the_copy_too(tmp_path, write_config):
    source = {"type": "local", "path": "/data/scienceqa", "expected_items": 24}
    data, config = tiny_copy(tmp_path, write_config, 24, source, models=("good", "also"))
    assert main(["compare", "tiny", *config]) == 0
    result = json.loads(paths.comparison_path(data["results_dir"], "tiny").read_text())
    assert result["n"] == 24 and result["partial_copy"] == {
        "items": 24,
        "published_items": 2017,
        "source": "local",
    }


# --- the report ---------------------------------------------------------------------------------------------


def make_copy(files: dict, model: str, bench: str, items: int, published: int, source: str) -> None:
    path = files[(model, bench)]
    obj = json.loads(path.read_text())
    obj["partial_copy"], obj["n"] = {"items": items, "published_items": published, "source": source}, items
    obj["n_valid"] = min(obj["n_valid"], items)  # a score file's n_valid is never above its n
    path.write_text(json.dumps(obj))


@pytest.fixture
def copy_files(tmp_path):
    """Both models' sqa_img cells scored on a local copy of 24 of its 2,017 items, their pope-fixture cells on
    a fixture of 90 stand-ins (POPE has 9,000); flowers whole."""
    files = write_scores(tmp_path)
    for model in MODELS:
        make_copy(files, model, "sqa_img", 24, 2017, "local")
        make_copy(files, model, "pope-fixture", 90, 9000, "fixture")
    return files


def test_the_main_table_marks_each_number_of_a_partial_copy_and_names_its_count(tmp_path, copy_files):
    build(tmp_path, copy_files)
    tables = tmp_path / "tables"
    rows = md_rows(tables / "main.md")
    assert rows["big-vlm"][:3] == [
        f"51.2 [44.0, 58.1]{COPY}",
        f"20.0 [15.5, 25.0]{COPY}",
        "33.3 [30.0, 36.6]",
    ]
    assert rows["clip_tiny"][1] == f"25.0 [12.0, 38.0]{COPY}"
    assert rows["big-vlm"][3].endswith(COPY)  # the average over them
    legend = (tables / "main.md").read_text(encoding="utf-8").strip().splitlines()[-1]
    # each benchmark named once with its count, though two models' cells carry the mark
    assert f"{COPY}: {LOCAL}, so the number is over those items alone: sqa_img 24 of 2,017 items" in legend
    assert (
        f"{FIXTURE}, so the number is not the benchmark's: pope-fixture 90 items standing in for 9,000"
        in legend
    )
    assert legend.count("sqa_img 24 of 2,017") == 1 and "An average over such a cell is marked too." in legend
    tex = (tables / "main.tex").read_text(encoding="utf-8")
    assert (
        latex_rows(tex)["big-vlm"][2] == f"20.0{TEX_COPY}"
        and latex_rows(tex)["big-vlm"][3] == r"\textbf{33.3}"
    )
    assert r"sqa\_img 24 of 2,017 items" in plain_latex(tex)
    assert f"20.0 [15.5, 25.0]{COPY}" in (tables / "main.html").read_text(encoding="utf-8")
    csv = {row["model"]: row for row in read_csv(tables / "main.csv")}
    assert (csv["big-vlm"]["sqa_img_copy_items"], csv["big-vlm"]["sqa_img_published_items"]) == ("24", "2017")
    assert csv["clip_tiny"]["pope-fixture_copy_items"] == "90" and "flowers_copy_items" not in csv["big-vlm"]
    assert float(csv["big-vlm"]["sqa_img"]) == 20.04  # the number itself as it is


def test_the_heatmap_marks_the_cell_and_gives_the_count_under_the_benchmark(copy_files):
    grid = load_grid(copy_files, MODELS, BENCHES)
    fig = main_heatmap(grid, "t")
    cells = heatmap_cells(fig, MODELS)
    assert cells[("big-vlm", "sqa_img")][0] == f"20.0{COPY}" and cells[("big-vlm", "flowers")][0] == "33.3"
    assert cells[("big-vlm", "Average")][0].endswith(COPY)
    # the count under the benchmark's name (the note of the default grid's figure has no room for a list)
    assert [label.get_text() for label in fig.axes[0].get_xticklabels()] == [
        "pope-fixture\n(F1)\n90 stand-ins",
        "sqa_img\n(Acc.)\n24 of 2,017",
        "flowers\n(Top-1)",
    ]
    assert f"{COPY}: over fewer items than the benchmark has, counted under its name." in main_note(grid)


def test_the_heatmap_note_names_cells_whose_copies_differ(copy_files):
    make_copy(copy_files, "clip_tiny", "sqa_img", 30, 2017, "local")
    grid = load_grid(copy_files, MODELS, BENCHES)
    labels = [label.get_text() for label in main_heatmap(grid, "t").axes[0].get_xticklabels()]
    assert (
        labels[1] == "sqa_img\n(Acc.)"
        and "clip_tiny on sqa_img 30 of 2,017 items, big-vlm on sqa_img 24 of 2,017 items" in main_note(grid)
    )


def test_the_cells_breakdown_and_variants_tables_mark_it_too(tmp_path, copy_files):
    obj = json.loads(copy_files[("big-vlm", "pope-fixture")].read_text())
    obj["variants"] = {"a": {"value": 50.0, "ci95": [40.0, 60.0]}, "b": {"value": 52.4, "ci95": [45.0, 60.0]}}
    copy_files[("big-vlm", "pope-fixture")].write_text(json.dumps(obj))
    build(tmp_path, copy_files)
    tables = tmp_path / "tables"
    cells = tables.joinpath("cells.md").read_text(encoding="utf-8")
    assert f"| 24 of 2017{COPY} |" in cells and "sqa_img 24 of 2,017 items" in cells
    assert f"| 90{COPY} |" in cells  # a fixture's stand-ins are not 90 of POPE's 9,000 questions
    rows = {(r["model"], r["benchmark"]): r for r in read_csv(tables / "cells.csv")}
    assert (rows[("big-vlm", "sqa_img")]["copy_items"], rows[("big-vlm", "sqa_img")]["published_items"]) == (
        "24",
        "2017",
    )
    assert rows[("big-vlm", "flowers")]["published_items"] == ""
    breakdown = tables.joinpath("breakdown.md").read_text(encoding="utf-8")
    assert f"| big-vlm | adversarial | F1 | 52.0 [32.0, 57.5]{COPY} |" in breakdown
    assert "pope-fixture 90 items standing in for 9,000" in breakdown
    assert {(r["copy_items"], r["published_items"]) for r in read_csv(tables / "breakdown.csv")} == {
        ("90", "9000")
    }
    variants = tables.joinpath("variants.md").read_text(encoding="utf-8")
    assert f"| big-vlm | pope-fixture | a | F1 | 50.0 [40.0, 60.0]{COPY} |" in variants
    assert "pope-fixture 90 items" in variants
    assert {r["published_items"] for r in read_csv(tables / "variants.csv")} == {"9000"}


def test_the_comparisons_table_marks_both_values(tmp_path, copy_files):
    files = {
        bench: write_comparison(tmp_path / "results", bench, None, [("clip_tiny", "big-vlm", 4.0, 0.01)])
        for bench in BENCHES
    }
    build(tmp_path, copy_files, comparison_files=files)
    tables = tmp_path / "tables"
    md = tables.joinpath("comparisons.md").read_text(encoding="utf-8")
    assert f"| clip_tiny | big-vlm | sqa_img | Acc. | 54.0{COPY} | 50.0{COPY} | +4.0 [1.0, 7.0] |" in md
    assert "| clip_tiny | big-vlm | flowers | Acc. | 54.0 | 50.0 | +4.0 [1.0, 7.0] |" in md
    assert "sqa_img 24 of 2,017 items" in md
    assert f"54.0{TEX_COPY}" in plain_latex(tables.joinpath("comparisons.tex").read_text(encoding="utf-8"))
    rows = read_csv(tables / "comparisons.csv")
    assert [(r["benchmark"], r["copy_items"], r["published_items"]) for r in rows] == [
        ("pope-fixture", "90", "9000"),
        ("sqa_img", "24", "2017"),
        ("flowers", "", ""),
    ]


def test_the_dvc_metrics_files_give_the_count(copy_files):
    tree = metrics(load_grid(copy_files, MODELS, BENCHES))
    assert tree["sqa_img"] == {
        "metric": "accuracy",
        "clip_tiny": 25.0,
        "big-vlm": 20.04,
        "items": 24,
        "published": 2017,
    }
    assert "items" not in tree["flowers"] and "items" not in tree["Average"]


def test_the_paper_tables_and_figures_mark_the_model(tmp_path, monkeypatch):
    from helpers.report import _capture_figures

    figures = _capture_figures(monkeypatch)
    langs = {"ar": (50.0, 0.0, 100.0), "te": (25.0, 0.0, 75.0)}
    objs = {
        model: {**kaleidoscope_obj(model, "kal", langs), "format_error_rate": 3.0}
        for model in ("vlm-a", "vlm-b")
    }
    objs["vlm-b"]["partial_copy"] = {"items": 28, "published_items": 20911, "source": "fixture"}
    files = {(model, "kal"): _write(tmp_path, obj) for model, obj in objs.items()}
    build_report(
        files,
        ["vlm-a", "vlm-b"],
        ["kal"],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={"kal": "kaleidoscope"},
    )
    tables = tmp_path / "tables"
    rows = md_rows(tables / "kaleidoscope.md")
    assert "vlm-a" in rows and f"vlm-b{COPY}" in rows
    text = (tables / "kaleidoscope.md").read_text(encoding="utf-8")
    assert "kal 28 items standing in for 20,911" in text
    assert f"vlm-b{TEX_COPY}" in plain_latex((tables / "kaleidoscope.tex").read_text(encoding="utf-8"))
    assert [r["published_items"] for r in read_csv(tables / "kaleidoscope.csv")] == ["", "20911"]
    fig = figures[
        -1
    ]  # the per-language bars: the legend names the model with the mark, the note gives the count
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["vlm-a", f"vlm-b{COPY}"]
    note = " ".join(t.get_text() for t in [*fig.texts, *fig.axes[-1].texts]).replace("\n", " ")
    assert "kal 28 items standing in for 20,911" in note


def test_the_reported_table_marks_a_reproduction_on_a_partial_copy(tmp_path):
    from helpers.reported import build as build_reported
    from helpers.reported import grid_objs

    objs = grid_objs()
    objs[("llava13", "mme-b")]["partial_copy"] = {"items": 24, "published_items": 2374, "source": "local"}
    build_reported(tmp_path, objs=objs)
    text = (tmp_path / "tables" / "reported.md").read_text(encoding="utf-8")
    assert f"| 1500.0 [1480.0, 1540.0]{COPY} | 1531.3 |" in text and "| 80.0 [78.0, 82.0] | 85.9 |" in text
    assert "mme-b 24 of 2,374 items" in text
    rows = read_csv(tmp_path / "tables" / "reported.csv")
    assert [(r["benchmark"], r["copy_items"], r["published_items"]) for r in rows][:2] == [
        ("mme-b", "24", "2374"),
        ("pope-b", "", ""),
    ]


def test_a_grid_of_fixtures_names_each_benchmark_once(tmp_path):
    """The default grid's shape: every cell a fixture. Each value carries the one mark, and the legend names
    each benchmark once with its stand-ins' count, not each of its cells."""
    files = write_scores(tmp_path)
    for model in MODELS:
        for bench, published in zip(BENCHES, (9000, 2017, 6149)):
            make_copy(files, model, bench, 90, published, "fixture")
    build(tmp_path, files)
    main_md = (tmp_path / "tables" / "main.md").read_text(encoding="utf-8")
    legend = main_md.strip().splitlines()[-1]
    assert (
        f"{COPY}: {FIXTURE}, so the number is not the benchmark's: pope-fixture 90 items standing in for "
        f"9,000, sqa_img 90 items standing in for 2,017, flowers 90 items standing in for 6,149."
    ) in legend
    rows = md_rows(tmp_path / "tables" / "main.md")
    assert all(cell.endswith(COPY) for model in MODELS for cell in rows[model])


@pytest.mark.parametrize(
    "manifest",
    [
        {"source": {"type": "local", "expected_items": 8910}},
        {"source": {"type": "local"}, "variant": "llava"},
    ],
)
def test_llavas_copy_of_pope_is_a_published_variant_not_a_partial_copy(manifest):
    """LLaVA-1.5 published its POPE scores on its own copy of POPE's label files, 8,910 questions (2,910 in
    the random split): the copy its numbers are compared with, whether its source names the count or not."""
    import types

    import pandas as pd

    from vlmgrid.benchmarks.pope_coco import KIND
    from vlmgrid.stages.score import partial_copy

    def bench(n):
        return types.SimpleNamespace(kind=KIND, manifest=manifest, records=pd.DataFrame({"id": range(n)}))

    assert KIND.variants == {"llava": 8910}
    assert partial_copy(bench(8910)) is None
    assert partial_copy(bench(9000)) is None
    assert partial_copy(bench(300)) == {
        "items": 300,
        "published_items": 8910 if "variant" in manifest else 9000,
        "source": "local",
    }
