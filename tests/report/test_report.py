"""vlmgrid.report: tables and figures from hand-written score files."""

from __future__ import annotations

import base64
import json
import re

import pytest
from helpers.dvc_lock import write_dvc_repo
from helpers.report import (
    BENCHES,
    DASH,
    MODELS,
    POPE_SPLITS,
    _est,
    _write,
    build,
    cvqa_obj,
    dance_obj,
    kaleidoscope_obj,
    mark_not_applicable,
    md_rows,
    plain_latex,
    read_csv,
    write_scores,
)

from vlmgrid.errors import VlmgridError
from vlmgrid.report import build_report
from vlmgrid.report.outputs import report_files


@pytest.fixture
def report(tmp_path):
    files = write_scores(tmp_path)
    written = build(tmp_path, files)
    return tmp_path, written


def test_written_files(report):
    root, written = report
    expected = [
        root / "tables" / n
        for n in (
            "main.md",
            "main.tex",
            "main.html",
            "main.csv",
            "breakdown.md",
            "breakdown.csv",
            "variants.md",
            "variants.csv",
            "cells.md",
            "cells.csv",
            "comparisons.md",
            "comparisons.tex",
            "comparisons.csv",
            "reported.md",
            "reported.tex",
            "reported.csv",
        )
    ]
    expected += [
        root / "figures" / n
        for n in ("main.png", "main.pdf", "main-embedded.html", "reported.png", "reported.pdf")
    ]
    expected += [root / "metrics" / f"{name}.json" for name in (*BENCHES, "Average")]
    assert written == expected
    # what the workflow declares as the report's outputs (no paper tables without their benchmark kinds)
    assert [
        path
        for path, _ in report_files(
            root, {"pope-fixture": "pope", "sqa_img": "scienceqa_img", "flowers": "flowers102"}
        )
    ] == expected
    assert all(p.is_file() and p.stat().st_size > 0 for p in expected)
    # atomic writes leave no temporary files behind
    leftovers = [p.name for d in ("tables", "figures") for p in (root / d).iterdir() if p not in expected]
    assert leftovers == []


def test_markdown_cells(report):
    root, _ = report
    rows = md_rows(root / "tables" / "main.md")
    assert rows["Model"] == ["pope-fixture (F1)", "sqa_img (Acc.)", "flowers (Top-1)", "Average"]
    assert rows["big-vlm"][:3] == ["51.2 [44.0, 58.1]", "20.0 [15.5, 25.0]", "33.3 [30.0, 36.6]"]
    assert rows["clip_tiny"] == [
        "50.0 [5.0, 85.0]",
        "25.0 [12.0, 38.0]",
        "18.0 [10.0, 29.0]",
        "31.0 [11.0, 49.0]",
    ]
    assert list(rows) == ["Model", "clip_tiny", "big-vlm"]  # models in the given order
    text = (root / "tables" / "main.md").read_text(encoding="utf-8")
    legend = text.strip().splitlines()[-1]
    assert "percent" in legend and "95% bootstrap CI" in legend and "5 bootstrap samples" in legend
    assert "n/a" not in legend  # the n/a note only where a cell is n/a


def test_average_ci_from_averaged_draws(report):
    root, _ = report
    rows = {r["model"]: r for r in read_csv(root / "tables" / "main.csv")}
    clip = rows["clip_tiny"]
    assert float(clip["average"]) == pytest.approx((50.0 + 25.0 + 18.0) / 3)
    # From the averaged draws (hand-computed above); averaging the ci95 bounds would give [9.0, 50.67].
    assert float(clip["average_ci_low"]) == pytest.approx(11.0)
    assert float(clip["average_ci_high"]) == pytest.approx(49.0)
    big = rows["big-vlm"]
    # big-vlm's draws average to [34, 35.667, 34.333, 36.667, 32.667] -> sorted, linear percentiles
    avg = sorted(
        [(50 + 19 + 33) / 3, (52 + 21 + 34) / 3, (51 + 20 + 32) / 3, (53 + 22 + 35) / 3, (49 + 18 + 31) / 3]
    )
    low = avg[0] + 0.1 * (avg[1] - avg[0])
    high = avg[3] + 0.9 * (avg[4] - avg[3])
    assert float(big["average"]) == pytest.approx((51.2 + 20.04 + 33.3) / 3)
    assert float(big["average_ci_low"]) == pytest.approx(low)
    assert float(big["average_ci_high"]) == pytest.approx(high)


def test_the_csv_average_is_rounded_like_its_columns(report):
    root, _ = report
    rows = {r["model"]: r for r in read_csv(root / "tables" / "main.csv")}
    # (51.2 + 20.04 + 33.3) / 3 = 34.84666...: four decimals, as the score files round the cells
    assert rows["big-vlm"]["average"] == "34.8467"
    assert rows["clip_tiny"]["average"] == "31.0"
    assert all(
        len(row[name].partition(".")[2]) <= 4
        for row in rows.values()
        for name in ("average", "average_ci_low", "average_ci_high")
    )


