"""The report's LaTeX tables: best bold and second underlined as the papers mark them, wide tables split into
blocks, and every .tex file compiling in a minimal document with pdflatex, inside the page's width, and a
table longer than a page running on over the next pages."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from helpers.compare import write_comparison, write_score
from helpers.report import _write, cvqa_obj, dance_obj, kaleidoscope_obj
from helpers.reported import build as build_reported

from vlmgrid.report import build_report
from vlmgrid.report.tables.format import BEST, BLOCK_COLUMNS, SECOND, _blocks, emphasis, latex_table

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(
    PDFLATEX is None,
    reason="pdflatex is not installed (Debian: texlive-latex-base and texlive-latex-recommended); the tables "
    "are not compiled",
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


def unbox(cell: str) -> str:
    """A cell's text without the box `latex_table` sets it in, nor the break points `latex_name` adds."""
    match = re.fullmatch(
        r"\\parbox\[[tb]\]\{[^{}]*\}\{\\(?:raggedright|centering)\\hspace\{0pt\}(.*)\}", cell
    )
    return (match.group(1) if match else cell).replace(r"\hspace{0pt}", "")


def table_rows(tex: str) -> list[list[str]]:
    """The rows of every tabular of a table, their cells unboxed."""
    return [
        [unbox(cell) for cell in line.removesuffix(r" \\").split(" & ")]
        for line in tex.splitlines()
        if line.endswith(r" \\") and not line.startswith(r"\multicolumn")
    ]


def test_each_block_repeats_the_row_names():
    header = [["Model", *"abcdefg"]]
    rows = [["m1", *"1234567"], ["m2", *"7654321"]]
    assert BLOCK_COLUMNS == 4
    tex = latex_table("T", "t", header, rows)
    assert tex.count(r"\begin{longtable}{lcccc}") == 1 and tex.count(r"\begin{longtable}{lccc}") == 1
    # one caption and label, on the first block; the second has the same number
    assert tex.count(r"\caption{T}\label{tab:t} \\") == 1 and tex.count(r"\addtocounter{table}{-1}") == 1
    assert tex.index(r"\caption{T}") < tex.index(r"\addtocounter") < tex.index(r"\begin{longtable}{lccc}")
    cells = table_rows(tex)
    assert ["Model", *"abcd"] in cells and ["Model", *"efg"] in cells
    assert ["m1", *"567"] in cells and ["m2", *"7654"] in cells
    # every tabular is as wide as the line, at most: the names' share and the value columns' add up to it
    assert r"\parbox[t]{\dimexpr0.22\linewidth-2\tabcolsep\relax}{\raggedright\hspace{0pt}m1}" in tex
    assert (
        r"\parbox[b]{\dimexpr(0.78\linewidth-8\tabcolsep-1pt)*250/1000\relax}{\centering\hspace{0pt}a}" in tex
    )
    assert (
        r"\parbox[b]{\dimexpr(0.78\linewidth-6\tabcolsep-1pt)*333/1000\relax}{\centering\hspace{0pt}e}" in tex
    )
    assert r"\resizebox" not in tex
    unsplit = latex_table("T", "t", header, rows, split=False)
    assert unsplit.count(r"\begin{longtable}") == 1 and r"\addtocounter" not in unsplit


# --- a grid of 14 benchmarks and three models --------------------------------------------------------------

BENCHES = [f"bench_{k:02d}-fixture" for k in range(14)]
MODELS = ["clip-tiny", "llava-tiny", "random"]
METRICS = ["accuracy", "f1", "scaled", "acc_at_50", "vqa_accuracy", "circular_accuracy", "pair_accuracy"]


def wide_grid(root: Path, models: list[str] = MODELS) -> dict:
    files = {}
    for i, model in enumerate(models):
        for k, bench in enumerate(BENCHES):
            if model == "clip-tiny" and k == 5:
                obj = {"model": model, "benchmark": bench, "applicable": False, "reason": "cannot generate"}
            else:
                value = 20.0 + 10 * ((i + k) % 3) + k / 10
                obj = {
                    "model": model,
                    "benchmark": bench,
                    "metric": METRICS[k % len(METRICS)],
                    "value": value,
                    "ci95": [value - 5, value + 5],
                    "n": 90,
                    "n_valid": 80,
                    "n_errors": 10,
                    # llava-tiny on bench_03 is built on too many format errors: a dagger
                    "format_error_rate": 40.0 if (model, k) == ("llava-tiny", 3) else 1.0,
                    "bootstrap": {"samples": 3, "seed": 0, "draws": [value - 1, value, value + 1]},
                }
            files[(model, bench)] = _write(root, obj)
    return files


