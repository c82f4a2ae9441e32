"""`vlmgrid import-predictions` of VLMEvalKit's prediction files: `<model>_<dataset>.xlsx` as run.py's
inference job dumps it (the dataset TSV's columns without `image`, plus `prediction`; xlsx through xlsxwriter,
or tsv / json with PRED_FORMAT), built from the prepared fixture benchmarks in each dataset TSV's columns,
imported, matched by the texts both keep, refused in one sentence when they do not answer exactly the
benchmark's items, and scored like a local run."""

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers.imports import (
    LETTERS,
    MODEL,
    MODEL_ID,
    NAN,
    dump,
    gold_text,
    imported,
    mmbench_rows,
    mme_rows,
    options,
    refused,
    run,
    score_of,
    small_grid,
    textvqa_rows,
)

from vlmgrid.errors import VlmgridError
from vlmgrid.imports import guess_format

SIZES = {
    "mmbench-fixture": 2,
    "mme-fixture": 2,
    "pope-fixture": 4,
    "scienceqa-fixture": 6,
    "textvqa-fixture": 3,
    "cvbench-fixture": 2,
    "mmvp-fixture": 2,
}


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The default grid's config with the seven benchmarks prepared small; (config path, {bench: records})."""
    return small_grid(tmp_path_factory.mktemp("vlmevalkit"), SIZES)


# --------------------------------------------------------------------------------------------- the TSVs' rows


def pope_rows(records) -> list[dict]:
    """POPE.tsv: one row per distinct question of an image, `category` the splits asking it, comma-separated
    (POPE_rating splits it on ","); answer Yes/No. Rows in order of first appearance."""
    rows: dict[tuple, dict] = {}
    for _, r in records.iterrows():
        key = (r["image_source"], r["question"], r["answer"])
        if key in rows:
            rows[key]["category"] += f",{r['split']}"
        else:
            rows[key] = {
                "index": len(rows),
                "question": r["question"],
                "answer": r["answer"].capitalize(),
                "category": r["split"],
            }
    return list(rows.values())


def scienceqa_rows(records) -> list[dict]:
    """ScienceQA_TEST.tsv: index, question, hint (NaN when none), A-E, answer letter, category, split."""
    return [
        {
            "index": n,
            "question": r["question"],
            "hint": r["hint"] or NAN,
            **options(r, 5),
            "answer": LETTERS[r["answer_index"]],
            "category": r["category"],
            "split": "test",
        }
        for n, (_, r) in enumerate(records.iterrows())
    ]


def cvbench_rows(records, kind: str) -> list[dict]:
    """CV-Bench-2D.tsv / -3D.tsv: index, question, prompt (build_prompt sends it), A-F, answer letter, source,
    split ("2D"/"3D"), task."""
    return [
        {
            "index": int(r["id"].split("-")[1]),
            "question": r["question"],
            "prompt": r["prompt"],
            **options(r, 6),
            "answer": LETTERS[r["answer_index"]],
            "source": r["source"],
            "split": kind,
            "task": r["task"],
        }
        for _, r in records[records["type"] == kind].iterrows()
    ]


def mmvp_rows(records) -> list[dict]:
    """MMVP.tsv: index, question, A, B, answer letter, in pairs (report_acc_MMVP pairs rows 2i, 2i + 1)."""
    return [
        {
            "index": int(r["id"]),
            "question": r["question"],
            **options(r, 2),
            "answer": LETTERS[r["answer_index"]],
        }
        for _, r in records.iterrows()
    ]


# ---------------------------------------------------------------------------------------------- imports


@pytest.mark.parametrize("fmt", ["xlsx", "tsv", "json"])
def test_mmbench_rows_match_by_index_in_each_pred_format(grid, tmp_path, capsys, fmt):
    config, records = grid
    mmbench = records["mmbench-fixture"]
    rows = mmbench_rows(mmbench)
    path = dump(rows, gold_text(rows), tmp_path, "MMBench_DEV_EN", fmt)
    out = tmp_path / "mmbench.parquet"
    assert run(config, MODEL_ID, "mmbench-fixture", path, "--out", str(out)) == 0
    assert "read as vlmevalkit (guessed" in capsys.readouterr().err
    frame = imported(out)
    assert list(frame["id"]) == list(mmbench["id"]) and list(frame["prediction_index"]) == list(
        mmbench["answer_index"]
    )
    assert score_of(config, tmp_path, "mmbench-fixture", out)["value"] == 100.0


