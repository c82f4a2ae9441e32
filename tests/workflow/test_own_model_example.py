"""The README's "Evaluate your own model" config (config/examples/own-model.yaml), run as a user runs it: a
checkpoint folder of one's own and three benchmarks in their authors' release layouts (MME's release folder,
MMBench's 2023-07-12 dev TSV named by its path, ScienceQA's problems.json), read where they lie. Only the
paths change (to small copies written in those layouts), and each copy says its item count, as a copy that is
not the published one must."""

import pandas as pd
import pytest
import yaml
from helpers.common import REPO, copy_workflow, run
from helpers.workflow import stages_run

from vlmgrid.fixtures.kinds import mmbench as mmbench_fixture
from vlmgrid.fixtures.kinds import mme as mme_fixture
from vlmgrid.fixtures.kinds import scienceqa as scienceqa_fixture

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "config" / "examples" / "own-model.yaml"
SETTINGS = {"seed": 0, "size": 4, "corrupt": 0}


def release_copies(base):
    """The three benchmarks as their authors ship them, small: {benchmark: (path, item count)}."""
    mme_dir = base / "MME_Benchmark_release_version"
    mme_fixture.write_release_fixture(mme_dir, SETTINGS)
    tsv = mmbench_fixture.write_tsv_fixture(base / "mmbench", SETTINGS, name="mmbench_dev_20230712.tsv")
    scienceqa_dir = base / "scienceqa"
    scienceqa_fixture.write_release_fixture(scienceqa_dir, SETTINGS)
    return {
        "mme": (mme_dir, 2 * SETTINGS["size"]),
        "mmbench": (tsv, sum(1 for line in tsv.read_text().splitlines()[1:] if line.strip())),
        "scienceqa": (scienceqa_dir, SETTINGS["size"]),
    }


def example_on_local_copies(base) -> dict:
    """The example config with its paths pointed at a tiny LLaVA checkpoint folder and the release copies."""
    example = yaml.safe_load(EXAMPLE.read_text())
    assert set(example["grid"]["benchmarks"]) == {"mme", "mmbench", "scienceqa"}
    run(["vlmgrid", "make-tiny-models", str(base / "ckpts"), "--families", "llava"], base)
    model = example["grid"]["models"][0]
    example["models"][model]["source"]["path"] = str(base / "ckpts" / "llava")
    example["models"][model].update(precision="fp32", batch_size=4)  # the CPU
    for name, (path, count) in release_copies(base / "eval").items():
        example["benchmarks"][name]["source"].update(path=str(path), expected_items=count)
    return example


def test_the_readme_example_runs_on_release_layouts_and_a_checkpoint_folder(tmp_path):
    example = example_on_local_copies(tmp_path)
    model = example["grid"]["models"][0]

    root = copy_workflow(tmp_path / "repo")
    config = root / "config" / "own-model.yaml"
    config.write_text(yaml.safe_dump(example, sort_keys=False))
    run(["snakemake", "--configfile", str(config), "--cores", "2", "--resources", "gpu=1"], root)

    results = root / example["results_dir"]
    main = pd.read_csv(results / "tables" / "main.csv")
    assert main["model"].tolist() == [model]
    for name in example["grid"]["benchmarks"]:
        assert (results / "scores" / model / f"{name}.json").is_file()
    # Read where they lie: nothing of the checkpoint or the raw data under the data folder.
    data = root / example["data_dir"]
    assert [p.name for p in (data / "models" / model).iterdir()] == ["model.json"]
    assert not list(data.rglob("*.tsv")) and not list(data.rglob("problems.json"))
    assert not list(data.rglob("*.safetensors"))


def test_the_readme_example_runs_through_dvc_to_the_end_and_again_has_nothing_to_do(tmp_path):
    # docs/dvc.md's commands, on the example file itself (it leaves `bootstrap` out, as the README's does)
    example = example_on_local_copies(tmp_path)
    assert "bootstrap" not in example
    model = example["grid"]["models"][0]
    root = copy_workflow(tmp_path / "repo")
    (root / "config/examples/own-model.yaml").write_text(yaml.safe_dump(example, sort_keys=False))
    run(["git", "init", "-q"], root)
    run(["vlmgrid", "dvc-pipelines", "--config", "config/examples/own-model.yaml"], root)
    pipeline = "pipelines/own-model/dvc.yaml"
    first = run(["dvc", "repro", pipeline], root)
    assert stages_run(first.stdout) == {f"{pipeline}:stamp_sources", f"{pipeline}:grid"}

    results = root / example["results_dir"]
    main = pd.read_csv(results / "tables" / "main.csv")
    assert main["model"].tolist() == [model]
    for name in example["grid"]["benchmarks"]:
        assert (results / "scores" / model / f"{name}.json").is_file()
    shown = run(["dvc", "metrics", "show", "-R", f"{example['results_dir']}/metrics"], root).stdout
    assert model in shown and "mme.json" in shown
    assert stages_run(run(["dvc", "repro", pipeline], root).stdout) == {f"{pipeline}:stamp_sources"}


def test_the_readme_shows_a_complete_config_with_the_example_files_grid_and_sources():
    import re

    from vlmgrid.config import validate_config

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Evaluate your own model", 1)[1].split("\n## ", 1)[0]
    shown = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    config = validate_config(shown)  # complete as it stands: nothing merged in from another file
    example = yaml.safe_load(EXAMPLE.read_text())
    assert shown["grid"] == example["grid"]
    for name, bench in example["benchmarks"].items():
        assert (
            shown["benchmarks"][name]["source"] == bench["source"]
            and config.benchmark(name)["kind"] == bench["kind"]
        )
    for name, model in example["models"].items():
        assert shown["models"][name]["source"] == model["source"]