def test_the_main_table_of_a_wide_grid_is_split_and_marks_each_column(tmp_path):
    build_report(wide_grid(tmp_path), MODELS, BENCHES, tmp_path / "tables", tmp_path / "figures")
    tex = (tmp_path / "tables" / "main.tex").read_text(encoding="utf-8")
    # 14 benchmarks and the average: four blocks of four, four, four and three value columns
    assert tex.count(r"\begin{longtable}{lcccc}") == 3 and tex.count(r"\begin{longtable}{lccc}") == 1
    # each block's header twice: on its first page and on every page it runs on to
    assert tex.count(r"\toprule") == 8 and tex.count(r"\endfirsthead") == tex.count(r"\endhead") == 4
    rows = {}
    for name, *cells in table_rows(tex):
        if name in MODELS:
            rows.setdefault(name, []).extend(cells)
    assert all(len(cells) == 15 for cells in rows.values())
    # bench_00: clip-tiny 20.0, llava-tiny 30.0, random 40.0, each over its CI
    stacked = r"\begin{tabular}[t]{@{}c@{}}%s \\{} {\scriptsize [%s, %s]}\end{tabular}"
    assert [rows[m][0] for m in MODELS] == [
        stacked % ("20.0", "15.0", "25.0"),
        stacked % (r"\underline{30.0}", "25.0", "35.0"),
        stacked % (r"\textbf{40.0}", "35.0", "45.0"),
    ]
    assert rows["clip-tiny"][5] == "n/a"
    assert r"$^{\dagger}$" in rows["llava-tiny"][3]
    assert (
        r"{\footnotesize Acc@50}" in tex and r"{\footnotesize MME scaled}" in tex and "acc_at_50" not in tex
    )


# --- compiled ----------------------------------------------------------------------------------------------

DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs}
\usepackage{longtable}
\usepackage{graphicx}
\begin{document}
\input{%s}
\end{document}
"""


# What LaTeX logs of a table taller than the page (a float, or a box, that cannot be broken across pages) or
# whose page is stretched or squeezed out of shape.
TOO_TALL = re.compile(
    r"^(?:LaTeX Warning: Float too large for page by .*|(?:Overfull|Underfull) \\vbox \(.*?\))", re.M
)


def compile_table(tex: Path, workdir: Path) -> str:
    """pdflatex on a minimal document holding the table; its log (the test fails on an error, and on a table
    taller than the page: `TOO_TALL`)."""
    document = workdir / f"{tex.stem}-document.tex"
    document.write_text(DOCUMENT % tex.resolve().as_posix(), encoding="utf-8")
    result = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", document.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (workdir / f"{document.stem}.log").read_text(encoding="utf-8", errors="replace")
    assert result.returncode == 0, f"{tex.name} does not compile:\n" + "\n".join(
        line for line in log.splitlines() if line.startswith("!") or "Error" in line
    )
    too_tall = TOO_TALL.findall(log)
    assert not too_tall, f"{tex.name} does not fit the page: {too_tall}"
    return log


def every_table(root: Path) -> list[Path]:
    """Reports holding every table kind: the wide main table and the papers' (Kaleidoscope, CVQA, DANCE), the
    comparisons against a reference model, and the published numbers beside the reproduced ones."""
    files = wide_grid(root / "grid")
    for k, model in enumerate(MODELS):
        files[(model, "kal_bench")] = _write(
            root / "grid",
            {
                **kaleidoscope_obj(
                    model,
                    "kal_bench",
                    {
                        "ar": (50.0 - 10 * k, 0.0, 100.0),
                        "te": (25.0 + k, 0.0, 75.0),
                        "es": (10.0 * k, 0.0, 40.0),
                    },
                )
            },
        )
        files[(model, "cvqa")] = _write(root / "grid", {**cvqa_obj(model, 5.0 * k), "model": model})
        files[(model, "dance")] = _write(
            root / "grid",
            {
                **dance_obj(
                    model,
                    {
                        "test-seen riddle-to-image": (60.0 - k, 40.0, 80.0),
                        "test-seen image-to-riddle": (50.0, 30.0, 70.0),
                        "test-unseen riddle-to-image": (20.0, 10.0, 30.0),
                        "test-unseen image-to-riddle": (10.0, 0.0, 20.0),
                    },
                ),
                "model": model,
            },
        )
    kinds = {"kal_bench": "kaleidoscope", "cvqa": "cvqa", "dance": "dance"}
    written = build_report(
        files,
        MODELS,
        [*BENCHES, *kinds],
        root / "grid" / "tables",
        root / "grid" / "figures",
        kinds=kinds,
        title="Results: 100% of the grid & more",
    )

    results = root / "compared"
    models, benchmarks = ["model_a", "model_b", "reference_model"], ["bench_x", "bench_y"]
    scores = {(m, b): write_score(results, m, b, 50.0, f"sha-{m}") for m in models for b in benchmarks}
    comparisons = {
        b: write_comparison(
            results,
            b,
            "reference_model",
            [("model_a", "reference_model", 4.0, 0.01), ("model_b", "reference_model", -2.0, 0.3)],
            {m: f"sha-{m}" for m in models},
        )
        for b in benchmarks
    }
    # a pair without a comparison, as the compare stage writes it: n/a in the table, its reason in a note
    data = json.loads(comparisons["bench_y"].read_text())
    data["pairs"][1] = {
        "model_a": "model_b",
        "model_b": "reference_model",
        "comparable": False,
        "reason": "model_b cannot run bench_y: the model scores image-text similarity and cannot "
        "generate text",
    }
    comparisons["bench_y"].write_text(json.dumps(data))
    written += build_report(
        scores,
        models,
        benchmarks,
        results / "tables",
        results / "figures",
        comparison_files=comparisons,
        reference_model="reference_model",
    )

    written += build_reported(root / "reported")
    written += partial_tables(root / "partial")
    return sorted(path for path in written if path.suffix == ".tex")


def _amend(path: Path, **keys) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **keys}))


def partial_tables(root: Path) -> list[Path]:
    """Reports with a partial cell (an imported answer set that lacks items by construction, its score file's
    coverage): the wide grid's main table with llava-tiny on bench_07 answering 2,350 of 2,374 items (and on
    bench_03 scored on a copy of 24 of its 2,374 items), and the comparisons of a pair compared on the items
    both answered (report.partial_cells: include), its A on a partial copy and batch-dependent."""
    files = wide_grid(root / "grid")
    _amend(files[("llava-tiny", BENCHES[7])], coverage={"answered": 2350, "total": 2374}, n=2350)
    _amend(
        files[("llava-tiny", BENCHES[3])],
        partial_copy={"items": 24, "published_items": 2374, "source": "local"},
    )
    written = build_report(files, MODELS, BENCHES, root / "grid" / "tables", root / "grid" / "figures")

    results = root / "compared"
    models, benchmarks = ["model_a", "reference_model"], ["bench_x"]
    scores = {(m, b): write_score(results, m, b, 50.0, f"sha-{m}") for m in models for b in benchmarks}
    _amend(
        scores[("model_a", "bench_x")],
        partial_copy={"items": 24, "published_items": 2374, "source": "local"},
        invariance={"checked": 8, "same": 7, "differing": ["q1"]},
    )
    comparison = write_comparison(
        results,
        "bench_x",
        "reference_model",
        [("model_a", "reference_model", 4.0, 0.01)],
        {m: f"sha-{m}" for m in models},
    )
    data = json.loads(comparison.read_text())
    data["pairs"][0]["coverage"] = {"answered": 2350, "total": 2374}
    comparison.write_text(json.dumps(data))
    written += build_report(
        scores,
        models,
        benchmarks,
        results / "tables",
        results / "figures",
        comparison_files={"bench_x": comparison},
        reference_model="reference_model",
    )
    return written


@needs_pdflatex
def test_every_table_compiles_within_the_page(tmp_path):
    tables = every_table(tmp_path / "report")
    assert {path.name for path in tables} == {
        "main.tex",
        "comparisons.tex",
        "reported.tex",
        "kaleidoscope.tex",
        "cvqa.tex",
        "cvqa-pairs.tex",
        "dance.tex",
    }
    assert any(r"\textbf{" in tex.read_text() for tex in tables if tex.name == "comparisons.tex") is False
    # the partial cell's double dagger is among what compiles: in the main table and in the comparisons; so
    # are a partial copy's pilcrow and a batch-dependent cell's not-equal sign
    for mark, names in (
        (r"$^{\ddagger}$", {"main.tex", "comparisons.tex"}),
        (r"$^{\P}$", {"main.tex", "comparisons.tex"}),
        (r"$^{\neq}$", {"main.tex", "comparisons.tex"}),
    ):
        assert {tex.name for tex in tables if "partial" in tex.parts and mark in tex.read_text()} == names, (
            mark
        )
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
@pytest.mark.parametrize(
    "body",
    [
        # a float cannot run on to the next page: LaTeX sets it anyway, over the page's foot
        "\\begin{table}[t]\n\\begin{tabular}{l}\n"
        + "".join(f"row {k} \\\\\n" for k in range(80))
        + "\\end{tabular}\n\\end{table}\n",
        "\\vbox to 10pt{\\hbox{a}\\vskip 20pt}\n",  # a box taller than its height: Overfull \vbox
        "\\vbox to 100pt{\\hbox{a}}\n",  # a box stretched out of shape: Underfull \vbox
    ],
)
def test_a_table_taller_than_its_room_fails_the_compile(tmp_path, body):
    # the checks below can fail: the log's warnings of a table or box that does not fit stop the test
    tall = tmp_path / "tall.tex"
    tall.write_text(body, encoding="utf-8")
    with pytest.raises(AssertionError, match="does not fit the page"):
        compile_table(tall, tmp_path)


def _unescape(match: re.Match) -> bytes:
    """A PDF string's escaped byte: an octal code ("\\050" is "(") or the character after the backslash."""
    code = match.group(1)
    return bytes([int(code, 8)]) if code[:1].isdigit() else code