def test_mmbench_one_wrong_copy_fails_its_question(grid, tmp_path):
    config, records = grid
    mmbench = records["mmbench-fixture"]
    rows = mmbench_rows(mmbench)
    answers = gold_text(rows)
    wrong = next(n for n, row in enumerate(rows) if row["index"] >= 1_000_000)
    answers[wrong] = "A" if answers[wrong] != "A" else "B"
    out = tmp_path / "mmbench.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "mmbench-fixture",
            dump(rows, answers, tmp_path, "MMBench_DEV_EN"),
            "--out",
            str(out),
        )
        == 0
    )
    groups = mmbench["circular_group"].nunique()
    # Circular: a question counts only when every copy is right; one of the `groups` questions fails.
    assert score_of(config, tmp_path, "mmbench-fixture", out)["value"] == pytest.approx(
        round((groups - 1) / groups * 100, 4)
    )


def test_mme_rows_match_by_subtask_and_question_and_score(grid, tmp_path):
    config, records = grid
    mme = records["mme-fixture"]
    rows = mme_rows(mme)
    out = tmp_path / "mme.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "mme-fixture",
            dump(list(reversed(rows)), list(reversed(gold_text(rows))), tmp_path, "MME"),
            "--out",
            str(out),
        )
        == 0
    )
    frame = imported(out)
    assert list(frame["id"]) == list(mme["id"]) and list(frame["prediction"]) == list(mme["answer"])
    result = score_of(config, tmp_path, "mme-fixture", out)
    subtasks = mme["category"].nunique()
    assert result["metrics"]["total"]["value"] == 200.0 * subtasks  # acc 100 + acc+ 100 per subtask


def test_pope_rows_answer_each_split_they_name(grid, tmp_path):
    config, records = grid
    pope = records["pope-fixture"]
    rows = pope_rows(pope)
    assert any("," in row["category"] for row in rows)  # the fixture's splits share questions, as POPE's do
    wrong = {rows[0]["question"]}  # answered "No" wherever asked (its gold is Yes)
    answers = ["No" if row["question"] in wrong else row["answer"] for row in rows]
    out = tmp_path / "pope.parquet"
    assert (
        run(config, MODEL_ID, "pope-fixture", dump(rows, answers, tmp_path, "POPE"), "--out", str(out)) == 0
    )
    frame = imported(out).set_index("id")
    expected = ["no" if q in wrong else a for q, a in zip(pope["question"], pope["answer"])]
    assert list(frame.loc[pope["id"], "prediction"]) == expected
    # Per split F1 from the hand count of yes-items missed; the headline is their mean.
    f1s = []
    for _split, part in pope.groupby("split"):
        pred = ["no" if q in wrong else a for q, a in zip(part["question"], part["answer"])]
        tp = sum(p == "yes" and a == "yes" for p, a in zip(pred, part["answer"]))
        positives, predicted = (part["answer"] == "yes").sum(), pred.count("yes")
        f1s.append(2 * tp / (positives + predicted))
    assert score_of(config, tmp_path, "pope-fixture", out)["value"] == pytest.approx(
        round(sum(f1s) / len(f1s) * 100, 4)
    )
    assert min(f1s) < 1.0


def test_scienceqa_rows_match_by_question_hint_and_options(grid, tmp_path):
    config, records = grid
    sqa = records["scienceqa-fixture"]
    rows = scienceqa_rows(sqa)
    gold = gold_text(rows)
    answers = [gold[0], "I am not sure.", f"{gold[2]}. yes", "E", gold[4], "B" if gold[5] != "B" else "A"]
    out = tmp_path / "sqa.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "scienceqa-fixture",
            dump(rows, answers, tmp_path, "ScienceQA_TEST"),
            "--out",
            str(out),
        )
        == 0
    )
    frame = imported(out)
    assert list(frame["raw"]) == answers
    assert frame["prediction"].isna().tolist() == [False, True, False, True, False, False]
    assert score_of(config, tmp_path, "scienceqa-fixture", out)["value"] == pytest.approx(
        round(3 / 6 * 100, 4)
    )


