import pandas as pd
import pytest
from helpers.dvc_lock import write_dvc_repo

from vlmgrid.errors import VlmgridError
from vlmgrid.predictions import check_against_records, read_predictions, rows_to_table, write_predictions
from vlmgrid.protocols.base import prediction_row


def _records(ids):
    return pd.DataFrame({"id": ids})


def _write(path, rows):
    write_predictions(path, rows_to_table(rows), {})


def test_round_trip_keeps_types(tmp_path):
    path = tmp_path / "p.parquet"
    _write(
        path,
        [
            prediction_row("a", prediction="yes", prediction_index=0, scores=[0.5, 0.25]),
            prediction_row("b", error="image unreadable: x.jpg"),
        ],
    )
    frame = read_predictions(path)
    assert list(frame["id"]) == ["a", "b"]
    assert list(frame["scores"][0]) == [0.5, 0.25]
    assert frame["prediction_index"].tolist() == [0, -1]
    assert frame["error"][1] == "image unreadable: x.jpg"


def test_truncated_file_is_one_clear_error(tmp_path):
    path = tmp_path / "p.parquet"
    _write(path, [prediction_row("a", prediction="yes", prediction_index=0)])
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(
        VlmgridError, match=r"p.parquet is unreadable \(truncated or not parquet.*delete it and rerun"
    ):
        read_predictions(path, "rerun inference")


def test_missing_file(tmp_path):
    with pytest.raises(VlmgridError, match="not found; rerun"):
        read_predictions(tmp_path / "nope.parquet", "rerun inference")


@pytest.mark.parametrize("given, fix", [(False, "rerun inference"), (True, "check the path")])
def test_a_missing_file_dvc_tracks_says_dvc_pull(tmp_path, monkeypatch, given, fix):
    monkeypatch.chdir(write_dvc_repo(tmp_path))
    tracked = tmp_path / "results" / "predictions" / "m" / "pope-fixture.parquet"
    with pytest.raises(VlmgridError) as caught:
        read_predictions(tracked, "rerun inference", given)
    assert str(caught.value) == (
        f"predictions file {tracked} not found; `dvc pull results/predictions/m/pope-fixture"
        f".parquet` fetches it (DVC tracks it: dvc.lock), or {fix}"
    )
    untracked = tmp_path / "results" / "mine" / "pope-fixture.parquet"
    with pytest.raises(VlmgridError) as caught:
        read_predictions(untracked, "rerun inference", given)
    assert str(caught.value) == f"predictions file {untracked} not found; {fix}"


def test_missing_columns_named(tmp_path):
    path = tmp_path / "p.parquet"
    pd.DataFrame({"id": ["a"], "prediction": ["yes"]}).to_parquet(path)
    with pytest.raises(VlmgridError, match="lacks the column.*variant"):
        read_predictions(path)


def test_records_check_names_missing_duplicate_and_unknown_ids(tmp_path):
    rows = [prediction_row("a"), prediction_row("b")]
    frame = pd.DataFrame(rows)
    check_against_records(frame, _records(["a", "b"]), "p")
    with pytest.raises(VlmgridError, match='misses 1 item.*"c"'):
        check_against_records(frame, _records(["a", "b", "c"]), "p")
    with pytest.raises(VlmgridError, match='id "a" more than once'):
        check_against_records(pd.DataFrame(rows + [prediction_row("a")]), _records(["a", "b"]), "p")
    with pytest.raises(VlmgridError, match='id\\(s\\) that the benchmark does not have, e.g. "b"'):
        check_against_records(frame, _records(["a"]), "p")


def test_a_class_index_the_benchmark_does_not_have_is_refused_not_a_wrong_answer():
    """A classification item has no options; its prediction_index is a class index, bounded by the
    benchmark's classes: 1000 on a benchmark of 1000 classes is no class, never a valid wrong answer."""
    records = pd.DataFrame({"id": ["a", "b"], "options": [[], []], "answer_index": [3, 999]})
    rows = [
        prediction_row("a", prediction="goldfish", prediction_index=1),
        prediction_row("b", prediction_index=-1),
    ]
    check_against_records(pd.DataFrame(rows), records, "p", classes=1000)
    rows[0] = prediction_row("a", prediction="?", prediction_index=1000)
    with pytest.raises(
        VlmgridError, match='item "a" .* prediction_index 1000, but it has 1000 classes; the index'
    ):
        check_against_records(pd.DataFrame(rows), records, "p", classes=1000)
