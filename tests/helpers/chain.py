"""What the end-to-end benchmark tests share: whether an image file opens, and a model's cell on a prepared
benchmark of a grid, inferred and scored."""

from pathlib import Path

from PIL import Image

from vlmgrid import paths
from vlmgrid.cellrun.cell import Cell
from vlmgrid.config import validate_config
from vlmgrid.stages.fetch import fetch_model
from vlmgrid.stages.infer import run_inference
from vlmgrid.stages.prepare import prepare_benchmark
from vlmgrid.stages.score import score_cell


def opens(path: Path) -> bool:
    try:
        with Image.open(path) as image:
            image.load()
        return True
    except OSError:
        return False


def prepared_grid(base: dict, benchmarks: dict, models: list[str]):
    """The config of `models` on `benchmarks` ({name: settings}) over the base config, its benchmarks
    prepared."""
    config = validate_config(
        {**base, "benchmarks": benchmarks, "grid": {"models": models, "benchmarks": list(benchmarks)}}
    )
    for name in benchmarks:
        prepare_benchmark(name, config.benchmark(name), paths.bench_dir(config.data_dir, name))
    return config


def infer_cell(config, model: str, bench: str, part_size: int) -> Path:
    """Fetches `model` and runs it on the grid's prepared benchmark `bench`; the cell's predictions file."""
    fetch_model(model, config.model(model), paths.model_dir(config.data_dir, model))
    return run_inference(
        model_settings=config.model(model),
        bench_dir=paths.bench_dir(config.data_dir, bench),
        model_dir=paths.model_dir(config.data_dir, model),
        cell=Cell.in_results(config.results_dir, model, bench),
        part_size=part_size,
        threads=1,
        progress=False,
    )


def score_of(config, model: str, bench: str, predictions: Path, samples: int) -> dict:
    """The cell's score file, written where the grid keeps it."""
    return score_cell(
        model_name=model,
        bench_dir=paths.bench_dir(config.data_dir, bench),
        predictions_path=predictions,
        out_path=paths.score_path(config.results_dir, model, bench),
        samples=samples,
        seed=0,
    )
