"""The report's LaTeX tables: best bold and second underlined as the papers mark them, wide tables split into
blocks, and every .tex file compiling in a minimal document with pdflatex, inside the page's width."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import test_reported
from test_compare import write_comparison, write_score
from test_report import _write, cvqa_obj, dance_obj, kaleidoscope_obj
from vlmgrid.report import build_report
from vlmgrid.report.tables.format import BEST, BLOCK_COLUMNS, SECOND, _blocks, emphasis, latex_table

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex is not installed (Debian: texlive-latex-base and texlive-latex-recommended); the tables are "
           "not compiled",
)


# --- best and second ---------------------------------------------------------------------------------------


def test_best_is_bold_and_second_underlined_by_value():
    assert emphasis([50.0, 51.2, 33.3]) == [SECOND, BEST, None]


def test_lower_is_better_turns_the_order():
    assert emphasis([12.5, 3.0, 7.0], lower_is_better=True) == [None, BEST, SECOND]


def test_values_equal_as_displayed_share_their_mark():
    # 20.04 is shown as 20.0: it ties with 20.0, and both are the second
    assert emphasis([20.04, 20.0, 33.3, 10.0]) == [SECOND, SECOND, BEST, None]
    assert emphasis([40.0, 40.0, 30.0, 10.0]) == [BEST, BEST, SECOND, None]


def test_the_second_needs_three_different_values():
    # two different values: the other one is the last, never underlined (docs/formats.md)
    assert emphasis([40.0, 40.0, 10.0]) == [BEST, BEST, None]
    assert emphasis([40.0, 10.0, 10.0]) == [BEST, None, None]
    assert emphasis([10.0, 10.0, 40.0, 40.0], lower_is_better=True) == [BEST, BEST, None, None]
    # 33.34 and 33.3 tie as displayed: still two different values
    assert emphasis([33.34, 33.3, 50.0]) == [None, None, BEST]


def test_no_mark_without_a_choice():
    assert emphasis([50.0, 40.0]) == [BEST, None]  # two values: a best, and the other is simply the last
    assert emphasis([50.0]) == [None]
    assert emphasis([30.0, 30.0, 30.0]) == [None, None, None]
    assert emphasis([None, 30.0, None, 20.0]) == [None, BEST, None, None]


def test_a_wide_table_is_split_into_even_blocks():
    assert _blocks(6, 6) == [range(6)]
    assert [list(b) for b in _blocks(7, 6)] == [[0, 1, 2, 3], [4, 5, 6]]
    assert [len(b) for b in _blocks(15, 6)] == [5, 5, 5]
    assert [len(b) for b in _blocks(17, 5)] == [5, 4, 4, 4]


def test_each_block_repeats_the_row_names():
    header = [["Model", *"abcdefg"]]
    rows = [["m1", *"1234567"], ["m2", *"7654321"]]
    assert BLOCK_COLUMNS == 5
    tex = latex_table("T", "t", header, rows)
    assert tex.count(r"\begin{tabular}{lcccc}") == 1 and tex.count(r"\begin{tabular}{lccc}") == 1
    assert "Model & a & b & c & d \\\\" in tex and "Model & e & f & g \\\\" in tex
    assert "m1 & 5 & 6 & 7 \\\\" in tex and "m2 & 7 & 6 & 5 & 4 \\\\" in tex
    unsplit = latex_table("T", "t", header, rows, split=False)
    assert unsplit.count(r"\begin{tabular}") == 1


# --- a grid of 14 benchmarks and three models --------------------------------------------------------------

BENCHES = [f"bench_{k:02d}-fixture" for k in range(14)]
MODELS = ["clip-tiny", "llava-tiny", "random"]
METRICS = ["accuracy", "f1", "scaled", "acc_at_50", "vqa_accuracy", "circular_accuracy", "pair_accuracy"]


def wide_grid(root: Path) -> dict:
    files = {}
    for i, model in enumerate(MODELS):
        for k, bench in enumerate(BENCHES):
            if model == "clip-tiny" and k == 5:
                obj = {"model": model, "benchmark": bench, "applicable": False, "reason": "cannot generate"}
            else:
                value = 20.0 + 10 * ((i + k) % 3) + k / 10
                obj = {"model": model, "benchmark": bench, "metric": METRICS[k % len(METRICS)], "value": value,
                       "ci95": [value - 5, value + 5], "n": 90, "n_valid": 80, "n_errors": 10,
                       # llava-tiny on bench_03 is built on too many format errors: a dagger
                       "format_error_rate": 40.0 if (model, k) == ("llava-tiny", 3) else 1.0,
                       "bootstrap": {"samples": 3, "seed": 0, "draws": [value - 1, value, value + 1]}}
            files[(model, bench)] = _write(root, obj)
    return files


def test_the_main_table_of_a_wide_grid_is_split_and_marks_each_column(tmp_path):
    build_report(wide_grid(tmp_path), MODELS, BENCHES, tmp_path / "tables", tmp_path / "figures")
    tex = (tmp_path / "tables" / "main.tex").read_text(encoding="utf-8")
    # 14 benchmarks and the average: three blocks of five value columns
    assert tex.count(r"\begin{tabular}{lccccc}") == 3 and tex.count(r"\toprule") == 3
    rows = {}
    for line in tex.splitlines():
        name, _, cells = line.partition(" & ")
        if name in MODELS:
            rows.setdefault(name, []).extend(cells.removesuffix(r" \\").split(" & "))
    assert all(len(cells) == 15 for cells in rows.values())
    # bench_00: clip-tiny 20.0, llava-tiny 30.0, random 40.0
    assert [rows[m][0].split(r"\,")[0] for m in MODELS] == ["20.0", r"\underline{30.0}", r"\textbf{40.0}"]
    assert rows["clip-tiny"][5] == "n/a"
    assert r"$^{\dagger}$" in rows["llava-tiny"][3]
    assert r"{\footnotesize Acc@50}" in tex and r"{\footnotesize MME scaled}" in tex and "acc_at_50" not in tex


# --- compiled ----------------------------------------------------------------------------------------------

DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs}
\usepackage{graphicx}
\begin{document}
\input{%s}
\end{document}
"""