def test_csv_columns_and_values(report):
    root, _ = report
    with open(root / "tables" / "main.csv", encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    expected = ["model"]
    for name in BENCHES + ["average"]:
        expected += [name, f"{name}_ci_low", f"{name}_ci_high"]
    # then per benchmark the cell's format error rate and whether it is marked, and whether the average is
    for name in BENCHES:
        expected += [f"{name}_format_error_rate", f"{name}_flagged"]
    expected += ["average_flagged"]
    assert header == expected
    rows = read_csv(root / "tables" / "main.csv")
    assert [r["model"] for r in rows] == MODELS
    big = rows[1]
    assert float(big["sqa_img"]) == 20.04  # full precision, not the rounded display value
    assert float(big["sqa_img_ci_low"]) == 15.46
    assert float(big["sqa_img_ci_high"]) == 24.96
    assert float(rows[0]["pope-fixture_ci_high"]) == 85.0


def test_latex(report):
    root, _ = report
    tex = plain_latex((root / "tables" / "main.tex").read_text(encoding="utf-8"))
    # a longtable: its header on the first page and again on each page it runs on to, its foot on each page
    # but the last and on the last
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert tex.count(rule) == 2
    assert (
        tex.index(r"\toprule")
        < tex.index(r"\midrule")
        < tex.index(r"\endfirsthead")
        < tex.index(r"\endhead")
        < tex.index(r"\bottomrule")
        < tex.index(r"\endfoot")
        < tex.index(r"\endlastfoot")
    )
    assert r"\begin{table}" not in tex
    assert r"\begin{longtable}{lcccc}" in tex and r"\end{longtable}" in tex
    assert r"\caption{" in tex and r"\label{tab:main}" in tex and r"\caption[]{(continued)}" in tex
    # benchmarks on the first header row, what their headline measures on the second
    assert r"Model & pope-fixture & sqa\_img & flowers & Average \\" in tex
    assert r" & {\footnotesize F1} & {\footnotesize Acc.} & {\footnotesize Top-1} &  \\" in tex
    assert r"clip\_tiny" in tex
    assert "sqa_img" not in tex and "clip_tiny" not in tex  # every underscore escaped
    assert r"95\% bootstrap" in tex
    lines = {line.split(" & ")[0]: line for line in tex.splitlines() if " & " in line}
    clip, big = lines[r"clip\_tiny"], lines["big-vlm"]
    # best per column: pope big-vlm, sqa clip_tiny, flowers big-vlm, average big-vlm (33.5 vs 31.0)
    assert r"\textbf{51.2}" in big and r"\textbf{50.0}" not in clip
    assert r"\textbf{25.0}" in clip and r"\textbf{20.0}" not in big
    assert r"\textbf{33.3}" in big and r"\textbf{18.0}" not in clip
    assert r"\textbf{34.8}" in big and r"\textbf{31.0}" not in clip
    assert tex.count(r"\textbf") == 4 and r"\underline" not in tex  # two models: a best, no second
    assert r"\textbf{51.2} \\{} {\scriptsize [44.0, 58.1]}" in big  # the CI under the value
    assert big.rstrip().endswith(r"\\")


def test_html_table_for_the_reports_first_page(tmp_path):
    files = write_scores(tmp_path)
    build(tmp_path, files, title="Results <1> & more")
    page = (tmp_path / "tables" / "main.html").read_text(encoding="utf-8")
    assert "<b>Results &lt;1&gt; &amp; more</b>" in page  # escaped, never markup of its own
    assert '<table class="dataframe vlmgrid-main">' in page
    # turned: a row per benchmark (then Average), a column per model, each value with its CI on one line
    header = re.findall(r"<th>(.*?)</th>", page)
    assert header == ["Benchmark", "clip_tiny", "big-vlm"]
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert cells[cells.index("sqa_img (Acc.)") :][:3] == [
        "sqa_img (Acc.)",
        "25.0 [12.0, 38.0]",
        "20.0 [15.5, 25.0]",
    ]
    assert cells[-3:] == ["Average", "31.0 [11.0, 49.0]", "34.8 [32.8, 36.6]"]
    assert "<details open><summary>Legend</summary>" in page and "95% bootstrap CI in brackets" in page


def test_html_figure_embeds_the_png_itself(report):
    root, _ = report
    page = (root / "figures" / "main-embedded.html").read_text(encoding="utf-8")
    data = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page).group(1)
    # the single-file report carries the picture, not a path to it
    assert base64.b64decode(data) == (root / "figures" / "main.png").read_bytes()


def test_latex_escapes_specials(tmp_path):
    files = write_scores(tmp_path)
    build(tmp_path, files, title="Results & 100% of #1")
    tex = plain_latex((tmp_path / "tables" / "main.tex").read_text(encoding="utf-8"))
    assert r"\caption{Results \& 100\% of \#1." in tex


