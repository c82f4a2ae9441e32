"""The marks that qualify a number reach every table it appears in, and every mark a table uses is explained
in its legend: the format-error dagger in the comparisons table, the double dagger of a partial cell in the
reported table (whose comparison with a whole-benchmark figure says it is partial), and no comparison mark on
a main-table cell without a number."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.report import BENCHES, MODELS, read_csv, write_scores

from vlmgrid.report.comparisons import Comparison, Comparisons
from vlmgrid.report.grid import load_grid
from vlmgrid.report.reported import Method, Published, ReportedRow
from vlmgrid.report.tables import comparisons as comparisons_table
from vlmgrid.report.tables import main as main_table
from vlmgrid.report.tables import reported as reported_table
from vlmgrid.report.tables.format import write_csv

KINDS = {"pope-fixture": "pope", "sqa_img": "scienceqa_img", "flowers": "flowers102"}
DAGGER, DOUBLE_DAGGER, BETTER, WORSE = "\u2020", "\u2021", "\u207a", "\u207b"


def _edit(files: dict, model: str, bench: str, **changes) -> None:
    path = files[(model, bench)]
    obj = json.loads(path.read_text())
    obj.update(changes)
    path.write_text(json.dumps(obj))


def _grid(files: dict, **kwargs):
    return load_grid(files, MODELS, BENCHES, KINDS, **kwargs)


def md_rows_of(text: str) -> dict[str, list[str]]:
    """A Markdown table's rows keyed by their first cell, as `helpers.report.md_rows` reads a file."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith(("|:", "|-")):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


def _pair(model_a: str, model_b: str, bench: str, value_a: float, value_b: float) -> Comparison:
    """A significant comparison (Holm p 0.01, difference above its MDD)."""
    difference = value_a - value_b
    return Comparison(
        model_a,
        model_b,
        bench,
        "accuracy",
        value_a=value_a,
        value_b=value_b,
        difference=difference,
        ci_low=difference - 2.0,
        ci_high=difference + 2.0,
        p_value=0.01,
        p_holm=0.01,
        test="paired sign-flip permutation",
        unit="item",
        permutations=2000,
        mdd=1.0,
        mdd_from="unit differences",
    )


# --- comparisons table: the dagger --------------------------------------------------------------------------


def _flagged_comparisons(tmp_path: Path):
    files = write_scores(tmp_path)
    _edit(files, "big-vlm", "sqa_img", format_error_rate=75.0)
    grid = _grid(files)
    comparisons = Comparisons(
        None,
        [
            _pair("clip_tiny", "big-vlm", "sqa_img", 25.0, 20.04),
            _pair("clip_tiny", "big-vlm", "flowers", 18.0, 33.3),
            Comparison("clip_tiny", "big-vlm", "pope-fixture", "f1", reason="no comparison file"),
        ],
    )
    return grid, comparisons


def test_a_flagged_cell_s_value_carries_the_dagger_in_the_comparisons_table(tmp_path):
    grid, comparisons = _flagged_comparisons(tmp_path)
    # the main table marks the cell...
    main_md = main_table.main_markdown(grid, "t")
    assert md_rows_of(main_md)["big-vlm"][1].endswith(DAGGER)
    # ...and so does every value of it in the comparisons table, whose legend explains the mark
    md = comparisons_table.comparisons_markdown(comparisons, "t", grid)
    rows = [line for line in md.splitlines() if line.startswith("| clip_tiny")]
    assert "| 25.0 | 20.0\u2020 |" in rows[0]
    assert "| 18.0 | 33.3 |" in rows[1]  # an unflagged cell of the same model carries no dagger
    legend = md.split("\n\n")[2]
    assert f"{DAGGER}: more than 10% of the cell's prediction rows" in legend
    assert "big-vlm on sqa_img 75.0%" in legend

    tex = comparisons_table.comparisons_latex(comparisons, "t", grid)
    body = tex[tex.index(r"\midrule") :]
    assert r"20.0$^{\dagger}$" in body and body.count(r"$^{\dagger}$") == 1
    assert r"$^{\dagger}$: more than 10\% of the cell's prediction rows" in tex

    frame = comparisons_table.comparisons_frame(comparisons, grid)
    write_csv(tmp_path / "comparisons.csv", frame)
    csv_rows = read_csv(tmp_path / "comparisons.csv")
    assert [(r["benchmark"], r["flagged_a"], r["flagged_b"]) for r in csv_rows] == [
        ("sqa_img", "False", "True"),
        ("flowers", "False", "False"),
        ("pope-fixture", "", ""),  # no comparison: nothing is shown to mark
    ]


