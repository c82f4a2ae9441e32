"""`vlmgrid dvc-pipelines`: every grid's DVC pipeline written from one template (workflow/dvc.template.yaml).

The default grid (config/config.yaml) is the repo's dvc.yaml; each other grid config (config/<grid>.yaml, any
config holding a `grid`, and any config of one's own given with --config) gets pipelines/<stem>/dvc.yaml,
whose stages run at the repo root (wdir), so all of them read the same paths. A pipeline written for a config
of one's own names its config, so the command keeps it current with the others from then on. DVC sees every
dvc.yaml of the repo as one graph, where no output may be declared twice: each grid has its own results_dir
and source stamps, its benchmark folders (<data_dir>/<bench>) are its own (checked here: a grid of one's own
takes a data_dir of its own, or benchmark names no other grid uses), and a model folder that several grids
evaluate is fetched by the first pipeline that lists it (the default grid, then the others in name order), on
the condition that every grid gives it the same backend and source.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from vlmgrid import fileio
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.report.outputs import report_files

log = logging.getLogger(__name__)

__all__ = [
    "TEMPLATE",
    "Pipeline",
    "check_pipeline",
    "check_pipelines",
    "config_in_repo",
    "render_pipelines",
    "write_pipelines",
]

TEMPLATE = Path("workflow") / "dvc.template.yaml"
DEFAULT_CONFIG = Path("config") / "config.yaml"
PIPELINES_DIR = Path("pipelines")
_TEMPLATE_NOTE = "#@"
_WRITTEN_NOTE = "# Written by `vlmgrid dvc-pipelines`"


@dataclass(frozen=True)
class Pipeline:
    config: Path  # the grid's config, relative to the repo root
    dvc_file: Path  # where its dvc.yaml goes, relative to the repo root
    # the PNG figures its report draws, under ${results_dir}: DVC's image plots
    figures: tuple[str, ...] = ()
    # the folders its grid stage alone writes, under ${data_dir}: its benchmarks' data, the weights of the
    # models no other grid evaluates
    own_folders: tuple[str, ...] = ()
    shared_models: tuple[str, ...] = ()  # the models of several grids that its fetch_model stages fetch
    # its models that a fetch_model stage fetches (its own or another pipeline's): its grid stage depends on
    # them
    fetched_models: tuple[str, ...] = ()


def _read_grid(root: Path, config: Path) -> dict:
    try:
        data = yaml.safe_load((root / config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise VlmgridError(
            f"{config} cannot be read as YAML ({exc}); fix it, then run `vlmgrid dvc-pipelines`"
        ) from None
    return data if isinstance(data, dict) else {}


def _grid_configs(root: Path) -> list[Path]:
    """The default config first, then every other config/*.yaml holding a `grid`, by name."""
    others = sorted(
        path.relative_to(root)
        for path in (root / "config").glob("*.yaml")
        if path.name != DEFAULT_CONFIG.name and "grid" in _read_grid(root, path.relative_to(root))
    )
    return [DEFAULT_CONFIG, *others]


def _pipeline_file(config: Path) -> Path:
    return Path("dvc.yaml") if config == DEFAULT_CONFIG else PIPELINES_DIR / config.stem / "dvc.yaml"


def _written_configs(root: Path) -> list[Path]:
    """The configs that the pipelines under pipelines/ were written for (their `vars` name it), so that a
    config of one's own, given once with --config, is kept current with the others (and its outputs
    checked)."""
    configs = []
    for dvc_file in sorted((root / PIPELINES_DIR).glob("*/dvc.yaml")):
        text = dvc_file.read_text(encoding="utf-8")
        if not text.startswith(_WRITTEN_NOTE):
            continue  # a pipeline of one's own: not this command's to write
        try:
            entry = yaml.safe_load(text)["vars"][
                0
            ]  # "<config from the file's folder>:data_dir,results_dir,grid"
        except (yaml.YAMLError, TypeError, KeyError, IndexError):
            entry = None
        if not isinstance(entry, str):
            continue  # edited past reading: written again once its config is given with --config
        config = Path(
            posixpath.normpath((dvc_file.parent.relative_to(root) / entry.rsplit(":", 1)[0]).as_posix())
        )
        if (root / config).is_file():
            configs.append(config)
        else:
            log.warning(
                f"{dvc_file.relative_to(root)} runs {config}, which does not exist; delete "
                f"{dvc_file.parent.relative_to(root)} if that grid is gone"
            )
    return configs


