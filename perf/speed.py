"""Speed of vlmgrid's own inference path, end to end from files on disk, next to the raw ceilings measured in
the same run.

    python perf/speed.py --out perf/results/speed-cpu-small.md              # CPU: small shapes
    python perf/speed.py --shapes real --out perf/results/speed-h200.md     # one GPU: real shapes, bf16
    python perf/speed.py --only dag --workflow --out ...                           # the CPU side alone
    python perf/speed.py --render perf/results/speed-cpu-small.json         # the table, from saved figures
    python perf/speed.py --shapes real --depth 1 --device cpu --out ...     # the real-shape path at one layer
    python perf/speed.py --device sim --out perf/results/speed-sim-h200.md  # host against a simulated H200

Every model is random-initialised at the chosen shapes, saved to a temporary folder and loaded the way the
grid loads it (open_clip's `local-dir:` path, transformers' `from_pretrained`); every benchmark is a folder of
JPEG files with its records, run through the protocol's own runner in parts of `--part-size` model requests,
as `vlmgrid infer` runs it. `--shapes real` (the default on CUDA) is ViT-B/32@224 and ViT-L/14@336 CLIP, and
LLaVA-1.5-7B's shape in bf16; `--shapes small` (the default on the CPU) is tiny shapes that run in a few
minutes, whose figures say nothing about a GPU. `--depth N` keeps the shapes' widths but gives every tower and
the language model N layers: the real-shape path at a size the CPU runs (tests/perf/test_speed.py runs it at
one layer), so that a short GPU run is not spent on a crash.

Sections (`--only`, comma-separated; all but `workflow` by default):
- clip: zero-shot classification from JPEG files in ImageNet's folder layout, for each tower, decoding them
  and then again from the pixel cache that pass filled; next to the tower alone on tensors already on the
  device (the ceiling), to opening each image in the main process, and to the naive path CLIP_benchmark
  takes (one torch DataLoader, workers = the cores, PIL and the whole preprocessing in them); on CUDA also
  with the JPEGs decoded and resized on the device (`image_decode: device`; the CPU has no such row);
- choice: multiple choice by the options' letter log-likelihood (ScienceQA-style items); next to a bare
  batched forward of the same inputs (the ceiling) and to the per-sample `generate` loop (16 new tokens);
- generate: short answers (TextVQA-style, 16 new tokens), next to transformers' own batched `generate` of the
  same inputs at the same batch size;
- rank: DANCE picture -> 50 riddles, next to 50 full forwards of picture + riddle;
- dag: `snakemake -n` of the largest grid (every catalog model x every benchmark of the shipped configs);
- workflow (also `--workflow`): the default grid cold (`snakemake --cores 2` in a fresh copy) and with nothing
  to do.

Each vlmgrid figure comes with the host cores its path used (the process's CPU seconds over the wall seconds).
`--device sim` runs none of these sections: it runs the same path on this machine's CPUs against stand-ins
that take the H200's time for the work each call is handed, part of it in GIL-holding launches (costs fitted
to `--measurements`: perf/speedcost.py; perf/speedsim.py), and gives the host's cost, its overlap with the
device's and the rate predicted on the H200's 16-core host in one table. The measurements live in
speedcases.py (speedfolders.py: the benchmark folders; speedgrid.py: the CPU side), the table in
speedreport.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # perf/'s own modules, when loaded by path too
from gridrun import REPO, render_saved, save_results  # noqa: E402
from speedcases import (  # noqa: E402
    SHAPES,
    at_depth,
    choice_section,
    clip_section,
    generate_section,
    load_llava,
    rank_section,
    write_llava,
)
from speedgrid import dag_section, workflow_section  # noqa: E402
from speedreport import render_markdown, render_sim_markdown, shapes_label  # noqa: E402
from speedsim import read_h200, sim_notes, sim_rows  # noqa: E402

SECTIONS = ("clip", "choice", "generate", "rank", "dag", "workflow")
MEASUREMENTS = REPO.parent / "shared" / "measurements"  # the project's H200 measurements, beside the checkout


def rendered(results: dict) -> str:
    """The Markdown of saved results: the simulated device's table, or the measured one."""
    render = render_sim_markdown if results["meta"].get("simulated") else render_markdown
    return render(results["meta"], results["rows"])


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _source() -> str:
    """The commit of the checkout vlmgrid's sources were imported from, and whether they differ from it."""
    import subprocess

    import vlmgrid

    folder = Path(vlmgrid.__file__).parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit, changed = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", ".")
    except (OSError, subprocess.CalledProcessError):
        return "vlmgrid's sources outside a git checkout"
    return f"vlmgrid's sources at commit {commit}" + (" with uncommitted changes" if changed else "")


