"""Prompt sets are config data: one YAML file per protocol or benchmark under the config's prompts folder.

`config/prompts/<name>.yaml` holds the prompts a protocol shows the models (the LVLM classification
templates, Kaleidoscope's per-language instructions, ...). Each protocol checks the structure it needs;
this module only finds and reads the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file

DEFAULT_PROMPTS_DIR = Path("config/prompts")


def prompts_file(name: str, prompts_dir: Path | str = DEFAULT_PROMPTS_DIR) -> Path:
    return Path(prompts_dir) / f"{name}.yaml"


def load_prompts(name: str, prompts_dir: Path | str = DEFAULT_PROMPTS_DIR) -> dict[str, Any]:
    """The prompt set `name` as a mapping; a missing or malformed file is one clear error."""
    path = prompts_file(name, prompts_dir)
    if not path.is_file():
        raise VlmgridError(
            f"{path}: prompt set {name!r} not found; set `prompts_dir` in the config to the folder that "
            f"holds {path.name} (the repository ships config/prompts/)"
        )
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise VlmgridError(f"{path}: is not valid UTF-8 YAML ({exc}); fix the file") from None
    if not isinstance(data, dict):
        raise VlmgridError(f"{path}: must hold a mapping at the top level (prompt set {name!r})")
    return data


def prompt_file_hashes(prompts_dir: str | Path) -> dict[str, str]:
    """{file name: sha256} of the prompt sets (`*.yaml`) in the folder; {} when there is no such folder.

    Part of every inference job's identity: an edited prompt set must not resume or keep old predictions.
    Only the prompt sets count, so editing the folder's README reruns nothing.
    """
    folder = Path(prompts_dir)
    if not folder.is_dir():
        return {}
    return {
        path.relative_to(folder).as_posix(): sha256_file(path)
        for path in sorted(folder.rglob("*.yaml"))
        if path.is_file()
    }