def compile_table(tex: Path, workdir: Path) -> str:
    """pdflatex on a minimal document holding the table; its log (the test fails on an error)."""
    document = workdir / f"{tex.stem}-document.tex"
    document.write_text(DOCUMENT % tex.resolve().as_posix(), encoding="utf-8")
    result = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", document.name],
                            cwd=workdir, capture_output=True, text=True, timeout=120)
    log = (workdir / f"{document.stem}.log").read_text(encoding="utf-8", errors="replace")
    assert result.returncode == 0, f"{tex.name} does not compile:\n" + "\n".join(
        line for line in log.splitlines() if line.startswith("!") or "Error" in line)
    return log


def every_table(root: Path) -> list[Path]:
    """Reports holding every table kind: the wide main table and the papers' (Kaleidoscope, CVQA, DANCE), the
    comparisons against a reference model, and the published numbers beside the reproduced ones."""
    files = wide_grid(root / "grid")
    for k, model in enumerate(MODELS):
        files[(model, "kal_bench")] = _write(root / "grid", {**kaleidoscope_obj(model, "kal_bench", {
            "ar": (50.0 - 10 * k, 0.0, 100.0), "te": (25.0 + k, 0.0, 75.0), "es": (10.0 * k, 0.0, 40.0)})})
        files[(model, "cvqa")] = _write(root / "grid", {**cvqa_obj(model, 5.0 * k), "model": model})
        files[(model, "dance")] = _write(root / "grid", {**dance_obj(model, {
            "test-seen riddle-to-image": (60.0 - k, 40.0, 80.0), "test-seen image-to-riddle": (50.0, 30.0, 70.0),
            "test-unseen riddle-to-image": (20.0, 10.0, 30.0), "test-unseen image-to-riddle": (10.0, 0.0, 20.0)}),
            "model": model})
    kinds = {"kal_bench": "kaleidoscope", "cvqa": "cvqa", "dance": "dance"}
    written = build_report(files, MODELS, [*BENCHES, *kinds], root / "grid" / "tables", root / "grid" / "figures",
                           kinds=kinds, title="Results: 100% of the grid & more")

    results = root / "compared"
    models, benchmarks = ["model_a", "model_b", "reference_model"], ["bench_x", "bench_y"]
    scores = {(m, b): write_score(results, m, b, 50.0, f"sha-{m}") for m in models for b in benchmarks}
    comparisons = {b: write_comparison(results, b, "reference_model",
                                       [("model_a", "reference_model", 4.0, 0.01), ("model_b", "reference_model", -2.0, 0.3)],
                                       {m: f"sha-{m}" for m in models}) for b in benchmarks}
    written += build_report(scores, models, benchmarks, results / "tables", results / "figures",
                            comparison_files=comparisons, reference_model="reference_model")

    written += test_reported.build(root / "reported")
    written += partial_tables(root / "partial")
    return sorted(path for path in written if path.suffix == ".tex")