def test_the_comparisons_legend_names_no_dagger_where_no_shown_value_carries_one(tmp_path):
    grid, comparisons = _flagged_comparisons(tmp_path)
    # only the unflagged benchmark is compared: the flagged cell's value is not in the table
    shown = Comparisons(None, [comparisons.rows[1]])
    md = comparisons_table.comparisons_markdown(shown, "t", grid)
    assert DAGGER not in md
    frame = comparisons_table.comparisons_frame(shown, grid)
    assert list(frame["flagged_b"]) == [False]


# --- reported table: partial cells --------------------------------------------------------------------------


def _published(*benches: tuple[str, str, float]) -> Published:
    rows = tuple(
        ReportedRow(
            "2310.03744",
            "Table 4",
            "Big VLM",
            kind,
            None,
            figure,
            value,
            "https://arxiv.org/abs/2310.03744 Table 4",
            None,
            Path("x.csv"),
            k,
            Method("likelihood"),
        )
        for k, (kind, figure, value) in enumerate(benches, 1)
    )
    return Published(rows=rows, reported_as={"big-vlm": "Big VLM"}, splits={})


def _partial_grid(tmp_path: Path):
    files = write_scores(tmp_path)
    _edit(files, "big-vlm", "sqa_img", coverage={"answered": 60, "total": 90})
    published = _published(("scienceqa_img", "accuracy", 20.0), ("flowers102", "top1", 33.0))
    return _grid(files), published


def test_the_reported_legend_explains_the_double_dagger_of_a_partial_cell(tmp_path):
    grid, published = _partial_grid(tmp_path)
    md = reported_table.reported_markdown(grid, published, "t")
    table = [line for line in md.splitlines() if line.startswith("| arXiv")]
    assert "| sqa_img | ScienceQA-IMG Acc. (%) | 20.0 [15.5, 25.0]\u2021 |" in table[0]
    assert "\u2021" not in table[1]
    legend = md.split("\n\n")[2]
    assert f"{DOUBLE_DAGGER}: the cell answers a subset of the benchmark's items" in legend
    assert "big-vlm on sqa_img 60 of 90 answered" in legend

    tex = reported_table.reported_latex(grid, published, "t")
    caption = tex[tex.index(r"\caption{") : tex.index(r"\label{")]
    assert r"$^{\ddagger}$: the cell answers a subset" in caption


def test_a_partial_cell_s_comparison_with_a_published_figure_says_it_is_partial(tmp_path):
    grid, published = _partial_grid(tmp_path)
    md = reported_table.reported_markdown(grid, published, "t")
    table = [line for line in md.splitlines() if line.startswith("| arXiv")]
    # the partial cell's verdict says so; the whole cell's reads as before
    assert table[0].endswith("| 0.0 | yes (partial) |")
    assert table[1].endswith("| +0.3 | yes |")
    assert "its Inside CI reads (partial)" in md

    tex = reported_table.reported_latex(grid, published, "t")
    assert r"yes \\{} {\scriptsize (partial)}" in tex

    write_csv(tmp_path / "reported.csv", reported_table.reported_frame(grid, published))
    csv_rows = read_csv(tmp_path / "reported.csv")
    assert [(r["benchmark"], r["status"], r["answered"], r["items"]) for r in csv_rows] == [
        ("sqa_img", "partial", "60", "90"),
        ("flowers", "compared", "", ""),
    ]
    assert list(csv_rows[0]).index("answered") == list(csv_rows[0]).index("flagged") + 1


