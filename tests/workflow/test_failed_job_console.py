"""A failed job's one sentence reaches the console under a plain `snakemake`: the repository's profile
(profiles/default, show-failed-logs) is where Snakemake looks for it by itself, and prints the job's log."""

import pytest
import yaml
from helpers.common import copy_workflow, run

pytestmark = pytest.mark.integration


def test_a_failed_jobs_sentence_is_on_the_console_of_a_plain_snakemake(tmp_path):
    root = copy_workflow(tmp_path / "repo")
    empty = tmp_path / "my-mme"
    empty.mkdir()  # a local MME copy that holds nothing: its prepare job fails with one sentence
    config = root / "config" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["benchmarks"]["mme-local"] = {"kind": "mme", "source": {"type": "local", "path": str(empty)}}
    data["grid"] = {"models": ["random"], "benchmarks": ["mme-local"]}
    config.write_text(yaml.safe_dump(data, sort_keys=False))

    result = run(["snakemake", "--cores", "1"], root, check=False)
    console = result.stdout + result.stderr
    assert result.returncode != 0
    sentences = [line for line in console.splitlines() if line.startswith("vlmgrid: error: ")]
    assert len(sentences) == 1, console
    assert f"{empty}: holds no mme data in a layout vlmgrid reads" in sentences[0]
