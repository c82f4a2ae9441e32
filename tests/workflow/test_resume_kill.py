"""`vlmgrid infer` killed with SIGKILL, again and again, resumes and writes what an uninterrupted run writes.

Real processes and real kills (tests/helpers/kill_harness.py): each kill lands inside the part that follows a
seeded random number of new parts, a seeded random fraction of a part's time into it (at its start, among its
batches, or with its rows ready but not saved). The job stops itself there before the kill, so a loaded
machine moves no kill. A kill costs the part being computed when it comes, never more.
"""

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import kill_harness as kh

from vlmgrid.predictions import read_metadata, read_predictions

pytestmark = pytest.mark.integration

RESUMING = re.compile(r"^resuming: (\d+) of (\d+) parts \((\d+) of (\d+) items\) already done$", re.M)


def _reference(ws, in_process: bool = False) -> pa.Table:
    """An uninterrupted run's predictions, moved aside so that the killed runs start from nothing.

    In this process when asked: a model that imports torch takes seconds to start, and a subprocess adds
    nothing to an uninterrupted run."""
    if in_process:
        _run_here(ws)
    else:
        kh.finish(ws, kh.start(ws))
    reference = ws.root / "reference.parquet"
    ws.out_path.rename(reference)
    return pq.read_table(reference)


def _run_here(ws):
    from vlmgrid import paths
    from vlmgrid.cellrun.cell import Cell
    from vlmgrid.stages.infer import run_inference

    config = ws.config
    run_inference(
        model_settings=config.model(ws.model),
        bench_dir=paths.bench_dir(config.data_dir, ws.bench),
        model_dir=paths.model_dir(config.data_dir, ws.model),
        cell=Cell(ws.model, ws.bench, ws.out_path, ws.partial_dir),
        part_size=ws.part_size,
        threads=1,
        prompts_dir=config.prompts_dir,
        check_items=int(config.infer["invariance_items"]),
        device="cpu",
        progress=False,
    )


def _resumed_from(log: str) -> tuple[int, int]:
    """(parts, items) a run's log says it resumed from."""
    found = RESUMING.search(log)
    assert found, log
    return int(found.group(1)), int(found.group(3))


def _check_killed_runs(ws, kills, reference, n_items):
    runs = [kill.log for kill in kills[1:]] + [kh.log_text(ws, ws.runs)]
    parts = [kill.parts_at_kill for kill in kills]
    assert parts == sorted(set(parts)), "every restart saved at least one part more"
    job = ws.job()
    for kill, next_log in zip(kills, runs):
        resumed_parts, resumed_items = _resumed_from(next_log)
        assert resumed_parts == kill.parts_at_kill  # every part on disk at the kill is taken, none is redone
        assert resumed_items == job.bounds[kill.parts_at_kill]  # the items of those parts
    assert job.bounds[-1] == n_items

    final = pq.read_table(ws.out_path)
    assert final.equals(reference, check_metadata=True)
    assert ws.out_path.read_bytes() == (ws.root / "reference.parquet").read_bytes()
    assert not ws.partial_dir.exists()

    costs = kh.kill_costs(ws, kills)
    for cost in costs:
        print(cost)
        # POPE's items ask one model request each: a part holds at most part_size of them
        assert cost.part_items <= ws.part_size and cost.items_done <= cost.part_items
    # The killed runs' trace (after the reference run) accounts for every item computed: each item once, plus
    # the parts the kills cut short.
    events = kh.trace(ws)
    first_killed_pid = kills[0].pid
    killed = events[next(i for i, e in enumerate(events) if e["pid"] == first_killed_pid) :]
    computed = sum(e["items"] for e in killed if e["event"] == "compute")
    # and the batch check's sample, answered again once every part is done (none for an unbatched model)
    checked = (read_metadata(ws.out_path).get("invariance") or {}).get("checked", 0)
    assert computed == n_items + sum(cost.part_items for cost in costs) + checked
    return costs


def test_random_baseline_killed_four_times_resumes_to_identical_predictions(small_config, tmp_path):
    ws = kh.make_workspace(tmp_path / "grid", small_config, model="random", bench="pope-fixture", part_size=8)
    reference = _reference(ws)
    n_items = reference.num_rows  # one row per item on pope
    kills = kh.run_killed(ws, kills=4, seed=7, part_seconds=0.1, part_delay=0.1)
    costs = _check_killed_runs(ws, kills, reference, n_items)
    assert any(cost.part_items for cost in costs), "some kill came inside a part"


def test_llava_tiny_killed_between_batches_resumes_to_identical_predictions(small_config, tmp_path):
    ws = kh.make_workspace(
        tmp_path / "grid",
        small_config,
        model="llava-tiny",
        bench="pope-fixture",
        part_size=16,
        model_settings={"batch_size": 4},
    )
    reference = _reference(ws, in_process=True)
    # 0.1 s a batch, 4 batches a part: kills land among the batches of a part.
    kills = kh.run_killed(ws, kills=2, seed=3, part_seconds=0.4, batch_delay=0.1)
    costs = _check_killed_runs(ws, kills, reference, reference.num_rows)
    for cost in costs:
        assert cost.batches_done <= 16 // 4  # the batches of one part at most


def test_kill_during_the_final_write_leaves_no_file_that_looks_complete(small_config, tmp_path):
    ws = kh.make_workspace(
        tmp_path / "grid", small_config, model="random", bench="pope-fixture", part_size=16
    )
    reference = _reference(ws)
    leftover = kh.kill_in_final_write(ws)

    assert not ws.out_path.exists()
    assert leftover.parent == ws.out_path.parent and leftover.name.startswith(f".{ws.out_path.name}.")
    with pytest.raises(pa.ArrowException):
        pq.read_table(leftover)  # half written
    assert ws.parts() == 6  # every part is still there: the final file is written before they are removed

    kh.finish(ws, kh.start(ws))
    assert _resumed_from(kh.log_text(ws, ws.runs)) == (6, 90)
    assert "loaded random" not in kh.log_text(ws, ws.runs)  # nothing left to compute: no model loaded
    assert pq.read_table(ws.out_path).equals(reference, check_metadata=True)
    assert len(read_predictions(ws.out_path)) == 90
    # The half-written temporary file is ignored, and no name a reader looks for ends in .tmp.
    assert sorted(p.name for p in ws.out_path.parent.glob("*.parquet")) == [ws.out_path.name]
    assert not leftover.exists()  # the killed run's temporary removed by the run that finished the file
