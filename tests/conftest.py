import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from helpers.common import (
    DEFAULT_CONFIG,
    REPO,
    copy_workflow,
    copy_workspace,
    heatmap_cells,
    run,
    small_grid_config,
)

# Caches (classifier weights, API responses) go to a fresh folder per test session, never the user's.
os.environ["VLMGRID_CACHE_DIR"] = tempfile.mkdtemp(prefix="vlmgrid-cache-")
# The jobs' fork server is each Snakemake run's own (started by its onstart, in a private folder, and ended
# with the run, `dvc repro`'s grid stage included): a `vlmgrid` command outside Snakemake runs in its own
# process, so the session has no server of its own to stop.


# --- running the suite in parallel (pytest-xdist, `-n N --dist loadgroup`) ----------------------------------
# Tests that share a set-up made once per session or module (the default grid's run, a Slurm cluster, a
# browser, tiny checkpoints) run in one worker, so no worker builds it again: every test is linked to the
# tests' session fixtures and to its module's module fixtures that it uses, and each group of linked tests
# becomes one xdist_group. A test that asks for such a fixture only while it runs (request.getfixturevalue)
# says so with an xdist_group mark of that fixture's name. Tests with no shared set-up are spread over the
# workers one by one.


def _group_marks(item) -> set[str]:
    """The group names of `item`'s own xdist_group marks."""
    return {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }


def _shared_setups(item) -> set[str]:
    """The names of the shared set-ups `item` uses: the tests' own session fixtures by name, module fixtures
    by module and name, and the names its xdist_group marks give."""
    names = _group_marks(item)
    info = getattr(item, "_fixtureinfo", None)
    for fixture, definitions in info.name2fixturedefs.items() if info else ():
        definition = definitions[-1]
        if not Path(definition.func.__code__.co_filename).resolve().is_relative_to(REPO / "tests"):
            continue  # pytest's own (tmp_path_factory and the like) hold nothing expensive
        if definition.scope == "session":
            names.add(fixture)
        elif definition.scope == "module":
            names.add(f"{item.path.name}::{fixture}")
    return names


def pytest_configure(config):
    if getattr(config.option, "dist", "no") == "loadgroup":
        # xdist would hand out the groups largest first and single tests after them in collection order, which
        # left a long single test to run alone at the end; it keeps the order of _slow_first instead
        config.option.loadscopereorder = False


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return (yield)
    _group_shared_setups(items)
    result = yield  # xdist, in a worker under --dist loadgroup, writes each test's group after its id
    if getattr(config.option, "loadgroup", False):  # set in the workers only
        for item in items:
            _name_group_in_id(item)
        _slow_first(items)
    return result


def _slow_first(items) -> None:
    """Put the end-to-end tests first, then the other tests that share a set-up, keeping the order within each
    part (the same in every worker): xdist hands out the tests in this order, so the long ones start first and
    the many short ones fill the end, rather than a long one collected late running alone while the other
    workers wait."""
    items.sort(
        key=lambda item: 0 if item.get_closest_marker("integration") else 1 if _group_marks(item) else 2
    )


def _name_group_in_id(item) -> None:
    """Make sure `item`'s id ends with "@" and its group, as xdist's loadgroup scheduler reads it:
    pytest-xdist 3.8 writes the old `_nodeid`, which pytest 9.2 no longer reads (pytest-xdist issue 1386), so
    the groups would be dropped without a word."""
    names = _group_marks(item)
    suffix = "@" + "_".join(sorted(names))
    if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
        item._id = type(item._id).parse(item.nodeid + suffix)


