"""The `vlmgrid` command: every Snakemake rule's job is one of its subcommands.

Each subcommand parses its arguments, loads the config and calls one stage function (`vlmgrid.stages`);
the package's messages (logging, one logger per module) are shown bare on stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vlmgrid import __version__

if TYPE_CHECKING:
    from vlmgrid.config import Config

# The package's modules are imported where they are used, not here: a command sent to the fork server (main's
# start) costs its client only this module's import and the client's.


log = logging.getLogger(__name__)


def cmd_check_config(config: Config, args) -> None:
    from vlmgrid.stages import plan

    print(plan.summary(config))


def cmd_benchmarks(config: Config | None, args) -> None:
    from vlmgrid.stages import plan

    print("\n".join(plan.benchmark_lines(config)))


def cmd_models(config: Config | None, args) -> None:
    from vlmgrid.stages import plan

    print("\n".join(plan.model_lines(config)))


def cmd_cells(config: Config, args) -> None:
    from vlmgrid.stages import plan

    for line in plan.cell_lines(config, as_paths=args.paths):
        print(line)


def cmd_plan(config: Config, args) -> None:
    from vlmgrid.stages.cost_text import write_plan

    print(write_plan(config, Path(args.csv) if args.csv else None))


def cmd_prepare(config: Config, args) -> None:
    from vlmgrid.stages.prepare import prepare

    prepare(config, args.benchmark)


def cmd_stamp_sources(config: Config, args) -> None:
    from vlmgrid.stages.prepare import stamp_sources

    if args.pipeline:
        from vlmgrid.stages.dvc_pipelines import check_pipeline, config_in_repo

        check_pipeline(Path("."), config_in_repo(Path("."), args.config), Path(args.pipeline))
    stamp_sources(config, Path(args.out) if args.out else None)


def cmd_verify(config: Config, args) -> None:
    from vlmgrid.stages.prepare import verify

    verify(config, args.benchmark)


def cmd_fetch_model(config: Config, args) -> None:
    from vlmgrid.stages.fetch import fetch

    fetch(config, args.model)


def cmd_infer(config: Config, args) -> None:
    from vlmgrid.stages.infer import infer_cell

    infer_cell(
        config,
        args.model,
        args.benchmark,
        shard=args.shard,
        threads=args.threads,
        progress=not args.no_progress,
    )


def cmd_inputs(config: Config, args) -> None:
    from vlmgrid.stages.inputs import cell_inputs

    cell_inputs(
        config,
        args.model,
        args.benchmark,
        limit=args.limit,
        pixels_dir=Path(args.pixels) if args.pixels else None,
    )


def cmd_merge_shards(config: Config, args) -> None:
    from vlmgrid.stages.infer import merge_cell

    merge_cell(config, args.model, args.benchmark)


def cmd_score(config: Config, args) -> None:
    from vlmgrid.stages.score import score_grid_cell

    score_grid_cell(config, args.model, args.benchmark, predictions=args.predictions, out=args.out)


def cmd_compare(config: Config, args) -> None:
    from vlmgrid.stages.compare import compare_benchmark

    compare_benchmark(config, args.benchmark)


def cmd_diff(config: Config, args) -> None:
    from vlmgrid.stages.diff import diff_sets

    print(
        diff_sets(
            config,
            args.benchmark,
            args.a,
            args.b,
            reading=args.reread or "recorded",
            csv_out=args.csv,
            json_out=args.json,
            limit=args.limit,
            tool=args.tool_reading,
        )
    )


def cmd_import_predictions(config: Config, args) -> None:
    from vlmgrid.stages.imports import import_predictions

    import_predictions(
        config,
        args.model,
        args.benchmark,
        args.file,
        file_format=args.format,
        questions=args.questions,
        out=args.out,
        replace=args.replace,
    )


def cmd_report(config: Config, args) -> None:
    from vlmgrid.stages.report import write_report

    write_report(config, allow_missing=args.allow_missing)


def cmd_dvc_pipelines(config: Config | None, args) -> None:
    from vlmgrid.stages.dvc_pipelines import check_pipelines, config_in_repo, write_pipelines

    configs = [config_in_repo(Path(args.root), config) for config in args.configs or []]
    if args.check:
        check_pipelines(Path(args.root), configs)
    else:
        write_pipelines(Path(args.root), configs)


def cmd_inspect(config: Config, args) -> None:
    from vlmgrid.stages.inspect import inspect_benchmark

    inspect_benchmark(config, args.benchmark, max_items=args.max_items, seed=args.seed)


def cmd_make_tiny_models(config: Config | None, args) -> None:
    from vlmgrid.stages.fetch import write_tiny_models

    write_tiny_models(Path(args.out), families=args.families, seed=args.seed)


def cmd_build_dance(config: Config | None, args) -> None:
    from vlmgrid.benchmarks.dance_build import build_dance

    meta = build_dance(
        Path(args.triples),
        Path(args.images),
        Path(args.out),
        seed=args.seed,
        relations=Path(args.relations) if args.relations else None,
        train_triples=Path(args.train_triples) if args.train_triples else None,
    )
    log.info(f"wrote {args.out}: {meta['n_queries']} queries from {meta['n_riddle_triples']} riddle triples")


# What the commands import, each where installed: the fork server imports them once for all its jobs.
# transformers' processor and auto-model machinery is imported lazily, on a job's first processor (an hf
# cell's inference, an inspect page's prompts): once in the server, not in every job.
JOB_MODULES = (
    "vlmgrid.stages.prepare",
    "vlmgrid.stages.fetch",
    "vlmgrid.stages.infer",
    "vlmgrid.stages.score",
    "vlmgrid.stages.compare",
    "vlmgrid.stages.report",
    "vlmgrid.stages.inspect",
    "vlmgrid.stages.inputs",
    "pandas",
    "pyarrow.parquet",
    "jsonschema",
    "matplotlib.pyplot",
    "torch",
    "torchvision",
    "open_clip",
    "transformers",
    "transformers.processing_utils",
    "transformers.models.auto.processing_auto",
    "transformers.models.auto.modeling_auto",
)


def cmd_forkserver(config: Config | None, args) -> None:
    from vlmgrid.forkserver import serve

    serve(args.socket, main, JOB_MODULES, idle_timeout=args.idle_timeout, parent_pid=args.parent_pid)


def build_parser() -> argparse.ArgumentParser:
    from vlmgrid.config import DEFAULT_CONFIG

    parser = argparse.ArgumentParser(
        prog="vlmgrid", description="Evaluate vision-language models on a grid of benchmarks."
    )
    parser.add_argument("--version", action="version", version=f"vlmgrid {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler, help_text: str, needs_config: bool = True, config_option: bool = True):
        command = sub.add_parser(name, help=help_text, description=help_text)
        if config_option:
            command.add_argument(
                "--config", default=str(DEFAULT_CONFIG), help=f"grid config (default: {DEFAULT_CONFIG})"
            )
        command.set_defaults(handler=handler, needs_config=needs_config)
        return command

    add("check-config", cmd_check_config, "validate a grid config and print its size")
    add("benchmarks", cmd_benchmarks, "list benchmark kinds and the config's benchmarks", needs_config=False)
    add("models", cmd_models, "list model backends and the config's models", needs_config=False)
    cells = add("cells", cmd_cells, "list the (model, benchmark) cells of the grid")
    cells.add_argument("--paths", action="store_true", help="print predictions paths instead of names")
    cost = add(
        "plan",
        cmd_plan,
        "what the grid will cost before it runs: per cell its items, model requests and "
        "estimated GPU-hours, and the totals per model and for the grid",
    )
    cost.add_argument(
        "--csv",
        metavar="PATH",
        help="write the full per-row table (every column) to this CSV file "
        "as well; the printed plan fits 100 columns",
    )
    add("prepare", cmd_prepare, "download or generate a benchmark, normalise it and hash it").add_argument(
        "benchmark"
    )
    stamps = add(
        "stamp-sources",
        cmd_stamp_sources,
        "write what DVC cannot see change (a local source's or "
        "checkpoint's file sizes and hashes, each model's settings, the grid's) for DVC's grid stage",
    )
    stamps.add_argument("--out", help="folder of the stamps (default: <data_dir>/.source-stamps)")
    stamps.add_argument(
        "--pipeline",
        metavar="DVC_FILE",
        help="first check that this dvc.yaml (from the repo root, "
        "here) is what `vlmgrid dvc-pipelines` writes for the config now",
    )
    add("verify", cmd_verify, "check every file of a prepared benchmark against its manifest").add_argument(
        "benchmark"
    )
    add("fetch-model", cmd_fetch_model, "download or build a model's weights").add_argument("model")
    infer = add("infer", cmd_infer, "run one model on one benchmark (resumes a killed run)")
    infer.add_argument("model")
    infer.add_argument("benchmark")
    infer.add_argument("--threads", type=int, help="CPU threads (default: the config's infer.threads)")
    infer.add_argument("--no-progress", action="store_true", help="no progress bar")
    infer.add_argument(
        "--shard",
        metavar="I/N",
        help="compute only shard I of N (from 1) and write its shard file "
        "(default: the whole cell, whatever the benchmark's `shards`)",
    )
    inputs = add(
        "inputs",
        cmd_inputs,
        "print what a cell's model receives, one JSON object per model request: the "
        "exact text handed to its tokenizer (system text and chat template included), the options it "
        "scores, the image it reads and how it decodes (docs/commands.md)",
    )
    inputs.add_argument("model")
    inputs.add_argument("benchmark")
    inputs.add_argument("--limit", type=int, metavar="N", help="only the requests of the first N items")
    inputs.add_argument(
        "--pixels",
        metavar="DIR",
        help="also write the pixel values the model receives for each "
        "image, a .npy file per image in DIR, and name it in `pixels`",
    )
    merge = add(
        "merge-shards",
        cmd_merge_shards,
        "join a cell's shard files (the benchmark's `shards`) into its predictions file",
    )
    merge.add_argument("model")
    merge.add_argument("benchmark")
    score = add("score", cmd_score, "score one model's predictions on one benchmark")
    score.add_argument("model")
    score.add_argument("benchmark")
    score.add_argument("--predictions", help="score this predictions file (made elsewhere) instead")
    score.add_argument("--out", help="write the score JSON here instead")
    compare = add(
        "compare",
        cmd_compare,
        "compare the grid's models pair by pair on one benchmark (difference, "
        "paired bootstrap CI, paired permutation test)",
    )
    compare.add_argument("benchmark", help="a benchmark of the grid")
    diff = add(
        "diff",
        cmd_diff,
        "why two prediction sets of one benchmark score differently: the items where "
        "they differ (same answer read differently, different answer, error rows) and what each kind of "
        "difference does to the headline",
    )
    diff.add_argument("benchmark")
    diff.add_argument("a", help="a predictions file, or a model of the grid (its predictions file)")
    diff.add_argument("b", nargs="?", help="the other set, the same way (none with --tool-reading)")
    diff.add_argument(
        "--tool-reading",
        action="store_true",
        help="diff A's publishing tool's own reading (its judge's and matcher's verdicts, or its rule) "
        "with the official reading A records, item by item",
    )
    diff.add_argument(
        "--reread",
        choices=("headline", "lenient"),
        help="read both sets' raw texts again with the benchmark's headline (or lenient) parser "
        "instead of taking the readings the files record",
    )
    diff.add_argument("--csv", help="write every differing item to this CSV file")
    diff.add_argument("--json", help="write the summary and every differing item to this JSON file")
    diff.add_argument(
        "--limit", type=int, default=10, help="items printed per kind of difference (default: 10)"
    )
    imported = add(
        "import-predictions",
        cmd_import_predictions,
        "turn answers published elsewhere (LLaVA's answer files, MME's eval-tool results, "
        "lmms-eval's logged samples) into a predictions file of a prepared benchmark",
    )
    imported.add_argument("model", help="the model that answered (a name outside the grid needs --out)")
    imported.add_argument("benchmark")
    imported.add_argument(
        "file",
        help="the answer file (or MME eval-tool result folder, or a folder of lmms-eval samples files)",
    )
    imported.add_argument(
        "--format", help="llava-answers, mme-eval-tool or lmms-eval-samples (default: guessed from the file)"
    )
    imported.add_argument(
        "--questions",
        help="the question file the answers were made from, where their ids "
        "name nothing else (LLaVA's POPE answers: llava_pope_test.jsonl)",
    )
    imported.add_argument("--out", help="write the predictions file here instead")
    imported.add_argument(
        "--replace",
        action="store_true",
        help="replace the predictions file of this model on "
        "this benchmark when there is one (made by inference or imported before); without it, an "
        "existing file is kept and the import refused",
    )
    report = add("report", cmd_report, "tables and figures from the grid's score files")
    report.add_argument(
        "--allow-missing",
        action="store_true",
        help='show a cell without a score file as "missing" (listed in the legends) instead of '
        "stopping with an error; the tables and figures go to <results_dir>/report-partial/",
    )
    pipelines = add(
        "dvc-pipelines",
        cmd_dvc_pipelines,
        "write dvc.yaml (config/config.yaml) and "
        "pipelines/<grid>/dvc.yaml (each other grid config, and each config pipelines/ was written for) "
        "from workflow/dvc.template.yaml",
        needs_config=False,
        config_option=False,
    )
    # Repeatable, and no default: the command writes every grid's pipeline; --config adds one of one's own.
    pipelines.add_argument(
        "--config",
        action="append",
        dest="configs",
        metavar="PATH",
        help="a grid config of your own (inside the repo): write pipelines/<its name>/dvc.yaml "
        "too (repeatable)",
    )
    pipelines.set_defaults(config=None)
    pipelines.add_argument("--root", default=".", help="the repo's root folder (default: here)")
    pipelines.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail when a pipeline differs from what the template gives",
    )
    inspect = add(
        "inspect",
        cmd_inspect,
        "a static HTML page of a benchmark's items and every grid model's "
        "answers, with filters (results/inspect/<bench>/index.html)",
    )
    inspect.add_argument("benchmark", help="a benchmark of the grid")
    inspect.add_argument(
        "--max-items",
        type=int,
        default=500,
        help="at most this many items on the page, a seeded sample of them (default: 500)",
    )
    inspect.add_argument("--seed", type=int, default=0, help="the sample's seed (default: 0)")
    tiny = add(
        "make-tiny-models",
        cmd_make_tiny_models,
        "write tiny random-initialised checkpoints of every supported family (offline tests)",
        needs_config=False,
    )
    tiny.add_argument("out", help="folder to write one checkpoint folder per family into")
    tiny.add_argument("--families", nargs="*", help="only these transformers families (default: all)")
    tiny.add_argument("--seed", type=int, default=0)
    dance = add(
        "build-dance",
        cmd_build_dance,
        "build a DANCE-format diagnostic set from ConceptNet triples and pictures of entities",
        needs_config=False,
    )
    dance.add_argument("--triples", required=True, help="ConceptNet assertions CSV (tab-separated)")
    dance.add_argument("--images", required=True, help="folder of <entity>/*.jpg pictures")
    dance.add_argument("--out", required=True, help="folder to write the set into (docs/dance-format.md)")
    dance.add_argument("--seed", type=int, default=0)
    dance.add_argument("--relations", help="riddle templates (default: config/prompts/dance_relations.yaml)")
    dance.add_argument(
        "--train-triples",
        help="ConceptNet CSV of the triples seen in training (test-seen); "
        "default: half of the riddle triples, drawn with the seed",
    )
    server = add(
        "forkserver",
        cmd_forkserver,
        "import the jobs' modules once and run each `vlmgrid` command sent "
        "to SOCKET in a forked child (the workflow's warm start; docs/speed.md)",
        needs_config=False,
    )
    server.add_argument("--socket", required=True, help="the Unix socket to listen on (made 0600)")
    server.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="stop after this many seconds with no job (default: 300)",
    )
    server.add_argument(
        "--parent-pid",
        type=int,
        metavar="PID",
        help="the pid of the process that starts the server: stop once it has ended (a run "
        "killed with SIGKILL, too)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None and os.environ.get("VLMGRID_FORKSERVER", "") not in ("", "off"):
        # A job of a Snakemake run: run it in the run's fork server
        # (workflow/rules/common.smk), where it takes it
        from vlmgrid.forkserver import run_through_server

        code = run_through_server(sys.argv[1:])
        if code is not None:
            return code
    from vlmgrid import codeversion

    # The code as it is when the command starts (the package's heavy modules are not imported yet): what its
    # outputs record. A job forked from a fork server has the server's, which it computed before its imports.
    codeversion.running_version()
    args = build_parser().parse_args(argv)
    from vlmgrid import messages

    with messages.on_stderr():
        return _run(args)


def _run(args) -> int:
    from vlmgrid import fileio, messages
    from vlmgrid.config import load_config
    from vlmgrid.errors import VlmgridError

    try:
        if args.needs_config:
            config = load_config(args.config)
        else:
            config = load_config(args.config) if args.config and Path(args.config).is_file() else None
        args.handler(config, args)
        sys.stdout.flush()  # inside the try: a reader that left (`vlmgrid benchmarks | head`) is seen here
    except KeyboardInterrupt:
        print("vlmgrid: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of the output closed it: stop quietly, as a command killed by SIGPIPE does. What is still
        # buffered goes to devnull, or Python's flush at exit would fail on the closed pipe again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file (captured): nothing is flushed at exit
            pass
        return 141  # 128 + SIGPIPE, the status a shell reports for a command ended by a closed pipe
    except (VlmgridError, OSError) as exc:
        failure = fileio.user_error(
            exc
        )  # the input's fault, or a full or read-only disk wherever the write was
        if failure is None:
            raise
        print(messages.error_text(failure), file=sys.stderr)  # the items and paths it names, escaped
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
