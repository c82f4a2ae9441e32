"""perf/speed.py --device sim: vlmgrid's path against stand-ins that take a measured device's time for the
work each call is handed, at tiny counts."""

import importlib.util
import json
import math
import sys
import time

import pytest
import torch
from helpers.common import REPO

_spec = importlib.util.spec_from_file_location("speed", REPO / "perf" / "speed.py")
speed = importlib.util.module_from_spec(_spec)
sys.modules["speed"] = speed
_spec.loader.exec_module(speed)  # puts perf/ on the import path: its modules below
import speedcost  # noqa: E402
import speedsim  # noqa: E402

# A fast made-up device whose rates follow exact costs, so the fit must give them back: a forward call 1 ms,
# an image 0.25 ms, a prompt token 7.5 us (a letter prompt of 640 tokens: 5 ms with its image), a decoding
# step 2 ms + 0.5 ms per row, a continuation token 10 us.
CALL, IMAGE, TOKEN, STEP, STEP_ROW, CONTINUATION = 1e-3, 0.25e-3, 7.5e-6, 2e-3, 0.5e-3, 10e-6
CLIP_RATES = {"ViT-L-14@336": 1 / IMAGE, "ViT-B-32@224": 9000.0}


def _prompt(rows: int, length: int = 640) -> float:
    return CALL + rows * IMAGE + rows * length * TOKEN


def _measurements(folder):
    folder.mkdir()
    rank = _prompt(1, 584) + CALL + 50 * 24 * CONTINUATION
    limits = {
        "jpeg_decode_resize_per_core_per_s": 150.0,
        "cpu_count": 16,
        "clip": {f"{key} bs256": {"img_per_s": rate} for key, rate in CLIP_RATES.items()},
        "llava": {f"forward_letter bs{bs}": {"samples_per_s": bs / _prompt(bs)} for bs in (1, 2, 4)},
        "rank50": {"shared_prefix_images_per_s": 1 / rank, "naive_images_per_s": 1 / _prompt(50, 608)},
    }
    generation = {
        f"generate{new} bs{bs}": {"samples_per_s": bs / (_prompt(bs) + new * (STEP + bs * STEP_ROW))}
        for new in (4, 16)
        for bs in (1, 2)
    }
    naive = {key: {"cpu_decode_e2e_img_s": rate / 10} for key, rate in CLIP_RATES.items()}
    (folder / "clip-e2e-h200.json").write_text(json.dumps(naive))
    (folder / "gpu-limits-h200.json").write_text(json.dumps(limits))
    (folder / "gen-limits-h200.json").write_text(json.dumps(generation))
    return folder


LAUNCHES = speedcost.LaunchTimes(forward_s=2e-3, step_s=1e-3, decode_per_core=300.0)


def test_the_costs_are_fitted_back_from_the_measured_rates(tmp_path):
    h200 = speedsim.read_h200(_measurements(tmp_path / "m"), LAUNCHES)
    cost = h200.cost
    assert cost.call_s == pytest.approx(CALL)
    assert cost.image_s == pytest.approx(IMAGE)
    assert cost.prefill_token_s == pytest.approx(TOKEN)
    assert cost.step_s == pytest.approx(STEP) and cost.step_row_s == pytest.approx(STEP_ROW)
    assert cost.continuation_token_s == pytest.approx(CONTINUATION)
    assert all(value == pytest.approx(1) for value in cost.residuals.values()), cost.residuals
    assert h200.host_ratio == pytest.approx(2.0)  # this host's 300 decodes per core against 150
    assert h200.share(1e-3, 4e-3) == pytest.approx(0.5) and h200.share(1e-3, 1e-3) == 1.0


