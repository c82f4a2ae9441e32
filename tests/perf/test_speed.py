"""perf/speed.py: the goal verdicts, the results table, the largest grid it builds for `snakemake -n`, and its
real-shape path run on the CPU at one layer."""

import importlib.util
import json
import math
import sys

import open_clip
import pytest
from helpers.common import REPO

_spec = importlib.util.spec_from_file_location("speed", REPO / "perf" / "speed.py")
speed = importlib.util.module_from_spec(_spec)
sys.modules["speed"] = speed  # dataclasses look their module up there
_spec.loader.exec_module(speed)  # puts perf/ on the import path: its modules below
import speedcases  # noqa: E402
import speedgrid  # noqa: E402
import speedreport  # noqa: E402

GOALS = {goal.figure: goal for goal in speedreport.GOALS}


def test_a_row_holds_the_ratio_to_its_reference():
    row = speedreport.result_row("clip large", "CLIP", "img/s", 927.0, 1030.0, "tower")
    assert row["ratio"] == pytest.approx(0.9)
    assert speedreport.result_row("dag", "dag", "s", 4.2)["ratio"] is None


@pytest.mark.parametrize(
    "figure,value,reference,shapes,expected",
    [
        ("clip large", 927.0, 1030.0, "real", "met"),  # exactly 0.9x
        ("clip large", 679.0, 1030.0, "real", "missed"),  # a plain DataLoader: 0.66x
        ("clip base cached", 8100.0, 28000.0, "real", "met"),  # an absolute goal: 8,000 img/s
        ("clip base cached", 4052.0, 28000.0, "real", "missed"),
        ("clip base cached", 50.0, 120.0, "small", "n/a (small shapes)"),  # no GPU figure from tiny shapes
        ("clip base vs naive", 1600.0, 1555.0, "real", "met"),  # from files: at least the plain DataLoader
        ("clip base vs naive", 1500.0, 1555.0, "real", "missed"),
        ("choice vs per-sample generate", 45.0, 2.8, "real", "met"),  # 16x
        ("choice", 1.0, 5.0, "small", "n/a (small shapes)"),  # the CPU says nothing of a GPU ratio
        ("rank", 6.9, 1.0, "real", "missed"),
        ("dag", 9.99, None, "small", "met"),
        ("dag", 10.0, None, "small", "missed"),  # under 10 s, not at
    ],
)
def test_verdicts(figure, value, reference, shapes, expected):
    row = speedreport.result_row(figure, figure, "", value, reference)
    assert speedreport.verdict(GOALS[figure], row, shapes) == expected


def test_a_figure_without_goal_or_reference_has_no_verdict():
    row = speedreport.result_row("workflow cold", "cold", "s", 480.0)
    assert speedreport.verdict(None, row, "small") == ""
    assert (
        speedreport.verdict(GOALS["rank"], speedreport.result_row("rank", "rank", "", 3.0), "real")
        == "n/a (not measured)"
    )


def test_the_table_says_cpu_small_shapes_and_every_figure():
    meta = {
        "date": "2026-11-30 05:00 UTC",
        "device": "CPU (x86_64)",
        "shapes": "small",
        "precision": "fp32",
        "cpus": 2,
        "libraries": "torch 2",
        "command": "python perf/speed.py",
        "notes": ["parts of 256"],
    }
    rows = [
        speedreport.result_row(
            "choice", "multiple choice", "samples/s", 40.0, 50.0, "bare forward", host_cores=1.5
        ),
        speedreport.result_row("dag", "snakemake -n", "s", 5.25),
    ]
    text = speedreport.render_markdown(meta, rows)
    assert text.startswith("# vlmgrid speed: CPU (x86_64), small shapes")
    assert "**CPU, small shapes.**" in text and "say nothing about a GPU" in text
    assert (
        "| multiple choice | 40.0 | samples/s | bare forward | 50.0 | 0.80x | 1.50 "
        "| >= 0.85x batched forward | n/a (small shapes) |"
    ) in text
    assert "| snakemake -n | 5.25 | s |  |  |  |  | < 10 s | met |" in text
    assert "- parts of 256" in text
    real = speedreport.render_markdown({**meta, "shapes": "real", "device": "NVIDIA H200"}, rows)
    assert "CPU, small shapes" not in real and "| 0.80x | 1.50 | >= 0.85x batched forward | missed |" in real