def test_textvqa_rows_match_by_question_and_their_ten_answers(grid, tmp_path):
    config, records = grid
    textvqa = records["textvqa-fixture"]
    rows = textvqa_rows(textvqa)
    out = tmp_path / "textvqa.parquet"
    assert (
        run(
            config,
            MODEL_ID,
            "textvqa-fixture",
            dump(rows, list(textvqa["answer"]), tmp_path, "TextVQA_VAL"),
            "--out",
            str(out),
        )
        == 0
    )
    assert list(imported(out)["raw"]) == list(textvqa["answer"])
    # The most common human answer matches at least 3 of the others in each fixture item: VQA accuracy 1.
    assert score_of(config, tmp_path, "textvqa-fixture", out)["value"] == 100.0


def test_cvbench_2d_and_3d_files_are_imported_from_their_folder(grid, tmp_path, capsys):
    config, records = grid
    cv = records["cvbench-fixture"]
    folder = tmp_path / MODEL / "T20250101_Gabcdef"
    for kind in ("2D", "3D"):
        rows = cvbench_rows(cv, kind)
        answers = gold_text(rows)
        if kind == "3D":
            answers[0] = next(c for c in "AB" if c != answers[0])  # one Omni3D item wrong
        dump(rows, answers, folder, f"CV-Bench-{kind}")
    dump(mme_rows(records["mme-fixture"]), ["Yes"] * len(records["mme-fixture"]), folder, "MME")
    (folder / f"{MODEL}_CV-Bench-2D_acc.csv").write_text("split,Overall\n2D,1.0\n")
    out = tmp_path / "cv.parquet"
    assert run(config, MODEL_ID, "cvbench-fixture", str(folder), "--out", str(out)) == 0
    assert "predictions for MME do not answer cvbench benchmarks" in capsys.readouterr().err
    assert list(imported(out)["id"]) == list(cv["id"])
    omni = (cv["source"] == "Omni3D").sum()
    # ((ADE20K 1 + COCO 1) / 2 + Omni3D (omni - 1) / omni) / 2
    assert score_of(config, tmp_path, "cvbench-fixture", out)["value"] == pytest.approx(
        round((1 + (omni - 1) / omni) / 2 * 100, 4)
    )


def test_mmvp_pairs_are_matched_in_order_and_scored_by_pair(grid, tmp_path):
    config, records = grid
    mmvp = records["mmvp-fixture"]
    rows = mmvp_rows(mmvp)
    answers = gold_text(rows)
    answers[1] = "A" if answers[1] == "B" else "B"  # the first pair's second image wrong
    out = tmp_path / "mmvp.parquet"
    assert (
        run(config, MODEL_ID, "mmvp-fixture", dump(rows, answers, tmp_path, "MMVP"), "--out", str(out)) == 0
    )
    assert list(imported(out)["raw"]) == answers
    pairs = mmvp["pair_id"].nunique()
    assert score_of(config, tmp_path, "mmvp-fixture", out)["value"] == pytest.approx(
        round((pairs - 1) / pairs * 100, 4)
    )


def test_an_empty_prediction_is_a_format_error_row(grid, tmp_path):
    """An empty text in the `prediction` field, the last row's too, is an empty answer, never a row cut
    short."""
    config, records = grid
    rows = mme_rows(records["mme-fixture"])
    answers = gold_text(rows)
    answers[1] = answers[-1] = ""
    for fmt in ("xlsx", "tsv", "json"):
        out = tmp_path / f"mme-{fmt}.parquet"
        assert (
            run(
                config,
                MODEL_ID,
                "mme-fixture",
                dump(rows, answers, tmp_path / fmt, "MME", fmt),
                "--out",
                str(out),
            )
            == 0
        )
        frame = imported(out)
        assert len(frame) == len(rows) and frame["raw"][1] == "" and frame["prediction"].isna().tolist()[1]
        assert frame["raw"].tolist()[-1] == "" and frame["prediction"].isna().sum() == 2


def test_a_prediction_written_as_a_formula_before_63a279f1_reads_as_the_models_text(grid, tmp_path):
    config, records = grid
    textvqa = records["textvqa-fixture"]
    predictions = ["=A", "= 3+4", "=FILTER(B2:B3, 1)"]
    path = dump(textvqa_rows(textvqa), predictions, tmp_path, "TextVQA_VAL", before_63a279f1=True)
    assert list(pd.read_excel(path, dtype=str)["prediction"]) == ["0"] * 3  # the stored values: not the text
    out = tmp_path / "textvqa.parquet"
    assert run(config, MODEL_ID, "textvqa-fixture", path, "--out", str(out)) == 0
    frame = imported(out)
    assert list(frame["raw"][:2]) == predictions[:2] and frame["error"][:2].isna().all()
    # xlsxwriter wrote FILTER( as _xlfn._xlws.FILTER(: the text the model wrote cannot be told, so it is an
    # error row naming the cell, never "0" nor a guess
    assert pd.isna(frame["raw"][2]) and pd.isna(frame["prediction"][2])
    assert f"{Path(path).name} cell D4 holds the formula '=_xlfn._xlws.FILTER(B2:B3, 1)'" in frame["error"][2]
    assert "63a279f1" in frame["error"][2]


