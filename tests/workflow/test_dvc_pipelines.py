"""Every grid's DVC pipeline from one template (`vlmgrid dvc-pipelines`): the committed files are what the
generator writes, each has a stamp stage, a grid stage (Snakemake) and a fetch stage per model it shares with
a later grid, DVC reads them all as one graph without overlapping outputs (and each pipeline's plots from its
own folder), and the plan refuses grids whose outputs would collide."""

import json
import posixpath
import re
import shutil
import struct
import zlib
from pathlib import Path

import pytest
import yaml
from helpers.common import REPO, copy_workflow, run

from vlmgrid.cli import main
from vlmgrid.errors import VlmgridError
from vlmgrid.stages.dvc_pipelines import plan_pipelines, render_pipelines

PAPER_GRIDS = ["carpe", "cvqa", "dance", "kaleidoscope"]


def test_the_committed_pipelines_are_what_the_generator_writes():
    rendered = render_pipelines(REPO)
    assert sorted(path.as_posix() for path in rendered) == ["dvc.yaml"] + [
        f"pipelines/{g}/dvc.yaml" for g in PAPER_GRIDS
    ]
    for path, text in rendered.items():
        assert (REPO / path).read_text() == text, f"{path} is stale: run `vlmgrid dvc-pipelines`"
    assert main(["dvc-pipelines", "--root", str(REPO), "--check"]) == 0


def test_check_names_a_pipeline_edited_by_hand(tmp_path, capsys):
    root = copy_workflow(tmp_path / "repo")
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    (root / "pipelines/dance/dvc.yaml").write_text("stages: {}\n")
    assert main(["dvc-pipelines", "--root", str(root), "--check"]) != 0
    assert "pipelines/dance/dvc.yaml differ from workflow/dvc.template.yaml" in capsys.readouterr().err
    assert main(["dvc-pipelines", "--root", str(root)]) == 0
    assert (root / "pipelines/dance/dvc.yaml").read_text() == (REPO / "pipelines/dance/dvc.yaml").read_text()


def test_a_shared_model_is_fetched_by_the_first_grid_that_lists_it():
    plans = {plan.config.stem: plan for plan in plan_pipelines(REPO)}
    assert plans["config"].shared_models == plans["config"].fetched_models == ()  # no model of another grid
    assert "llava-1.5-7b" in plans["carpe"].shared_models
    assert (
        "llava-1.5-7b" not in plans["cvqa"].shared_models
        and "llava-1.5-7b" not in plans["dance"].shared_models
    )
    assert (
        "clip-vit-b-32" in plans["cvqa"].shared_models and "clip-vit-b-32" not in plans["dance"].shared_models
    )
    # every grid that evaluates it reads the one folder: a dependency of its grid stage, not an output
    for grid in ("carpe", "cvqa", "dance"):
        assert "llava-1.5-7b" in plans[grid].fetched_models
        assert "models/llava-1.5-7b" not in plans[grid].own_folders
    # a model of one grid alone is fetched by that grid's stage: one of its outputs
    assert "models/aya-vision-8b" in plans["kaleidoscope"].own_folders


def _pipeline_stages(stages: list[str]) -> dict[str, list[str]]:
    """`dvc stage list --all --names-only` by pipeline: {dvc.yaml path: its stages' names}."""
    by_pipeline: dict[str, list[str]] = {}
    for stage in stages:
        pipeline, _, name = stage.rpartition(":")
        by_pipeline.setdefault(pipeline or "dvc.yaml", []).append(name)
    return by_pipeline