def config_in_repo(root: Path, given: str | Path) -> Path:
    """A config given on the command line, as a path relative to the repo root (DVC reads no file outside
    it)."""
    path = Path(given)
    if not path.is_file():
        raise VlmgridError(f"config file {given} not found; pass --config with the path of a grid config")
    try:
        return path.resolve().relative_to(Path(root).resolve())
    except ValueError:
        raise VlmgridError(
            f"{given} lies outside the repo ({root}), and DVC reads only files inside it; move it into "
            f"the repo (config/<grid>.yaml) and pass that path"
        ) from None


def _figures(data: dict) -> tuple[str, ...]:
    """The PNG figures the report of this grid config draws (by its benchmarks' kinds), as paths under the
    pipeline's ${results_dir}."""
    benchmarks = data.get("benchmarks") or {}
    kinds = {
        bench: (benchmarks.get(bench) or {}).get("kind")
        for bench in (data.get("grid") or {}).get("benchmarks") or []
    }
    return tuple(
        path.as_posix() for path, _ in report_files(Path("${results_dir}"), kinds) if path.suffix == ".png"
    )


def _folder(config: Path, data: dict, key: str) -> str:
    """The config's data_dir or results_dir, normalised: DVC reads it from the file (a var has no default) and
    keeps outputs only inside the repo."""
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise VlmgridError(
            f"{config} sets no {key}, which its DVC pipeline reads from the file; add "
            f"`{key}: {key.split('_')[0]}/{config.stem}` (a folder of this grid's own)"
        )
    folder = posixpath.normpath(value)
    if posixpath.isabs(folder) or folder.split("/")[0] == "..":
        raise VlmgridError(
            f"{config}: {key} {value} lies outside the repo, where DVC keeps no output; set it to a "
            f"folder inside the repo, such as {key.split('_')[0]}/{config.stem}"
        )
    return folder


def plan_pipelines(root: Path, configs: Sequence[Path] = ()) -> list[Pipeline]:
    """One pipeline per grid config: the repo's (config/*.yaml), those pipelines/ was written for, and
    `configs` (relative to the root). A model folder that several grids evaluate is fetched by the first that
    lists it. Refuses two configs of one pipeline file or one results_dir, two grids that share a benchmark
    folder (it would be two stages' output) or give a shared model folder another backend or source."""
    root = Path(root)
    repo = _grid_configs(root)
    own = {config: None for config in [*_written_configs(root), *configs] if config not in repo}
    grids = []  # (config, its data, its data_dir, its grid's models)
    owners: dict[str, Path] = {}  # a pipeline file, results_dir or benchmark folder: the config that has it
    model_owner: dict[str, tuple[Path, object]] = {}  # a model folder: the config that fetches it, and how
    listed: dict[str, int] = {}  # a model folder: how many grids evaluate it
    for config in [*repo, *sorted(own, key=lambda config: _pipeline_file(config).as_posix())]:
        data = _read_grid(root, config)
        if config in own:
            validate_config(data, source=config)  # a config of one's own is checked as its jobs will read it
        grid = data.get("grid") or {}
        data_dir, results_dir = _folder(config, data, "data_dir"), _folder(config, data, "results_dir")
        for output, clash in (
            (_pipeline_file(config).as_posix(), "would both be written to {output}; rename one"),
            (results_dir, "both write their results to {output}; give {config} a results_dir of its own"),
        ):
            if output in owners:
                raise VlmgridError(
                    f"{config} and {owners[output]} {clash.format(output=output, config=config)}"
                )
            owners[output] = config
        for bench in grid.get("benchmarks") or []:
            folder = posixpath.join(data_dir, bench)
            if folder in owners:
                raise VlmgridError(
                    f"{config} and {owners[folder]} both evaluate the benchmark {bench!r} in {folder}, which "
                    f"DVC allows as one stage's output only; give {config} a data_dir of its own (data_dir: "
                    f"data/{config.stem}), or the benchmark another name"
                )
            owners[folder] = config
        models = list(dict.fromkeys(grid.get("models") or []))
        for model in models:
            settings = (data.get("models") or {}).get(model) or {}
            weights = (settings.get("backend"), settings.get("source"))
            folder = posixpath.join(data_dir, "models", model)
            listed[folder] = listed.get(folder, 0) + 1
            if folder not in model_owner:
                model_owner[folder] = (config, weights)
            elif model_owner[folder][1] != weights:
                raise VlmgridError(
                    f"{config} gives the model {model!r} another backend or source than "
                    f"{model_owner[folder][0]}, but both would fetch it into {folder}; give one of them "
                    f"another name, or {config} a data_dir of its own"
                )
        grids.append((config, data, data_dir, models))
    pipelines = []
    for config, data, data_dir, models in grids:
        folders = {model: posixpath.join(data_dir, "models", model) for model in models}
        shared = [model for model in models if listed[folders[model]] > 1]
        benchmarks = (data.get("grid") or {}).get("benchmarks") or []
        own_folders = (*benchmarks, *(f"models/{model}" for model in models if model not in shared))
        pipelines.append(
            Pipeline(
                config,
                _pipeline_file(config),
                _figures(data),
                own_folders,
                shared_models=tuple(model for model in shared if model_owner[folders[model]][0] == config),
                fetched_models=tuple(shared),
            )
        )
    return pipelines