def _group_shared_setups(items) -> None:
    """Give each group of tests linked by their shared set-ups one xdist_group mark."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.setdefault(name, name) != name:
            name = parent[name]
        return name

    shared = {item: _shared_setups(item) for item in items}
    for names in shared.values():
        first, *rest = sorted(names) or [None]
        for name in rest:
            parent[root(name)] = root(first)
    marked: dict[str, set[str]] = {}  # a group's root: the names its tests' xdist_group marks give
    for item, names in shared.items():
        if names:
            marked.setdefault(root(next(iter(names))), set()).update(_group_marks(item))
    for item, names in shared.items():
        if not names:
            continue
        group = root(next(iter(names)))
        marks = marked[group]
        if len(marks) > 1:
            raise pytest.UsageError(
                f"{item.nodeid} joins the xdist groups {sorted(marks)} through its shared "
                "fixtures; give the tests one group name"
            )
        if not _group_marks(item):
            item.add_marker(pytest.mark.xdist_group(next(iter(marks), group)))


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


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    """The tiny random-initialised LLaVA through the hf backend on the CPU, batch 2, 4 new tokens."""
    from vlmgrid.fixtures.models import MODEL_FIXTURES
    from vlmgrid.models.hf_backend import Hf

    model_dir = tmp_path_factory.mktemp("llava")
    settings = {
        "backend": "hf",
        "source": {"type": "fixture", "family": "llava", "seed": 0},
        "precision": "fp32",
        "batch_size": 2,
        "generation": {"max_new_tokens": 4},
    }
    Hf.fetch(settings, model_dir, fixture=MODEL_FIXTURES.get("hf"))
    return Hf.load(settings, model_dir, "cpu")


@pytest.fixture(scope="session")
def snakemake_run(tmp_path_factory):
    """The default grid run once per test session by Snakemake, in a copy of the repo.

    Tests only read this workspace (or run Snakemake where it has nothing to do); a test that changes
    anything works on `snakemake_copy`.
    """
    root = copy_workflow(tmp_path_factory.mktemp("wf") / "repo")
    # --cores 4 even on two cores: the small jobs mostly wait on their imports and files, so a few at a time
    # keep both cores busy. The jobs' commands, and so every file, are the same.
    run(["snakemake", "--cores", "4"], root)
    return root


@pytest.fixture
def snakemake_copy(snakemake_run, tmp_path) -> Path:
    """A copy of the default grid's workspace, up to date: Snakemake has nothing to do in it."""
    return copy_workspace(snakemake_run, tmp_path / "repo")


@pytest.fixture(scope="session")
def small_grid_tables(snakemake_run, tmp_path_factory):
    """results/tables of a small grid through Snakemake, for the run through DVC to compare against:
    small_grid_tables(SMALL_GRID) is their folder (made once a session).

    Each is made in a copy of the default grid's workspace: its cells are done there, so Snakemake runs only
    the report (and would run any cell whose file it did not find up to date).
    """
    made = {}

    def tables(grid: dict) -> Path:
        key = yaml.safe_dump(grid)
        if key not in made:
            root = copy_workspace(snakemake_run, tmp_path_factory.mktemp("wf-small") / "repo")
            for folder in ("tables", "figures"):  # the default grid's report, which holds more files
                shutil.rmtree(root / "results" / folder)
            config = root / "config" / "small.yaml"
            config.write_text(yaml.safe_dump(small_grid_config(grid), sort_keys=False))
            run(["snakemake", "--cores", "2", "--configfile", str(config)], root)
            made[key] = root / "results" / "tables"
        return made[key]

    return tables


@pytest.fixture
def bar_heights(monkeypatch) -> list[list[float]]:
    """The heights of every bar the report's figures draw, in drawing order."""
    import matplotlib.axes

    heights: list[list[float]] = []
    original = matplotlib.axes.Axes.bar

    def bar(self, x, height, *args, **kwargs):
        heights.append(list(height))
        return original(self, x, height, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", bar)
    return heights


@pytest.fixture
def main_heatmaps(monkeypatch) -> list[dict[tuple[str, str], tuple[str, tuple]]]:
    """The cells (`heatmap_cells`) of every main figure the report draws, in drawing order."""
    import vlmgrid.report.figures as figures

    drawn = []
    original = figures.main_heatmap

    def main_heatmap(grid, title):
        fig = original(grid, title)
        drawn.append(heatmap_cells(fig, grid.models))
        return fig

    monkeypatch.setattr(figures, "main_heatmap", main_heatmap)
    return drawn