def partial_tables(root: Path) -> list[Path]:
    """Reports with a partial cell (an imported answer set that lacks items by construction, its score file's
    coverage): the wide grid's main table with llava-tiny on bench_07 answering 2,350 of 2,374 items, and the
    comparisons of a pair compared on the items both answered (report.partial_cells: include)."""
    import json

    files = wide_grid(root / "grid")
    path = files[("llava-tiny", BENCHES[7])]
    obj = json.loads(path.read_text())
    obj["coverage"], obj["n"] = {"answered": 2350, "total": 2374}, 2350
    path.write_text(json.dumps(obj))
    written = build_report(files, MODELS, BENCHES, root / "grid" / "tables", root / "grid" / "figures")

    results = root / "compared"
    models, benchmarks = ["model_a", "reference_model"], ["bench_x"]
    scores = {(m, b): write_score(results, m, b, 50.0, f"sha-{m}") for m in models for b in benchmarks}
    comparison = write_comparison(results, "bench_x", "reference_model", [("model_a", "reference_model", 4.0, 0.01)],
                                  {m: f"sha-{m}" for m in models})
    data = json.loads(comparison.read_text())
    data["pairs"][0]["coverage"] = {"answered": 2350, "total": 2374}
    comparison.write_text(json.dumps(data))
    written += build_report(scores, models, benchmarks, results / "tables", results / "figures",
                            comparison_files={"bench_x": comparison}, reference_model="reference_model")
    return written


@needs_pdflatex
def test_every_table_compiles_within_the_page(tmp_path):
    tables = every_table(tmp_path / "report")
    assert {path.name for path in tables} == {"main.tex", "comparisons.tex", "reported.tex", "kaleidoscope.tex",
                                              "cvqa.tex", "cvqa-pairs.tex", "dance.tex"}
    assert any(r"\textbf{" in tex.read_text() for tex in tables if tex.name == "comparisons.tex") is False
    # the partial cell's double dagger is among what compiles: in the main table and in the comparisons
    assert {tex.name for tex in tables if "partial" in tex.parts and r"$^{\ddagger}$" in tex.read_text()} == {
        "main.tex", "comparisons.tex"}
    for tex in tables:
        log = compile_table(tex, tmp_path)
        # a table wider than the text would push into the margin: LaTeX says so as an overfull box
        overfull = re.findall(r"^Overfull \\hbox \((.*?)\)", log, re.M)
        assert not overfull, f"{tex.name} is wider than the page: {overfull}"


@needs_pdflatex
def test_a_broken_table_fails_to_compile(tmp_path):
    # the check above can fail: an unescaped underscore stops pdflatex
    broken = tmp_path / "broken.tex"
    broken.write_text("\\begin{tabular}{l}\nclip_tiny \\\\\n\\end{tabular}\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="does not compile"):
        compile_table(broken, tmp_path)


@needs_pdflatex
def test_an_unsplit_wide_table_is_shrunk_to_the_page(tmp_path):
    header = [["Model", *(f"benchmark-{k}" for k in range(15))]]
    rows = [["a-model", *(r"51.2\,{\scriptsize [44.0, 58.1]}" for _ in range(15))]]
    tex = tmp_path / "wide.tex"
    tex.write_text(latex_table("Wide", "wide", header, rows, split=False), encoding="utf-8")
    assert "Overfull \\hbox" not in compile_table(tex, tmp_path)
    # without the shrinking it would not fit: the check sees it
    tex.write_text(latex_table("Wide", "wide", header, rows, split=False).replace(
        r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%", "{%"), encoding="utf-8")
    assert "Overfull \\hbox" in compile_table(tex, tmp_path)


@needs_pdflatex
@pytest.mark.integration
def test_the_default_grids_tables_compile_within_the_page(snakemake_run, tmp_path):
    tables = sorted((snakemake_run / "results" / "tables").glob("*.tex"))
    assert {"main.tex", "comparisons.tex", "reported.tex", "kaleidoscope.tex", "cvqa.tex", "dance.tex"} <= {
        path.name for path in tables}
    for tex in tables:
        assert "Overfull \\hbox" not in compile_table(tex, tmp_path), f"{tex.name} is wider than the page"