# ---------------------------------------------------------------------------------------------- refusals


def test_a_file_without_prediction_or_index_is_refused(grid, tmp_path, capsys):
    config, records = grid
    rows = mme_rows(records["mme-fixture"])
    out = str(tmp_path / "o.parquet")
    path = dump(rows, gold_text(rows), tmp_path, "MME")
    pd.read_excel(path).drop(columns=["prediction"]).to_excel(path, index=False)
    message = refused(capsys, config, MODEL_ID, "mme-fixture", path, "--format", "vlmevalkit", "--out", out)
    assert f"{path} has no `prediction` column" in message and "not a VLMEvalKit prediction file" in message
    path = dump(rows, gold_text(rows), tmp_path, "MME", "tsv")
    pd.read_csv(path, sep="\t").drop(columns=["index"]).to_csv(path, sep="\t", index=False)
    message = refused(capsys, config, MODEL_ID, "mme-fixture", path, "--format", "vlmevalkit", "--out", out)
    assert f"{path} has no `index` column" in message


@pytest.mark.parametrize("damage", ["cut before the last prediction", "a field more in the first row"])
def test_a_tsv_row_with_other_than_the_headers_fields_is_refused_naming_it(grid, tmp_path, capsys, damage):
    """pandas would read the row cut short as an empty prediction, and the first row with a field more as the
    header shifted by one."""
    config, records = grid
    rows = mmbench_rows(records["mmbench-fixture"])
    path = Path(dump(rows, gold_text(rows), tmp_path, "MMBench_DEV_EN", "tsv"))
    lines = path.read_text().splitlines()
    header = len(rows[0]) + 1  # and the prediction
    if damage == "cut before the last prediction":
        n, fields = len(rows), header - 1
        path.write_text("\n".join(lines[:-1] + [lines[-1].rsplit("\t", 1)[0]]))
    else:
        n, fields = 1, header + 1
        path.write_text("\n".join(lines[:1] + [lines[1] + '\t"B"'] + lines[2:]) + "\n")
    out = tmp_path / "o.parquet"
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", str(path), "--out", str(out))
    assert message == (
        f"vlmgrid: error: {path} row {n} has {fields} tab-separated fields where the header has {header}: "
        "the row is cut short or damaged, so its prediction cannot be told; copy the whole file again"
    )
    assert not out.exists()


@pytest.mark.parametrize("change", ["prediction lost", "prediction misspelt", "index lost"])
def test_a_json_row_without_index_or_prediction_is_refused_naming_it(grid, tmp_path, capsys, change):
    """Such a row would read as an empty answer (or an item the benchmark lacks)."""
    config, records = grid
    rows = mmbench_rows(records["mmbench-fixture"])
    path = Path(dump(rows, gold_text(rows), tmp_path, "MMBench_DEV_EN", "json"))
    data = json.loads(path.read_text())
    key = change.split()[0]
    value = data[1].pop(key)
    if change == "prediction misspelt":
        data[1]["predicton"] = value
    path.write_text(json.dumps(data, indent=4))
    out = tmp_path / "o.parquet"
    message = refused(capsys, config, MODEL_ID, "mmbench-fixture", str(path), "--out", str(out))
    assert message == (
        f"vlmgrid: error: {path} row 2 has no `{key}` key, which the other rows have (it has "
        f"{', '.join(data[1])}): its answer cannot be told; write the key again or copy the whole file again"
    )
    assert not out.exists()


def test_rows_that_match_no_item_are_refused_with_their_count_and_the_first(grid, tmp_path, capsys):
    config, records = grid
    rows = scienceqa_rows(records["scienceqa-fixture"])
    rows[2]["question"] = "Which ocean is highlighted?"
    rows[4]["question"] = "Which country is highlighted?"
    path = dump(rows, ["A"] * len(rows), tmp_path, "ScienceQA_TEST")
    message = refused(
        capsys, config, MODEL_ID, "scienceqa-fixture", path, "--out", str(tmp_path / "o.parquet")
    )
    assert (
        "has 2 answer(s) to items that benchmark scienceqa-fixture does not have, "
        "the first at row 3 (index 2)" in message
    )


