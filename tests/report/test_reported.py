"""Published numbers beside the reproduced ones: config/reported/*.csv read and checked, matched to the grid's
cells, and the reported table and figure (vlmgrid.report.reported, report.tables.reported,
report.reported_figure)."""

from __future__ import annotations

import copy
import csv
import dataclasses
import struct
from pathlib import Path

import jsonschema
import pytest
from helpers.reported import (
    BENCHES,
    KINDS,
    MODELS,
    PUBLISHED,
    ZOO,
    build,
    grid_objs,
    reported_row,
    score,
    write_grid,
)

from vlmgrid.benchmarks.catalog import BENCHMARKS
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.metrics import METRICS
from vlmgrid.report import build_report
from vlmgrid.report.reported import (
    COLUMNS,
    Method,
    Published,
    _schema,
    figure_label,
    grid_method,
    load_reported,
    match_reported,
)
from vlmgrid.stages.report import published_numbers

REPO = Path(__file__).resolve().parents[2]

GOOD = {
    "paper": "2310.03744",
    "table": "Table 4",
    "model": "LLaVA-1.5 13B",
    "benchmark": "pope",
    "split": "",
    "figure": "f1",
    "value": "85.9",
    "source": "https://arxiv.org/abs/2310.03744 Table 4",
    "note": "",
    "answering": "generation",
    "decoding": "greedy",
    "prompt_suffix": "Answer the question using a single word or phrase.",
    "method_source": "https://github.com/haotian-liu/LLaVA/blob/main/scripts/v1_5/eval/pope.sh",
}