def test_dvc_reads_every_grid_as_one_graph_without_running_it(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    run(["git", "init", "-q"], root)
    stages = run(["dvc", "stage", "list", "--all", "--names-only"], root).stdout.split()
    by_pipeline = _pipeline_stages(stages)
    assert sorted(by_pipeline) == sorted(
        ["dvc.yaml", *(f"pipelines/{grid}/dvc.yaml" for grid in PAPER_GRIDS)]
    )
    # each pipeline: its stamps, its grid (one Snakemake run), and the fetch of each model it shares with a
    # later grid
    for pipeline, names in by_pipeline.items():
        assert [name for name in names if not name.startswith("fetch_model@")] == ["stamp_sources", "grid"], (
            pipeline
        )
    plans = {plan.dvc_file.as_posix(): plan for plan in plan_pipelines(REPO)}
    for pipeline, names in by_pipeline.items():
        assert [name for name in names if name.startswith("fetch_model@")] == [
            f"fetch_model@{model}" for model in plans[pipeline].shared_models
        ], pipeline
    assert by_pipeline["dvc.yaml"] == ["stamp_sources", "grid"]  # the default grid shares no model
    # a model of three grids has one fetch stage in the graph, in the first pipeline listing it
    assert [stage for stage in stages if stage.endswith("fetch_model@llava-1.5-7b")] == [
        "pipelines/carpe/dvc.yaml:fetch_model@llava-1.5-7b"
    ]
    # the other grids' stages depend on its folder: their upstream crosses pipelines
    for grid in ("cvqa", "dance"):
        grid_stage = _stages(root, f"pipelines/{grid}/dvc.yaml")["grid"]
        assert "${data_dir}/models/llava-1.5-7b" in grid_stage["deps"]
        assert not [out for out in grid_stage["outs"] if "models/llava-1.5-7b" in str(out)]
        dag = run(["dvc", "dag", f"pipelines/{grid}/dvc.yaml:grid"], root).stdout
        assert "pipelines/carpe/dvc.yaml:fetch_model@llava-1.5-7b" in dag, grid
        assert "pipelines/carpe/dvc.yaml:grid" not in dag  # another grid's fetch, never its grid


def test_a_paper_pipelines_plots_are_its_grids_figures_from_the_pipelines_folder():
    # DVC reads a top-level plot's path from the dvc.yaml's folder (a stage's wdir does not apply there)
    for path, text in render_pipelines(REPO).items():
        pipeline = yaml.safe_load(text)
        config = yaml.safe_load((REPO / path.parent / pipeline["vars"][0].rsplit(":", 1)[0]).read_text())
        plots = [plot.replace("${results_dir}", config["results_dir"]) for plot in pipeline["plots"]]
        assert plots and "main.png" in {posixpath.basename(plot) for plot in plots}, path
        for plot in plots:
            if path == Path("dvc.yaml"):
                assert re.fullmatch(r"results/figures/[\w-]+\.png", plot), plot
            else:
                grid = path.parent.name
                assert re.fullmatch(rf"\.\./\.\./results/{re.escape(grid)}/figures/[\w-]+\.png", plot), plot
                assert posixpath.normpath(posixpath.join(path.parent.as_posix(), plot)).startswith(
                    f"results/{grid}/figures/"
                )


def _png() -> bytes:
    """A 1x1 grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"\x00\x80"))
        + chunk(b"IEND", b"")
    )


def test_dvc_plots_show_lists_a_paper_grids_figure(tmp_path):
    """A paper grid's figure, where its report draws it, is on the page `dvc plots show` writes (no grid run:
    a PNG file stands for it)."""
    root = copy_workflow(tmp_path / "repo")
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    run(["git", "init", "-q"], root)
    figure = root / "results/dance/figures/main.png"
    figure.parent.mkdir(parents=True)
    figure.write_bytes(_png())
    run(["dvc", "plots", "show"], root)
    page = (root / "dvc_plots/index.html").read_text()
    images = re.findall(r"<img [^>]*src=\"([^\"]+)\"", page)
    shown = [source for source in images if "dance" in source]
    assert len(shown) == 1, images
    assert (root / "dvc_plots" / shown[0]).read_bytes() == figure.read_bytes()


def _grid_file(root, name: str, data: dict) -> None:
    (root / "config" / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_two_grids_with_the_same_benchmark_are_refused(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    default = yaml.safe_load((root / "config/config.yaml").read_text())
    _grid_file(root, "copy", {**default, "results_dir": "results/copy"})
    with pytest.raises(
        VlmgridError,
        match=r"config/copy.yaml and config/config.yaml both evaluate the benchmark "
        r"'imagenet-fixture'",
    ):
        plan_pipelines(root)


def test_a_shared_model_with_another_source_is_refused(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    default = yaml.safe_load((root / "config/config.yaml").read_text())
    other = {
        **default,
        "results_dir": "results/other",
        "grid": {"models": ["random"], "benchmarks": []},
        "models": {"random": {"backend": "open_clip", "source": {"type": "fixture"}}},
    }
    _grid_file(root, "other", other)
    with pytest.raises(
        VlmgridError, match="config/other.yaml gives the model 'random' another backend or source"
    ):
        plan_pipelines(root)


def test_stamp_sources_writes_into_the_folder_it_is_given(tmp_path):
    # the paper grids' pipelines stamp into <results_dir>/source-stamps: a folder of each grid's own
    assert (
        main(
            ["stamp-sources", "--config", str(REPO / "config/dance.yaml"), "--out", str(tmp_path / "stamps")]
        )
        == 0
    )
    assert sorted(path.name for path in (tmp_path / "stamps").iterdir()) == ["dance.json", "grid", "models"]
    models = yaml.safe_load((REPO / "config/dance.yaml").read_text())["grid"]["models"]
    assert sorted(path.stem for path in (tmp_path / "stamps" / "models").iterdir()) == sorted(models)


def test_the_grids_settings_stamp_holds_what_vlmgrid_reads_defaults_filled_in(tmp_path):
    # the README's own-model config leaves bootstrap out: DVC's score stages track vlmgrid's default
    stamps = tmp_path / "stamps"
    assert main(["stamp-sources", "--config", str(REPO / OWN), "--out", str(stamps)]) == 0
    written = stamps / "grid" / "settings.json"
    settings = json.loads(written.read_text())
    assert {key: value for key, value in settings.items() if key != "models"} == {
        "bootstrap": {"samples": 1000, "seed": 0},
        "invariance_items": 32,
        "title": "My fine-tuned LLaVA on MME, MMBench and ScienceQA-IMG",
    }
    # and each model's settings, as its own stamp holds them: the grid stage's params (`dvc exp show` columns)
    model = json.loads((stamps / "models" / "my-llava.json").read_text())["models"]["my-llava"]
    assert (
        settings["models"] == {"my-llava": model} and model["source"]["path"] == "/checkpoints/my-llava-13b"
    )
    before = written.stat().st_mtime_ns
    assert main(["stamp-sources", "--config", str(REPO / OWN), "--out", str(stamps)]) == 0
    assert written.stat().st_mtime_ns == before  # unchanged: not rewritten, so DVC reruns nothing


# -------------------------------------------------------------------------------------- a config of one's own

OWN = "config/examples/own-model.yaml"


def _stages(root, dvc_file: str) -> dict:
    return yaml.safe_load((root / dvc_file).read_text())["stages"]


def test_a_config_of_ones_own_gets_a_pipeline_that_tracks_the_keys_it_leaves_out_in_a_stamp(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    example = yaml.safe_load((root / OWN).read_text())
    assert "bootstrap" not in example and example["data_dir"] == "data/own-model"  # the README's config
    assert main(["dvc-pipelines", "--root", str(root), "--config", str(root / OWN)]) == 0

    stages = _stages(root, "pipelines/own-model/dvc.yaml")
    assert list(stages) == ["stamp_sources", "fetch_model", "grid"]
    # bootstrap and title, which the config leaves out, are params of the grid's settings stamp (with
    # vlmgrid's defaults), the whole file, not of the config (DVC would stop at a missing one); only `grid`,
    # which every config holds, is
    settings = "${results_dir}/source-stamps/grid/settings.json"
    assert stages["grid"]["params"] == [{OWN: ["grid"]}, {settings: None}]
    # its one model is no other grid's: its grid stage fetches it, into a folder of this grid's own
    assert stages["fetch_model"]["foreach"] == []
    assert {"${data_dir}/models/my-llava": {"persist": True}} in stages["grid"]["outs"]
    for grid in PAPER_GRIDS:  # the repo's pipelines are what they were
        assert (root / f"pipelines/{grid}/dvc.yaml").read_text() == (
            REPO / f"pipelines/{grid}/dvc.yaml"
        ).read_text()
    # the pipeline names its config: a plain run keeps it current, and --check checks it
    assert main(["dvc-pipelines", "--root", str(root), "--check"]) == 0
    (root / "pipelines/own-model/dvc.yaml").write_text(
        (root / "pipelines/own-model/dvc.yaml").read_text() + "# x\n"
    )
    assert main(["dvc-pipelines", "--root", str(root), "--check"]) != 0
    assert main(["dvc-pipelines", "--root", str(root)]) == 0
    assert main(["dvc-pipelines", "--root", str(root), "--check", "--config", str(root / OWN)]) == 0

    # DVC reads it beside CARPE's pipeline, which has an `mme` and an `mmbench` of its own in data/
    run(["git", "init", "-q"], root)
    listed = set(run(["dvc", "stage", "list", "--all", "--names-only"], root).stdout.split())
    assert {"pipelines/own-model/dvc.yaml:grid", "pipelines/carpe/dvc.yaml:grid"} <= listed
    assert {"${data_dir}/mme": {"persist": True}} in stages["grid"][
        "outs"
    ]  # data/own-model/mme, not data/mme


def test_a_grid_of_ones_own_in_another_grids_data_folder_is_refused_in_one_sentence(tmp_path, capsys):
    root = copy_workflow(tmp_path / "repo")
    example = yaml.safe_load((root / OWN).read_text())
    _grid_file(root, "mine", {**example, "data_dir": "data", "results_dir": "results/mine"})
    assert main(["dvc-pipelines", "--root", str(root), "--config", str(root / "config/mine.yaml")]) == 2
    said = capsys.readouterr().err.strip()
    assert said == (
        "vlmgrid: error: config/mine.yaml and config/carpe.yaml both evaluate the benchmark 'mme' in "
        "data/mme, which DVC allows as one stage's output only; give config/mine.yaml a data_dir of its "
        "own (data_dir: data/mine), or the benchmark another name"
    )
    assert not (root / "pipelines").exists()


@pytest.mark.parametrize(
    "change, said",
    [
        (
            {"data_dir": None},
            "config/examples/own-model.yaml sets no data_dir, which its DVC pipeline reads from the "
            "file; add `data_dir: data/own-model`",
        ),
        (
            {"results_dir": "results/carpe"},
            "config/examples/own-model.yaml and config/carpe.yaml both write their "
            "results to results/carpe; give config/examples/own-model.yaml a results_dir",
        ),
        (
            {"results_dir": "../elsewhere"},
            "config/examples/own-model.yaml: results_dir ../elsewhere lies outside the repo",
        ),
        (
            {"grid": {"models": ["my-llava"], "benchmarks": ["mme", "mmbnech"]}},
            'config/examples/own-model.yaml: grid.benchmarks names "mmbnech", which is not defined under '
            "benchmarks",
        ),
    ],
)
def test_a_config_of_ones_own_that_dvc_could_not_run_is_refused(tmp_path, capsys, change, said):
    root = copy_workflow(tmp_path / "repo")
    example = yaml.safe_load((root / OWN).read_text())
    example.update(change)
    (root / OWN).write_text(
        yaml.safe_dump({key: value for key, value in example.items() if value is not None})
    )
    assert main(["dvc-pipelines", "--root", str(root), "--config", str(root / OWN)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (root / "pipelines").exists()


def test_configs_of_ones_own_outside_the_repo_or_of_one_name_are_refused(tmp_path, capsys):
    root = copy_workflow(tmp_path / "repo")
    outside = tmp_path / "mine.yaml"
    shutil.copy(root / OWN, outside)
    assert main(["dvc-pipelines", "--root", str(root), "--config", str(outside)]) == 2
    assert (
        f"{outside} lies outside the repo ({root}), and DVC reads only files inside it"
        in capsys.readouterr().err
    )
    twin = root / "grids" / "own-model.yaml"
    twin.parent.mkdir()
    twin.write_text(
        (root / OWN)
        .read_text()
        .replace("results/own-model", "results/twin")
        .replace("data/own-model", "data/twin")
    )
    assert (
        main(["dvc-pipelines", "--root", str(root), "--config", str(root / OWN), "--config", str(twin)]) == 2
    )
    assert (
        "grids/own-model.yaml and config/examples/own-model.yaml would both be written to "
        "pipelines/own-model/dvc.yaml; rename one"
    ) in capsys.readouterr().err


def test_a_grid_changed_since_its_pipeline_was_written_stops_at_the_first_stage(
    tmp_path, monkeypatch, capsys
):
    """The grid stage lists the grid's benchmark and model folders as its outputs: the stamp stage, which `dvc
    repro` runs first, refuses a pipeline written for another grid, and says how to write it again."""
    root = copy_workflow(tmp_path / "repo")
    monkeypatch.chdir(root)
    stamp = [
        "stamp-sources",
        "--config",
        "config/config.yaml",
        "--out",
        str(tmp_path / "stamps"),
        "--pipeline",
        "dvc.yaml",
    ]
    assert main(stamp) == 0
    config = yaml.safe_load((root / "config/config.yaml").read_text())
    config["grid"]["benchmarks"] = config["grid"]["benchmarks"][:2]
    (root / "config/config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    capsys.readouterr()
    assert main(stamp) == 2
    assert capsys.readouterr().err.strip() == (
        "vlmgrid: error: dvc.yaml is not what workflow/dvc.template.yaml and config/config.yaml give now "
        "(the grid changed since it was written, or it was edited); run `vlmgrid dvc-pipelines`, then `dvc "
        "repro` again"
    )
    assert main(["dvc-pipelines"]) == 0
    assert main(stamp) == 0