def page_texts(pdf: Path) -> list[str]:
    """The text each page of an uncompressed PDF draws, in page order, its strings joined without spaces (the
    words are apart by moves, not space characters)."""
    texts = []
    for head, stream in re.findall(rb"<<([^<>]*)>>\s*stream\r?\n(.*?)\r?\nendstream", pdf.read_bytes(), re.S):
        if b"/Length1" in head or b" Tf" not in stream:  # an embedded font, not a page
            continue
        strings = [token[1:-1] for token in _TOKEN.findall(stream) if token.startswith(b"(")]
        text = b"".join(re.sub(rb"\\([0-7]{1,3}|.)", _unescape, string) for string in strings)
        texts.append(text.decode("latin-1"))
    return texts


def compile_pages(tex: Path, workdir: Path) -> list[str]:
    """`compile_table` (so nothing is taller than its room), then the text of each page, compiled
    uncompressed."""
    compile_table(tex, workdir)
    document = workdir / f"{tex.parent.parent.name}-{tex.stem}-pages.tex"
    document.write_text(
        r"\pdfcompresslevel=0 \pdfobjcompresslevel=0" + "\n" + DOCUMENT % tex.resolve().as_posix(),
        encoding="utf-8",
    )
    result = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", document.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{tex.name} does not compile"
    return page_texts(workdir / f"{document.stem}.pdf")


# a paper's grid: a dozen models (two of them as in the wide grid: an n/a cell, a marked one)
MANY_MODELS = [*MODELS, *(f"model-{k:02d}" for k in range(9))]