def test_every_mark_of_the_reported_table_is_in_its_legend(tmp_path):
    files = write_scores(tmp_path)
    _edit(files, "big-vlm", "sqa_img", coverage={"answered": 60, "total": 90}, format_error_rate=40.0)
    published = _published(("scienceqa_img", "accuracy", 20.0))
    md = reported_table.reported_markdown(_grid(files), published, "t")
    table, legend = md.split("\n\n")[1:3]
    for mark in (DAGGER, DOUBLE_DAGGER):
        assert mark in table and f"{mark}:" in legend


def test_a_not_compared_cell_has_no_coverage_in_the_reported_csv(tmp_path):
    files = write_scores(tmp_path)
    _edit(files, "big-vlm", "sqa_img", coverage={"answered": 60, "total": 90})
    # the score file lacks the published figure: not compared, so neither partial nor counted
    published = _published(("scienceqa_img", "valid_accuracy", 20.0))
    frame = reported_table.reported_frame(_grid(files), published)
    assert list(frame["status"]) == ["not in the score file"]
    assert frame["answered"].isna().all() and frame["items"].isna().all()
    assert "\u2021:" not in reported_table.reported_markdown(_grid(files), published, "t")


# --- main table: no comparison mark without a number --------------------------------------------------------


def _reference_comparisons() -> Comparisons:
    """big-vlm significantly better than clip_tiny on sqa_img and pope-fixture, worse on flowers."""
    return Comparisons(
        "clip_tiny",
        [
            _pair("big-vlm", "clip_tiny", "pope-fixture", 51.2, 50.0),
            _pair("big-vlm", "clip_tiny", "sqa_img", 30.0, 25.0),
            _pair("big-vlm", "clip_tiny", "flowers", 10.0, 18.0),
        ],
    )


def _main_outputs(grid, comparisons, tmp_path: Path):
    md = main_table.main_markdown(grid, "t", comparisons)
    tex = main_table.main_latex(grid, "t", comparisons)
    html = main_table.main_html(grid, "t", comparisons)
    write_csv(tmp_path / "main.csv", main_table.main_frame(grid, comparisons))
    return md_rows_of(md), tex, html, read_csv(tmp_path / "main.csv")


def _outputs_without(tmp_path: Path, model: str, benchmark: str):
    """The main table's outputs with the cell's score file gone (it reads missing)."""
    files = write_scores(tmp_path)
    files[(model, benchmark)].unlink()
    return _main_outputs(_grid(files, allow_missing=True), _reference_comparisons(), tmp_path)


def test_a_missing_cell_carries_no_comparison_mark(tmp_path):
    rows, tex, html, csv_rows = _outputs_without(tmp_path, "big-vlm", "sqa_img")
    assert rows["big-vlm"][1] == "missing"
    assert rows["big-vlm"][0].endswith(BETTER) and rows["big-vlm"][2].endswith(WORSE)  # numbers keep theirs
    assert "missing$^{+}$" not in tex and "missing\u207a" not in html
    big = next(r for r in csv_rows if r["model"] == "big-vlm")
    assert (big["pope-fixture_vs_reference"], big["sqa_img_vs_reference"], big["flowers_vs_reference"]) == (
        "better",
        "",
        "worse",
    )


def test_a_failed_cell_carries_no_comparison_mark(tmp_path):
    files = write_scores(tmp_path)
    _edit(files, "big-vlm", "flowers", format_error_rate=100.0)
    grid = _grid(files)
    rows, tex, _, csv_rows = _main_outputs(grid, _reference_comparisons(), tmp_path)
    assert rows["big-vlm"][2] == f"failed{DAGGER}"
    assert r"failed$^{\dagger}$$^{-}$" not in tex
    assert next(r for r in csv_rows if r["model"] == "big-vlm")["flowers_vs_reference"] == ""


def test_no_cell_is_marked_against_a_reference_cell_without_a_number(tmp_path):
    rows, _, _, csv_rows = _outputs_without(tmp_path, "clip_tiny", "sqa_img")
    assert rows["clip_tiny"][1] == "missing"
    assert rows["big-vlm"][1] == "20.0 [15.5, 25.0]"  # its number, but nothing to be better than
    assert rows["big-vlm"][0].endswith(BETTER)
    assert next(r for r in csv_rows if r["model"] == "big-vlm")["sqa_img_vs_reference"] == ""