def write_csv(path: Path, rows: list[dict], columns=COLUMNS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def row(**changes) -> dict:
    return {**GOOD, **changes}


# --- loading -----------------------------------------------------------------------------------------------


def test_loads_a_good_file(tmp_path):
    write_csv(
        tmp_path / "llava.csv",
        [
            row(),
            row(
                benchmark="mmbench",
                split="dev",
                figure="circular_accuracy",
                value="67.7",
                note="dev, circular",
            ),
        ],
    )
    first, second = load_reported(tmp_path)
    assert (first.model, first.benchmark, first.figure, first.value, first.split, first.note) == (
        "LLaVA-1.5 13B",
        "pope",
        "f1",
        85.9,
        None,
        None,
    )
    assert (second.split, second.value, second.note, second.row) == ("dev", 67.7, "dev, circular", 2)


def test_an_empty_folder_has_no_rows(tmp_path):
    assert load_reported(tmp_path) == ()


@pytest.mark.parametrize(
    "changes, column, problem",
    [
        ({"paper": "LLaVA-1.5"}, "paper", "'LLaVA-1.5' is not of the right form"),
        ({"table": ""}, "table", "is empty"),
        ({"benchmark": "pope_v2"}, "benchmark", "'pope_v2' is not one of the allowed names"),
        ({"figure": "total"}, "figure", "'total' is not one of the allowed names"),  # POPE has no total
        ({"value": "85,9"}, "value", "'85,9' is not a number"),
        ({"value": "nan"}, "value", "'nan' is not a number"),
        ({"value": "185.9"}, "value", "185.9 is above 100"),  # a POPE F1 is a percent
        ({"value": "-1"}, "value", "-1.0 is below 0"),
        ({"source": "the paper"}, "source", "'the paper' is not of the right form"),
        ({"answering": ""}, "answering", "is empty"),
        ({"answering": "guess"}, "answering", "'guess' is not one of the allowed names"),
        ({"decoding": ""}, "decoding", "is empty"),  # generation says how it decoded
        ({"decoding": "beam"}, "decoding", "'beam' is not one of the allowed names"),
        ({"answering": "likelihood"}, "decoding", "'greedy' is given where it has no meaning"),
        ({"method_source": ""}, "method_source", "is empty"),
        (
            {"method_source": "LLaVA's scripts"},
            "method_source",
            '"LLaVA\'s scripts" is not of the right form',
        ),
    ],
)
def test_a_bad_row_is_refused_naming_file_row_and_column(tmp_path, changes, column, problem):
    path = write_csv(tmp_path / "paper.csv", [row(), row(model="LLaVA-1.5 7B", **changes)])
    with pytest.raises(VlmgridError) as error:
        load_reported(tmp_path)
    message = str(error.value)
    assert message.startswith(f"{path} row 2, column {column}: {problem}")
    assert "; give " in message and "\n" not in message


def test_the_method_is_read_with_the_row(tmp_path):
    write_csv(
        tmp_path / "a.csv", [row(), row(model="CLIP", answering="similarity", decoding="", prompt_suffix="")]
    )
    generation, similarity = load_reported(tmp_path)
    assert generation.method == Method(
        "generation", "greedy", "Answer the question using a single word or phrase."
    )
    assert generation.method_source == GOOD["method_source"]
    assert similarity.method == Method("similarity") and similarity.method.words() == "similarity"
    assert generation.method.words() == "generation (greedy)"


def test_mme_points_have_their_own_range(tmp_path):
    write_csv(tmp_path / "mme.csv", [row(benchmark="mme", figure="perception", value="1531.3")])
    assert load_reported(tmp_path)[0].value == 1531.3
    write_csv(tmp_path / "mme.csv", [row(benchmark="mme", figure="perception", value="2100")])
    with pytest.raises(VlmgridError, match="row 1, column value: 2100.0 is above 2000"):
        load_reported(tmp_path)
    write_csv(tmp_path / "mme.csv", [row(benchmark="mme", figure="scaled", value="1531.3")])
    with pytest.raises(VlmgridError, match="row 1, column value: 1531.3 is above 100"):
        load_reported(tmp_path)


def test_a_missing_or_extra_column_is_refused(tmp_path):
    columns = [c for c in COLUMNS if c != "note"]
    path = write_csv(tmp_path / "a.csv", [{k: v for k, v in row().items() if k != "note"}], columns)
    with pytest.raises(
        VlmgridError, match=f"^{path} lacks the column 'note'; its header must be paper,table,"
    ):
        load_reported(tmp_path)
    path = write_csv(tmp_path / "a.csv", [{**row(), "unit": "%"}], list(COLUMNS) + ["unit"])
    with pytest.raises(VlmgridError, match="has a column 'unit' it should not"):
        load_reported(tmp_path)


def test_a_number_given_twice_is_refused(tmp_path):
    first = write_csv(tmp_path / "a.csv", [row()])
    second = write_csv(tmp_path / "b.csv", [row(value="86.0")])
    with pytest.raises(VlmgridError, match=f"{second} row 1 gives the same number as {first} row 1"):
        load_reported(tmp_path)


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(VlmgridError, match="does not exist; create it"):
        load_reported(tmp_path / "nowhere")


def test_schema_lists_every_kind_and_exactly_its_metric_names():
    validator = jsonschema.Draft202012Validator(_schema())
    assert set(_schema()["properties"]["benchmark"]["enum"]) == set(BENCHMARKS)
    every_name = {name for metric in METRICS for name in METRICS.get(metric).names}
    for kind in map(BENCHMARKS.get, BENCHMARKS):
        accepted = {
            name
            for name in every_name
            if validator.is_valid(
                {
                    **{k: v for k, v in row().items() if v},
                    "benchmark": kind.name,
                    "figure": name,
                    "value": 1.0,
                }
            )
        }
        assert accepted == set(METRICS.get(kind.metric).names), kind.name


def test_the_seeded_llava_numbers_pass_the_schema_and_are_the_model_zoo_ones():
    rows = load_reported(REPO / "config" / "reported")
    got = {(r.model, r.benchmark, r.split, r.figure): r.value for r in rows}
    # docs/MODEL_ZOO.md of haotian-liu/LLaVA, LLaVA-v1.5 table, full_ft-1e rows (SQA, TextVQA, POPE, MME,
    # MM-Bench)
    assert got == {
        ("LLaVA-1.5 7B", "scienceqa_img", None, "accuracy"): 66.8,
        ("LLaVA-1.5 7B", "textvqa", None, "vqa_accuracy"): 58.2,
        ("LLaVA-1.5 7B", "pope", None, "f1"): 85.9,
        ("LLaVA-1.5 7B", "mme", None, "perception"): 1510.7,
        ("LLaVA-1.5 7B", "mmbench", "dev", "circular_accuracy"): 64.3,
        ("LLaVA-1.5 13B", "scienceqa_img", None, "accuracy"): 71.6,
        ("LLaVA-1.5 13B", "textvqa", None, "vqa_accuracy"): 61.3,
        ("LLaVA-1.5 13B", "pope", None, "f1"): 85.9,
        ("LLaVA-1.5 13B", "mme", None, "perception"): 1531.3,
        ("LLaVA-1.5 13B", "mmbench", "dev", "circular_accuracy"): 67.7,
    }
    assert all(r.paper == "2310.03744" and r.source.startswith(ZOO) for r in rows)
    # how LLaVA-1.5 answered: greedy generation (--temperature 0 in scripts/v1_5/eval/*.sh), the short-answer
    # instruction for POPE, MME and TextVQA, the letter instruction for ScienceQA and MMBench
    # (--single-pred-prompt)
    short, letter = (
        "Answer the question using a single word or phrase.",
        "Answer with the option's letter from the given choices directly.",
    )
    assert {r.benchmark: r.method for r in rows} == {
        "pope": Method("generation", "greedy", short),
        "mme": Method("generation", "greedy", short),
        "textvqa": Method("generation", "greedy", short),
        "scienceqa_img": Method("generation", "greedy", letter),
        "mmbench": Method("generation", "greedy", letter),
    }
    assert all(r.method_source.startswith(ZOO.replace("docs/MODEL_ZOO.md", "")) for r in rows)
    assert "OCR tokens" in next(r.note for r in rows if r.benchmark == "textvqa")


# --- matching ----------------------------------------------------------------------------------------------


def test_matching_by_reported_as_kind_and_split():
    rows = (
        reported_row("LLaVA-1.5 13B", "pope", "f1", 85.9),
        reported_row("LLaVA-1.5 13B", "mmbench", "circular_accuracy", 67.7, split="dev"),
        reported_row("LLaVA-1.5 7B", "pope", "f1", 85.9),
    )
    published = Published(
        rows,
        reported_as={"l13": "LLaVA-1.5 13B", "l13-fp32": "LLaVA-1.5 13B"},
        splits={"pope-a": None, "pope-b": None, "mmb-dev": "dev", "mmb-test": "test"},
    )
    kinds = {
        "pope-a": "pope",
        "pope-b": "pope",
        "mmb-dev": "mmbench",
        "mmb-test": "mmbench",
        "sqa": "scienceqa_img",
    }
    matches = match_reported(published, ["l13", "clip", "l13-fp32"], list(kinds), kinds)
    assert [(r.benchmark, r.model, model, bench) for r, model, bench in matches] == [
        ("pope", "LLaVA-1.5 13B", "l13", "pope-a"),
        ("pope", "LLaVA-1.5 13B", "l13", "pope-b"),
        ("mmbench", "LLaVA-1.5 13B", "l13", "mmb-dev"),
        ("pope", "LLaVA-1.5 13B", "l13-fp32", "pope-a"),
        ("pope", "LLaVA-1.5 13B", "l13-fp32", "pope-b"),
        ("mmbench", "LLaVA-1.5 13B", "l13-fp32", "mmb-dev"),
    ]
    assert match_reported(Published(rows), ["l13"], list(kinds), kinds) == []


def test_figure_labels_say_the_unit():
    assert figure_label("mme", "perception") == "MME perception (points)"
    assert figure_label("pope", "f1") == "POPE F1 (%)"
    assert figure_label("mme", "scaled") == "MME scaled (%)"  # not "MME MME scaled"
    assert figure_label("mmbench", "circular_accuracy", "dev") == "MMBench circular acc., dev (%)"


def test_the_config_links_models_and_names_the_folder(default_config_data):
    data = copy.deepcopy(default_config_data)
    assert validate_config(copy.deepcopy(data)).report["reported"] == "config/reported"
    data["models"]["llava-tiny"]["reported_as"] = "LLaVA-1.5 13B"
    data["report"]["reported"] = str(REPO / "config" / "reported")
    config = validate_config(data)
    published = published_numbers(config)
    assert published.reported_as == {"llava-tiny": "LLaVA-1.5 13B"}
    assert published.folder == REPO / "config" / "reported" and len(published.rows) == 10
    # the fixture stands for the kind's published split: MMBench en dev
    assert published.splits["mmbench-fixture"] == "dev"
    data["models"]["random"]["reported_as"] = ""
    with pytest.raises(VlmgridError, match="reported_as"):
        validate_config(data)


def test_every_llava_1_5_entry_names_its_paper_model():
    import yaml

    for name in ("models", "carpe", "cvqa", "dance"):
        models = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())["models"]
        for key, size in (("llava-1.5-7b", "7B"), ("llava-1.5-13b", "13B")):
            if key in models:
                assert models[key]["reported_as"] == f"LLaVA-1.5 {size}", (name, key)