def test_render_writes_the_markdown_of_saved_results(tmp_path):
    meta = {
        "date": "d",
        "device": "CPU",
        "shapes": "small",
        "precision": "fp32",
        "cpus": 2,
        "libraries": "l",
        "command": "c",
    }
    rows = [speedreport.result_row("dag", "snakemake -n", "s", 3.5)]
    saved = tmp_path / "speed.json"
    saved.write_text(json.dumps({"meta": meta, "rows": rows}))
    assert speed.main(["--render", str(saved)]) == 0
    assert (tmp_path / "speed.md").read_text() == speedreport.render_markdown(meta, rows)


def test_the_largest_grid_is_every_catalog_model_on_every_shipped_benchmark():
    import yaml

    from vlmgrid.config import validate_config

    config = speedgrid.largest_grid(REPO)
    catalog = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["models"]
    assert config["grid"]["models"] == list(catalog)
    for name in speedgrid.GRID_CONFIGS:
        shipped = yaml.safe_load((REPO / "config" / name).read_text())["benchmarks"]
        assert set(shipped) <= set(config["grid"]["benchmarks"])
    kinds = {bench["kind"] for bench in config["benchmarks"].values()}
    assert {
        "imagenet",
        "scienceqa_img",
        "textvqa",
        "pope",
        "mme",
        "mmbench",
        "cvbench",
        "mmvp",
        "kaleidoscope",
        "cvqa",
        "dance",
    } <= kinds
    grid = validate_config(config, source="largest")
    assert len(grid.cells) == len(catalog) * len(config["benchmarks"])


def test_a_reduced_depth_keeps_every_real_width():
    real = speedcases.SHAPES["real"]
    shallow = speedcases.at_depth(real, 1)
    for role, (label, arch) in real["clip"].items():
        full = open_clip.get_model_config(arch)
        shallow_label, cfg = shallow["clip"][role]
        assert shallow_label == label
        assert cfg["vision_cfg"]["layers"] == cfg["text_cfg"]["layers"] == 1
        assert cfg["vision_cfg"] == {**full["vision_cfg"], "layers": 1}
        assert cfg["text_cfg"] == {**full["text_cfg"], "layers": 1}
        assert cfg["embed_dim"] == full["embed_dim"]
    assert shallow["vision"] == {**real["vision"], "num_hidden_layers": 1}
    assert shallow["text"] == {**real["text"], "num_hidden_layers": 1}
    assert shallow["vocab"] == 32064 and shallow["precision"] == "bf16"
    assert (
        real["vision"]["num_hidden_layers"] == 24 and real["text"]["num_hidden_layers"] == 32
    )  # left as it was
    assert open_clip.get_model_config("ViT-L-14-336")["vision_cfg"]["layers"] == 24


def test_a_reduced_depth_is_said_above_the_table_and_judges_no_goal():
    meta = {
        "date": "d",
        "device": "CPU",
        "shapes": speedreport.shapes_label("real", 1),
        "precision": "fp32",
        "cpus": 2,
        "libraries": "l",
        "command": "c",
    }
    rows = [speedreport.result_row("rank", "ranking", "pictures/s", 80.0, 1.0, "full forwards")]
    text = speedreport.render_markdown(meta, rows)
    assert text.startswith("# vlmgrid speed: CPU, depth-1 real shapes")
    assert "**Reduced depth.**" in text and "CPU, small shapes" not in text
    assert "| 80.00x |  | >= 7x 50 full forwards | n/a (depth-1 real shapes) |" in text
    assert "reduced depth" not in speedreport.render_markdown({**meta, "shapes": "real"}, rows)


def test_a_depth_below_one_is_refused(capsys):
    with pytest.raises(SystemExit):
        speed.main(["--depth", "0"])
    assert "--depth 0: a model needs at least one layer" in capsys.readouterr().err