def test_breakdown(report):
    root, _ = report
    rows = read_csv(root / "tables" / "breakdown.csv")
    assert list(rows[0]) == [
        "model",
        "benchmark",
        "column",
        "group",
        "metric",
        "value",
        "ci_low",
        "ci_high",
        "n",
        "n_valid",
        "format_error_rate",
        "flagged",
    ]
    assert len(rows) == 6  # only pope-fixture has a breakdown: 2 models x 3 splits
    assert [(r["model"], r["group"]) for r in rows] == [(m, s) for m in MODELS for s in POPE_SPLITS]
    assert rows[1] == {
        "model": "clip_tiny",
        "benchmark": "pope-fixture",
        "column": "split",
        "group": "popular",
        "metric": "f1",
        "value": "41.0",
        "ci_low": "31.0",
        "ci_high": "56.5",
        "n": "30",
        "n_valid": "29",
        "format_error_rate": "3.3",
        "flagged": "False",
    }
    assert rows[5]["value"] == "52.0" and rows[5]["model"] == "big-vlm" and rows[5]["group"] == "adversarial"
    md = (root / "tables" / "breakdown.md").read_text(encoding="utf-8")
    assert "## pope-fixture" in md and "sqa_img" not in md
    table = md_rows(root / "tables" / "breakdown.md")
    header = table["Model"]
    assert header == ["split", "Metric", "Value [95% CI]", "n", "n_valid", "Format errors (%)"]
    lines = [line for line in md.splitlines() if line.startswith("| big-vlm | adversarial |")]
    assert lines == ["| big-vlm | adversarial | F1 | 52.0 [32.0, 57.5] | 30 | 29 | 3.3 |"]
    assert "| clip_tiny | (all) | F1 | 50.0 [5.0, 85.0] | 90 | 87 | 3.3 |" in md


def test_no_breakdown(tmp_path):
    files = write_scores(tmp_path)
    for path in files.values():
        obj = json.loads(path.read_text())
        obj.pop("breakdown")
        path.write_text(json.dumps(obj))
    build(tmp_path, files)
    assert read_csv(tmp_path / "tables" / "breakdown.csv") == []
    assert "No benchmark" in (tmp_path / "tables" / "breakdown.md").read_text(encoding="utf-8")


