"""A DVC repo's pipeline files as DVC 3 writes them, without DVC: a `.dvc` folder, the default grid's dvc.yaml
and dvc.lock at the root and a paper grid's under pipelines/paper/ (its stages run at the root: `wdir:
../..`), for the tests of the messages that tell a missing tracked file's `dvc pull`."""

from __future__ import annotations

from pathlib import Path

import yaml

# The outputs each lock file records in DVC's cache (relative to the repo root); results/metrics and
# results/paper/metrics are recorded too but kept in git (`cache: false` in their dvc.yaml).
ROOT_OUTPUTS = [
    "data/.source-stamps",
    "data/models/clip-tiny",
    "data/mme-fixture",
    "data/pope-fixture",
    "results/predictions",
    "results/scores",
    "results/comparisons",
]
PAPER_OUTPUTS = [
    "results/paper/source-stamps",
    "data/models/llava-1.5-7b",
    "data/mme",
    "results/paper/predictions",
    "results/paper/scores",
]

ROOT_YAML = """\
vars:
  - config/config.yaml:data_dir,results_dir

stages:
  stamp_sources:
    cmd: vlmgrid stamp-sources --config config/config.yaml --out ${data_dir}/.source-stamps \
--pipeline dvc.yaml
    always_changed: true
    outs:
      - ${data_dir}/.source-stamps:
          persist: true
  fetch_model:
    foreach: [clip-tiny]
    do:
      cmd: snakemake --configfile config/config.yaml -- ${data_dir}/models/${item}/model.json
      deps:
        - ${data_dir}/.source-stamps/models/${item}.json
      outs:
        - ${data_dir}/models/${item}:
            persist: true
  grid:
    cmd: snakemake --configfile config/config.yaml $VLMGRID_SNAKEMAKE_ARGS
    deps:
      - config/config.yaml
      - ${data_dir}/.source-stamps
    outs:
      - ${data_dir}/mme-fixture:
          persist: true
      - ${data_dir}/pope-fixture:
          persist: true
      - ${results_dir}/predictions:
          persist: true
      - ${results_dir}/scores:
          persist: true
      - ${results_dir}/comparisons:
          persist: true
    metrics:
      - ${results_dir}/metrics:
          cache: false
          persist: true
"""

PAPER_YAML = """\
vars:
  - ../../config/paper.yaml:data_dir,results_dir

stages:
  stamp_sources:
    wdir: ../..
    cmd: >-
      vlmgrid stamp-sources --config config/paper.yaml --out ${results_dir}/source-stamps
      --pipeline pipelines/paper/dvc.yaml
    always_changed: true
    outs:
      - ${results_dir}/source-stamps:
          persist: true
  fetch_model:
    foreach: [llava-1.5-7b]
    do:
      wdir: ../..
      cmd: snakemake --configfile config/paper.yaml -- ${data_dir}/models/${item}/model.json
      deps:
        - ${results_dir}/source-stamps/models/${item}.json
      outs:
        - ${data_dir}/models/${item}:
            persist: true
  grid:
    wdir: ../..
    cmd: snakemake --configfile config/paper.yaml $VLMGRID_SNAKEMAKE_ARGS
    deps:
      - config/paper.yaml
      - ${results_dir}/source-stamps
    outs:
      - ${data_dir}/mme:
          persist: true
      - ${results_dir}/predictions:
          persist: true
      - ${results_dir}/scores:
          persist: true
    metrics:
      - ${results_dir}/metrics:
          cache: false
          persist: true
"""


def _out(path: str, digest: str, folder: bool = True) -> dict:
    """An output as dvc.lock records it (DVC 3: `hash: md5`; a folder's md5 ends in .dir, with its file
    count)."""
    out = {"path": path, "hash": "md5", "md5": digest + (".dir" if folder else ""), "size": 1234}
    return {**out, "nfiles": 3} if folder else out


def _lock(stages: dict[str, list[str]], deps: list[str]) -> str:
    locked = {}
    for index, (name, outs) in enumerate(stages.items()):
        locked[name] = {
            "cmd": f"the command of {name}",
            "deps": [_out(dep, f"{index:02d}" + "d" * 30, folder=False) for dep in deps],
            "outs": [_out(out, f"{index:02d}{number:02d}" + "e" * 28) for number, out in enumerate(outs)],
        }
    return yaml.safe_dump({"schema": "2.0", "stages": locked}, sort_keys=False)


def write_dvc_repo(root: Path) -> Path:
    """The repo's `.dvc` folder and pipeline files under `root` (the grid config's data and results folders
    are root/data and root/results, the paper grid's results root/results/paper); returns root."""
    (root / ".dvc").mkdir(parents=True, exist_ok=True)
    (root / ".dvc" / "config").write_text("[core]\n    remote = store\n", encoding="utf-8")
    (root / "dvc.yaml").write_text(ROOT_YAML, encoding="utf-8")
    (root / "dvc.lock").write_text(
        _lock(
            {
                "stamp_sources": ["data/.source-stamps"],
                "fetch_model@clip-tiny": ["data/models/clip-tiny"],
                "grid": [
                    "data/mme-fixture",
                    "data/pope-fixture",
                    "results/predictions",
                    "results/scores",
                    "results/comparisons",
                    "results/metrics",
                ],
            },
            ["config/config.yaml"],
        ),
        encoding="utf-8",
    )
    paper = root / "pipelines" / "paper"
    paper.mkdir(parents=True, exist_ok=True)
    (paper / "dvc.yaml").write_text(PAPER_YAML, encoding="utf-8")
    (paper / "dvc.lock").write_text(
        _lock(
            {
                "stamp_sources": ["results/paper/source-stamps"],
                "fetch_model@llava-1.5-7b": ["data/models/llava-1.5-7b"],
                "grid": [
                    "data/mme",
                    "results/paper/predictions",
                    "results/paper/scores",
                    "results/paper/metrics",
                ],
            },
            ["config/paper.yaml"],
        ),
        encoding="utf-8",
    )
    return root