@needs_pdflatex
def test_a_table_longer_than_a_page_runs_on_with_its_header(tmp_path):
    files = wide_grid(tmp_path / "grid", MANY_MODELS)
    build_report(files, MANY_MODELS, BENCHES, tmp_path / "grid" / "tables", tmp_path / "grid" / "figures")
    # each model against the reference: 11 pairs x 14 benchmarks, a difference over its CI in each row
    results, reference = tmp_path / "compared", MANY_MODELS[-1]
    shas = {m: f"sha-{m}" for m in MANY_MODELS}
    scores = {(m, b): write_score(results, m, b, 50.0, shas[m]) for m in MANY_MODELS for b in BENCHES}
    comparisons = {
        b: write_comparison(
            results, b, reference, [(m, reference, 4.0, 0.01) for m in MANY_MODELS[:-1]], shas
        )
        for b in BENCHES
    }
    build_report(
        scores,
        MANY_MODELS,
        BENCHES,
        results / "tables",
        results / "figures",
        comparison_files=comparisons,
        reference_model=reference,
    )
    for tex, first, last_row in (
        (tmp_path / "grid" / "tables" / "main.tex", "Model", "model-08"),
        (results / "tables" / "comparisons.tex", "Benchmark", "bench_13-"),
    ):
        pages = compile_pages(tex, tmp_path)
        assert len(pages) >= 3, f"{tex.name}: {len(pages)} pages"
        # the caption on the first page only; every further page under "(continued)" and the header again
        assert pages[0].startswith("Table1:") and "(continued)" not in pages[0]
        for page in pages[1:]:
            assert page.startswith(("Table1:(continued)" + first, first)), page[:200]
        assert sum(page.startswith("Table1:(continued)") for page in pages) >= 1
        # a page whose rows go on says so at its foot (before its number), and only such a page; a block that
        # ends on a page does not, and the next begins with its own header
        for k, page in enumerate(pages[:-1], 1):
            assert page.endswith(f"continuedonthenextpage{k}") == pages[k].startswith("Table1:(continued)"), k
        assert "continuedonthenextpage" not in pages[-1] and last_row in pages[-1]
        assert_normal_size(tex, tmp_path)


@needs_pdflatex
def test_a_wide_table_is_split_to_fit_the_page_at_its_size(tmp_path):
    header = [["Model", *(f"benchmark-{k}" for k in range(15))]]
    rows = [["a-model", *(r"51.2\,{\scriptsize [44.0, 58.1]}" for _ in range(15))]]
    tex = tmp_path / "wide.tex"
    tex.write_text(latex_table("Wide", "wide", header, rows), encoding="utf-8")
    assert "Overfull \\hbox" not in compile_table(tex, tmp_path)
    # in one tabular it would not fit: the check sees it
    tex.write_text(latex_table("Wide", "wide", header, rows, split=False), encoding="utf-8")
    assert "Overfull \\hbox" in compile_table(tex, tmp_path)


@needs_pdflatex
@pytest.mark.integration
def test_the_default_grids_tables_compile_within_the_page(snakemake_run, tmp_path):
    tables = sorted((snakemake_run / "results" / "tables").glob("*.tex"))
    assert {"main.tex", "comparisons.tex", "reported.tex", "kaleidoscope.tex", "cvqa.tex", "dance.tex"} <= {
        path.name for path in tables
    }
    for tex in tables:
        assert "Overfull \\hbox" not in compile_table(tex, tmp_path), f"{tex.name} is wider than the page"
        assert_normal_size(tex, tmp_path)


# --- the size the table is set in --------------------------------------------------------------------------

# The sizes pdflatex sets text in, in a 10pt article: \normalsize, \small, \footnotesize, \scriptsize and the
# math script sizes (6pt, 5pt), as the PDF's Tf operator gives them. A table scaled to fit sets in other
# sizes.
LATEX_SIZES = {9.96, 8.97, 7.97, 6.97, 5.98, 4.98}
NORMAL = 9.96

_TOKEN = re.compile(rb"\((?:\\.|[^\\)])*\)|\[|\]|<[0-9a-fA-F]*>|/[^\s/\[\]()<>]+|[^\s/\[\]()<>]+")


def set_sizes(pdf: Path) -> Counter:
    """{size in pt: characters} of the text an uncompressed PDF draws: the font size (Tf) times the scale of
    the text matrix (Tm) and of the graphics state (cm, saved by q and restored by Q)."""
    sizes: Counter = Counter()
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf.read_bytes(), re.S):
        scale, saved, operands, font, text = 1.0, [], [], 0.0, 1.0
        for token in _TOKEN.findall(stream):
            if token == b"q":
                saved.append(scale)
            elif token == b"Q":
                scale = saved.pop()
            elif token in (b"cm", b"Tm"):
                a, b, c, d = (float(x) for x in operands[-6:-2])
                if token == b"cm":
                    scale *= abs(a * d - b * c) ** 0.5
                else:
                    text = abs(a * d - b * c) ** 0.5
            elif token == b"BT":
                text = 1.0
            elif token == b"Tf":
                font = float(operands[-1])
            elif token in (b"TJ", b"Tj"):
                sizes[round(font * text * scale, 2)] += sum(
                    len(o) - 2 for o in operands if o.startswith(b"(")
                )
            if token[:1].isalpha() and token not in (b"true", b"false", b"null"):
                operands = []
            else:
                operands.append(token)
    return sizes