# --- the table and the figure ------------------------------------------------------------------------------


def md_rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [
        [c.strip() for c in line.strip().strip("|").split(" | ")]
        for line in lines
        if line.startswith("| ") and not line.startswith("| Paper")
    ]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_table_sets_each_match_beside_its_cell(tmp_path):
    build(tmp_path)
    rows = md_rows(tmp_path / "tables" / "reported.md")
    assert rows == [
        [
            "arXiv 2310.03744 [1]",
            "Table 4",
            "LLaVA-1.5 13B (llava13)",
            "mme-b",
            "MME perception (points)",
            "1500.0 [1480.0, 1540.0]",
            "1531.3",
            "-31.3",
            "yes",
        ],
        [
            "arXiv 2310.03744 [1]",
            "Table 4",
            "LLaVA-1.5 13B (llava13)",
            "pope-b",
            "POPE F1 (%)",
            "80.0 [78.0, 82.0]",
            "85.9",
            "-5.9",
            "no",
        ],
        [
            "arXiv 2310.03744 [2]",
            "Table 4",
            "LLaVA-1.5 13B (llava13)",
            "tvqa",
            "TextVQA VQA acc. (%)",
            "n/a",
            "61.3",
            "not compared",
            "not compared",
        ],
        [
            "arXiv 2310.03744 [3]",
            "Table 4",
            "LLaVA-1.5 13B (llava13)",
            "mmb",
            "MMBench circular acc., dev (%)",
            "66.0 [63.0, 69.0]\u2020",
            "67.7",
            "-1.7",
            "yes",
        ],
    ]
    text = (tmp_path / "tables" / "reported.md").read_text(encoding="utf-8")
    assert f"- [1] {ZOO} (LLaVA-v1.5 table)\n" in text
    assert f"- [2] {ZOO} (LLaVA-v1.5 table). Note: LLaVA's TextVQA prompt lists OCR tokens\n" in text
    assert "llava13 on mmb 20.0%" in text  # the dagger's footnote
    # nothing of the unmatched model (no reported_as), nor of the 7B row
    assert "clip" not in text and "LLaVA-1.5 7B" not in text


