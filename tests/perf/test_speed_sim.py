"""perf/speed.py --device sim: vlmgrid's path against stand-ins that take a measured device's time, at tiny
counts."""

import importlib.util
import json
import sys

import pytest
from helpers.common import REPO

_spec = importlib.util.spec_from_file_location("speed", REPO / "perf" / "speed.py")
speed = importlib.util.module_from_spec(_spec)
sys.modules["speed"] = speed
_spec.loader.exec_module(speed)  # puts perf/ on the import path: its modules below
import speedsim  # noqa: E402

# Rates of a fast made-up device, so the run takes seconds; the counts fill every batch but the rank's.
CLIP_RATES = {"ViT-L-14@336": 4000.0, "ViT-B-32@224": 9000.0}
LETTERS = {1: 150.0, 2: 200.0}
GENERATE = {1: 40.0, 2: 60.0}


def _measurements(folder):
    folder.mkdir()
    limits = {
        "jpeg_decode_resize_per_core_per_s": 150.0,
        "cpu_count": 16,
        "clip": {f"{key} bs256": {"img_per_s": rate} for key, rate in CLIP_RATES.items()},
        "llava": {f"forward_letter bs{bs}": {"samples_per_s": rate} for bs, rate in LETTERS.items()},
        "rank50": {"shared_prefix_images_per_s": 50.0},
    }
    generation = {f"generate16 bs{bs}": {"samples_per_s": rate} for bs, rate in GENERATE.items()}
    (folder / "gpu-limits-h200.json").write_text(json.dumps(limits))
    (folder / "gen-limits-h200.json").write_text(json.dumps(generation))
    return folder


def test_the_simulated_device_runs_vlmgrids_path_against_the_measured_rates(tmp_path, monkeypatch):
    monkeypatch.setattr(
        speedsim,
        "SIM_COUNTS",
        {
            **speedsim.SIM_COUNTS,
            "clip_images": 8,
            "clip_batch": 4,
            "choice_items": 4,
            "generate_items": 4,
            "lm_batch": 2,
            "rank_queries": 1,
            "candidates": 3,
        },
    )
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))  # the run points it at its own folder
    out = tmp_path / "sim.md"
    assert (
        speed.main(
            ["--device", "sim", "--measurements", str(_measurements(tmp_path / "m")), "--out", str(out)]
        )
        == 0
    )
    saved = json.loads(out.with_suffix(".json").read_text())
    rows = {row["figure"]: row for row in saved["rows"]}
    assert list(rows) == ["sim clip large", "sim clip base", "sim choice", "sim generate", "sim rank"]
    # the ceiling is the stand-ins back to back: the measured rate wherever every batch is of a measured size
    assert rows["sim clip large"]["reference"] == pytest.approx(CLIP_RATES["ViT-L-14@336"])
    assert rows["sim clip base"]["reference"] == pytest.approx(CLIP_RATES["ViT-B-32@224"])
    assert rows["sim choice"]["reference"] == pytest.approx(LETTERS[2])
    assert rows["sim generate"]["reference"] == pytest.approx(GENERATE[2])
    for row in rows.values():
        assert 0 < row["value"] <= row["reference"], row  # the device's time is all in the wall time
        assert row["wall_s"] >= row["device_s"] > 0 and row["host_s"] > 0 and row["cpu_s"] > 0
        assert row["host_cores"] == pytest.approx(row["cpu_s"] / row["wall_s"])
        assert row["cores_needed"] == pytest.approx(row["reference"] / row["per_core"])
    for role in ("large", "base"):
        clip = rows[f"sim clip {role}"]
        assert clip["bare_per_core"] > 0 and clip["per_core_ratio"] == pytest.approx(
            clip["per_core"] / clip["bare_per_core"]
        )
    assert rows["sim clip large"]["h200_cores_needed"] == pytest.approx(4000.0 / 150.0)
    text = out.read_text()
    assert text.startswith("# vlmgrid speed: simulated H200")
    assert "| host alone s | device s | host + device s | max(host, device) s | wall s |" in text
    assert text == speed.rendered(saved)
    assert speed.main(["--render", str(out.with_suffix(".json")), "--out", str(tmp_path / "again.md")]) == 0
    assert (tmp_path / "again.md").read_text() == text


def test_missing_measurements_are_one_sentence(tmp_path):
    with pytest.raises(
        SystemExit, match="gpu-limits-h200.json is missing: the simulated device takes its times"
    ):
        speed.main(["--device", "sim", "--measurements", str(tmp_path)])


def test_a_short_batch_takes_the_nearest_measured_size():
    assert speedsim.at_batch({1: 35.0, 16: 50.0, 64: 51.0}, 64) == 51.0
    assert speedsim.at_batch({1: 35.0, 16: 50.0, 64: 51.0}, 20) == 50.0
    assert speedsim.at_batch({1: 35.0, 16: 50.0, 64: 51.0}, 4) == 35.0
