"""The compare stage (`vlmgrid compare`), the comparisons table and the main table's marks, end to end on a
hand-built benchmark and on a prepared fixture benchmark, with predictions written by the tests."""

import copy
import csv
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers.compare import (
    FAIR,
    grid_data,
    tiny_grid,  # noqa: F401 (a fixture: the tests take it as a parameter)
    write_bench,
    write_comparison,
    write_preds,
    write_score,
)
from helpers.dvc_lock import write_dvc_repo

from vlmgrid import paths
from vlmgrid.cli import main
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import rows_to_table, write_predictions
from vlmgrid.report.comparisons import comparison_pairs, holm, read_comparisons
from vlmgrid.report.outputs import report_files

# --- Holm by hand ----------------------------------------------------------------------------------------


def test_holm_on_a_textbook_example():
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): x4 = 0.02, x3 = 0.03, x2 = 0.06, x1 = 0.04 -> 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.02]) == pytest.approx([0.02])  # a family of one is not adjusted
    assert holm([]) == []


def test_the_pairs_of_a_grid():
    assert comparison_pairs(["a", "b", "c"], None) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert comparison_pairs(["a", "b", "c"], "b") == [("a", "b"), ("c", "b")]


# --- a hand-built benchmark ------------------------------------------------------------------------------


def test_compare_writes_every_pair_with_numbers_or_the_reason_in_words(tiny_grid, capsys):
    data, config = tiny_grid
    assert main(["compare", "tiny", "--config", str(config)]) == 0
    out = paths.comparison_path(data["results_dir"], "tiny")
    result = json.loads(out.read_text())
    assert (
        result["benchmark"] == "tiny" and result["metric"] == "accuracy" and result["reference_model"] is None
    )
    assert (result["n"], result["samples"], result["seed"]) == (20, 2000, 0)
    pairs = {(p["model_a"], p["model_b"]): p for p in result["pairs"]}
    assert list(pairs) == comparison_pairs(["good", "fair", "broken", "na"], None)
    good_fair = pairs[("good", "fair")]
    assert good_fair["comparable"] is True
    assert (good_fair["value_a"], good_fair["value_b"], good_fair["difference"]) == (65.0, 35.0, 30.0)
    assert good_fair["mcnemar"] == {"a_only": 8, "b_only": 2, "p_value": pytest.approx(112 / 1024)}
    assert good_fair["p_value"] == pytest.approx(112 / 1024, abs=0.03)
    assert good_fair["test"] == "paired sign-flip permutation" and good_fair["permutations"] == 2000
    assert good_fair["unit"] == "item" and good_fair["units"] == 20
    # a failed cell and a cell that cannot run: no number, the reason in words
    broken = pairs[("good", "broken")]
    assert broken == {
        "model_a": "good",
        "model_b": "broken",
        "comparable": False,
        "reason": "every answer of broken is a format error (its cell failed)",
    }
    assert pairs[("fair", "na")]["reason"] == "na cannot run tiny: it cannot answer yes or no"
    assert pairs[("broken", "na")]["comparable"] is False and "difference" not in pairs[("broken", "na")]
    assert set(result["inputs"]["predictions_sha256"]) == {"good", "fair", "broken", "na"}
    said = capsys.readouterr().err
    assert "fair - na on tiny: no comparison" in said
    # each compared pair's line names the metric, the CI's resampling and both tests (McNemar's p: 112/1024)
    line = next(line for line in said.splitlines() if "good - fair on tiny" in line)
    assert "good - fair on tiny: accuracy +30.0 [" in line
    assert "(95% CI: paired bootstrap over items), p = " in line
    assert (
        "(two-sided paired sign-flip permutation test over items, 2000 permutations; exact McNemar p = 0.109)"
        in line
    )


