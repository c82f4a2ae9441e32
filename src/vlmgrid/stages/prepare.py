"""The prepare stage: download or generate a benchmark, normalise it and hash it; source stamps; verify.

A `source: {type: fixture}` benchmark is a small fake copy in the kind's real raw format, whose writer
(vlmgrid.fixtures.kinds.BENCHMARK_FIXTURES, by kind name) this stage hands to vlmgrid.benchmarks, which never
imports the fixtures itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vlmgrid import fileio, paths
from vlmgrid.benchmarks import dataset
from vlmgrid.benchmarks.stamps import write_source_stamps
from vlmgrid.cellrun.lock import exclusive_lock, lock_path
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.serving import recorded_settings
from vlmgrid.stages.plan import another_grids_data, grid_config_name

if TYPE_CHECKING:
    from vlmgrid.fixtures.kinds import BenchmarkFixture

log = logging.getLogger(__name__)

__all__ = ["fixture_for", "prepare", "prepare_benchmark", "stamp_sources", "verify"]


def fixture_for(settings: Mapping[str, Any]) -> BenchmarkFixture | None:
    """The fixture writer of a benchmark whose source is a fixture; None for any other source
    (and for settings without a known kind: prepare then says what is wrong with them)."""
    source = settings.get("source") if isinstance(settings, Mapping) else None
    if not isinstance(source, Mapping) or source.get("type") != "fixture":
        return None
    from vlmgrid.fixtures.kinds import BENCHMARK_FIXTURES

    kind = settings.get("kind")
    return BENCHMARK_FIXTURES.get(kind) if isinstance(kind, str) and kind in BENCHMARK_FIXTURES else None


def prepare_benchmark(
    name: str, settings: Mapping[str, Any], bench_dir: Path, grid_config: str | None = None
) -> dict:
    """Fetch (or generate), adapt, validate and hash one benchmark into bench_dir; returns its manifest.

    Idempotent: a folder whose manifest matches the settings and whose files match their hashes is left as it
    is (vlmgrid.benchmarks.dataset.prepare_benchmark says when it is rebuilt). One prepare of a folder at a
    time: a second waits for the first (two grids sharing data_dir may both need the benchmark), then finds
    the folder prepared and reuses it. The lock is a file beside the folder, `<bench_dir>.lock`, which the
    kernel drops when its holder dies.
    """
    bench_dir = Path(bench_dir)

    def wait(path: Path, holder: dict) -> None:
        who = (
            f"pid {holder['pid']} on {holder.get('host')}, since {holder.get('started')}: "
            f"`{holder.get('command')}`"
            if "pid" in holder
            else "a process that has not yet written who it is"
        )
        log.warning(
            f"benchmark {name}: another prepare of it is in progress ({who}), holding its lock {path}; "
            f"waiting for it to finish"
        )

    with exclusive_lock(lock_path(bench_dir), wait):
        # another grid's data in a shared data_dir is never prepared over (the workflows check it before any
        # job)
        conflict = another_grids_data(name, dict(settings), bench_dir, grid_config) if grid_config else None
        if conflict is not None:
            raise VlmgridError(conflict)
        return dataset.prepare_benchmark(
            name, settings, bench_dir, fixture=fixture_for(settings), grid_config=grid_config
        )


def prepare(config: Config, benchmark: str) -> dict:
    """`vlmgrid prepare`: the config's benchmark prepared into data/<benchmark>/; returns its manifest."""
    manifest = prepare_benchmark(
        benchmark,
        config.benchmark(benchmark),
        paths.bench_dir(config.data_dir, benchmark),
        grid_config_name(config),
    )
    log.info(f"{benchmark}: {manifest['n_items']} items, fingerprint {manifest['fingerprint'][:12]}")
    return manifest


def stamp_sources(config: Config, folder: Path | None = None) -> list[str]:
    """`vlmgrid stamp-sources`: a stamp of each benchmark's source (a local source's file sizes and hashes),
    one file per benchmark in `folder` (default: the stamps folder under data_dir), and of each grid model's
    source and settings in its `models/` folder, for DVC's grid and fetch_model stages; returns the names
    whose stamp changed (a model's as models/<name>). Each grid that shares data_dir with another needs a
    folder of its own, as the stamps of other benchmarks are removed."""
    folder = Path(folder) if folder is not None else paths.source_stamps_dir(config.data_dir)
    written = write_source_stamps({name: config.benchmark(name) for name in config.benchmarks}, folder)
    local = sum(config.benchmark(name)["source"].get("type") == "local" for name in config.benchmarks)
    log.info(f"{folder}: {len(config.benchmarks)} source stamps ({local} local), {len(written)} changed")
    # the models' checkpoints, in a folder of their own (a model may share a benchmark's name)
    models = {name: config.model(name) for name in config.models}
    stamps = {name: _model_stamp(name, settings) for name, settings in models.items()}
    written += [
        f"models/{name}"
        for name in write_source_stamps(stamps, paths.model_stamps_dir(folder), stamp_of=dict, label="model")
    ]
    local = sum((settings.get("source") or {}).get("type") == "local" for settings in models.values())
    log.info(f"{paths.model_stamps_dir(folder)}: {len(models)} model stamps ({local} local)")
    # the grid stage's params (`dvc exp show` columns): each model's settings under models.<name>, as in the
    # config
    settings = {
        "title": config.title,
        "bootstrap": config.bootstrap,
        "invariance_items": config.infer["invariance_items"],
        "models": {name: stamp["models"][name] for name, stamp in stamps.items()},
    }
    if _write_if_changed(paths.grid_settings_stamp(folder), settings):
        written.append("grid/settings")
    return written


def _write_if_changed(path: Path, data: dict) -> bool:
    """Write `data` as JSON to `path` unless it already holds exactly that text (DVC then reruns nothing)."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    fileio.write_text(path, text)
    return True


def _model_stamp(name: str, settings: Mapping[str, Any]) -> dict:
    """A model's stamp for DVC: its checkpoint's (vlmgrid.stages.fetch.model_stamp) and its settings, which
    DVC's grid stage tracks here rather than in the config, since DVC writes a param's value into dvc.lock and
    a `serve: env:` value is a token (recorded_settings names only its variables). The settings sit under
    `models.<name>`, as in the config, so `dvc exp show` names them `models.<name>.<key>` (the param key is
    `models` alone: DVC would split a dotted model name into levels)."""
    from vlmgrid.stages.fetch import model_stamp

    return {**model_stamp(settings), "models": {name: recorded_settings(dict(settings))}}


def verify(config: Config, benchmark: str) -> None:
    """`vlmgrid verify`: every file of the prepared benchmark checked against its manifest."""
    dataset.verify_benchmark(paths.bench_dir(config.data_dir, benchmark), full=True)
    log.info(f"{benchmark}: every file matches its manifest")
