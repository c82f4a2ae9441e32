"""The import stage: a file of answers published elsewhere (LLaVA's answer files, MME's eval-tool results,
lmms-eval's logged samples, VLMEvalKit's prediction files) -> a predictions file of a prepared benchmark
(docs/formats.md, "Predictions made elsewhere").

The importer (`vlmgrid.imports`) matches each answer to its record by the published ids; here every answer is
read by the parser the benchmark's protocol reads generated text with, so an imported file and a local run
are scored alike. An answer that cannot be read is a format-error row (prediction null), never dropped.
A format whose files answer a subset by construction (`Importer.partial`) writes rows for the answered items
only, and the metadata's `coverage` ({answered, total}) says so; the score stage scores those items alone.
Where the answers carry the tool's own verdicts (VLMEvalKit's judge file), the metadata's `tool_reading` keeps
them (`stages.tool_reading`), never the rows, whose schema and hash stay those of any predictions file.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from vlmgrid import paths
from vlmgrid.cellrun.cell import Cell
from vlmgrid.cellrun.job import Job, predictions_metadata
from vlmgrid.config import Config
from vlmgrid.errors import VlmgridError
from vlmgrid.fileio import sha256_file, sha256_json
from vlmgrid.predictions import read_metadata, rows_to_table, write_predictions

log = logging.getLogger(__name__)

# The parser each protocol's generate strategy falls back on when the kind names none (vlmgrid.protocols).
PROTOCOL_PARSERS = {"yes_no": "pope", "multiple_choice": "letter", "short_answer": "short_answer"}


def _file_sha256(path: Path) -> str:
    """The file's sha256; a folder's is that of its files' names and hashes (sorted)."""
    if path.is_file():
        return sha256_file(path)
    return sha256_json(sorted([p.name, sha256_file(p)] for p in path.iterdir() if p.is_file()))


def _out_path(config: Config, model: str, benchmark: str, out: str | None) -> Path:
    if out:
        return Path(out)
    if model not in config.data["models"]:
        raise VlmgridError(
            f'model "{model}" is not a model of {config.path}, so its predictions have no place in the grid; '
            f"give --out"
        )
    return paths.predictions_path(config.results_dir, model, benchmark)


def _check_not_an_input(out_path: Path, inputs: dict[str, Path]) -> None:
    """Refuse an output that would overwrite an input: the same file by any path (a link, a hard link) or a
    path inside an input folder. `inputs`: {what it is: path}."""
    for what, given in inputs.items():
        if given.is_dir():
            if out_path.resolve().is_relative_to(given.resolve()):
                raise VlmgridError(
                    f"--out {out_path} is inside the {what} {given}, which is read, not written; "
                    f"give --out a path outside it"
                )
        elif given.exists() and out_path.exists() and os.path.samefile(out_path, given):
            raise VlmgridError(
                f"--out {out_path} is the {what} {given} itself (the same file, by another path or "
                f"a link), which would be lost; give --out another path"
            )


def _made_by(metadata: dict) -> str:
    provenance = metadata.get("provenance") if isinstance(metadata.get("provenance"), dict) else {}
    if "imported" in provenance:
        return str(provenance["imported"])
    if metadata.get("applicable") is False:
        return "the record that the model cannot run it"
    return "made by vlmgrid infer"


def _check_replace(out_path: Path, model: str, benchmark: str, replace: bool) -> None:
    """An existing file at the output is replaced only when it is the predictions file of this model on this
    benchmark and `replace` says so: any other file is the user's, and kept."""
    if not out_path.exists() and not out_path.is_symlink():
        return
    metadata = read_metadata(out_path) if out_path.is_file() else {}
    cell = (metadata.get("model"), metadata.get("benchmark"))
    if None in cell:
        raise VlmgridError(
            f"{out_path} exists and is not a predictions file of vlmgrid; it is kept: give --out "
            f"another path, or move it away and import again"
        )
    if cell != (model, benchmark):
        raise VlmgridError(
            f"{out_path} holds the predictions of {cell[0]} on {cell[1]}, not of {model} on "
            f"{benchmark}; it is kept: give --out another path"
        )
    if not replace:
        raise VlmgridError(
            f"{out_path} already holds the predictions of {model} on {benchmark} "
            f"({_made_by(metadata)}); give --replace to replace them with the imported answers"
        )


def _cell_lock(config: Config, model: str, benchmark: str, out_path: Path):
    """The lock of the grid cell whose predictions file `out_path` is (none for a file outside the grid)."""
    cell = Cell.in_results(config.results_dir, model, benchmark)
    if out_path.resolve() != cell.out_path.resolve():
        return contextlib.nullcontext()
    return cell.running()