def table_sizes(tex: Path, workdir: Path) -> Counter:
    """The sizes the table's own text is set in: the .tex without its caption (set at the document's size
    whatever the table does) on a page without a number, compiled uncompressed."""
    bare = workdir / f"{tex.parent.parent.name}-{tex.stem}-bare.tex"
    bare.write_text(
        "\n".join(
            line for line in tex.read_text(encoding="utf-8").splitlines() if not line.startswith(r"\caption{")
        ),
        encoding="utf-8",
    )
    document = workdir / f"{bare.stem}-document.tex"
    # without the page number, which is set at the document's size whatever the table does
    document.write_text(
        r"\pdfcompresslevel=0 \pdfobjcompresslevel=0"
        + "\n"
        + DOCUMENT.replace(r"\begin{document}", r"\begin{document}\pagestyle{empty}")
        % bare.resolve().as_posix(),
        encoding="utf-8",
    )
    result = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", document.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{tex.name} does not compile"
    return set_sizes(workdir / f"{document.stem}.pdf")


def assert_normal_size(tex: Path, workdir: Path) -> None:
    """The table sets its text in LaTeX's sizes only, its names and values in the document's (the CIs and
    notes in smaller ones), never in a size a scaling makes."""
    sizes = table_sizes(tex, workdir)
    assert set(sizes) <= LATEX_SIZES, f"{tex.name} is scaled: it sets text in {sorted(sizes)} pt"
    assert max(sizes) == NORMAL, (
        f"{tex.name} is set in {max(sizes)} pt at most, not the document's {NORMAL} pt"
    )


@needs_pdflatex
def test_every_table_is_set_at_the_document_s_size(tmp_path):
    tables = every_table(tmp_path / "report")
    for path in tables:
        assert_normal_size(path, tmp_path)


def test_a_pair_without_a_comparison_reads_n_a_with_a_note(tmp_path):
    compared = tmp_path / "report" / "compared" / "tables" / "comparisons.tex"
    assert compared in every_table(tmp_path / "report")
    tex = compared.read_text(encoding="utf-8")
    # each pair heads its rows; the pair without a comparison: a short mark in the difference column, its
    # reason in the note under the table
    lines = tex.splitlines()
    heading = next(i for i, line in enumerate(lines) if r"model\_\hspace{0pt}b $-$" in line)
    row = table_rows(lines[heading + 2])[0]
    assert row[0] == r"bench\_y" and row[3] == "n/a$^{1}$" and "cannot" not in lines[heading + 2]
    assert r"$^{1}$model\_b cannot run bench\_y: the model scores image-text similarity" in tex


@needs_pdflatex
def test_a_table_scaled_to_fit_is_seen(tmp_path):
    # the size check can fail: a table shrunk by a \resizebox (as every wide table was) sets in no LaTeX size
    header = [["Model", *(f"benchmark-{k}" for k in range(15))]]
    rows = [["a-model", *(r"51.2\,{\scriptsize [44.0, 58.1]}" for _ in range(15))]]
    tex = tmp_path / "tables" / "wide.tex"
    tex.parent.mkdir()
    scaled = "\n".join(
        [
            r"\begin{table}[t]",
            r"\resizebox{\linewidth}{!}{\begin{tabular}{l%s}" % ("c" * 15),
            *(" & ".join(row) + r" \\" for row in [*header, *rows]),
            r"\end{tabular}}",
            r"\end{table}",
        ]
    )
    tex.write_text(scaled, encoding="utf-8")
    with pytest.raises(AssertionError, match="is scaled"):
        assert_normal_size(tex, tmp_path)
    # one set in \small throughout is seen too
    table = latex_table("Wide", "wide", header, rows)
    tex.write_text(table.replace(r"\begingroup", r"\begingroup\small"), encoding="utf-8")
    with pytest.raises(AssertionError, match="not the document's"):
        assert_normal_size(tex, tmp_path)
    # split into blocks, at the document's size: the check passes
    tex.write_text(table, encoding="utf-8")
    assert_normal_size(tex, tmp_path)