class _Ledger(speedsim.Clock):
    """A clock that records each call's seconds and launch share instead of taking them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = []

    def run(self, seconds, share=0.0):
        self.owed += seconds
        self.calls.append((seconds, share))

    launch = run


def _llava(h200, clock):
    class Real:
        config = generation_config = None

    return speedsim.llava_stand_in(Real(), clock, h200, token_id=5, vocab=16)


def _forward(model, rows, length, images=True):
    pixels = torch.zeros(rows, 3, 2, 2) if images else None
    model(input_ids=torch.zeros(rows, length, dtype=torch.long), pixel_values=pixels)


def test_each_call_is_charged_by_the_work_it_is_handed(tmp_path):
    h200 = speedsim.read_h200(_measurements(tmp_path / "m"), LAUNCHES)
    clock = _Ledger()
    model = _llava(h200, clock)

    def owed(call) -> float:
        clock.owed = 0.0
        call()
        return clock.owed

    exact = owed(lambda: _forward(model, 8, 600))
    assert exact == pytest.approx(CALL + 8 * IMAGE + 8 * 600 * TOKEN)
    # padding to a longer row costs the padded tokens; a batch split in two pays a second call
    assert owed(lambda: _forward(model, 8, 640)) - exact == pytest.approx(8 * 40 * TOKEN)
    split = owed(lambda: [_forward(model, 4, 600) for _ in range(2)])
    assert split - exact == pytest.approx(CALL)
    # a continuation: its rows x length tokens, no images
    assert owed(lambda: _forward(model, 1, 300, images=False)) == pytest.approx(CALL + 300 * CONTINUATION)
    # generate: its prompt, then one step per new token for all its rows
    ids, pixels = torch.zeros(4, 600, dtype=torch.long), torch.zeros(4, 3, 2, 2)
    clock.calls = []
    out = owed(lambda: model.generate(input_ids=ids, pixel_values=pixels, max_new_tokens=16))
    assert out == pytest.approx(_prompt(4, 600) + 16 * (STEP + 4 * STEP_ROW))
    assert len(clock.calls) == 17
    # the launch share: the launches' host time there (twice this host's) over the call's time
    step = STEP + 4 * STEP_ROW
    assert clock.calls[1][1] == pytest.approx(min(1.0, 2 * LAUNCHES.step_s / step))
    assert model.generate(input_ids=ids, pixel_values=pixels, max_new_tokens=3).shape == (4, 603)


def test_a_call_holds_the_gil_for_its_launch_share_and_sleeps_the_rest(monkeypatch):
    clock = speedsim.Clock()
    held, slept = [], []
    monkeypatch.setattr(clock._launcher, "hold", held.append)
    monkeypatch.setattr(speedsim.time, "sleep", slept.append)
    clock.run(0.2, 0.25)
    assert held == [pytest.approx(0.05)] and slept == [pytest.approx(0.15)]
    clock.launches = False
    clock.run(0.2, 0.25)
    assert held[-1] == 0.0 and slept[-1] == pytest.approx(0.2)
    clock.launches, clock.speed, clock.here_per_there = True, 0.0, 0.5
    clock.run(0.2, 0.25)  # the host alone: launches at this host's speed (twice the H200 host's), no sleep
    assert held[-1] == pytest.approx(0.025) and len(slept) == 2 and clock.owed == pytest.approx(0.6)
    assert clock.held_s == pytest.approx(0.075)


def test_the_clock_keeps_each_parts_wait_for_its_first_call_and_the_last_call(monkeypatch):
    clock = speedsim.Clock()
    clock.speed = 0.0
    monkeypatch.setattr(clock._launcher, "hold", lambda seconds: None)

    def runner(part):
        time.sleep(0.03)  # the first batch's preparation
        for seconds in part:
            clock.run(seconds)
        return []

    speedsim._run(runner, [[0.1, 0.2], [0.3]], clock=clock)
    assert 0.06 <= clock.first_s < 0.1 and clock.last_s == 0.3 and clock.owed == pytest.approx(0.6)


def test_clip_embeddings_run_on_the_device_while_the_host_goes_on_until_read_back(tmp_path, monkeypatch):
    # 4 batches of 10 images at 2.5 ms each, the clock 10x slow (25 ms a batch), no launch share: launched at
    # once, and the first read-back waits for the device's whole queue; read back one by one, each batch
    # waits for its own
    h200 = speedsim.read_h200(_measurements(tmp_path / "m"), LAUNCHES)

    class Text(torch.nn.Module):
        def encode_text(self, tokens, normalize=False):
            return torch.zeros((tokens.shape[0], 8))

    clock = speedsim.Clock()
    clock.speed = 10.0
    monkeypatch.setattr(clock._launcher, "hold", lambda seconds: None)
    clip = speedsim.clip_stand_in(Text(), clock, h200, "ViT-L-14@336")
    pixels = torch.zeros((10, 3, 2, 2))
    started = time.monotonic()
    launched = [clip.encode_image(pixels).float() for _ in range(4)]
    assert time.monotonic() - started < 0.05 and clock.owed == pytest.approx(40 * IMAGE)
    rows = [features.cpu().numpy() for features in launched]
    assert time.monotonic() - started >= 0.1 and rows[0].shape == (10, 8) and rows[0][0, 0] == 1
    started = time.monotonic()
    for _ in range(4):
        clip.encode_image(pixels).float().cpu()
    assert time.monotonic() - started >= 0.1


SLOW = 50.0  # the simulated clock's slowdown in the timed LLaVA tests: a call of 2 ms takes 100 ms


def _slow_llava(tmp_path, monkeypatch):
    """The LLaVA stand-in on a clock SLOW times slow, with no launch share; (model, clock)."""
    h200 = speedsim.read_h200(_measurements(tmp_path / "m"), LAUNCHES)
    clock = speedsim.Clock()
    clock.speed = SLOW
    monkeypatch.setattr(clock._launcher, "hold", lambda seconds: None)
    return _llava(h200, clock), clock


def _prompt_forward(model):
    return model(input_ids=torch.zeros(1, 100, dtype=torch.long), pixel_values=torch.zeros(1, 3, 2, 2))


def _continuation(model):
    return model(input_ids=torch.zeros(1, 100, dtype=torch.long), cache=torch.zeros(1))


def test_llava_forwards_run_on_the_device_while_the_host_goes_on_until_read_back(tmp_path, monkeypatch):
    # the clock 50x slow, no launch share: a prompt of one row of 100 tokens takes 100 ms, its tower 12.5 ms
    # of them, and a continuation of 100 tokens 100 ms. A prompt's forward returns once the device has run
    # what was queued before it and its tower (LLaVA's image-token check reads a count back there); a
    # continuation's at once; reading logits back waits for the queue, and a call read back at once
    # (generate's) waits for the queue before its own time
    model, clock = _slow_llava(tmp_path, monkeypatch)
    prompt, tower = SLOW * (CALL + IMAGE + 100 * TOKEN), SLOW * IMAGE
    continuation = SLOW * (CALL + 100 * CONTINUATION)
    started = time.monotonic()
    first = _prompt_forward(model)
    assert tower <= time.monotonic() - started < tower + 0.05
    options = _continuation(model)
    assert time.monotonic() - started < tower + 0.05
    second = _prompt_forward(model)
    waited = time.monotonic() - started
    assert prompt + continuation + tower <= waited < prompt + continuation + tower + 0.05
    scores = torch.log_softmax(second.logits[0, -1].float(), dim=-1)  # queued work: no wait
    assert time.monotonic() - started < waited + 0.02
    assert scores.tolist()[0] == pytest.approx(-math.log(16)) and first.logits.shape == (1, 1, 16)
    assert time.monotonic() - started >= 2 * prompt + continuation and options.logits.shape == (1, 100, 16)
    started = time.monotonic()
    _continuation(model)
    clock.run(prompt)
    assert time.monotonic() - started >= continuation + prompt


def test_a_copy_to_the_host_without_blocking_waits_for_the_calls_before_it_alone(tmp_path, monkeypatch):
    # a prompt's forward of 100 ms (the clock 50x slow), its logits copied without blocking, then a
    # continuation of 100 ms: the copy's first use waits for the prompt only, a plain read-back for both
    model, _ = _slow_llava(tmp_path, monkeypatch)
    prompt, tower = SLOW * (CALL + IMAGE + 100 * TOKEN), SLOW * IMAGE
    started = time.monotonic()
    first = _prompt_forward(model)
    copied = torch.log_softmax(first.logits[0, -1].float(), dim=-1).to("cpu", non_blocking=True)
    options = _continuation(model)
    assert time.monotonic() - started < tower + 0.05
    assert copied[:2].tolist() == pytest.approx([-math.log(16)] * 2)
    assert prompt <= time.monotonic() - started < 2 * prompt
    options.logits.tolist()
    assert time.monotonic() - started >= 2 * prompt


def test_the_launcher_spends_its_seconds_of_this_threads_cpu_in_torch_operations(monkeypatch):
    launcher = speedcost.Launcher()
    counts = []
    run_ops = launcher.run_ops
    monkeypatch.setattr(launcher, "run_ops", lambda count: (counts.append(count), run_ops(count)))
    start = time.thread_time()
    launcher.hold(0.02)
    assert time.thread_time() - start >= 0.02 and counts and set(counts) == {launcher.CHUNK}
    counts.clear()
    launcher.hold(0.0)
    assert counts == []


def test_the_prediction_takes_the_serial_and_parallel_host_time_to_the_h200s_host(tmp_path):
    h200 = speedsim.read_h200(_measurements(tmp_path / "m"), LAUNCHES)  # its host at half this one's speed
    # 4 s on one core, 2.5 s on two: 1 s serial and 3 s parallel; the serial beside the parallel, so on 16
    # cores the serial's 1 s, at half the speed
    row = speedsim.predicted(h200, 100, host1_s=4.0, host_s=2.5, cpus=2, wall_s=2.5, device_s=1.0)
    assert row["serial_s"] == pytest.approx(1.0) and row["parallel_s"] == pytest.approx(3.0)
    assert row["host16_s"] == pytest.approx(2 * 1.0)
    assert row["predicted"] == pytest.approx(100 / row["host16_s"])
    # all parallel: the whole over the 16 cores
    row = speedsim.predicted(h200, 100, host1_s=32.0, host_s=16.0, cpus=2, wall_s=16.0, device_s=1.0)
    assert row["serial_s"] == 0 and row["host16_s"] == pytest.approx(2 * 32.0 / 16)
    # device-bound: the first batch's preparation there (0.25 s here, 4x faster for that host's cores, at
    # half the speed), the device's time, and the wall beyond both here at that host's speed
    row = speedsim.predicted(
        h200, 100, host1_s=0.4, host_s=0.3, cpus=2, wall_s=5.5, device_s=5.0, first_s=0.25, first_spread=4
    )
    assert row["first16_s"] == pytest.approx(0.125) and row["unhidden_s"] == pytest.approx(0.25)
    assert row["predicted_wall_s"] == pytest.approx(0.125 + 5.0 + 2 * 0.25)
    # host-bound here and there: the host, then the last call; the run's launches held beyond the host
    # alone's are host work over this host's cores, not time unexplained
    times = {"host1_s": 4.0, "host_s": 2.5, "wall_s": 2.9, "device_s": 1.0, "last_s": 0.1}
    row = speedsim.predicted(h200, 100, cpus=2, launches_beyond_s=0.6, **times)
    assert row["unhidden_s"] == pytest.approx(0.0) and row["predicted_wall_s"] == pytest.approx(2.0 + 0.1)


def test_the_simulated_device_runs_vlmgrids_path_against_the_measured_rates(tmp_path, monkeypatch):
    monkeypatch.setattr(
        speedsim,
        "SIM_COUNTS",
        {
            **speedsim.SIM_COUNTS,
            "clip_images": 8,
            "clip_batch": 4,
            "choice_items": 4,
            "lm_batch": 2,
            "rank_queries": 1,
            "candidates": 3,
        },
    )
    monkeypatch.setattr(speedsim, "measure_launch_times", lambda: LAUNCHES)
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))  # the run points it at its own folder
    out = tmp_path / "sim.md"
    measurements = str(_measurements(tmp_path / "m"))
    argv = ["--device", "sim", "--measurements", measurements, "--generate-items", "4", "--out", str(out)]
    assert speed.main(argv) == 0
    saved = json.loads(out.with_suffix(".json").read_text())
    rows = {row["figure"]: row for row in saved["rows"]}
    assert list(rows) == ["sim clip large", "sim clip base", "sim choice", "sim generate", "sim rank"]
    # the ceiling is the stand-ins back to back: a CLIP image's cost whatever the batch
    assert rows["sim clip large"]["reference"] == pytest.approx(CLIP_RATES["ViT-L-14@336"])
    assert rows["sim clip base"]["reference"] == pytest.approx(CLIP_RATES["ViT-B-32@224"])
    for row in rows.values():
        assert 0 < row["value"] <= row["reference"], row  # the device's time is all in the wall time
        assert row["wall_s"] >= row["device_s"] > 0 and row["host_s"] > 0 and row["cpu_s"] > 0
        assert row["host1_s"] > 0 and row["predicted"] > 0
        assert row["host_cores"] == pytest.approx(row["cpu_s"] / row["wall_s"])
        assert row["cores_needed"] == pytest.approx(row["reference"] / row["per_core"])
    assert set(rows["sim generate"]["variants"]) == {"asleep", "launch-bound steps"}
    assert rows["sim generate"]["items"] == 4 and rows["sim choice"]["items"] == 4  # --generate-items
    assert rows["sim choice"]["h200_measured"] == 47.3
    # the H200's short answers were 128 items and its riddles 20 words: other workloads, shown, not compared
    other = rows["sim generate"]["h200_other_workload"]
    assert (
        other == {"figures": [21.8, 24.3], "workload": "128 items"}
        and rows["sim generate"]["workload"] == "4 items"
    )
    assert rows["sim rank"]["h200_measured_warm"] is None and "(riddles of 20 words)" in out.read_text()
    assert "for 128 items, not this run's 4 items: not compared" in out.read_text()
    for role in ("large", "base"):
        clip = rows[f"sim clip {role}"]
        assert clip["bare_per_core"] > 0 and clip["per_core_ratio"] == pytest.approx(
            clip["per_core"] / clip["bare_per_core"]
        )
    assert rows["sim clip large"]["h200_cores_needed"] == pytest.approx(CLIP_RATES["ViT-L-14@336"] / 150.0)
    text = out.read_text()
    assert text.startswith("# vlmgrid speed: simulated H200")
    assert "| predicted, 16 cores | H200 measured | predicted / measured |" in text
    assert text == speed.rendered(saved)
    assert speed.main(["--render", str(out.with_suffix(".json")), "--out", str(tmp_path / "again.md")]) == 0
    assert (tmp_path / "again.md").read_text() == text


def test_missing_measurements_are_one_sentence(tmp_path):
    with pytest.raises(
        SystemExit, match="gpu-limits-h200.json is missing: the simulated device takes its times"
    ):
        speed.main(["--device", "sim", "--measurements", str(tmp_path)])