def test_the_csv_keeps_numbers_and_says_why_a_row_was_not_compared(tmp_path):
    build(tmp_path)
    rows = read_csv(tmp_path / "tables" / "reported.csv")
    assert [
        (
            r["benchmark"],
            r["reproduced"],
            r["ci_low"],
            r["ci_high"],
            r["reported"],
            r["inside_ci"],
            r["status"],
            r["flagged"],
            r["unit"],
        )
        for r in rows
    ] == [
        ("mme-b", "1500.0", "1480.0", "1540.0", "1531.3", "True", "compared", "False", "points"),
        ("pope-b", "80.0", "78.0", "82.0", "85.9", "False", "compared", "False", "percent"),
        ("tvqa", "", "", "", "61.3", "", "n/a", "", "percent"),
        ("mmb", "66.0", "63.0", "69.0", "67.7", "True", "compared", "True", "percent"),
    ]
    assert float(rows[0]["difference"]) == pytest.approx(-31.3) and rows[2]["difference"] == ""
    assert (
        rows[3]["split"] == "dev"
        and rows[0]["reported_as"] == "llava13"
        and rows[0]["model"] == "LLaVA-1.5 13B"
    )


def test_latex_cites_the_sources(tmp_path):
    build(tmp_path)
    tex = (tmp_path / "tables" / "reported.tex").read_text(encoding="utf-8")
    assert r"1500.0 \\{} {\scriptsize [1480.0, 1540.0]}" in tex  # the CI under the value
    # the model over its grid name, the benchmark and figure with the number of its source, in boxes that wrap
    assert r"{\raggedright\hspace{0pt}LLaVA-\hspace{0pt}1.5 13B (llava13)} & " in tex
    assert r"{\raggedright\hspace{0pt}pope-\hspace{0pt}b: POPE F1 (\%) [1]} & " in tex
    # the sources under the table name the paper and its table
    assert r"\footnotesize [1] arXiv 2310.03744, Table 4: https://github.com/haotian-liu/LLaVA/" in tex


