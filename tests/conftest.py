import os
import tempfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "config" / "config.yaml"

# Caches (classifier weights, API responses) go to a fresh folder per test session, never the user's.
os.environ["VLMGRID_CACHE_DIR"] = tempfile.mkdtemp(prefix="vlmgrid-cache-")


@pytest.fixture
def default_config_data() -> dict:
    return yaml.safe_load(DEFAULT_CONFIG.read_text())


@pytest.fixture
def write_config(tmp_path):
    """Write a config dict to tmp_path/config.yaml and return its path."""

    def write(data: dict, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def small_config(default_config_data, tmp_path) -> dict:
    """The default grid with data and results under tmp_path."""
    data = dict(default_config_data)
    data["data_dir"] = str(tmp_path / "data")
    data["results_dir"] = str(tmp_path / "results")
    return data