def simulated(
    measurements: str, part_size: int, generate_items: int | None, out: str | None, argv: list[str] | None
) -> int:
    """vlmgrid's path on this machine's CPUs against a simulated H200 (perf/speedsim.py)."""
    import open_clip
    import torch
    import transformers

    h200 = read_h200(Path(measurements))
    work = Path(tempfile.mkdtemp(prefix="vlmgrid-speed-sim-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["VLMGRID_CACHE_DIR"] = str(work / "cache")
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    try:
        rows = sim_rows(h200, work, part_size, _cpus(), generate_items)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()[0]
    meta = {
        "simulated": True,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "device": f"simulated H200 on CPU ({platform.processor() or platform.machine()})",
        "measurements": f"{os.path.relpath(measurements, REPO)} (H200, {h200.cores} host cores, "
        f"{h200.decode_per_core:.1f} JPEG decodes + resizes per core per s)",
        "cpus": _cpus(),
        "libraries": f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"open_clip {open_clip.__version__}, python {platform.python_version()}",
        "command": "python perf/speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seconds": round(time.perf_counter() - started, 1),
        "load": [round(load_before, 2), round(load_after, 2)],
        "code": _source(),
        "h200_cores": h200.cores,
    }
    meta["notes"] = sim_notes(rows, h200, meta, part_size)
    text = render_sim_markdown(meta, rows)
    print(text)
    if out:
        save_results(out, text, {"meta": meta, "rows": rows})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda", "sim"],
        default="auto",
        help="sim: the CPU path against stand-ins that take the H200's measured time",
    )
    parser.add_argument(
        "--measurements",
        default=str(MEASUREMENTS),
        help="the H200's measurements the simulated device takes its times from",
    )
    parser.add_argument("--shapes", choices=["real", "small"], help="default: real on CUDA, small on the CPU")
    parser.add_argument(
        "--only",
        default=",".join(s for s in SECTIONS if s != "workflow"),
        help=f"comma-separated sections of {', '.join(SECTIONS)}",
    )
    parser.add_argument("--workflow", action="store_true", help="add the default grid's cold and no-op runs")
    parser.add_argument(
        "--depth",
        type=int,
        help="layers in every tower and in the language model, the widths kept "
        "(default: the shapes' own; a test runs the real shapes at 1)",
    )
    parser.add_argument(
        "--part-size",
        type=int,
        default=1024,
        help="model requests per runner call at most, as infer.part_size (its default)",
    )
    parser.add_argument(
        "--generate-items",
        type=int,
        help="short answers to generate (default: a part, --part-size; the H200's run of 2026-12-04 had 128)",
    )
    parser.add_argument("--out", help="write the results here (Markdown; the same name with .json beside it)")
    parser.add_argument(
        "--render", metavar="JSON", help="measure nothing: write the Markdown of a results JSON"
    )
    args = parser.parse_args(argv)
    if args.render:
        return render_saved(args.render, args.out, rendered)
    if args.device == "sim":
        return simulated(args.measurements, args.part_size, args.generate_items, args.out, argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()] + (
        ["workflow"] if args.workflow else []
    )
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section {unknown[0]!r}; the sections are {', '.join(SECTIONS)}")
    if args.depth is not None and args.depth < 1:
        parser.error(f"--depth {args.depth}: a model needs at least one layer")

    import open_clip
    import torch
    import transformers

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    shapes = args.shapes or ("real" if device == "cuda" else "small")
    shape = SHAPES[shapes] if args.depth is None else at_depth(SHAPES[shapes], args.depth)
    work = Path(tempfile.mkdtemp(prefix="vlmgrid-speed-"))
    # a stopped run still removes its models and pictures (several GB with real shapes)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["VLMGRID_CACHE_DIR"] = str(
        work / "cache"
    )  # classifier weights start cold, and stay out of ~/.cache
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    rows: list[dict] = []
    measured: list[str] = []

    def save() -> str:
        """The table of the rows so far; with --out, rewritten after each section, so that a run stopped by a
        time limit keeps the sections it finished."""
        meta = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "device": torch.cuda.get_device_name()
            if device == "cuda"
            else f"CPU ({platform.processor() or platform.machine()})",
            "shapes": shapes_label(shapes, args.depth),
            "precision": shape["precision"] if device == "cuda" else "fp32 (the CPU always runs fp32)",
            "cpus": _cpus(),
            "libraries": f"torch {torch.__version__}, transformers {transformers.__version__}, "
            f"open_clip {open_clip.__version__}, python {platform.python_version()}",
            "command": "python perf/speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "seconds": round(time.perf_counter() - started, 1),
            "part_size": args.part_size,
        }
        left = [name for name in sections if name not in measured]
        meta["notes"] = [
            f"runners called in parts of at most {args.part_size} model requests, cut as `vlmgrid infer` "
            f"cuts them; the whole run took {meta['seconds']} s"
            if not left
            else f"sections measured so far: {', '.join(measured)}, in {meta['seconds']} s; not yet: "
            f"{', '.join(left)}",
            f"load average (1 min) at the start {load_before:.1f}, at the end {os.getloadavg()[0]:.1f}, "
            f"on {meta['cpus']} CPUs: a load above the CPU count means other work shared them",
        ]
        text = render_markdown(meta, rows)
        if args.out:
            save_results(args.out, text, {"meta": meta, "rows": rows})
        return text

    def measure(name: str, section, *section_args) -> None:
        new_rows = section(*section_args)
        rows.extend(new_rows)
        measured.append(name)
        print(json.dumps(new_rows, indent=1), flush=True)
        save()

    try:
        if "clip" in sections:
            measure("clip", clip_section, shape, device, work / "clip", args.part_size)
        lm_sections = [s for s in ("choice", "generate", "rank") if s in sections]
        if lm_sections:
            model_dir = write_llava(shape, device, work / "llava")
            backend = load_llava(shape, device, model_dir, shape["lm_batch"])
            for name in lm_sections:
                section = {"choice": choice_section, "generate": generate_section, "rank": rank_section}[name]
                measure(name, section, backend, shape, device, work / name, args.part_size)
            del backend
        if "dag" in sections:
            measure("dag", dag_section, work)
        if "workflow" in sections:
            measure("workflow", workflow_section, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(save())
    return 0


if __name__ == "__main__":
    sys.exit(main())