def test_failed_hidden_and_missing_cells_are_never_compared(tmp_path):
    objs = grid_objs()
    objs[("llava13", "mme-b")] = score(
        "llava13", "mme-b", {"perception": (1500.0, [1480.0, 1540.0])}, rate=100.0
    )
    objs[("llava13", "pope-b")] = {
        "model": "llava13",
        "benchmark": "pope-b",
        "labels_hidden": True,
        "metric": "f1",
        "submission": {"all": "x.csv"},
    }
    # a figure the score file does not hold (neither among its numbers nor its headline)
    rows = list(PUBLISHED.rows)
    rows[3] = dataclasses.replace(rows[3], figure="vanilla_accuracy")
    build(tmp_path, objs=objs, published=dataclasses.replace(PUBLISHED, rows=tuple(rows)))
    rows = read_csv(tmp_path / "tables" / "reported.csv")
    assert [
        (r["benchmark"], r["status"], r["reproduced"], r["difference"], r["inside_ci"]) for r in rows
    ] == [
        ("mme-b", "failed", "", "", ""),
        ("pope-b", "hidden", "", "", ""),
        ("tvqa", "n/a", "", "", ""),
        ("mmb", "not in the score file", "", "", ""),
    ]
    # in LaTeX a reason longer than a word is a short mark in the numeric column and a lettered note under it
    tex = (tmp_path / "tables" / "reported.tex").read_text(encoding="utf-8")
    row = next(line for line in tex.splitlines() if "mmb: " in line)
    assert r" & --$^{a}$ & 67.7 & -- & -- \\" in row and "score file" not in row
    assert r"{\footnotesize $^{a}$not compared: not in the score file.}" in tex
    files = write_grid(tmp_path / "m", grid_objs())
    files[("llava13", "mme-b")] = tmp_path / "nowhere.json"
    build_report(
        files,
        MODELS,
        BENCHES,
        tmp_path / "m" / "tables",
        tmp_path / "m" / "figures",
        kinds=KINDS,
        published=PUBLISHED,
        allow_missing=True,
    )
    first = md_rows(tmp_path / "m" / "tables" / "reported.md")[0]
    assert first[5:] == ["missing", "1531.3", "not compared", "not compared"]


def test_without_a_match_the_table_and_figure_say_so(tmp_path):
    written = build(tmp_path, published=Published(PUBLISHED.rows, folder=Path("config/reported")))
    text = (tmp_path / "tables" / "reported.md").read_text(encoding="utf-8")
    assert "No published number matches this grid's models" in text and "reported_as" in text
    assert "|" not in text
    assert "No published number matches" in (tmp_path / "tables" / "reported.tex").read_text(encoding="utf-8")
    assert read_csv(tmp_path / "tables" / "reported.csv") == []
    assert (tmp_path / "tables" / "reported.csv").read_text().startswith("paper,table,model,reported_as,")
    assert (
        tmp_path / "figures" / "reported.png" in written and (tmp_path / "figures" / "reported.pdf").is_file()
    )
    # with no published numbers given at all, the same
    build(tmp_path / "none", published=None)
    assert "No published number matches" in (tmp_path / "none" / "tables" / "reported.md").read_text()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return struct.unpack(">II", data[16:24])


def test_the_figure_is_seven_inches_at_300_dpi_and_deterministic(tmp_path):
    build(tmp_path / "a")
    build(tmp_path / "b")
    for name in ("reported.png", "reported.pdf"):
        assert (tmp_path / "a" / "figures" / name).read_bytes() == (
            tmp_path / "b" / "figures" / name
        ).read_bytes()
    width, height = png_size(tmp_path / "a" / "figures" / "reported.png")
    assert width == 2100 and 600 < height < 2100


# --- the method each side answered by ----------------------------------------------------------------------

