"""`vlmgrid dvc-pipelines`: every grid's DVC pipeline written from one template (workflow/dvc.template.yaml).

The default grid (config/config.yaml) is the repo's dvc.yaml; each other grid config (config/<grid>.yaml, any
config holding a `grid`) gets pipelines/<grid>/dvc.yaml, whose stages run at the repo root (wdir), so all of them
read the same paths. DVC sees every dvc.yaml of the repo as one graph, where no output may be declared twice:
each grid has its own results_dir and source stamps, its benchmarks are its own (checked here), and a model
that several grids evaluate is fetched by the first pipeline that lists it (the default grid, then the others in
name order), on the condition that every grid gives it the same backend and source.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import yaml

from vlmgrid import fileio
from vlmgrid.errors import VlmgridError
from vlmgrid.report.outputs import report_files

log = logging.getLogger(__name__)

__all__ = ["TEMPLATE", "Pipeline", "check_pipelines", "render_pipelines", "write_pipelines"]

TEMPLATE = Path("workflow") / "dvc.template.yaml"
DEFAULT_CONFIG = Path("config") / "config.yaml"
PIPELINES_DIR = Path("pipelines")
_TEMPLATE_NOTE = "#@"


@dataclass(frozen=True)
class Pipeline:
    config: Path  # the grid's config, relative to the repo root
    dvc_file: Path  # where its dvc.yaml goes, relative to the repo root
    fetch_models: tuple[str, ...] | None  # the models it fetches; None: all of its grid's (from the config)
    # the PNG figures its report draws, under ${results_dir}: DVC's image plots
    figures: tuple[str, ...] = ()


def _read_grid(root: Path, config: Path) -> dict:
    try:
        data = yaml.safe_load((root / config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise VlmgridError(f"{config} cannot be read as YAML ({exc}); fix it, then run `vlmgrid dvc-pipelines`")
    return data if isinstance(data, dict) else {}


def _grid_configs(root: Path) -> list[Path]:
    """The default config first, then every other config/*.yaml holding a `grid`, by name."""
    others = sorted(path.relative_to(root) for path in (root / "config").glob("*.yaml")
                    if path.name != DEFAULT_CONFIG.name and "grid" in _read_grid(root, path.relative_to(root)))
    return [DEFAULT_CONFIG, *others]


def _figures(data: dict) -> tuple[str, ...]:
    """The PNG figures the report of this grid config draws (by its benchmarks' kinds), as paths under the
    pipeline's ${results_dir}."""
    benchmarks = data.get("benchmarks") or {}
    kinds = {bench: (benchmarks.get(bench) or {}).get("kind")
             for bench in (data.get("grid") or {}).get("benchmarks") or []}
    return tuple(path.as_posix() for path, _ in report_files(Path("${results_dir}"), kinds) if path.suffix == ".png")


def plan_pipelines(root: Path) -> list[Pipeline]:
    """One pipeline per grid config, each model fetched by the first that lists it; refuses two grids that share
    a benchmark (its data folder would be two stages' output) or give a shared model another backend or source."""
    pipelines: list[Pipeline] = []
    benchmark_owner: dict[str, Path] = {}
    model_owner: dict[str, tuple[Path, object]] = {}
    for config in _grid_configs(root):
        data = _read_grid(root, config)
        grid = data.get("grid") or {}
        for bench in grid.get("benchmarks") or []:
            if bench in benchmark_owner:
                raise VlmgridError(
                    f"{config} and {benchmark_owner[bench]} both evaluate the benchmark {bench!r}, whose data folder "
                    f"DVC allows as one stage's output only; give it another name in one of them")
            benchmark_owner[bench] = config
        owned = []
        for model in grid.get("models") or []:
            settings = (data.get("models") or {}).get(model) or {}
            weights = (settings.get("backend"), settings.get("source"))
            if model not in model_owner:
                model_owner[model] = (config, weights)
                owned.append(model)
            elif model_owner[model][1] != weights:
                raise VlmgridError(
                    f"{config} gives the model {model!r} another backend or source than {model_owner[model][0]}, "
                    f"but both would fetch it into the same folder; give one of them another name")
        figures = _figures(data)
        if config == DEFAULT_CONFIG:
            pipelines.append(Pipeline(config, Path("dvc.yaml"), None, figures))
        else:
            pipelines.append(Pipeline(config, PIPELINES_DIR / config.stem / "dvc.yaml", tuple(owned), figures))
    return pipelines


def render(template: str, pipeline: Pipeline) -> str:
    """The dvc.yaml text of one pipeline."""
    at_root = pipeline.dvc_file.parent == Path(".")
    up = Path(*[".."] * len(pipeline.dvc_file.parent.parts))
    lines = []
    for line in template.splitlines():
        if line.startswith(_TEMPLATE_NOTE) or (at_root and "@WDIR@" in line):
            continue
        lines.append(line)
    text = "\n".join(lines) + "\n"
    if pipeline.fetch_models is None:
        fetch_models = "${grid.models}"
    else:
        fetch_models = "[" + ", ".join(pipeline.fetch_models) + "]"
    stamps = "${data_dir}/.source-stamps" if at_root else "${results_dir}/source-stamps"
    figure_plots = "\n".join(f"  - {figure}" for figure in pipeline.figures)
    replacements = {"@WDIR@": up.as_posix(), "@VARS@": (up / pipeline.config).as_posix(),
                    "@CONFIG@": pipeline.config.as_posix(), "@STAMPS@": stamps, "@FETCH_MODELS@": fetch_models,
                    "@DVC_FILE@": pipeline.dvc_file.as_posix(), "@FIGURE_PLOTS@": figure_plots}
    for placeholder, value in replacements.items():
        text = text.replace(placeholder, value)
    return text


def render_pipelines(root: Path) -> dict[Path, str]:
    """{dvc.yaml path relative to the repo root: its text} for every grid config of the repo at `root`."""
    template_path = Path(root) / TEMPLATE
    if not template_path.is_file():
        raise VlmgridError(f"{template_path} does not exist; run `vlmgrid dvc-pipelines` at the repo root")
    template = template_path.read_text(encoding="utf-8")
    return {pipeline.dvc_file: render(template, pipeline) for pipeline in plan_pipelines(Path(root))}


def write_pipelines(root: Path) -> list[Path]:
    """Write every pipeline whose text changed; returns the paths written (relative to the repo root)."""
    written = []
    for path, text in render_pipelines(root).items():
        target = Path(root) / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        fileio.write_text(target, text)
        written.append(path)
    for path in written:
        log.info(f"wrote {path}")
    return written


def check_pipelines(root: Path) -> None:
    """Refuse pipelines that differ from what the template and configs give (edited by hand, or stale)."""
    stale = [path.as_posix() for path, text in render_pipelines(root).items()
             if not (Path(root) / path).is_file() or (Path(root) / path).read_text(encoding="utf-8") != text]
    if stale:
        raise VlmgridError(f"{', '.join(stale)} differ from {TEMPLATE} and the grid configs; "
                           f"run `vlmgrid dvc-pipelines` to write them again")