def import_predictions(
    config: Config,
    model: str,
    benchmark: str,
    file: str,
    *,
    file_format: str | None = None,
    questions: str | None = None,
    out: str | None = None,
    replace: bool = False,
) -> Path:
    """`vlmgrid import-predictions`: write the predictions file of `file`'s answers to `benchmark`; an
    existing predictions file of the cell is replaced only with `replace`."""
    source = Path(file)
    if not source.exists():
        raise VlmgridError(f"{source} not found; check the path")
    out_path = _out_path(config, model, benchmark, out)
    inputs = {"answer " + ("folder" if source.is_dir() else "file"): source}
    if questions:
        inputs["question file"] = Path(questions)
    _check_not_an_input(out_path, inputs)
    with _cell_lock(config, model, benchmark, out_path):
        _check_replace(out_path, model, benchmark, replace)
        return _import(config, model, benchmark, source, out_path, file_format, questions)


def _import(
    config: Config,
    model: str,
    benchmark: str,
    source: Path,
    out_path: Path,
    file_format: str | None,
    questions: str | None,
) -> Path:
    from vlmgrid.benchmarks import load_benchmark
    from vlmgrid.imports import IMPORTERS, check_answers, guess_format
    from vlmgrid.protocols.base import prediction_row
    from vlmgrid.protocols.parsing import PARSERS
    from vlmgrid.stages.tool_reading import metadata_entry

    bench = load_benchmark(paths.bench_dir(config.data_dir, benchmark))
    if file_format is None:
        file_format = guess_format(source)
        log.info(f"{source}: read as {file_format} (guessed from the file; give --format to choose)")
    importer = IMPORTERS.get(file_format)
    if bench.kind.name not in importer.kinds:
        raise VlmgridError(
            f"format {file_format} does not hold answers to {bench.kind.name} benchmarks such as {benchmark} "
            f"(it reads {', '.join(importer.kinds)})"
        )
    answers = importer.read(source, bench.records, bench.kind.name, Path(questions) if questions else None)
    check_answers(answers, bench.records, source, benchmark, partial=importer.partial)

    parser_name = bench.kind.parser or PROTOCOL_PARSERS.get(bench.kind.protocol)
    if parser_name is None:
        raise VlmgridError(
            f"benchmark {benchmark} ({bench.kind.protocol} protocol) has no answer parser to read "
            f"imported text with"
        )
    parse = PARSERS.get(parser_name)
    options = dict(zip(bench.records["id"].astype(str), bench.records["options"]))
    raw_of = {answer.record_id: answer.raw for answer in answers}
    error_of = {answer.record_id: answer.error for answer in answers if answer.error is not None}
    order = {item: n for n, item in enumerate(bench.records["id"].astype(str))}
    rows = []
    for item in bench.records["id"].astype(str):  # record order, as inference writes
        if item not in raw_of:  # unanswered by a partial format: absent, not wrong
            continue
        if item in error_of:  # the text cannot be told: an error row saying why, never a guess
            rows.append(prediction_row(item, error=error_of[item]))
            continue
        parsed = parse(raw_of[item], [str(option) for option in options[item]])
        rows.append(
            prediction_row(
                item, raw=raw_of[item], prediction=parsed.prediction, prediction_index=parsed.index
            )
        )
    # The prompts were the publisher's, not this config's prompt sets: none is recorded.
    job = Job(bench=bench, prompts={}, part_size=len(rows), bounds=(0, len(rows)), fingerprint="")
    provenance = {
        "imported": f"imported from {source} ({file_format})",
        "format": file_format,
        "file": str(source),
        "sha256": _file_sha256(source),
        "parser": parser_name,
    }
    metadata = predictions_metadata(
        model_name=model,
        model_settings=config.data["models"].get(model, {}),
        job=job,
        strategy="generate",
        provenance=provenance,
    )
    if len(rows) < len(bench.records):
        metadata["coverage"] = {"answered": len(rows), "total": int(len(bench.records))}
    tool_reading = metadata_entry(importer.tool, sorted(answers, key=lambda answer: order[answer.record_id]))
    if tool_reading is not None:  # the tool's own verdicts, kept beside the rows (their hash is unchanged)
        metadata["tool_reading"] = tool_reading
    write_predictions(out_path, rows_to_table(rows), metadata)
    unreadable = sum(row["prediction"] is None for row in rows)
    log.info(
        f"wrote {out_path}: {len(rows)} answers of {model} to the {len(bench.records)} items of {benchmark} "
        f"imported from {source} ({file_format}), {unreadable} unreadable by the {parser_name} parser "
        "(format errors)"
    )
    return out_path