GREEDY = Method("generation", "greedy", "Answer the question using a single word or phrase.")


def test_the_grid_method_is_read_from_the_strategy_and_decoding():
    assert grid_method("generate", {}) == Method("generation", "greedy")
    assert grid_method("generate", {"preset": "kaleidoscope", "do_sample": True}) == Method(
        "generation", "sampled"
    )
    assert grid_method("score_options", {}) == Method("likelihood")
    assert grid_method("embed", {}) == Method("similarity")
    assert grid_method("score_options", {}, backend="baseline") == Method("baseline guess")
    assert grid_method(None, {}) is None
    assert GREEDY.same_as(Method("generation", "greedy")) and not GREEDY.same_as(Method("likelihood"))
    assert not GREEDY.same_as(Method("generation", "sampled"))


def method_build(tmp_path: Path) -> list[Path]:
    """MME by log-likelihood and MMBench by sampling (both unlike the paper's greedy generation), POPE by
    greedy generation (like it), TextVQA not compared."""
    objs = grid_objs()
    objs[("llava13", "mme-b")]["strategy"] = "score_options"
    objs[("llava13", "pope-b")].update(strategy="generate", generation={"max_new_tokens": 32})
    objs[("llava13", "mmb")].update(strategy="generate", generation={"do_sample": True, "temperature": 0.7})
    rows = tuple(dataclasses.replace(r, method=GREEDY) for r in PUBLISHED.rows)
    return build(tmp_path, published=dataclasses.replace(PUBLISHED, rows=rows), objs=objs)


def test_a_comparison_across_methods_is_marked_in_the_markdown(tmp_path):
    method_build(tmp_path)
    rows = md_rows(tmp_path / "tables" / "reported.md")
    assert [r[5] for r in rows] == [
        "1500.0 [1480.0, 1540.0]\u00a7",
        "80.0 [78.0, 82.0]",
        "n/a",
        "66.0 [63.0, 69.0]\u2020\u00a7",
    ]
    text = (tmp_path / "tables" / "reported.md").read_text(encoding="utf-8")
    assert (
        "\u00a7: the paper and the grid answered by different methods, so the difference is not the model's "
        "alone: llava13 on mme-b: paper generation (greedy), grid likelihood; llava13 on mmb: paper "
        "generation (greedy), grid generation (sampled) (to answer as the paper did, see docs/models.md)."
    ) in text
    assert "pope-b: paper" not in text


def test_the_same_method_is_not_marked(tmp_path):
    build(tmp_path)  # the rows say no method: nothing is marked, nothing is said
    text = (tmp_path / "tables" / "reported.md").read_text(encoding="utf-8")
    assert "\u00a7" not in text and "different methods" not in text
    objs = {key: {**obj, "strategy": "generate"} for key, obj in grid_objs().items()}
    rows = tuple(dataclasses.replace(r, method=GREEDY) for r in PUBLISHED.rows)
    build(tmp_path / "same", published=dataclasses.replace(PUBLISHED, rows=rows), objs=objs)
    for name in ("reported.md", "reported.tex"):
        text = (tmp_path / "same" / "tables" / name).read_text(encoding="utf-8")
        assert "\u00a7" not in text and r"\S" not in text and "different methods" not in text
    assert {r["same_method"] for r in read_csv(tmp_path / "same" / "tables" / "reported.csv")} == {"True", ""}


def test_a_comparison_across_methods_is_marked_in_latex_and_the_csv(tmp_path):
    method_build(tmp_path)
    tex = (tmp_path / "tables" / "reported.tex").read_text(encoding="utf-8")
    assert r"1500.0$^{\S}$ \\{} {\scriptsize [1480.0, 1540.0]}" in tex
    assert r"80.0 \\{} {\scriptsize [78.0, 82.0]}" in tex
    assert r"$^{\S}$: the paper and the grid answered by different methods" in tex
    rows = read_csv(tmp_path / "tables" / "reported.csv")
    assert [
        (r["benchmark"], r["reported_method"], r["reproduced_method"], r["same_method"]) for r in rows
    ] == [
        ("mme-b", "generation (greedy)", "likelihood", "False"),
        ("pope-b", "generation (greedy)", "generation (greedy)", "True"),
        ("tvqa", "generation (greedy)", "", ""),
        ("mmb", "generation (greedy)", "generation (sampled)", "False"),
    ]
    assert {r["reported_prompt_suffix"] for r in rows} == {GREEDY.prompt_suffix}