def test_compare_against_the_reference_model(tiny_grid, write_config):
    data, _ = tiny_grid
    data = copy.deepcopy(data)
    data["report"] = {"reference_model": "fair"}
    config = write_config(data, "ref.yaml")
    assert main(["compare", "tiny", "--config", str(config)]) == 0
    result = json.loads(paths.comparison_path(data["results_dir"], "tiny").read_text())
    assert result["reference_model"] == "fair"
    assert [(p["model_a"], p["model_b"]) for p in result["pairs"]] == [
        ("good", "fair"),
        ("broken", "fair"),
        ("na", "fair"),
    ]


def test_the_reference_model_must_be_a_model_of_the_grid(tiny_grid):
    data, _ = tiny_grid
    data = copy.deepcopy(data)
    data["report"] = {"reference_model": "gooood"}
    with pytest.raises(VlmgridError, match='report.reference_model names "gooood".*did you mean "good"'):
        validate_config(data, "grid.yaml")


def test_compare_refuses_a_benchmark_outside_the_grid_and_stale_predictions(tiny_grid, capsys):
    data, config = tiny_grid
    assert main(["compare", "other", "--config", str(config)]) == 2
    assert 'benchmark "other" is not in the grid' in capsys.readouterr().err
    write_preds(paths.predictions_path(data["results_dir"], "fair", "tiny"), FAIR, "another-fingerprint")
    assert main(["compare", "tiny", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "prepared again" in err
    assert not paths.comparison_path(data["results_dir"], "tiny").exists()


def test_a_missing_predictions_file_dvc_tracks_says_dvc_pull_first(tiny_grid, tmp_path, monkeypatch, capsys):
    data, config = tiny_grid
    predictions = paths.predictions_path(data["results_dir"], "fair", "tiny")
    predictions.unlink()
    monkeypatch.chdir(write_dvc_repo(tmp_path))  # results_dir is tmp_path/results, which DVC tracks
    assert main(["compare", "tiny", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"vlmgrid: error: predictions file {predictions} not found; `dvc pull results/"
        f"predictions/fair/tiny.parquet` fetches it (DVC tracks it: dvc.lock), or "
        f"rerun `vlmgrid infer fair tiny` to rebuild it\n"
    )
    (tmp_path / "dvc.lock").unlink()  # no lock records it: recompute it
    assert main(["compare", "tiny", "--config", str(config)]) == 2
    assert capsys.readouterr().err.endswith(
        f"{predictions} not found; rerun `vlmgrid infer fair tiny` to rebuild it\n"
    )


def test_a_significant_p_on_a_difference_below_the_mdd_is_not_a_win(tmp_path, write_config, capsys):
    # 100 items, gold 0: both right on 50, only "a" on 14, only "ref" on 4, both wrong on 32: a - ref = +10
    # points, exact McNemar p = 2 x 4,048 / 2^18 = 0.031; but 18 discordant items give an MDD of
    # 100 x 2.801585 x sqrt(0.18 / 100) = 11.886 points, and 10 is below it
    from vlmgrid.report.tables.comparisons import comparisons_frame, comparisons_markdown

    data = {**grid_data(tmp_path, ["a", "ref"]), "report": {"reference_model": "ref"}}
    data_fp = write_bench(tmp_path / "data" / "tiny", n=100)
    write_preds(paths.predictions_path(data["results_dir"], "a", "tiny"), [0] * 64 + [1] * 36, data_fp)
    write_preds(
        paths.predictions_path(data["results_dir"], "ref", "tiny"),
        [0] * 50 + [1] * 14 + [0] * 4 + [1] * 32,
        data_fp,
    )
    assert main(["compare", "tiny", "--config", str(write_config(data))]) == 0
    out = paths.comparison_path(data["results_dir"], "tiny")
    result = json.loads(out.read_text())
    assert (result["mdd_alpha"], result["mdd_power"]) == (0.05, 0.8)
    pair = result["pairs"][0]
    assert pair["difference"] == 10.0 and pair["mcnemar"]["p_value"] == pytest.approx(2 * 4048 / 2**18)
    assert pair["p_value"] < 0.05
    assert pair["mdd"] == pytest.approx(11.886, abs=1e-3) and pair["mdd_from"] == "unit differences"
    line = next(line for line in capsys.readouterr().err.splitlines() if "a - ref on tiny" in line)
    assert line.endswith("MDD 11.9 (5% two-sided, 80% power): the difference is below it")

    comparisons = read_comparisons({"tiny": out}, ["a", "ref"], ["tiny"], "ref")
    row = comparisons.row("a", "ref", "tiny")
    assert row.p_holm < 0.05 and row.below_mdd is True
    assert row.significant is False and comparisons.versus_reference("a", "tiny") == 0
    assert "| 64.0 | 54.0 | +10.0 [" in comparisons_markdown(comparisons, "t")
    assert "| 11.9 | " in comparisons_markdown(comparisons, "t")
    assert "no (below MDD) |" in comparisons_markdown(comparisons, "t")
    frame = comparisons_frame(comparisons)
    assert frame["mdd"].tolist() == [pytest.approx(11.886, abs=1e-3)] and frame["significant"].tolist() == [
        False
    ]


# --- the report: comparisons table, Holm, marks in the main table ----------------------------------------


def test_holm_runs_over_each_pair_s_benchmarks_and_marks_the_main_table(tmp_path):
    from vlmgrid.report import build_report

    results = tmp_path / "results"
    models, benchmarks = ["a", "b", "ref"], ["x", "y", "z"]
    score_files = {
        (m, bench): write_score(results, m, bench, 50.0, f"sha-{m}") for m in models for bench in benchmarks
    }
    # a vs ref: p 0.01, 0.02, 0.04 -> Holm 0.03, 0.04, 0.04: all significant (x better, y worse, z better)
    # b vs ref: p 0.01, 0.3, 0.5 -> Holm 0.03, 0.6, 0.6: only x
    p = {"x": (0.01, 0.01), "y": (0.02, 0.3), "z": (0.04, 0.5)}
    sign = {"x": 4.0, "y": -4.0, "z": 2.0}
    files = {
        bench: write_comparison(
            results,
            bench,
            "ref",
            [("a", "ref", sign[bench], p[bench][0]), ("b", "ref", sign[bench], p[bench][1])],
            {m: f"sha-{m}" for m in models},
        )
        for bench in benchmarks
    }
    comparisons = read_comparisons(files, models, benchmarks, "ref", score_files)
    holm_a = [comparisons.row("a", "ref", bench).p_holm for bench in benchmarks]
    holm_b = [comparisons.row("b", "ref", bench).p_holm for bench in benchmarks]
    assert holm_a == pytest.approx([0.03, 0.04, 0.04]) and holm_b == pytest.approx([0.03, 0.6, 0.6])
    assert [comparisons.versus_reference("a", bench) for bench in benchmarks] == [1, -1, 1]
    assert [comparisons.versus_reference("b", bench) for bench in benchmarks] == [1, 0, 0]
    assert comparisons.versus_reference("ref", "x") == 0

    written = build_report(
        score_files,
        models,
        benchmarks,
        tmp_path / "tables",
        tmp_path / "figures",
        comparison_files=files,
        reference_model="ref",
    )
    assert written == [
        path for path, _ in report_files(tmp_path, {bench: "scienceqa_img" for bench in benchmarks})
    ]
    main_md = (tmp_path / "tables" / "main.md").read_text()
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in main_md.splitlines()
        if line.startswith("| ") and not line.startswith("| Model")
    }
    assert [cell[-1] for cell in rows["a"][:3]] == ["\u207a", "\u207b", "\u207a"]
    assert rows["b"][0].endswith("\u207a") and rows["b"][1].endswith("]") and rows["b"][2].endswith("]")
    assert all(cell.endswith("]") for cell in rows["ref"][:3])
    assert "significantly better / worse than the reference model ref" in main_md
    tex = (tmp_path / "tables" / "main.tex").read_text()
    body = tex[tex.index(r"\midrule") :]  # the caption's legend names both marks once
    assert body.count("$^{+}$") == 3 and body.count("$^{-}$") == 1
    with open(tmp_path / "tables" / "main.csv", newline="") as handle:
        main_csv = list(csv.DictReader(handle))
    assert [row["x_vs_reference"] for row in main_csv] == ["better", "better", ""]
    assert main_csv[0]["y_vs_reference"] == "worse"

    with open(tmp_path / "tables" / "comparisons.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(r["model_a"], r["benchmark"], r["significant"]) for r in table] == [
        ("a", "x", "True"),
        ("b", "x", "True"),
        ("a", "y", "True"),
        ("b", "y", "False"),
        ("a", "z", "True"),
        ("b", "z", "False"),
    ]
    assert float(table[3]["p_holm"]) == pytest.approx(0.6)
    md = (tmp_path / "tables" / "comparisons.md").read_text()
    assert "| a | ref | x | Acc. | 54.0 | 50.0 | +4.0 [1.0, 7.0] | 1.0 | 0.010 | 0.030 | yes |" in md
    # the header names the CI's resampling and the test, each row its metric
    assert (
        "| Model A | Model B | Benchmark | Metric | A | B | A \u2212 B [95% CI, paired bootstrap] | MDD | "
        "p (paired permutation) | Holm p | Significant |"
    ) in md
    assert "family is one pair's benchmarks" in md and "each model against the reference model ref" in md
    assert "\\begin{tabular}" in (tmp_path / "tables" / "comparisons.tex").read_text()


def test_the_main_table_marks_no_difference_below_the_mdd(tmp_path):
    from vlmgrid.report import build_report

    results = tmp_path / "results"
    models, benchmarks = ["a", "ref"], ["x", "y"]
    score_files = {
        (m, bench): write_score(results, m, bench, 50.0, f"sha-{m}") for m in models for bench in benchmarks
    }
    shas = {m: f"sha-{m}" for m in models}
    # the same +4.0 at p 0.01 on both (Holm 0.02): on x the benchmark can tell 5 points apart, on y 3
    files = {
        "x": write_comparison(results, "x", "ref", [("a", "ref", 4.0, 0.01)], shas, mdd=5.0),
        "y": write_comparison(results, "y", "ref", [("a", "ref", 4.0, 0.01)], shas, mdd=3.0),
    }
    build_report(
        score_files,
        models,
        benchmarks,
        tmp_path / "tables",
        tmp_path / "figures",
        comparison_files=files,
        reference_model="ref",
    )
    main_md = (tmp_path / "tables" / "main.md").read_text()
    row = next(line for line in main_md.splitlines() if line.startswith("| a "))
    x, y = [cell.strip() for cell in row.split("|")[2:4]]
    assert x.endswith("]") and y.endswith("\u207a")
    assert "at least the minimum detectable one" in main_md
    with open(tmp_path / "tables" / "main.csv", newline="") as handle:
        main_csv = list(csv.DictReader(handle))
    assert (main_csv[0]["x_vs_reference"], main_csv[0]["y_vs_reference"]) == ("", "better")
    with open(tmp_path / "tables" / "comparisons.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(r["benchmark"], r["mdd"], r["p_holm"], r["significant"]) for r in table] == [
        ("x", "5.0", "0.02", "False"),
        ("y", "3.0", "0.02", "True"),
    ]
    md = (tmp_path / "tables" / "comparisons.md").read_text()
    assert (
        "| a | ref | x | Acc. | 54.0 | 50.0 | +4.0 [1.0, 7.0] | 5.0 | 0.010 | 0.020 | no (below MDD) |" in md
    )
    assert "| a | ref | y | Acc. | 54.0 | 50.0 | +4.0 [1.0, 7.0] | 3.0 | 0.010 | 0.020 | yes |" in md
    assert "MDD: the minimum detectable difference" in md
    # LaTeX: the MDD under the difference's CI, the reason under the "no"
    tex = (tmp_path / "tables" / "comparisons.tex").read_text()
    assert (
        r"{\scriptsize [1.0, 7.0]} \\{} {\scriptsize MDD 5.0}" in tex and r"{\scriptsize (below MDD)}" in tex
    )


def test_a_comparison_file_without_an_mdd_gives_no_comparison_and_says_so(tmp_path):
    results = tmp_path / "results"
    path = write_comparison(results, "x", None, [("a", "b", 10.0, 0.001)])
    data = json.loads(path.read_text())
    del data["pairs"][0]["mdd"]  # as an older vlmgrid wrote it
    path.write_text(json.dumps(data))
    comparisons = read_comparisons({"x": path}, ["a", "b"], ["x"], None)
    assert comparisons.rows == []
    assert comparisons.unavailable["x"] == (
        "the comparison file predates the minimum detectable difference (rerun `vlmgrid compare x`)"
    )
    data["pairs"][0]["mdd"] = -1.0
    path.write_text(json.dumps(data))
    with pytest.raises(VlmgridError, match=r"pairs\[0\].mdd is -1.0, not a difference of at least 0"):
        read_comparisons({"x": path}, ["a", "b"], ["x"], None)


def test_without_a_reference_model_nothing_is_marked_and_the_legend_says_why(tmp_path):
    from vlmgrid.report import build_report

    results = tmp_path / "results"
    models, benchmarks = ["a", "b"], ["x"]
    score_files = {(m, "x"): write_score(results, m, "x", 50.0, f"sha-{m}") for m in models}
    files = {"x": write_comparison(results, "x", None, [("a", "b", 10.0, 0.001)])}
    build_report(
        score_files, models, benchmarks, tmp_path / "tables", tmp_path / "figures", comparison_files=files
    )
    main_md = (tmp_path / "tables" / "main.md").read_text()
    assert "\u207a" not in main_md and "\u207b" not in main_md
    assert "No cell is marked for significance: the config names no report.reference_model" in main_md
    # with no comparison files at all, the main table says nothing about them
    build_report(score_files, models, benchmarks, tmp_path / "t2", tmp_path / "f2")
    assert "significance" not in (tmp_path / "t2" / "main.md").read_text()
    assert "No comparisons" in (tmp_path / "t2" / "comparisons.md").read_text()


def test_missing_or_stale_comparison_files_give_no_comparison_and_say_so(tmp_path):
    results = tmp_path / "results"
    models, benchmarks = ["a", "ref"], ["x", "y"]
    score_files = {
        (m, bench): write_score(results, m, bench, 50.0, f"sha-{m}") for m in models for bench in benchmarks
    }
    files = {
        "x": write_comparison(
            results, "x", "ref", [("a", "ref", 5.0, 0.001)], {"a": "old", "ref": "sha-ref"}
        ),
        "y": paths.comparison_path(results, "y"),
    }
    comparisons = read_comparisons(files, models, benchmarks, "ref", score_files)
    assert comparisons.rows == []
    assert "other predictions of a" in comparisons.unavailable["x"]
    assert "vlmgrid compare y" in comparisons.unavailable["y"]
    assert comparisons.versus_reference("a", "x") == 0


def test_a_comparison_file_of_another_grid_is_refused_in_one_sentence(tmp_path):
    results = tmp_path / "results"
    files = {"x": write_comparison(results, "x", None, [("a", "b", 5.0, 0.01)])}
    with pytest.raises(
        VlmgridError, match=r"not a valid comparison file \(its pairs of models are not the grid's"
    ):
        read_comparisons(files, ["a", "b", "c"], ["x"], None)
    with pytest.raises(VlmgridError, match="compares against the reference model None.*names 'a'"):
        read_comparisons(files, ["a", "b"], ["x"], "a")
    files["x"].write_text(
        json.dumps(
            {
                "benchmark": "x",
                "reference_model": None,
                "pairs": [
                    {
                        "model_a": "a",
                        "model_b": "b",
                        "comparable": True,
                        "difference": 1.0,
                        "ci95": [0, 2],
                        "p_value": 0.0,
                        "value_a": 1,
                        "value_b": 0,
                        "permutations": 9,
                    }
                ],
            }
        )
    )
    with pytest.raises(VlmgridError, match=r"pairs\[0\].p_value is 0.0, not a p-value"):
        read_comparisons(files, ["a", "b"], ["x"], None)


# --- a prepared fixture benchmark, end to end ------------------------------------------------------------


def test_a_prepared_fixture_benchmark_through_compare_and_report(small_config, tmp_path):
    """MMBench's fixture, prepared as the grid prepares it; two models' predictions written here (one answers
    every row right, one by a seeded guess, one in two prompt variants), scored, compared and reported."""
    data = copy.deepcopy(small_config)
    data["benchmarks"] = {"mmbench-fixture": data["benchmarks"]["mmbench-fixture"]}
    data["models"] = {name: {"backend": "baseline", "seed": 0} for name in ("oracle", "guess", "twice")}
    data["grid"] = {"models": ["oracle", "guess", "twice"], "benchmarks": ["mmbench-fixture"]}
    data["report"] = {"reference_model": "guess"}
    data["bootstrap"] = {"samples": 300, "seed": 0}
    config_path = tmp_path / "mmb.yaml"
    config_path.write_text(yaml.safe_dump(data))
    config = ["--config", str(config_path)]
    assert main(["prepare", "mmbench-fixture", *config]) == 0
    bench_dir = paths.bench_dir(data["data_dir"], "mmbench-fixture")
    records = pd.read_parquet(bench_dir / "records.parquet")
    manifest = json.loads((bench_dir / "manifest.json").read_text())
    rng = np.random.default_rng(0)
    gold = records["answer_index"].to_numpy()
    n_options = records["options"].map(len).to_numpy()
    answers = {
        "oracle": {"default": gold},
        "guess": {"default": rng.integers(0, n_options)},
        "twice": {"t1": gold, "t2": rng.integers(0, n_options)},
    }
    for model, variants in answers.items():
        rows = [
            {
                "id": item,
                "variant": variant,
                "raw": None,
                "prediction": str(records["options"].iloc[i][k]),
                "prediction_index": int(k),
                "scores": None,
                "topk": None,
                "error": None,
            }
            for variant, indices in variants.items()
            for i, (item, k) in enumerate(zip(records["id"], indices))
        ]
        path = paths.predictions_path(data["results_dir"], model, "mmbench-fixture")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_predictions(
            path, rows_to_table(rows), {"applicable": True, "data_fingerprint": manifest["fingerprint"]}
        )
        assert main(["score", model, "mmbench-fixture", *config]) == 0
    assert main(["compare", "mmbench-fixture", *config]) == 0
    result = json.loads(paths.comparison_path(data["results_dir"], "mmbench-fixture").read_text())
    pairs = {(p["model_a"], p["model_b"]): p for p in result["pairs"]}
    assert list(pairs) == [("oracle", "guess"), ("twice", "guess")]
    scores = {
        m: json.loads(paths.score_path(data["results_dir"], m, "mmbench-fixture").read_text())
        for m in answers
    }
    for (a, b), pair in pairs.items():
        # the scores' own numbers, and their own resamples: the difference of the score draws gives the CI
        assert pair["value_a"] == pytest.approx(scores[a]["value"], abs=1e-4)
        assert pair["value_b"] == pytest.approx(scores[b]["value"], abs=1e-4)
        draws = np.array(scores[a]["bootstrap"]["draws"]) - np.array(scores[b]["bootstrap"]["draws"])
        assert pair["ci95"] == pytest.approx(list(np.percentile(draws, [2.5, 97.5])), abs=1e-3)
        assert pair["unit"] == "circular_group" and pair["mcnemar"] is None
    assert pairs[("oracle", "guess")]["difference"] > 0
    assert main(["report", *config]) == 0
    tables = paths.tables_dir(data["results_dir"])
    with open(tables / "comparisons.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["model_a"], r["model_b"], r["benchmark"]) for r in rows] == [
        ("oracle", "guess", "mmbench-fixture"),
        ("twice", "guess", "mmbench-fixture"),
    ]
    # a family of one benchmark: Holm leaves p as it is
    assert all(float(r["p_holm"]) == pytest.approx(float(r["p_value"])) for r in rows)