def test_figures(report):
    root, _ = report
    assert (root / "figures" / "main.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = (root / "figures" / "main.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and b"CreationDate" not in pdf
    from PIL import Image

    with Image.open(root / "figures" / "main.png") as image:
        assert image.info.get("dpi", (0, 0))[0] == pytest.approx(300, abs=1)
        assert image.size[0] == 2100  # 7 in
        assert "Software" not in image.info


def test_deterministic(tmp_path):
    files = write_scores(tmp_path)
    first = build_report(files, MODELS, BENCHES, tmp_path / "a" / "t", tmp_path / "a" / "f")
    second = build_report(files, MODELS, BENCHES, tmp_path / "b" / "t", tmp_path / "b" / "f")
    for one, two in zip(first, second):
        assert one.name == two.name and one.read_bytes() == two.read_bytes(), one.name


def test_missing_cell(tmp_path):
    files = write_scores(tmp_path, skip={("big-vlm", "flowers")})
    build(tmp_path, files)
    rows = md_rows(tmp_path / "tables" / "main.md")
    assert rows["big-vlm"] == ["51.2 [44.0, 58.1]", "20.0 [15.5, 25.0]", DASH, DASH]
    assert rows["clip_tiny"][3] == "31.0 [11.0, 49.0]"
    big = read_csv(tmp_path / "tables" / "main.csv")[1]
    for key in (
        "flowers",
        "flowers_ci_low",
        "flowers_ci_high",
        "average",
        "average_ci_low",
        "average_ci_high",
    ):
        assert big[key] == ""
    tex = plain_latex((tmp_path / "tables" / "main.tex").read_text(encoding="utf-8"))
    big_line = next(line for line in tex.splitlines() if line.startswith("big-vlm & "))
    assert big_line.endswith(r"& -- & -- \\")
    # only one model has an average, so there is no best to bold in that column
    assert r"\textbf{31.0}" not in tex
    assert (tmp_path / "figures" / "main.png").is_file()


def test_different_draw_lengths_give_no_average(tmp_path):
    files = write_scores(tmp_path)
    path = files[("big-vlm", "sqa_img")]
    obj = json.loads(path.read_text())
    obj["bootstrap"]["draws"] = obj["bootstrap"]["draws"][:4]
    path.write_text(json.dumps(obj))
    build(tmp_path, files)
    rows = md_rows(tmp_path / "tables" / "main.md")
    assert rows["big-vlm"][3] == DASH
    assert rows["clip_tiny"][3] == "31.0 [11.0, 49.0]"
    assert read_csv(tmp_path / "tables" / "main.csv")[1]["average"] == ""


def _corrupt_text(obj):
    return "{not json"


def _drop_draws(obj):
    del obj["bootstrap"]["draws"]
    return json.dumps(obj)


def _drop_ci(obj):
    del obj["ci95"]
    return json.dumps(obj)


def _wrong_model(obj):
    obj["model"] = "someone-else"
    return json.dumps(obj)


def _string_value(obj):
    obj["value"] = "51.2"
    return json.dumps(obj)


@pytest.mark.parametrize(
    "corrupt, reason",
    [
        (_corrupt_text, "not JSON"),
        (_drop_draws, "bootstrap.draws"),
        (_drop_ci, "ci95"),
        (_wrong_model, "someone-else"),
        (_string_value, "value"),
    ],
)
def test_invalid_score_file(tmp_path, corrupt, reason):
    files = write_scores(tmp_path)
    path = files[("big-vlm", "sqa_img")]
    path.write_text(corrupt(json.loads(path.read_text())))
    with pytest.raises(VlmgridError) as info:
        build(tmp_path, files)
    message = str(info.value)
    assert message.startswith(f"{path} is not a valid score file (")
    assert reason in message
    assert "rerun `vlmgrid score big-vlm sqa_img`" in message
    # nothing is written when an input is bad
    assert not (tmp_path / "tables").exists() and not (tmp_path / "figures").exists()


def test_unreadable_score_file(tmp_path):
    files = write_scores(tmp_path)
    missing = tmp_path / "scores" / "nope.json"
    files[("clip_tiny", "flowers")] = missing
    with pytest.raises(VlmgridError, match="nope.json is not a valid score file"):
        build(tmp_path, files)


def test_a_missing_score_file_dvc_tracks_says_dvc_pull_first(tmp_path, monkeypatch):
    files = write_scores(tmp_path / "results")
    missing = files[("clip_tiny", "flowers")]
    missing.unlink()
    monkeypatch.chdir(write_dvc_repo(tmp_path))  # DVC tracks results/scores
    rebuild = "rerun `vlmgrid score clip_tiny flowers` to rebuild it"
    with pytest.raises(VlmgridError) as caught:
        build(tmp_path, files)
    assert str(caught.value) == (
        f"{missing} is not a valid score file (cannot be read: FileNotFoundError); `dvc pull "
        f"results/scores/clip_tiny/flowers.json` fetches it (DVC tracks it: dvc.lock), or "
        f"{rebuild}"
    )
    (tmp_path / "dvc.lock").unlink()
    with pytest.raises(VlmgridError) as caught:
        build(tmp_path, files)
    assert (
        str(caught.value)
        == f"{missing} is not a valid score file (cannot be read: FileNotFoundError); {rebuild}"
    )


def test_bold_compares_numbers_not_strings(tmp_path):
    files = write_scores(tmp_path)
    for model, value in (("clip_tiny", 9.5), ("big-vlm", 10.0)):
        path = files[(model, "flowers")]
        obj = json.loads(path.read_text())
        obj["value"], obj["ci95"] = value, [5.0, 15.0]
        path.write_text(json.dumps(obj))
    build(tmp_path, files)
    tex = plain_latex((tmp_path / "tables" / "main.tex").read_text(encoding="utf-8"))
    assert r"\textbf{10.0}" in tex and r"\textbf{9.5}" not in tex


def test_breakdown_group_without_counts(tmp_path):
    files = write_scores(tmp_path)
    path = files[("clip_tiny", "pope-fixture")]
    obj = json.loads(path.read_text())
    for entry in obj["breakdown"]["split"].values():
        del entry["n_valid"], entry["format_error_rate"]
    path.write_text(json.dumps(obj))
    build(tmp_path, files)
    md = (tmp_path / "tables" / "breakdown.md").read_text(encoding="utf-8")
    assert f"| clip_tiny | random | F1 | 40.0 [30.0, 55.5] | 30 | {DASH} | {DASH} |" in md


def test_legend_explains_headlines_that_are_not_plain_accuracy(tmp_path):
    from vlmgrid.report import load_grid
    from vlmgrid.report.tables.main import legend

    def score(bench, metric):
        path = tmp_path / f"{bench}.json"
        path.write_text(
            json.dumps(
                {
                    "model": "m",
                    "benchmark": bench,
                    "metric": metric,
                    "value": 50.0,
                    "ci95": [40.0, 60.0],
                    "bootstrap": {"samples": 3, "draws": [49.0, 50.0, 51.0]},
                }
            )
        )
        return path

    files = {("m", "mme"): score("mme", "scaled"), ("m", "sqa"): score("sqa", "accuracy")}
    text = legend(load_grid(files, ["m"], ["mme", "sqa"]))
    assert "MME scaled: MME's perception + cognition points / 2800 x 100." in text
    assert "F1" not in text and "Acc." not in text


# --- not applicable ------------------------------------------------------------------------------

NA_NOTE = "n/a: the model cannot run this benchmark; its average is then n/a"


@pytest.fixture
def na_report(tmp_path):
    files = write_scores(tmp_path)
    mark_not_applicable(files, "clip_tiny", "sqa_img")
    build(tmp_path, files)
    return tmp_path


def test_not_applicable_cell_and_average_are_na_in_markdown(na_report):
    rows = md_rows(na_report / "tables" / "main.md")
    assert rows["clip_tiny"] == ["50.0 [5.0, 85.0]", "n/a", "18.0 [10.0, 29.0]", "n/a"]
    # the other model is untouched, its average included
    assert rows["big-vlm"][1] == "20.0 [15.5, 25.0]" and rows["big-vlm"][3] != "n/a"
    assert rows["Model"][1] == "sqa_img (Acc.)"
    legend = (na_report / "tables" / "main.md").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert NA_NOTE in legend


def test_not_applicable_in_latex_and_csv(na_report):
    tex = plain_latex((na_report / "tables" / "main.tex").read_text(encoding="utf-8"))
    row = next(line for line in tex.splitlines() if line.startswith("clip\\_tiny"))
    cells = [c.strip() for c in row.removesuffix(r"\\").split("&")]
    assert cells[2] == "n/a" and cells[4] == "n/a"
    assert NA_NOTE in tex
    by_model = {r["model"]: r for r in read_csv(na_report / "tables" / "main.csv")}
    clip = by_model["clip_tiny"]
    assert [clip["sqa_img"], clip["sqa_img_ci_low"], clip["sqa_img_ci_high"]] == ["", "", ""]
    assert [clip["average"], clip["average_ci_low"], clip["average_ci_high"]] == ["", "", ""]
    assert float(clip["flowers"]) == 18.0 and by_model["big-vlm"]["sqa_img"] == "20.04"


def test_not_applicable_cell_is_worded_not_coloured(tmp_path, main_heatmaps):
    files = write_scores(tmp_path)
    mark_not_applicable(files, "clip_tiny", "sqa_img")
    build(tmp_path, files)
    [cells] = main_heatmaps
    assert {key: words for key, (words, _) in cells.items()} == {
        ("clip_tiny", "pope-fixture"): "50.0",
        ("clip_tiny", "sqa_img"): "n/a",
        ("clip_tiny", "flowers"): "18.0",
        ("clip_tiny", "Average"): "n/a",
        ("big-vlm", "pope-fixture"): "51.2",
        ("big-vlm", "sqa_img"): "20.0",
        ("big-vlm", "flowers"): "33.3",
        ("big-vlm", "Average"): "34.8",
    }
    grey = cells[("clip_tiny", "sqa_img")][1]
    assert cells[("clip_tiny", "Average")][1] == grey
    assert all(colour != grey for words, colour in cells.values() if words != "n/a")


def test_not_applicable_without_reason_is_invalid(tmp_path):
    files = write_scores(tmp_path)
    path = files[("clip_tiny", "sqa_img")]
    path.write_text(json.dumps({"model": "clip_tiny", "benchmark": "sqa_img", "applicable": False}))
    with pytest.raises(VlmgridError, match="applicable is false but there is no reason"):
        build(tmp_path, files)


def test_grid_of_only_not_applicable_cells(tmp_path):
    files = write_scores(tmp_path)
    for key in files:
        mark_not_applicable(files, *key)
    build(tmp_path, files)
    rows = md_rows(tmp_path / "tables" / "main.md")
    assert rows["big-vlm"] == ["n/a"] * 4


# --- variants ------------------------------------------------------------------------------------


def _with_variants(files: dict, model: str, bench: str, variants: dict) -> None:
    obj = json.loads(files[(model, bench)].read_text())
    obj["variants"] = variants
    files[(model, bench)].write_text(json.dumps(obj))


def test_variants_table(tmp_path):
    files = write_scores(tmp_path)
    # Headline sqa_img of big-vlm is 20.04; its variants in a deliberately unsorted order.
    _with_variants(
        files,
        "big-vlm",
        "sqa_img",
        {
            "open-10": {"value": 30.0, "ci95": [20.0, 40.0]},
            "open-02": {"value": 10.0, "ci95": [5.0, 15.0]},
            "closed-01": {"value": 20.12, "ci95": [18.0, 22.0]},
        },
    )
    # One variant only: no rows for this cell.
    _with_variants(files, "clip_tiny", "flowers", {"default": {"value": 18.0, "ci95": [10.0, 29.0]}})
    build(tmp_path, files)
    rows = read_csv(tmp_path / "tables" / "variants.csv")
    assert [(r["model"], r["benchmark"], r["variant"]) for r in rows] == [
        ("big-vlm", "sqa_img", "closed-01"),
        ("big-vlm", "sqa_img", "open-02"),
        ("big-vlm", "sqa_img", "open-10"),
        ("big-vlm", "sqa_img", "(mean)"),
    ]
    assert [float(r["value"]) for r in rows] == [20.12, 10.0, 30.0, 20.04]
    assert [(r["ci_low"], r["ci_high"]) for r in rows][-1] == ("15.46", "24.96")
    assert {r["metric"] for r in rows} == {"accuracy"}
    text = (tmp_path / "tables" / "variants.md").read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| big-vlm")]
    assert table[1] == "| big-vlm | sqa_img | open-02 | Acc. | 10.0 [5.0, 15.0] |"
    assert table[3] == "| big-vlm | sqa_img | (mean) | Acc. | 20.0 [15.5, 25.0] |"


def test_natural_sort_of_variant_names():
    from vlmgrid.report.tables.format import natural_key

    names = ["open-10", "closed-02", "open-2", "open-01", "closed-10", "closed-1"]
    assert sorted(names, key=natural_key) == [
        "closed-1",
        "closed-02",
        "closed-10",
        "open-01",
        "open-2",
        "open-10",
    ]


def test_variants_files_exist_when_no_cell_has_variants(report):
    root, _ = report
    text = (root / "tables" / "variants.md").read_text(encoding="utf-8")
    assert "No cell of this grid has more than one prompt variant." in text
    lines = (root / "tables" / "variants.csv").read_text(encoding="utf-8").splitlines()
    assert lines == ["model,benchmark,variant,metric,value,ci_low,ci_high,n_valid,format_error_rate,flagged"]


def test_variant_without_value_is_invalid(tmp_path):
    files = write_scores(tmp_path)
    _with_variants(files, "big-vlm", "sqa_img", {"a": {"ci95": [1.0, 2.0]}, "b": {"value": 1.0}})
    with pytest.raises(VlmgridError, match=r"variants\.a\.value"):
        build(tmp_path, files)


# --- paper tables: Kaleidoscope, CVQA; how each number was answered -----------------------------------------


SAMPLED = {
    "preset": "kaleidoscope",
    "do_sample": True,
    "temperature": 0.7,
    "top_p": 0.9,
    "max_new_tokens": 1024,
}


@pytest.fixture
def kaleidoscope_report(tmp_path):
    files = {
        ("vlm-a", "kal"): _write(
            tmp_path, kaleidoscope_obj("vlm-a", "kal", {"ar": (50.0, 0.0, 100.0), "te": (25.0, 0.0, 75.0)})
        ),
        ("vlm-b", "kal"): _write(
            tmp_path,
            kaleidoscope_obj(
                "vlm-b", "kal", {"ar": (0.0, 0.0, 0.0), "en": (75.0, 25.0, 100.0)}, generation=SAMPLED
            ),
        ),
        ("clip", "kal"): _write(
            tmp_path,
            {
                "model": "clip",
                "benchmark": "kal",
                "applicable": False,
                "reason": "cannot",
                "metric": "accuracy",
            },
        ),
    }
    written = build_report(
        files,
        ["vlm-a", "vlm-b", "clip"],
        ["kal"],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={"kal": "kaleidoscope"},
    )
    return tmp_path, written


def test_kaleidoscope_table_columns_values_and_cis(kaleidoscope_report):
    root, written = kaleidoscope_report
    assert written == [path for path, _ in report_files(root, {"kal": "kaleidoscope"})]
    assert {p.name for p in written} >= {
        "kaleidoscope.md",
        "kaleidoscope.tex",
        "kaleidoscope.csv",
        "kaleidoscope.png",
        "kaleidoscope.pdf",
    }
    rows = md_rows(root / "tables" / "kaleidoscope.md")
    # languages in the order the score files list them, each language once
    assert rows["Model"] == ["Accuracy", "Format errors", "Multimodal", "Text-only", "ar", "te", "en"]
    # 12.5% format errors is over the default 10%: the row names carry the dagger
    assert rows["vlm-a†"] == [
        "30.0 [20.0, 40.0]",
        "12.5 [5.0, 20.0]",
        "33.3 [20.0, 50.0]",
        "14.3 [0.0, 42.9]",
        "50.0 [0.0, 100.0]",
        "25.0 [0.0, 75.0]",
        DASH,
    ]
    assert rows["vlm-b†"][4:] == ["0.0 [0.0, 0.0]", DASH, "75.0 [25.0, 100.0]"]
    assert rows["clip"] == ["n/a"] * 7
    csv_rows = read_csv(root / "tables" / "kaleidoscope.csv")
    assert list(csv_rows[0])[:7] == [
        "model",
        "accuracy",
        "accuracy_ci_low",
        "accuracy_ci_high",
        "format_error_rate",
        "format_error_rate_ci_low",
        "format_error_rate_ci_high",
    ]
    assert list(csv_rows[0])[-4:] == ["en", "en_ci_low", "en_ci_high", "flagged"]
    assert [r["flagged"] for r in csv_rows] == ["True", "True", ""]
    assert csv_rows[1]["en"] == "75.0" and csv_rows[1]["en_ci_low"] == "25.0" and csv_rows[0]["en"] == ""
    assert csv_rows[2]["accuracy"] == ""  # n/a
    tex = plain_latex((root / "tables" / "kaleidoscope.tex").read_text())
    assert r"\label{tab:kaleidoscope}" in tex and r"30.0 \\{} {\scriptsize [20.0, 40.0]}" in tex


def test_kaleidoscope_caption_says_how_answers_were_sampled(kaleidoscope_report):
    root, _ = kaleidoscope_report
    text = (root / "tables" / "kaleidoscope.md").read_text()
    assert "vlm-a: generation + parser, greedy" in text
    assert "vlm-b: generation + parser, sampled: kaleidoscope preset, temperature 0.7, top-p 0.9" in text
    assert "n/a: the model cannot run this benchmark." in text


def test_kaleidoscope_figure_has_a_bar_per_language_and_model(tmp_path, bar_heights, main_heatmaps):
    files = {
        ("vlm-a", "kal"): _write(
            tmp_path, kaleidoscope_obj("vlm-a", "kal", {"ar": (50.0, 0.0, 100.0), "te": (25.0, 0.0, 75.0)})
        )
    }
    build_report(
        files, ["vlm-a"], ["kal"], tmp_path / "tables", tmp_path / "figures", kinds={"kal": "kaleidoscope"}
    )
    assert bar_heights == [[50.0, 25.0]]  # the per-language figure; the main figure has no bars
    # the main figure's one cell; 12.5% format errors are over the default 10%
    assert main_heatmaps[0][("vlm-a", "kal")][0] == "30.0\u2020"


def test_several_kaleidoscope_benchmarks_get_a_table_each(tmp_path):
    kinds = {"kal-1": "kaleidoscope", "kal-2": "kaleidoscope"}
    files = {("m", b): _write(tmp_path, kaleidoscope_obj("m", b, {"ar": (50.0, 0.0, 100.0)})) for b in kinds}
    written = build_report(files, ["m"], list(kinds), tmp_path / "tables", tmp_path / "figures", kinds=kinds)
    assert written == [path for path, _ in report_files(tmp_path, kinds)]
    names = {p.name for p in written}
    assert {"kaleidoscope-kal-1.md", "kaleidoscope-kal-2.csv", "kaleidoscope-kal-2.pdf"} <= names
    assert "kaleidoscope.md" not in names


@pytest.fixture
def cvqa_report(tmp_path):
    files = {
        ("vlm-a", "cvqa"): _write(tmp_path, cvqa_obj("vlm-a", 0.0)),
        ("vlm-b", "cvqa"): _write(tmp_path, cvqa_obj("vlm-b", 5.0)),
        ("vlm-c", "cvqa"): _write(
            tmp_path,
            {
                "model": "vlm-c",
                "benchmark": "cvqa",
                "applicable": True,
                "labels_hidden": True,
                "reason": "hidden",
                "metric": "accuracy",
                "n": 21,
                "strategy": "generate",
                "generation": {},
                "submission": {
                    s: f"cvqa.submission-{s}.csv" for s in ("loc-en", "loc-local", "noloc-en", "noloc-local")
                },
            },
        ),
    }
    written = build_report(
        files,
        ["vlm-a", "vlm-b", "vlm-c"],
        ["cvqa"],
        tmp_path / "tables",
        tmp_path / "figures",
        kinds={"cvqa": "cvqa"},
    )
    return tmp_path, written


def test_cvqa_settings_table(cvqa_report):
    root, written = cvqa_report
    assert written == [path for path, _ in report_files(root, {"cvqa": "cvqa"})]
    rows = md_rows(root / "tables" / "cvqa.md")
    assert rows["Model"] == ["loc-en", "loc-local", "noloc-en", "noloc-local", "Mean"]
    assert rows["vlm-a"] == [
        "40.0 [30.0, 50.0]",
        "30.0 [20.0, 40.0]",
        "20.0 [10.0, 30.0]",
        "10.0 [0.0, 20.0]",
        "25.0 [15.0, 35.0]",
    ]
    assert rows["vlm-b"][-1] == "30.0 [20.0, 40.0]"
    assert rows["vlm-c"] == ["hidden"] * 5
    csv_rows = read_csv(root / "tables" / "cvqa.csv")
    assert csv_rows[0]["loc-en"] == "40.0" and csv_rows[0]["mean_ci_high"] == "35.0"
    assert csv_rows[2]["mean"] == "" and csv_rows[2]["loc-en"] == ""
    text = (root / "tables" / "cvqa.md").read_text()
    assert "hidden: the benchmark's labels are not public; the submission file was written." in text


def test_cvqa_pairs_table(cvqa_report):
    root, _ = cvqa_report
    rows = md_rows(root / "tables" / "cvqa-pairs.md")
    assert rows["Country-language"] == ["vlm-a", "vlm-b", "vlm-c"]
    assert list(rows)[1:] == ["India-Telugu", "Japan-Japanese", "(all)"]
    assert rows["Japan-Japanese"] == ["50.0 [0.0, 100.0]", "55.0 [0.0, 100.0]", "hidden"]
    assert rows["(all)"] == ["25.0 [15.0, 35.0]", "30.0 [20.0, 40.0]", "hidden"]
    csv_rows = read_csv(root / "tables" / "cvqa-pairs.csv")
    assert list(csv_rows[0])[:4] == ["country-language", "vlm-a", "vlm-a_ci_low", "vlm-a_ci_high"]
    assert [r["country-language"] for r in csv_rows] == ["India-Telugu", "Japan-Japanese", "(all)"]
    assert (root / "figures" / "cvqa-pairs.png").read_bytes()[:4] == b"\x89PNG"
    assert r"Japan-Japanese & \begin{tabular}[t]{@{}c@{}}50.0 \\{}" in plain_latex(
        (root / "tables" / "cvqa-pairs.tex").read_text()
    )


def test_hidden_cell_in_the_main_table(cvqa_report):
    root, _ = cvqa_report
    rows = md_rows(root / "tables" / "main.md")
    assert rows["vlm-c"] == ["hidden", "hidden"]  # the cell and that model's average
    assert rows["vlm-a"][0] == "25.0 [15.0, 35.0]"
    text = (root / "tables" / "main.md").read_text()
    assert "hidden: the benchmark's labels are not public; the submission file was written" in text
    assert read_csv(root / "tables" / "main.csv")[2]["cvqa"] == ""


def test_hidden_score_without_submission_files_is_invalid(tmp_path):
    path = _write(
        tmp_path,
        {"model": "m", "benchmark": "cvqa", "applicable": True, "labels_hidden": True, "metric": "accuracy"},
    )
    with pytest.raises(VlmgridError, match="submission does not name the submission files"):
        build_report({("m", "cvqa"): path}, ["m"], ["cvqa"], tmp_path / "t", tmp_path / "f")


def test_cells_table_says_how_each_number_was_answered(tmp_path):
    files = write_scores(tmp_path)
    for (model, bench), strategy in {
        ("clip_tiny", "pope-fixture"): "embed",
        ("big-vlm", "flowers"): "open-world: generate; closed-world: score_options",
        ("big-vlm", "sqa_img"): "generate",
    }.items():
        obj = json.loads(files[(model, bench)].read_text())
        obj["strategy"] = strategy
        obj["generation"] = SAMPLED if bench == "sqa_img" else {}
        if (
            bench == "sqa_img"
        ):  # the generated answers read leniently too: a second figure beside the headline
            obj["metrics"][f"{obj['metric']}_lenient"] = _est(61.5, 50.0, 70.0)
        files[(model, bench)].write_text(json.dumps(obj))
    mark_not_applicable(files, "clip_tiny", "sqa_img")
    build(tmp_path, files)
    rows = {(r["model"], r["benchmark"]): r for r in read_csv(tmp_path / "tables" / "cells.csv")}
    assert list(next(iter(rows.values()))) == [
        "model",
        "benchmark",
        "status",
        "strategy",
        "answered_by",
        "decoding",
        "n",
        "n_valid",
        "format_error_rate",
        "lenient",
        "flagged",
        "items",
    ]
    assert rows[("big-vlm", "sqa_img")]["lenient"] == "61.5" and rows[("big-vlm", "flowers")]["lenient"] == ""
    assert rows[("clip_tiny", "pope-fixture")]["answered_by"] == "embedding similarity"
    assert rows[("clip_tiny", "pope-fixture")]["decoding"] == ""
    assert (
        rows[("big-vlm", "flowers")]["answered_by"]
        == "open-world: generation + parser; closed-world: log-likelihood"
    )
    assert rows[("big-vlm", "flowers")]["decoding"] == "greedy"
    assert (
        rows[("big-vlm", "sqa_img")]["decoding"] == "sampled: kaleidoscope preset, temperature 0.7, top-p 0.9"
    )
    assert rows[("big-vlm", "sqa_img")]["n"] == "90" and rows[("big-vlm", "sqa_img")]["n_valid"] == "87"
    assert rows[("clip_tiny", "sqa_img")]["status"] == "n/a" and rows[("clip_tiny", "sqa_img")]["n"] == ""
    md = md_rows(tmp_path / "tables" / "cells.md")
    assert md["Model"] == [
        "Benchmark",
        "Answered by",
        "Decoding",
        "n",
        "Valid answers",
        "Format errors (%)",
        "Lenient reading",
    ]
    text = (tmp_path / "tables" / "cells.md").read_text()
    assert (
        "| big-vlm | sqa_img | generation + parser | sampled: kaleidoscope preset, temperature 0.7, top-p "
        "0.9 | 90 | 87 | 3.3 | 61.5 |" in text
    )
    assert "| clip_tiny | sqa_img | n/a | – | – | – | – | – |" in text
    # a score file written before `strategy` existed reads as "–"
    assert "| clip_tiny | flowers | – | – | 90 | 87 | 3.3 | – |" in text


def test_dance_table_is_split_by_direction_in_the_papers_order(tmp_path):
    subsets = {  # written out of order: the table puts seen before unseen, riddle->image first
        "test-unseen image-to-riddle": (10.0, 0.0, 20.0),
        "test-seen riddle-to-image": (60.0, 40.0, 80.0),
        "test-unseen riddle-to-image": (20.0, 10.0, 30.0),
        "test-seen image-to-riddle": (50.0, 30.0, 70.0),
    }
    files = {("clip", "dance"): _write(tmp_path, dance_obj("clip", subsets))}
    written = build_report(
        files, ["clip"], ["dance"], tmp_path / "tables", tmp_path / "figures", kinds={"dance": "dance"}
    )
    assert written == [path for path, _ in report_files(tmp_path, {"dance": "dance"})]
    rows = md_rows(tmp_path / "tables" / "dance.md")
    assert rows["Model"] == [
        "test-seen riddle→image",
        "test-seen image→riddle",
        "test-unseen riddle→image",
        "test-unseen image→riddle",
        "All",
    ]
    assert rows["clip"] == [
        "60.0 [40.0, 80.0]",
        "50.0 [30.0, 70.0]",
        "20.0 [10.0, 30.0]",
        "10.0 [0.0, 20.0]",
        "40.0 [30.0, 50.0]",
    ]
    csv_rows = read_csv(tmp_path / "tables" / "dance.csv")
    assert csv_rows[0]["test-seen_riddle-to-image"] == "60.0" and csv_rows[0]["all_ci_low"] == "30.0"
    assert "\\toprule" in (tmp_path / "tables" / "dance.tex").read_text()
    assert "| Model | dance (Acc@50) | Average |" in (tmp_path / "tables" / "main.md").read_text()


def test_the_list_of_report_files_is_cheap_to_import():
    """The Snakefile imports `report_files` on every run: no pandas, no matplotlib behind it."""
    import subprocess
    import sys

    code = (
        "import sys, vlmgrid.report.outputs; "
        "print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
