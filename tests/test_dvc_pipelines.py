"""Every grid's DVC pipeline from one template (`vlmgrid dvc-pipelines`): the committed files are what the
generator writes, DVC reads them all as one graph without overlapping outputs, and the plan refuses grids
whose outputs would collide."""

import shutil

import pytest
import yaml

from conftest import REPO, copy_workflow, run
from vlmgrid.cli import main
from vlmgrid.errors import VlmgridError
from vlmgrid.stages.dvc_pipelines import plan_pipelines, render_pipelines

PAPER_GRIDS = ["carpe", "cvqa", "dance", "kaleidoscope"]


def test_the_committed_pipelines_are_what_the_generator_writes():
    rendered = render_pipelines(REPO)
    assert sorted(path.as_posix() for path in rendered) == ["dvc.yaml"] + [f"pipelines/{g}/dvc.yaml" for g in PAPER_GRIDS]
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
    assert plans["config"].fetch_models is None  # the default grid: all its models, read from its config
    assert "llava-1.5-7b" in plans["carpe"].fetch_models
    assert "llava-1.5-7b" not in plans["cvqa"].fetch_models and "llava-1.5-7b" not in plans["dance"].fetch_models
    assert "clip-vit-b-32" in plans["cvqa"].fetch_models and "clip-vit-b-32" not in plans["dance"].fetch_models


def test_dvc_reads_every_grid_as_one_graph_without_running_it(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    run(["git", "init", "-q"], root)
    stages = set(run(["dvc", "stage", "list", "--all", "--names-only"], root).stdout.split())
    for grid in PAPER_GRIDS:
        assert {f"pipelines/{grid}/dvc.yaml:{stage}" for stage in ("stamp_sources", "report")} <= stages
    assert "pipelines/carpe/dvc.yaml:infer@llava-1.5-7b-pope" in stages
    assert "pipelines/kaleidoscope/dvc.yaml:infer@qwen2.5-vl-7b-kaleidoscope" in stages
    # a shared model's folder comes from the grid that fetches it: the dance cell's upstream crosses pipelines
    dag = run(["dvc", "dag", "pipelines/dance/dvc.yaml:infer@llava-1.5-7b-dance"], root).stdout
    assert "pipelines/carpe/dvc.yaml:fetch_model@llava-1.5-7b" in dag


def _grid_file(root, name: str, data: dict) -> None:
    (root / "config" / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def test_two_grids_with_the_same_benchmark_are_refused(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    default = yaml.safe_load((root / "config/config.yaml").read_text())
    _grid_file(root, "copy", {**default, "results_dir": "results/copy"})
    with pytest.raises(VlmgridError, match=r"config/copy.yaml and config/config.yaml both evaluate the benchmark "
                                           r"'imagenet-fixture'"):
        plan_pipelines(root)


def test_a_shared_model_with_another_source_is_refused(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    default = yaml.safe_load((root / "config/config.yaml").read_text())
    other = {**default, "results_dir": "results/other", "grid": {"models": ["random"], "benchmarks": []},
             "models": {"random": {"backend": "open_clip", "source": {"type": "fixture"}}}}
    _grid_file(root, "other", other)
    with pytest.raises(VlmgridError, match="config/other.yaml gives the model 'random' another backend or source"):
        plan_pipelines(root)


def test_stamp_sources_writes_into_the_folder_it_is_given(tmp_path):
    # the paper grids' pipelines stamp into <results_dir>/source-stamps: a folder of each grid's own
    assert main(["stamp-sources", "--config", str(REPO / "config/dance.yaml"), "--out", str(tmp_path / "stamps")]) == 0
    assert sorted(path.name for path in (tmp_path / "stamps").iterdir()) == ["dance.json", "models"]
    models = yaml.safe_load((REPO / "config/dance.yaml").read_text())["grid"]["models"]
    assert sorted(path.stem for path in (tmp_path / "stamps" / "models").iterdir()) == sorted(models)