def render(template: str, pipeline: Pipeline) -> str:
    """The dvc.yaml text of one pipeline."""
    at_root = pipeline.dvc_file.parent == Path(".")
    up = Path(*[".."] * len(pipeline.dvc_file.parent.parts))
    stamps = "${data_dir}/.source-stamps" if at_root else "${results_dir}/source-stamps"
    # Lists of paths, a line each (an empty one leaves no line). A top-level plot's path is read from the
    # dvc.yaml's folder, not from a stage's wdir.
    lists = {
        "@GRID_OUTS@": [
            f"      - ${{data_dir}}/{folder}:\n          persist: true" for folder in pipeline.own_folders
        ],
        "@SHARED_MODEL_DIRS@": [f"      - ${{data_dir}}/models/{model}" for model in pipeline.fetched_models],
        "@FIGURE_PLOTS@": [f"  - {(up / figure).as_posix()}" for figure in pipeline.figures],
    }
    values = {
        "@WDIR@": up.as_posix(),
        "@VARS@": (up / pipeline.config).as_posix(),
        "@CONFIG@": pipeline.config.as_posix(),
        "@STAMPS@": stamps,
        "@SHARED_MODELS@": "[" + ", ".join(pipeline.shared_models) + "]",
        "@DVC_FILE@": pipeline.dvc_file.as_posix(),
    }
    lines = []
    for line in template.splitlines():
        if line.startswith(_TEMPLATE_NOTE) or (at_root and "@WDIR@" in line):
            continue
        if line.strip() in lists:
            lines += lists[line.strip()]
            continue
        for placeholder, value in values.items():
            line = line.replace(placeholder, value)
        lines.append(line)
    return "\n".join(lines) + "\n"


def render_pipelines(root: Path, configs: Sequence[Path] = ()) -> dict[Path, str]:
    """{dvc.yaml path relative to the repo root: its text} for every grid config of the repo at `root` (see
    plan_pipelines; `configs`: configs of one's own, relative to the root)."""
    template_path = Path(root) / TEMPLATE
    if not template_path.is_file():
        raise VlmgridError(f"{template_path} does not exist; run `vlmgrid dvc-pipelines` at the repo root")
    template = template_path.read_text(encoding="utf-8")
    return {pipeline.dvc_file: render(template, pipeline) for pipeline in plan_pipelines(Path(root), configs)}


def write_pipelines(root: Path, configs: Sequence[Path] = ()) -> list[Path]:
    """Write every pipeline whose text changed; returns the paths written (relative to the repo root)."""
    written = []
    for path, text in render_pipelines(root, configs).items():
        target = Path(root) / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        fileio.write_text(target, text)
        written.append(path)
    for path in written:
        log.info(f"wrote {path}")
    return written


def check_pipeline(root: Path, config: Path, dvc_file: Path) -> None:
    """Refuse to run a pipeline that differs from what the template and its config give now (`vlmgrid
    stamp-sources --pipeline`, its first stage): a grid edited since its lists of benchmark folders were
    written would run stages over the old grid."""
    config, dvc_file = Path(config), Path(dvc_file)
    expected = render_pipelines(root, [config]).get(dvc_file)
    target = Path(root) / dvc_file
    if expected is None or not target.is_file() or target.read_text(encoding="utf-8") != expected:
        command = "vlmgrid dvc-pipelines" + (
            "" if config in _grid_configs(Path(root)) else f" --config {config}"
        )
        raise VlmgridError(
            f"{dvc_file} is not what {TEMPLATE} and {config} give now (the grid changed since it "
            f"was written, or it was edited); run `{command}`, then `dvc repro` again"
        )


def check_pipelines(root: Path, configs: Sequence[Path] = ()) -> None:
    """Refuse pipelines that differ from what the template and configs give (edited by hand, or stale)."""
    stale = [
        path.as_posix()
        for path, text in render_pipelines(root, configs).items()
        if not (Path(root) / path).is_file() or (Path(root) / path).read_text(encoding="utf-8") != text
    ]
    if stale:
        command = " ".join(
            ["vlmgrid dvc-pipelines", *(f"--config {config.as_posix()}" for config in configs)]
        )
        raise VlmgridError(
            f"{', '.join(stale)} differ from {TEMPLATE} and the grid configs; "
            f"run `{command}` to write them again"
        )
