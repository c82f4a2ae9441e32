"""The `vlmgrid` command: every Snakemake rule and DVC stage is one of its subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from vlmgrid import __version__, paths
from vlmgrid.config import DEFAULT_CONFIG, Config, load_config
from vlmgrid.errors import VlmgridError


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def cmd_check_config(config: Config, args) -> None:
    n_na = sum(config.not_applicable(cell.model, cell.benchmark) is not None for cell in config.cells)
    print(f"{config.path}: valid; {len(config.models)} models x {len(config.benchmarks)} benchmarks "
          f"= {len(config.cells)} cells" + (f" ({n_na} not applicable)" if n_na else ""))


def cmd_benchmarks(config: Config | None, args) -> None:
    from vlmgrid.benchmarks import BENCHMARKS

    print("benchmark kinds:")
    for name, kind in BENCHMARKS.items():
        print(f"  {name:<16} {kind.protocol:<16} {kind.metric:<15} {kind.description}")
    if config is not None:
        print(f"benchmarks in {config.path}:")
        for name in config.benchmarks:
            entry = config.benchmark(name)
            print(f"  {name:<24} kind={entry['kind']} source={entry['source']['type']}")


def cmd_models(config: Config | None, args) -> None:
    from vlmgrid.models import BACKENDS

    print("model backends:")
    for name, backend in BACKENDS.items():
        print(f"  {name:<12} capabilities: {', '.join(sorted(backend.capabilities))}"
              f"{'; uses a GPU when there is one' if backend.uses_gpu else ''}")
    if config is not None:
        print(f"models in {config.path}:")
        for name in config.models:
            print(f"  {name:<24} backend={config.model(name)['backend']}")


def cmd_cells(config: Config, args) -> None:
    for cell in config.cells:
        if args.paths:
            # A not-applicable cell has its files too (they say so), so it is listed like any other.
            print(paths.predictions_path(config.results_dir, cell.model, cell.benchmark))
            continue
        reason = config.not_applicable(cell.model, cell.benchmark)
        print(f"{cell.model}\t{cell.benchmark}" + (f"\tn/a: {reason}" if reason else ""))


def cmd_prepare(config: Config, args) -> None:
    from vlmgrid.benchmarks import prepare_benchmark

    manifest = prepare_benchmark(args.benchmark, config.benchmark(args.benchmark),
                                 paths.bench_dir(config.data_dir, args.benchmark))
    _say(f"{args.benchmark}: {manifest['n_items']} items, fingerprint {manifest['fingerprint'][:12]}")


def cmd_stamp_sources(config: Config, args) -> None:
    from vlmgrid.benchmarks.sources import write_source_stamps

    folder = paths.source_stamps_dir(config.data_dir)
    written = write_source_stamps({name: config.benchmark(name) for name in config.benchmarks}, folder)
    local = sum(config.benchmark(name)["source"].get("type") == "local" for name in config.benchmarks)
    _say(f"{folder}: {len(config.benchmarks)} source stamps ({local} local), {len(written)} changed")


def cmd_verify(config: Config, args) -> None:
    from vlmgrid.benchmarks import verify_benchmark

    verify_benchmark(paths.bench_dir(config.data_dir, args.benchmark), full=True)
    _say(f"{args.benchmark}: every file matches its manifest")


def cmd_fetch_model(config: Config, args) -> None:
    from vlmgrid.models.fetch import fetch_model

    manifest = fetch_model(args.model, config.model(args.model), paths.model_dir(config.data_dir, args.model))
    _say(f"{args.model}: {len(manifest['files'])} file(s), fingerprint {manifest['fingerprint'][:12]}")


def cmd_infer(config: Config, args) -> None:
    from vlmgrid.gpu import acquire_gpu
    from vlmgrid.models import BACKENDS

    settings = config.model(args.model)
    config.benchmark(args.benchmark)  # a clear error for an unknown name before any work
    # Without --shard the cell runs whole whatever its benchmark's `shards` says: sharding is the workflow's
    # choice of jobs (dvc.yaml runs cells whole), and the file is the same either way.
    shard = None
    out_path = paths.predictions_path(config.results_dir, args.model, args.benchmark)
    partial_dir = paths.partial_dir(config.results_dir, args.model, args.benchmark)
    if args.shard is not None:
        from vlmgrid.shards import Shard

        shard = Shard.parse(args.shard)
        out_path = paths.shard_path(config.results_dir, args.model, args.benchmark, shard.index, shard.count)
        partial_dir = paths.shard_partial_dir(config.results_dir, args.model, args.benchmark, shard.index,
                                              shard.count)
    reason = config.not_applicable(args.model, args.benchmark)
    if reason is not None:
        from vlmgrid.infer import write_not_applicable

        # No model, no GPU: the file only records that this cell cannot run.
        write_not_applicable(model_name=args.model, model_settings=settings, benchmark=args.benchmark,
                             reason=reason, out_path=out_path, partial_dir=partial_dir, say=_say)
        return
    backend = BACKENDS.get(settings["backend"])
    wants_gpu = backend.uses_gpu and settings.get("device", "auto") != "cpu"
    lease = acquire_gpu(say=_say) if wants_gpu else None
    device = "cpu"
    if lease is not None and lease.gpu is not None:
        device = "cuda"
    elif settings.get("device") == "cuda":
        raise VlmgridError(f"model {args.model} asks for device: cuda, but no GPU is visible to this job")
    from vlmgrid.infer import run_inference

    try:
        run_inference(
            model_name=args.model,
            model_settings=settings,
            bench_dir=paths.bench_dir(config.data_dir, args.benchmark),
            model_dir=paths.model_dir(config.data_dir, args.model),
            out_path=out_path,
            partial_dir=partial_dir,
            prompts_dir=config.prompts_dir,
            part_size=int(config.infer["part_size"]),
            threads=int(args.threads or config.infer["threads"]),
            device=device,
            progress=not args.no_progress,
            shard=shard,
            say=_say,
        )
    finally:
        if lease is not None:
            lease.release()


def cmd_merge_shards(config: Config, args) -> None:
    settings = config.model(args.model)
    count = config.shards(args.benchmark)
    out_path = paths.predictions_path(config.results_dir, args.model, args.benchmark)
    reason = config.not_applicable(args.model, args.benchmark)
    if reason is not None:
        from vlmgrid.infer import write_not_applicable

        # No shard ran a model: the cell's file only records why, as an unsharded infer writes it.
        write_not_applicable(model_name=args.model, model_settings=settings, benchmark=args.benchmark,
                             reason=reason, out_path=out_path,
                             partial_dir=paths.partial_dir(config.results_dir, args.model, args.benchmark), say=_say)
        return
    from vlmgrid.shards import merge_shards

    merge_shards(
        model_name=args.model,
        model_settings=settings,
        bench_dir=paths.bench_dir(config.data_dir, args.benchmark),
        part_size=int(config.infer["part_size"]),
        shard_paths=[paths.shard_path(config.results_dir, args.model, args.benchmark, index, count)
                     for index in range(1, count + 1)],
        out_path=out_path,
        prompts_dir=config.prompts_dir,
        say=_say,
    )


def cmd_score(config: Config, args) -> None:
    from vlmgrid.score import score_cell

    predictions = Path(args.predictions) if args.predictions else paths.predictions_path(
        config.results_dir, args.model, args.benchmark)
    out = Path(args.out) if args.out else paths.score_path(config.results_dir, args.model, args.benchmark)
    score = score_cell(
        model_name=args.model,
        bench_dir=paths.bench_dir(config.data_dir, args.benchmark),
        predictions_path=predictions,
        out_path=out,
        samples=int(config.bootstrap["samples"]),
        seed=int(config.bootstrap["seed"]),
        given=bool(args.predictions),
    )
    if not score.get("applicable", True):
        _say(f"{args.model} on {args.benchmark}: not applicable ({score['reason']}) -> {out}")
        return
    if score.get("labels_hidden"):
        files = ", ".join(score["submission"].values())
        _say(f"{args.model} on {args.benchmark}: the labels are hidden, so there is no score; the leaderboard's "
             f"submission files are in {out.parent} ({files}) -> {out}")
        return
    low, high = score["ci95"]
    _say(f"{args.model} on {args.benchmark}: {score['metric']} {score['value']:.1f} [{low:.1f}, {high:.1f}] "
         f"(n={score['n']}, format errors {score['format_error_rate']:.1f}%) -> {out}")


def cmd_report(config: Config, args) -> None:
    from vlmgrid.report import build_report

    score_files = {
        (cell.model, cell.benchmark): paths.score_path(config.results_dir, cell.model, cell.benchmark)
        for cell in config.cells
    }
    # With missing cells the tables go to a folder of their own: the grid's report files only ever hold it whole.
    root = paths.partial_report_dir(config.results_dir) if args.allow_missing else Path(config.results_dir)
    written = build_report(score_files, config.models, config.benchmarks,
                           paths.tables_dir(root), paths.figures_dir(root),
                           title=config.title,
                           kinds={name: config.benchmark(name)["kind"] for name in config.benchmarks},
                           flag_error_rate=float(config.report["flag_error_rate"]),
                           allow_missing=args.allow_missing)
    for path in written:
        _say(f"wrote {path}")


def cmd_make_tiny_models(config: Config | None, args) -> None:
    from vlmgrid.models.open_clip_backend import write_tiny_open_clip
    from vlmgrid.models.tiny_hf import FAMILIES, write_tiny_checkpoint

    out = Path(args.out)
    families = args.families or list(FAMILIES)
    for family in families:
        write_tiny_checkpoint(family, out / family, seed=args.seed)
        _say(f"wrote {out / family} (transformers, {family})")
    write_tiny_open_clip(out / "open_clip", seed=args.seed)
    _say(f"wrote {out / 'open_clip'} (open_clip)")


def cmd_build_dance(config: Config | None, args) -> None:
    from vlmgrid.benchmarks.dance_build import build_dance

    meta = build_dance(Path(args.triples), Path(args.images), Path(args.out), seed=args.seed,
                       relations=Path(args.relations) if args.relations else None,
                       train_triples=Path(args.train_triples) if args.train_triples else None)
    _say(f"wrote {args.out}: {meta['n_queries']} queries from {meta['n_riddle_triples']} riddle triples")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vlmgrid", description="Evaluate vision-language models on a grid of benchmarks.")
    parser.add_argument("--version", action="version", version=f"vlmgrid {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler, help_text: str, needs_config: bool = True):
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument("--config", default=str(DEFAULT_CONFIG),
                             help=f"grid config (default: {DEFAULT_CONFIG})")
        command.set_defaults(handler=handler, needs_config=needs_config)
        return command

    add("check-config", cmd_check_config, "validate a grid config and print its size")
    add("benchmarks", cmd_benchmarks, "list benchmark kinds and the config's benchmarks", needs_config=False)
    add("models", cmd_models, "list model backends and the config's models", needs_config=False)
    cells = add("cells", cmd_cells, "list the (model, benchmark) cells of the grid")
    cells.add_argument("--paths", action="store_true", help="print predictions paths instead of names")
    add("prepare", cmd_prepare, "download or generate a benchmark, normalise it and hash it").add_argument("benchmark")
    add("stamp-sources", cmd_stamp_sources, "write a stamp of each benchmark's source (a local source's file "
        "sizes and times) for DVC's prepare stages")
    add("verify", cmd_verify, "check every file of a prepared benchmark against its manifest").add_argument("benchmark")
    add("fetch-model", cmd_fetch_model, "download or build a model's weights").add_argument("model")
    infer = add("infer", cmd_infer, "run one model on one benchmark (resumes a killed run)")
    infer.add_argument("model")
    infer.add_argument("benchmark")
    infer.add_argument("--threads", type=int, help="CPU threads (default: the config's infer.threads)")
    infer.add_argument("--no-progress", action="store_true", help="no progress bar")
    infer.add_argument("--shard", metavar="I/N", help="compute only shard I of N (from 1) and write its shard file "
                       "(default: the whole cell, whatever the benchmark's `shards`)")
    merge = add("merge-shards", cmd_merge_shards,
                "join a cell's shard files (the benchmark's `shards`) into its predictions file")
    merge.add_argument("model")
    merge.add_argument("benchmark")
    score = add("score", cmd_score, "score one model's predictions on one benchmark")
    score.add_argument("model")
    score.add_argument("benchmark")
    score.add_argument("--predictions", help="score this predictions file (made elsewhere) instead")
    score.add_argument("--out", help="write the score JSON here instead")
    report = add("report", cmd_report, "tables and figures from the grid's score files")
    report.add_argument("--allow-missing", action="store_true",
                        help="show a cell without a score file as \"missing\" (listed in the legends) instead of "
                             "stopping with an error; the tables and figures go to <results_dir>/report-partial/")
    tiny = add("make-tiny-models", cmd_make_tiny_models,
               "write tiny random-initialised checkpoints of every supported family (offline tests)",
               needs_config=False)
    tiny.add_argument("out", help="folder to write one checkpoint folder per family into")
    tiny.add_argument("--families", nargs="*", help="only these transformers families (default: all)")
    tiny.add_argument("--seed", type=int, default=0)
    dance = add("build-dance", cmd_build_dance,
                "build a DANCE-format diagnostic set from ConceptNet triples and pictures of entities",
                needs_config=False)
    dance.add_argument("--triples", required=True, help="ConceptNet assertions CSV (tab-separated)")
    dance.add_argument("--images", required=True, help="folder of <entity>/*.jpg pictures")
    dance.add_argument("--out", required=True, help="folder to write the set into (docs/dance-format.md)")
    dance.add_argument("--seed", type=int, default=0)
    dance.add_argument("--relations", help="riddle templates (default: config/prompts/dance_relations.yaml)")
    dance.add_argument("--train-triples", help="ConceptNet CSV of the triples seen in training (test-seen); "
                       "default: half of the riddle triples, drawn with the seed")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.needs_config:
            config = load_config(args.config)
        else:
            config = load_config(args.config) if Path(args.config).is_file() else None
        args.handler(config, args)
        sys.stdout.flush()  # inside the try: a reader that left (`vlmgrid benchmarks | head`) is seen here
    except VlmgridError as exc:
        print(f"vlmgrid: error: {exc}", file=sys.stderr)
        return 2
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
