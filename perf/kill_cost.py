"""What a SIGKILL costs `vlmgrid infer`: the work thrown away by each kill, measured on real processes.

    python perf/kill_cost.py                                  # tiny LLaVA, the default grid's part size
    python perf/kill_cost.py --part-size 16                   # parts of one batch
    python perf/kill_cost.py --model random --part-delay 0.1  # the random baseline, 0.1 s a part

The job runs on a POPE fixture in a temporary folder and is killed `--kills` times, each inside the part that
follows a seeded random number of new parts, a seeded random fraction of a part's time into it, then left to
finish; its predictions are checked against an uninterrupted run. Per kill it prints the items of the part cut
short (all computed again after the restart), the model batches already done for that part (their items
computed and never saved), the seconds spent on that part, and the restart's start-up and model load. Parts
are saved whole, so a kill costs at most one part: part_size model requests, which on POPE (one request an
item) are part_size items, part_size / batch_size batches.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the harness that kills and traces the job lives with the tests

import kill_harness as kh  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llava-tiny", choices=["llava-tiny", "random"])
    parser.add_argument(
        "--part-size", type=int, help="model requests per part, items on POPE (default: the default grid's)"
    )
    parser.add_argument("--batch-size", type=int, default=16, help="the hf model's batch size")
    parser.add_argument("--size", type=int, default=300, help="POPE fixture size (3 items each)")
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-delay", type=float, default=0.05, help="seconds added to each hf batch")
    parser.add_argument("--part-delay", type=float, default=0.0, help="seconds added to each part")
    args = parser.parse_args(argv)

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    part_size = args.part_size or int(config["infer"]["part_size"])
    hf = args.model != "random"
    settings = {"batch_size": args.batch_size} if hf else {}
    batches_per_part = -(-part_size // args.batch_size) if hf else 1

    with tempfile.TemporaryDirectory(prefix="vlmgrid-kill-") as tmp:
        root = Path(tmp)
        ws = kh.make_workspace(
            root / "grid",
            config,
            model=args.model,
            bench="pope-fixture",
            part_size=part_size,
            size=args.size,
            model_settings=settings,
        )
        delays = {"part_delay": args.part_delay, "batch_delay": args.batch_delay if hf else 0.0}
        kh.finish(ws, kh.start(ws, **delays))
        # Kills are spread over a part's measured time, so they land as often late in a part as early.
        events = kh.trace(ws)
        starts = [e["t"] for e in events if e["event"] == "compute"]
        ends = [e["t"] for e in events if e["event"] == "saved"]
        part_seconds = statistics.median(end - begin for begin, end in zip(starts, ends))
        reference = ws.out_path.read_bytes()
        ws.out_path.unlink()
        kills = kh.run_killed(ws, kills=args.kills, seed=args.seed, part_seconds=part_seconds, **delays)
        identical = ws.out_path.read_bytes() == reference
        costs = kh.kill_costs(ws, kills)

    batch_note = f", batch size {args.batch_size} ({batches_per_part} batches a part)" if hf else ""
    print(
        f"{args.model} on pope-fixture ({3 * args.size} items), part size {part_size}{batch_note}, "
        f"{args.kills} kills, a part taking {part_seconds:.3f} s"
    )
    print(
        f"{'kill':>4} {'parts on disk':>13} {'part cut short':>14} {'batches done':>12} {'items done':>10} "
        f"{'seconds lost':>12} {'restart s':>9}"
    )
    for number, (kill, cost) in enumerate(zip(kills, costs), 1):
        done = (cost.batches_done, cost.items_done) if hf else ("n/a", "n/a")  # the baseline has no batches
        print(
            f"{number:>4} {kill.parts_at_kill:>13} {cost.part_items:>14} {done[0]:>12} {done[1]:>10} "
            f"{cost.seconds_lost:>12.3f} {cost.restart_seconds:>9.1f}"
        )
    batches = (
        (
            f"batches done and lost {statistics.mean(c.batches_done for c in costs):.1f} on average, "
            f"{max(c.batches_done for c in costs)} at most (bound {batches_per_part}); "
        )
        if hf
        else ""
    )
    print(
        f"per kill: part cut short {statistics.mean(c.part_items for c in costs):.1f} items on average "
        f"(at most {part_size}); {batches}{statistics.mean(c.seconds_lost for c in costs):.3f} s of compute "
        f"and {statistics.mean(c.restart_seconds for c in costs):.1f} s of restart"
    )
    print(f"final predictions {'identical to' if identical else 'DIFFERENT from'} the uninterrupted run's")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