def test_a_comparison_across_methods_is_marked_in_the_figure(tmp_path, monkeypatch):
    import matplotlib.figure
    from matplotlib.text import Text

    saved = []
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, **kwargs):
        saved.append([t.get_text() for t in fig.findobj(Text)])
        return savefig(fig, path, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    method_build(tmp_path)
    texts = saved[-1]  # the reported figure is saved last (PNG, then PDF: the same texts)
    assert texts.count("\u00a7") == 2  # beside the MME and the MMBench points, not the POPE one
    words = " ".join(texts).replace("\n", " ")
    assert "llava13 on mme-b: paper generation (greedy), grid likelihood" in words


def test_the_workflow_caption_explains_the_mark():
    caption = (REPO / "workflow" / "report" / "reported.rst").read_text(encoding="utf-8")
    assert "\u00a7" in caption and "different methods" in caption


# --- the recipe that answers as LLaVA-1.5's paper did -------------------------------------------------------

RECIPE = REPO / "config" / "examples" / "llava-1.5-method.yaml"


def test_the_llava_recipe_validates_and_asks_for_greedy_generation():
    import yaml

    config = validate_config(yaml.safe_load(RECIPE.read_text(encoding="utf-8")))
    assert config.report["reported"] == "config/reported"
    for name, size in (("llava-1.5-7b", "7B"), ("llava-1.5-13b", "13B")):
        settings = config.model(name)
        assert settings["reported_as"] == f"LLaVA-1.5 {size}" and settings["answer_mode"] == "generate"
        assert settings["generation"]["do_sample"] is False and "preset" not in settings["generation"]
        assert grid_method("generate", settings["generation"]) == Method("generation", "greedy")
    # every benchmark the paper's rows name, so each is compared
    kinds = {config.benchmark(b)["kind"] for b in config.benchmarks}
    assert kinds == {r.benchmark for r in load_reported(REPO / "config" / "reported")}


def test_the_llava_recipe_sends_llavas_prompt_and_matches_the_papers_method():
    """A fake model with both capabilities (as the hf backend has): with the recipe's settings it answers
    every kind by generation and receives LLaVA-1.5's instruction after the question (for MME in place of the
    question's own "Please answer yes or no.", as LLaVA's MME question file has it)."""
    from types import SimpleNamespace

    import pandas as pd
    import yaml

    from vlmgrid.model_requests import GenerationResult
    from vlmgrid.models.base import Backend
    from vlmgrid.protocols import make_runner

    class Recorder(Backend):
        name = "recorder"
        capabilities = frozenset({"generate", "score_options"})

        def __init__(self, settings):
            super().__init__(settings)
            self.prompts = []

        def generate_results(self, requests):
            self.prompts.extend(r.prompt for r in requests)
            return [GenerationResult("A") for _ in requests]

    config = validate_config(yaml.safe_load(RECIPE.read_text(encoding="utf-8")))
    paper = {r.benchmark: r.method for r in load_reported(REPO / "config" / "reported")}
    for benchmark in config.benchmarks:
        kind = BENCHMARKS.get(config.benchmark(benchmark)["kind"])
        question = "Is there a dog? Please answer yes or no." if kind.name == "mme" else "Is there a dog?"
        records = pd.DataFrame(
            {
                "id": ["q"],
                "image": [None],
                "question": [question],
                "options": [["yes", "no"]],
                "answer": ["yes"],
                "answer_index": [0],
            }
        )
        model = Recorder(config.model("llava-1.5-7b"))
        bench = SimpleNamespace(root=Path("."), records=records, classes=[], kind=kind)
        runner, strategy = make_runner(kind.protocol, model, bench)
        runner(records)
        assert strategy == "generate", benchmark
        method = paper[kind.name]
        lettered = (
            "\nA. yes\nB. no" if method.prompt_suffix.startswith("Answer with the option's letter") else ""
        )
        assert model.prompts == [f"Is there a dog?{lettered}\n{method.prompt_suffix}"], benchmark
        assert grid_method(strategy, config.model("llava-1.5-7b")["generation"]).same_as(method)