def test_a_subset_is_refused(grid, tmp_path, capsys):
    config, records = grid
    rows = mmvp_rows(records["mmvp-fixture"])[:-1]
    path = dump(rows, gold_text(rows), tmp_path, "MMVP")
    message = refused(capsys, config, MODEL_ID, "mmvp-fixture", path, "--out", str(tmp_path / "o.parquet"))
    assert f"answers {len(rows)} of the {len(rows) + 1} items of mmvp-fixture: 1 missing" in message


@pytest.mark.parametrize(
    "bench, dataset, make, change, expected",
    [
        (
            "mme-fixture",
            "MME",
            mme_rows,
            lambda row: row.update(answer="No" if row["answer"] == "Yes" else "Yes"),
            "gives the gold answer",
        ),
        (
            "pope-fixture",
            "POPE",
            pope_rows,
            lambda row: row.update(answer="No" if row["answer"] == "Yes" else "Yes"),
            "gives the gold answer",
        ),
        (
            "mmbench-fixture",
            "MMBench_DEV_EN_V11",
            mmbench_rows,
            lambda row: row.update(A="a dog"),
            "gives the options ['a dog'",
        ),
        (
            "mmbench-fixture",
            "MMBench_DEV_EN",
            mmbench_rows,
            lambda row: row.update(answer="B" if row["answer"] == "A" else "A"),
            "gives the gold letter",
        ),
        (
            "textvqa-fixture",
            "TextVQA_VAL",
            textvqa_rows,
            lambda row: row.update(answer=str(["stop"] * 10)),
            "gives the gold answer",
        ),
    ],
)
def test_rows_of_another_version_are_refused(grid, tmp_path, capsys, bench, dataset, make, change, expected):
    config, records = grid
    rows = make(records[bench])
    change(rows[0])
    path = dump(rows, ["yes"] * len(rows), tmp_path, dataset)
    message = refused(capsys, config, MODEL_ID, bench, path, "--out", str(tmp_path / "o.parquet"))
    assert f"{path} row 1 (index {rows[0]['index']}) {expected}" in message
    assert f"the file was made from another version of {dataset}; import it into that one" in message


def test_an_unknown_dataset_name_is_refused_with_the_names_read(grid, tmp_path, capsys):
    config, records = grid
    rows = mme_rows(records["mme-fixture"])
    path = dump(rows, gold_text(rows), tmp_path, "MME_CoT_TEST")
    message = refused(
        capsys,
        config,
        MODEL_ID,
        "mme-fixture",
        path,
        "--format",
        "vlmevalkit",
        "--out",
        str(tmp_path / "o.parquet"),
    )
    assert "is not named <model>_<dataset>.xlsx for a dataset whose rows can be matched" in message
    assert (
        "MMBench_DEV_EN, MMBench_DEV_EN_V11, MME, POPE, ScienceQA_TEST, ScienceQA_VAL, TextVQA_VAL, "
        "CV-Bench-2D, CV-Bench-3D, MMVP" in message
    )


def test_a_dataset_of_another_kind_is_refused(grid, tmp_path, capsys):
    config, records = grid
    rows = mme_rows(records["mme-fixture"])
    path = dump(rows, gold_text(rows), tmp_path, "MME")
    message = refused(capsys, config, MODEL_ID, "pope-fixture", path, "--out", str(tmp_path / "o.parquet"))
    assert (
        "predictions for MME, whose rows answer mme benchmarks, not pope ones (the datasets read for pope "
        "are POPE)" in message
    )


def test_the_format_is_guessed_from_the_columns(grid, tmp_path):
    config, records = grid
    rows = mmvp_rows(records["mmvp-fixture"])
    for fmt in ("xlsx", "tsv", "json"):
        path = dump(rows, gold_text(rows), tmp_path / fmt, "MMVP", fmt)
        assert guess_format(Path(path)) == "vlmevalkit"
    other = tmp_path / "other.tsv"
    other.write_text("index\tanswer\n1\tA\n")
    with pytest.raises(VlmgridError, match="looks like no known format"):
        guess_format(other)