# Small counts: every section runs its whole path (JPEG files, save, from_pretrained / open_clip loading,
# the runner over several parts of 3 items, a last batch short, the reference beside it).
TINY_COUNTS = {
    "clip_images": 8,
    "clip_batch": 4,
    "choice_items": 4,
    "generate_items": 4,
    "lm_batch": 2,
    "rank_queries": 1,
}


def test_a_run_stopped_after_a_section_keeps_its_figures(tmp_path, monkeypatch):
    """--out is rewritten after each section: a run its time limit stops keeps the sections it finished, and
    says which it did not reach."""
    clip_rows = [speedreport.result_row("clip large", "CLIP ViT-L/14@336", "img/s", 900.0, 1000.0, "tower")]
    monkeypatch.setattr(speed, "clip_section", lambda shape, device, work, part_size: clip_rows)

    def stopped(*args):
        raise SystemExit(143)  # what SIGTERM does in speed.py

    monkeypatch.setattr(speed, "dag_section", stopped)
    out = tmp_path / "speed.md"
    with pytest.raises(SystemExit):
        speed.main(["--device", "cpu", "--only", "clip,dag", "--out", str(out)])
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["rows"] == clip_rows
    assert saved["meta"]["notes"][0].startswith("sections measured so far: clip, in ")
    assert saved["meta"]["notes"][0].endswith("s; not yet: dag")
    assert out.read_text() == speedreport.render_markdown(saved["meta"], saved["rows"])
    assert "| CLIP ViT-L/14@336 | 900 |" in out.read_text()


@pytest.mark.integration
def test_the_real_shape_path_runs_at_depth_one_on_the_cpu(tmp_path, monkeypatch):
    """The GPU run's own path at real widths and one layer (LLaVA-1.5-7B's width and vocabulary: 2 GB in
    fp32)."""
    monkeypatch.setitem(speedcases.SHAPES, "real", {**speedcases.SHAPES["real"], **TINY_COUNTS})
    monkeypatch.setattr(speedcases, "CANDIDATES", 3)
    # every timed call once, with no warm-up call: what the figures are is not checked here, only that each
    # path runs and gives a finite figure (the repeated forwards at real width were most of this test's time)
    timed = speedcases.timed
    monkeypatch.setattr(speedcases, "timed", lambda fn, device, repeats=1, warmup=1: timed(fn, device, 1, 0))
    monkeypatch.setattr(speedcases, "warm_up", lambda runner, records: None)
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))  # the run points it at its own folder
    out = tmp_path / "speed.md"
    assert (
        speed.main(
            [
                "--shapes",
                "real",
                "--depth",
                "1",
                "--device",
                "cpu",
                "--only",
                "clip,choice,generate,rank",
                "--part-size",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    saved = json.loads(out.with_suffix(".json").read_text())
    meta, rows = saved["meta"], saved["rows"]
    assert meta["shapes"] == "depth-1 real"
    figures = [row["figure"] for row in rows]
    assert {goal.figure for goal in speedreport.GOALS if not goal.cpu_side} <= set(figures)
    assert {"clip large plain", "clip base plain"} <= set(figures) and len(figures) == len(set(figures))
    for row in rows:
        assert math.isfinite(row["value"]) and row["value"] > 0, row
        assert row["reference"] is not None and math.isfinite(row["reference"]) and row["reference"] > 0, row
        assert 0 < row["host_cores"] <= meta["cpus"] + 0.5, row  # the host side beside every figure
    labels = {row["figure"]: row["label"] for row in rows}
    assert labels["clip large"].startswith("CLIP ViT-L/14@336") and labels["clip base"].startswith(
        "CLIP ViT-B/32@224"
    )
    assert labels["rank"].startswith("ranking 3 riddles per picture")
    # the ranking again with every riddle in its own row, which a GPU run compares with the packed row's
    assert labels["rank, rows"].endswith("each riddle in its own row")
    text = out.read_text()
    assert text == speedreport.render_markdown(meta, rows)
    assert text.count("n/a (depth-1 real shapes)") == len([f for f in figures if f in GOALS])
