"""perf/speed.py --device sim: vlmgrid's own path against a simulated H200.

Everything is vlmgrid's real code (benchmark folders of JPEG files, the protocols' runners over parts, image
loading, open_clip's decoding threads and pixel cache, the hf processor, chat template and tokenizer, batching
and prefetching, reading the answers) except each model call, which is a stand-in: it returns outputs of the
right shape and takes the time the H200 took for that batch (batch size over the items per second measured
there, `--measurements`), sleeping, so it holds no core. Its ceiling is the stand-in alone, back to back.

Each workload runs twice: once with the stand-in taking no time (the host's own time) and once sleeping (the
run). The host cores used are the process's CPU time over its wall time. Where the H200's rate needs more
host cores than this machine has, the figure that counts is per core: items per CPU second against a bare
decode and resize of the same JPEGs in one thread.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from speedcases import NEW_TOKENS, in_parts, infer_parts, load_llava, write_llava_processor
from speedcost import (
    LETTER_PROMPT_TOKENS,
    LLAVA_LAYERS,
    DeviceCost,
    Launcher,
    LaunchTimes,
    fit_cost,
    measure_launch_times,
)
from speedfolders import RIDDLE_TOKENS, dance_folder, folder_benchmark, imagenet_folder, item_records
from speedhost import cpu_seconds, hold_to

# The tower shapes whose preprocessing (image size) the simulated CLIP runs: the towers themselves are
# stand-ins.
SIM_CLIP = {
    "large": ("ViT-L/14@336", "ViT-L-14@336", 336, 14),
    "base": ("ViT-B/32@224", "ViT-B-32@224", 224, 32),
}
# CLIP: a part of 1024 requests is 16 batches of 64: the first batch's preparation, which nothing can hide, is
# 1/16 of it; short answers: a part too, unless the run says otherwise (`generate_items`: the calibration runs
# the H200's 128). The other LLaVA counts are the H200's run's (perf/speed.py --shapes real), whose figures
# calibrate the prediction: the first batch's share of the wall is the same.
SIM_COUNTS = {
    "clip_images": 1024,
    "clip_batch": 64,
    "choice_items": 512,
    "lm_batch": 64,
    "rank_queries": 8,
    "candidates": 50,
}
# LLaVA-1.5's image processing (336 pixels, 14-pixel patches: 576 image tokens in every prompt)
LLAVA_VISION = {"vision": {"image_size": 336, "patch_size": 14}}


@dataclass(frozen=True)
class H200:
    """The H200's measured rates and what the simulated device takes from them: the cost of each call's work
    (speedcost.DeviceCost), and the launch times that set the share of a call its launching thread holds the
    GIL."""

    clip: dict  # tower key -> images/s at batch 256
    naive_clip: dict  # tower key -> images/s from JPEG files through a plain DataLoader (clip-e2e-h200.json)
    cost: DeviceCost
    launches: LaunchTimes
    decode_per_core: float  # JPEG decode + bicubic resize, one core of its host
    cores: int

    @property
    def host_ratio(self) -> float:
        """The H200 host's seconds per second of this host's (per core: the bare decode's rates)."""
        return self.launches.decode_per_core / self.decode_per_core

    def share(self, host_s: float, device_s: float) -> float:
        """The launch share of a call of `device_s` whose launches take `host_s` on this host."""
        return min(1.0, host_s * self.host_ratio / device_s) if device_s > 0 else 0.0

    @property
    def per_layer_s(self) -> float:
        """This host's launch time per transformer layer of a forward (24 vision + 32 language layers)."""
        return self.launches.forward_s / (LLAVA_LAYERS["vision"] + LLAVA_LAYERS["language"])


def read_h200(folder: Path, launches: LaunchTimes | None = None) -> H200:
    """The rates of the measurement files in `folder` (gpu-limits-h200.json, gen-limits-h200.json), with this
    host's launch times (measured unless given)."""
    names = ("gpu-limits-h200.json", "gen-limits-h200.json", "clip-e2e-h200.json")
    files = {name: folder / name for name in names}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise SystemExit(
            f"{missing[0]} is missing: the simulated device takes its times from the H200's "
            f"measurements; pass their folder with --measurements"
        )
    limits = json.loads(files["gpu-limits-h200.json"].read_text(encoding="utf-8"))
    generation = json.loads(files["gen-limits-h200.json"].read_text(encoding="utf-8"))
    clip_files = json.loads(files["clip-e2e-h200.json"].read_text(encoding="utf-8"))
    try:
        keys = [key for _, key, _, _ in SIM_CLIP.values()]
        cost = fit_cost(limits, generation, keys)
        return H200(
            clip={key: limits["clip"][f"{key} bs256"]["img_per_s"] for key in keys},
            naive_clip={key: clip_files[key]["cpu_decode_e2e_img_s"] for key in keys},
            cost=cost,
            launches=launches or measure_launch_times(),
            decode_per_core=limits["jpeg_decode_resize_per_core_per_s"],
            cores=int(limits["cpu_count"]),
        )
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise SystemExit(
            f"{folder}: the H200 measurements lack {exc}; write them again with the scripts beside them"
        ) from None


class Clock:
    """The simulated device's time: every stand-in call owes its seconds here and takes them (scaled by
    `speed`), its launch share in GIL-holding operations and the rest asleep, so that a thread holding the GIL
    meanwhile delays it as it delays a real launching thread. Calls from the prefetching thread and the main
    one take turns, as on one device. `launches` False: every call asleep. `speed` 0 runs the host alone: a
    call takes no device time, and its launches this host's time for them (`here_per_there` of the H200
    host's), the host's own work.

    It also keeps, per part (`part_started`), the time from the part's start to its first call (the first
    batch's preparation, which nothing can hide), and the last call's device seconds."""

    def __init__(self) -> None:
        self.owed = 0.0
        self.speed = 1.0
        self.launches = True
        self.here_per_there = 1.0
        self.step_share: float | None = None  # a decoding step's launch share, where not the measured one
        self.first_s = 0.0  # summed over the parts
        self.last_s = 0.0
        self.held_s = 0.0  # launch seconds held
        self._part_start: float | None = None
        self._launcher = Launcher()
        self._device = threading.Lock()
        self._busy_until = 0.0  # when the device has run every call `launch` queued

    def reset(self) -> None:
        self.owed = self.first_s = self.last_s = self.held_s = 0.0

    def part_started(self) -> None:
        self._part_start = time.perf_counter()

    def _called(self, seconds: float) -> None:
        self.owed += seconds
        self.last_s = seconds
        if self._part_start is not None:
            self.first_s += time.perf_counter() - self._part_start
            self._part_start = None

    def _held(self, seconds: float, share: float) -> float:
        held = seconds * share * (self.speed or self.here_per_there) if self.launches else 0.0
        self.held_s += held
        return held

    def run(self, seconds: float, share: float = 0.0) -> None:
        """A call whose result is read back at once: after the calls launched before it."""
        with self._device:
            self._called(seconds)
            if self.speed:
                self.wait()
            held = self._held(seconds, share)
            self._launcher.hold(held)
            if self.speed:
                time.sleep(max(0.0, seconds * self.speed - held))

    def launch(self, seconds: float, share: float = 0.0) -> None:
        """A call whose result is read back later (`wait`), as a real device's: its launch share held here,
        its time run on the device after the calls queued before it, while the caller goes on."""
        with self._device:
            self._called(seconds)
            started = time.monotonic()
            self._launcher.hold(self._held(seconds, share))
            if self.speed:
                self._busy_until = max(started, self._busy_until) + seconds * self.speed

    def wait(self) -> None:
        """A read-back: until the device has run every launched call."""
        self.wait_until(self._busy_until)

    def queued_until(self) -> float:
        """When the device will have run every call launched so far (a copy queued now is done then)."""
        return self._busy_until

    def wait_until(self, moment: float) -> None:
        remaining = moment - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)


# --- stand-ins ---------------------------------------------------------------------------------------------

# transformer layers of each CLIP tower whose launches the stand-in holds
CLIP_LAYERS = {"ViT-L-14@336": 24, "ViT-B-32@224": 12}


def on_device(clock: Clock):
    """The tensor class of a stand-in's outputs still on the simulated device: the operations on them go on
    (as a real device's are queued), and reading them back (`.cpu()`, `.tolist()`, `float()`...) waits for
    the device to have run every call launched before. A copy to the host without blocking
    (`.to("cpu", non_blocking=True)`, pinned memory on CUDA) is queued instead: the caller goes on, and the
    copy's first use waits for the calls launched before it, not for those launched after."""
    import torch

    class Copied(torch.Tensor):
        ready_at = 0.0

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            for value in args:
                if isinstance(value, Copied):
                    clock.wait_until(value.ready_at)
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    read_backs = {
        torch.Tensor.cpu,
        torch.Tensor.numpy,
        torch.Tensor.tolist,
        torch.Tensor.item,
        torch.Tensor.__float__,
        torch.Tensor.__int__,
        torch.Tensor.__bool__,
    }

    class OnDevice(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.to and (kwargs or {}).get("non_blocking"):
                with torch._C.DisableTorchFunctionSubclass():
                    copy = func(*args, **kwargs).clone().as_subclass(Copied)
                copy.ready_at = clock.queued_until()
                return copy
            if func not in read_backs:
                return super().__torch_function__(func, types, args, kwargs or {})
            clock.wait()
            result = super().__torch_function__(func, types, args, kwargs or {})
            return result.as_subclass(torch.Tensor) if isinstance(result, OnDevice) else result

    return OnDevice


def clip_stand_in(real, clock: Clock, h200: H200, key: str):
    """The open_clip model with its image tower replaced: unit embeddings that take the tower's time per image
    times the batch's images on the device, launched as a real tower's are: the caller goes on, and reading
    them back (`.cpu()`, `.numpy()`) waits for the device. The text tower stays real (the classifier is built
    before the clock starts)."""
    import torch

    image_s = h200.cost.clip_image_s[key]
    launch_s = CLIP_LAYERS[key] * h200.per_layer_s
    OnDevice = on_device(clock)

    class SimulatedClip(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.real = real
            self.width = int(real.encode_text(torch.zeros((1, 77), dtype=torch.long)).shape[-1])

        def encode_text(self, tokens, normalize=False):
            return self.real.encode_text(tokens, normalize=normalize)

        def encode_image(self, pixels, normalize=False):
            seconds = pixels.shape[0] * image_s
            clock.launch(seconds, h200.share(launch_s, seconds))
            features = torch.zeros((pixels.shape[0], self.width))
            features[:, 0] = 1
            return features.as_subclass(OnDevice)

    return SimulatedClip().eval()


def llava_stand_in(real, clock: Clock, h200: H200, token_id: int, vocab: int):
    """LLaVA with its forward and generate replaced: logits and token ids of the right shapes after the H200's
    time for the work in the call's shapes. A forward with pixels is a prompt (letters, a ranking prefix): its
    rows x padded length tokens and its images; one without continues a ranking prefix: its rows x length
    tokens (options packed in one row, or one a row with their padding); generate is its prompt's forward and
    then a decoding step per new token for all its rows, and emits `token_id`. A prompt's forward waits for
    the device between its vision tower and its language model, as LLaVA's does in transformers."""
    import torch
    from transformers.modeling_outputs import CausalLMOutputWithPast

    cost, launches = h200.cost, h200.launches
    OnDevice = on_device(clock)

    class SimulatedLlava(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config, self.generation_config = real.config, real.generation_config

        @property
        def device(self):
            return torch.device("cpu")

        def forward(self, input_ids=None, pixel_values=None, use_cache=False, cache=None, **kwargs):
            # launched as a real forward is: the caller goes on, and reading its logits back waits
            rows, length = input_ids.shape
            if pixel_values is not None:
                # LLaVA's forward reads the image-token count back once its vision tower is queued
                # (transformers' placeholder check formats the count into its message): the tower is
                # launched, the caller waits for the device, and then the language model is launched
                seconds = cost.prompt(rows, length, pixel_values.shape[0])
                tower = pixel_values.shape[0] * cost.image_s
                clock.launch(tower, h200.share(LLAVA_LAYERS["vision"] * h200.per_layer_s, tower))
                clock.wait()
                language = seconds - tower
                clock.launch(language, h200.share(LLAVA_LAYERS["language"] * h200.per_layer_s, language))
            else:
                seconds = cost.continuation(rows, length)
                clock.launch(seconds, h200.share(launches.step_s, seconds))
            kept = 1 if cache is None else length  # a prompt's last position; every continued token
            logits = torch.zeros((rows, kept, vocab)).as_subclass(OnDevice)
            return CausalLMOutputWithPast(logits=logits, cache=torch.zeros(1) if use_cache else None)

        def generate(self, input_ids=None, pixel_values=None, max_new_tokens=NEW_TOKENS, **kwargs):
            rows, length = input_ids.shape
            images = 0 if pixel_values is None else pixel_values.shape[0]
            prompt = cost.prompt(rows, length, images)
            clock.run(prompt, h200.share(launches.forward_s, prompt))
            step = cost.step(rows)
            share = h200.share(launches.step_s, step) if clock.step_share is None else clock.step_share
            for _ in range(max_new_tokens):  # min_new_tokens is set: every row runs them all
                clock.run(step, share)
            return torch.cat([input_ids, torch.full((rows, max_new_tokens), token_id)], dim=1)

    return SimulatedLlava().eval()


# --- measuring ---------------------------------------------------------------------------------------------

# What the H200 measured for each workload (perf/results/speed-h200.md, 2026-12-04; the warm runs of
# speed-h200-ab.md where that run's figure lay below them): the figures the prediction is calibrated on, and
# the workload they are of where a run's may differ (a row of another workload is not compared with them).
H200_MEASURED = {
    "sim clip large": (459.0, None, None),
    "sim clip base": (864.0, None, None),
    "sim choice": (47.3, None, None),
    "sim generate": (21.8, 24.3, "128 items"),
    "sim rank": (3.28, 5.9, "riddles of 20 words"),
}
CALIBRATED = 0.15  # a prediction within 15% of what the H200 measured
HOST_REPEATS = 3


def _run(runner, parts: list, before=None, clock: Clock | None = None) -> tuple[float, float, float]:
    """(wall s, CPU s of the process and its workers, CPU s of this thread) of the runner over the parts;
    `clock`: told where each part starts."""
    if before is not None:
        before()
    if clock is not None:
        clock.reset()
        runner = _marking_parts(runner, clock)
    wall, cpu, thread = time.perf_counter(), cpu_seconds(), time.thread_time()
    in_parts(runner, parts)
    return time.perf_counter() - wall, cpu_seconds() - cpu, time.thread_time() - thread


def _marking_parts(runner, clock: Clock):
    def run(part):
        clock.part_started()
        return runner(part)

    return run


def _owing(clock: Clock, runner, parts: list, before=None) -> tuple[float, float, float, float, float, float]:
    """(wall s, CPU s, the device's s, the parts' first calls' waits s, the last call's s, the launches held
    s) of the runner over the parts against the stand-ins."""
    wall_s, cpu_s, _ = _run(runner, parts, before, clock)
    return wall_s, cpu_s, clock.owed, clock.first_s, clock.last_s, clock.held_s


def _on_one_core(runner, parts: list, before=None) -> float:
    """The runner's wall seconds with the process and its workers on one core."""
    cores = os.sched_getaffinity(0)
    hold_to({min(cores)})
    try:
        return _run(runner, parts, before)[0]
    finally:
        hold_to(cores)


def predicted(
    h200: H200,
    n: int,
    host1_s: float,
    host_s: float,
    cpus: int,
    wall_s: float,
    device_s: float,
    serial_s: float = 0.0,
    first_s: float = 0.0,
    last_s: float = 0.0,
    first_spread: float = 1.0,
    launches_beyond_s: float = 0.0,
) -> dict:
    """The rate on the H200's host, from this host's measures.

    The host's work (launches included) there: its serial and parallel time at that host's per-core speed.
    The serial time is the larger of Amdahl's line through this host's host alone on one core and on `cpus`,
    and `serial_s` (the main thread's CPU time: one thread's work never spreads over cores). The serial work
    runs beside the parallel (the thread feeding the device, while workers decode or threads open images), so
    the host takes the larger of the serial time and the whole over that host's cores.

    The run there: the first batch's preparation (`first_s` here, at that host's speed and `first_spread`
    times faster for its cores: a batch decoded in chunks over them), then the device's time; or, where the
    host is slower, its time and then the last call (`last_s`). Plus what this run's wall time has beyond
    both of those here, at that host's speed: launches the GIL delayed. The run's launches, held for the
    H200 host's time, hold `launches_beyond_s` more CPU than the host alone's: where the host is the slower
    here, that is host work over this host's cores, not a delay."""
    parallel = max(0.0, (host1_s - host_s) * cpus / (cpus - 1)) if cpus > 1 else 0.0
    serial = min(max(host1_s - parallel, serial_s), host1_s)
    parallel = host1_s - serial
    ratio = h200.host_ratio
    host16 = ratio * max(serial, host1_s / h200.cores)
    first16 = ratio * first_s / first_spread
    explained = max(first_s + device_s, host_s + launches_beyond_s / cpus + last_s)
    unhidden = max(0.0, wall_s - explained)
    wall16 = max(first16 + device_s, host16 + last_s) + ratio * unhidden
    return {
        "serial_s": serial,
        "parallel_s": parallel,
        "host16_s": host16,
        "first_s": first_s,
        "first16_s": first16,
        "last_s": last_s,
        "unhidden_s": unhidden,
        "predicted_wall_s": wall16,
        "predicted": n / wall16,
    }


def measured(
    figure: str,
    label: str,
    unit: str,
    n: int,
    runner,
    parts: list,
    clock: Clock,
    h200: H200,
    cpus: int,
    before=None,
    variants: dict | None = None,
    goal_reference: float | None = None,
    first_spread: float = 1.0,
    goal_figure: str | None = None,
    workload: str | None = None,
) -> dict:
    """One row: the runner's rate against the stand-ins, against the stand-ins alone back to back, with the
    host's own time (the stand-ins taking none) on one core and on all, the host cores used and needed, and
    the rate predicted on the H200's host. `variants`: once more for each, with
    the clock's attributes it names set.
    `goal_reference`: the rate the goal's ratio is taken against (default: the ceiling); `goal_figure`: the
    measured figure whose goal judges the prediction (default: the one the row simulates); `workload`: what
    the row runs, where H200_MEASURED names the workload of its figures. `first_spread`: how
    many times faster the H200's host prepares a first batch than this one at the same speed per core
    (`predicted`)."""
    clock.speed, clock.here_per_there = 0.0, 1 / h200.host_ratio
    # the best of three runs each (host alone on all cores and on one, against the stand-ins): the first also
    # warms what the runner's warm-up left cold, and the prediction rests on their differences
    host_s, host_cpu, main_s = min(_run(runner, parts, before, clock) for _ in range(HOST_REPEATS))
    held_here = clock.held_s
    host1_s = min(_on_one_core(runner, parts, before) for _ in range(HOST_REPEATS))
    clock.speed = 1.0
    wall_s, cpu_s, device_s, first_s, last_s, held_there = min(
        _owing(clock, runner, parts, before) for _ in range(HOST_REPEATS)
    )
    beyond = held_there - held_here
    shape = (device_s, main_s, first_s, last_s, first_spread, beyond)
    ceiling = n / device_s
    per_core = n / cpu_s
    row = {
        "figure": figure,
        "label": label,
        "unit": unit,
        "value": n / wall_s,
        "reference": ceiling,
        "reference_label": "simulated H200",
        "ratio": n / wall_s / ceiling,
        "items": n,
        "host1_s": host1_s,
        "host_s": host_s,
        "host_cpu_s": host_cpu,
        "device_s": device_s,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "host_cores": cpu_s / wall_s,
        "per_core": per_core,
        "cores_needed": ceiling / per_core,
        "cpus": cpus,
        "main_s": main_s,
        "launches_beyond_s": beyond,
        **predicted(h200, n, host1_s, host_s, cpus, wall_s, *shape),
    }
    row["variants"] = {}
    for name, settings in (variants or {}).items():
        saved = {key: getattr(clock, key) for key in settings}
        for key, value in settings.items():
            setattr(clock, key, value)
        try:
            variant_s = _run(runner, parts, before)[0]
        finally:
            for key, value in saved.items():
                setattr(clock, key, value)
        row["variants"][name] = {
            "wall_s": variant_s,
            "predicted": predicted(h200, n, host1_s, host_s, cpus, variant_s, *shape)["predicted"],
        }
    measured_there, warm, there_workload = H200_MEASURED.get(figure, (None, None, None))
    row["workload"] = workload
    if there_workload not in (None, workload):
        row["h200_other_workload"] = {"figures": [measured_there, warm], "workload": there_workload}
        measured_there = warm = None
    row.update(
        h200_measured=measured_there,
        h200_measured_warm=warm,
        goal_reference=goal_reference or ceiling,
        goal_figure=goal_figure or figure.removeprefix("sim "),
    )
    return row


def calibration(row: dict) -> tuple[str, bool]:
    """The prediction against what the H200 measured: the text, and whether it is within CALIBRATED of the
    run's figure or of the warm runs' one."""
    figures = [value for value in (row["h200_measured"], row["h200_measured_warm"]) if value]
    if not figures:
        return "", False
    parts = [f"{row['predicted'] / value:.2f}x of {_number(value)}" for value in figures]
    return ", ".join(parts), any(abs(row["predicted"] / value - 1) <= CALIBRATED for value in figures)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def bare_decode_per_core(bench, preprocess, n: int) -> float:
    """JPEG decode + the preprocessing's resize and crop, one image after another in this thread: images per
    CPU second (the H200 host's `jpeg_decode_resize_per_core_per_s`, measured here)."""
    from torchvision.transforms import ToTensor

    from vlmgrid.images import open_rgb

    steps = list(preprocess.transforms)
    geometric = steps[: next(i for i, step in enumerate(steps) if isinstance(step, ToTensor))]
    paths = [bench.root / name for name in bench.records["image"].iloc[:n]]
    open_rgb(paths[0])  # warm: the decoder's first call
    start = time.process_time()
    for path in paths:
        image = open_rgb(path)
        for step in geometric:
            image = step(image)
    return len(paths) / (time.process_time() - start)


# The goal each CLIP row's prediction is judged by (perf/speedreport.py's GOALS) and the rate it is taken
# against: ViT-L/14@336's tower is the slower, the device sets the pace, and the goal is the tower's;
# ViT-B/32's 28,000 images a second need ~190 of its host's cores decoding (GPU decoding measured 4,052), so
# the files' decoding sets the pace and the goal is to beat the plain DataLoader measured there
CLIP_GOALS = {
    "large": lambda h200, key: {},
    "base": lambda h200, key: {"goal_figure": "clip base vs naive", "goal_reference": h200.naive_clip[key]},
}


def _clip_files():
    """vlmgrid.models.clip_files, or None in sources from before the decoding workers (the calibration runs
    this script on the sources the H200 measured)."""
    try:
        from vlmgrid.models import clip_files
    except ImportError:
        return None
    return clip_files


def clip_first_spread(h200: H200, part: int, batch_size: int) -> float:
    """How many times faster the H200's host decodes a part's first batch than this host at the same speed per
    core: its workers each decode a chunk of it (clip_files.chunk_size), smaller over more workers."""
    clip_files = _clip_files()
    here = clip_files.worker_count("auto", part) if clip_files else 0
    if here == 0:
        return 1.0  # threads of this process, there too
    there = min(h200.cores, clip_files.MAX_AUTO_WORKERS)
    return clip_files.chunk_size(batch_size, here) / clip_files.chunk_size(batch_size, there)


def clip_rows(h200: H200, work: Path, part_size: int, cpus: int) -> list[dict]:
    from vlmgrid.cache import cache_root
    from vlmgrid.fixtures.models.tiny_open_clip import write_tiny_open_clip
    from vlmgrid.models import BACKENDS
    from vlmgrid.pixel_cache import PIXELS_DIR
    from vlmgrid.protocols.classification import embed_strategy

    bench = imagenet_folder(SIM_COUNTS["clip_images"], work)
    n = len(bench.records)
    rows = []
    for role, (label, key, size, patch) in SIM_CLIP.items():
        model_cfg = {
            "embed_dim": 64,
            "vision_cfg": {
                "image_size": size,
                "layers": 1,
                "width": 64,
                "patch_size": patch,
                "head_width": 32,
            },
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1},
        }
        model_dir = work / f"clip-{role}"
        model_dir.mkdir()
        write_tiny_open_clip(model_dir, seed=0, model_cfg=model_cfg)
        settings = {
            "backend": "open_clip",
            "source": {"type": "fixture"},
            "batch_size": SIM_COUNTS["clip_batch"],
            "precision": "fp32",
        }
        model = BACKENDS.get("open_clip").load(settings, model_dir, "cpu")
        runner = embed_strategy(model, bench)  # the classifier, from the real text tower
        clock = Clock()
        model.model = clip_stand_in(model.model, clock, h200, key)
        # the device's tensors are shapes only: its own work (normalising the pixels) costs the host nothing
        model.device = "meta"
        cold = lambda: shutil.rmtree(cache_root() / PIXELS_DIR, ignore_errors=True)  # noqa: E731
        clock.speed = 0.0
        # warm: the decoding workers started (as by a part before), the first batch's allocations
        runner(bench.records.iloc[: getattr(_clip_files(), "IN_PROCESS_BELOW", 4)])
        row = measured(
            f"sim clip {role}",
            f"CLIP {label} zero-shot from JPEG files",
            "img/s",
            n,
            runner,
            infer_parts(bench, settings, part_size),
            clock,
            h200,
            cpus,
            before=cold,
            first_spread=clip_first_spread(h200, min(n, part_size), SIM_COUNTS["clip_batch"]),
            **CLIP_GOALS[role](h200, key),
        )
        bare = bare_decode_per_core(bench, model.preprocess, min(n, 256))
        row.update(
            bare_per_core=bare,
            per_core_ratio=row["per_core"] / bare,
            key=key,
            h200_cores_needed=h200.clip[key] / h200.decode_per_core,
        )
        rows.append(row)
    return rows


def llava_rows(h200: H200, work: Path, part_size: int, cpus: int, generate_items: int) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    from vlmgrid.fixtures.models.tiny_hf import write_tiny_checkpoint
    from vlmgrid.protocols.choice import multiple_choice_option_strategy
    from vlmgrid.protocols.ranking import likelihood_strategy
    from vlmgrid.protocols.short_answer import generate_strategy

    model_dir = work / "llava"
    write_tiny_checkpoint("llava", model_dir, seed=0)
    write_llava_processor(LLAVA_VISION, model_dir)
    bs = SIM_COUNTS["lm_batch"]
    backend = load_llava({"precision": "fp32"}, "cpu", model_dir, bs)
    clock = Clock()
    token_id = backend.tokenizer.encode("cat", add_special_tokens=False)[0]
    backend.model = llava_stand_in(backend.model, clock, h200, token_id, len(backend.tokenizer))
    backend._prefetch = ThreadPoolExecutor(
        max_workers=1
    )  # as on an accelerator: the next batch prepared ahead
    choice = folder_benchmark(
        "scienceqa_img",
        work / "scienceqa",
        item_records(SIM_COUNTS["choice_items"], work / "scienceqa", "choice"),
    )
    vqa = folder_benchmark("textvqa", work / "textvqa", item_records(generate_items, work / "textvqa", "vqa"))
    dance = dance_folder(SIM_COUNTS["rank_queries"], SIM_COUNTS["candidates"], work, backend.tokenizer)
    cases = [
        (
            "sim choice",
            f"LLaVA-1.5-7B letter multiple choice, batch {bs}",
            "samples/s",
            choice,
            multiple_choice_option_strategy,
            None,
        ),
        (
            "sim generate",
            f"LLaVA-1.5-7B short answers, {NEW_TOKENS} new tokens, batch {bs}",
            "samples/s",
            vqa,
            generate_strategy,
            f"{generate_items} items",
        ),
        (
            "sim rank",
            f"LLaVA-1.5-7B DANCE ranking, {SIM_COUNTS['candidates']} riddles per picture",
            "pictures/s",
            dance,
            likelihood_strategy,
            f"riddles of {RIDDLE_TOKENS} tokens",
        ),
    ]
    rows = []
    for figure, label, unit, bench, strategy, workload in cases:
        runner = strategy(backend, bench)
        clock.speed = 0.0
        runner(bench.records.iloc[:2])  # warm: the tokenizer's and processor's first calls
        row = measured(
            figure,
            label,
            unit,
            len(bench.records),
            runner,
            infer_parts(bench, backend.settings, part_size),
            clock,
            h200,
            cpus,
            variants=generate_variants(h200) if figure == "sim generate" else None,
            goal_reference=naive_rank_rate(backend, bench, h200) if figure == "sim rank" else None,
            workload=workload,
        )
        rows.append({**row, "batches": -(-len(bench.records) // bs)})
    backend._prefetch.shutdown()
    return rows


def naive_rank_rate(backend, bench, h200: H200) -> float:
    """Pictures per second of the ranking's reference on the simulated device: the first picture's riddles as
    full forwards of picture + prompt + riddle in batches (perf/speed.py's rank section), at the costs of
    their shapes."""
    from vlmgrid.images import open_rgb
    from vlmgrid.model_requests import OptionRequest
    from vlmgrid.protocols.ranking import ranking_prompt

    prompt, picture = ranking_prompt(), open_rgb(bench.root / bench.records["image"].iloc[0])
    full = [
        OptionRequest(f"r{j}", picture, prompt + " " + riddle, ["x"], ["A"])
        for j, riddle in enumerate(bench.records["options"].iloc[0])
    ]
    bs, seconds = SIM_COUNTS["lm_batch"], 0.0
    for start in range(0, len(full), bs):
        rows, length = backend._encode(full[start : start + bs])["input_ids"].shape
        seconds += h200.cost.prompt(rows, length, rows)
    return 1 / seconds


def generate_variants(h200: H200) -> dict:
    """The short answers run again: every call asleep (no GIL-holding launches at all), and every decoding
    step launch-bound (its launch share all of it beyond the device's memory floor)."""
    rows = SIM_COUNTS["lm_batch"]
    bound = h200.cost.unbound_step_share(rows, LETTER_PROMPT_TOKENS + NEW_TOKENS // 2)
    return {"asleep": {"launches": False}, "launch-bound steps": {"step_share": bound}}


def sim_rows(
    h200: H200, work: Path, part_size: int, cpus: int, generate_items: int | None = None
) -> list[dict]:
    """Every workload's row; `generate_items`: the short answers' count (default: a part)."""
    llava = llava_rows(h200, work / "llava", part_size, cpus, generate_items or part_size)
    return clip_rows(h200, work / "clip", part_size, cpus) + llava


def sim_notes(rows: list[dict], h200: H200, meta: dict, part_size: int) -> list[str]:
    """What the table's figures rest on, below it."""
    cost, launches, ratio = h200.cost, h200.launches, h200.host_ratio
    fits = ", ".join(f"{key} {value:.2f}x" for key, value in cost.residuals.items())
    bs = SIM_COUNTS["lm_batch"]
    shares = {
        "a prompt at batch 1": h200.share(launches.forward_s, cost.prompt(1, 640, 1)),
        f"a prompt at batch {bs}": h200.share(launches.forward_s, cost.prompt(bs, 640, bs)),
        f"a decoding step at batch {bs}": h200.share(launches.step_s, cost.step(bs)),
        "a ranking's 50 continuations": h200.share(launches.step_s, cost.continuation(1, 1200)),
        f"ViT-L/14@336 at batch {SIM_COUNTS['clip_batch']}": h200.share(
            CLIP_LAYERS["ViT-L-14@336"] * h200.per_layer_s,
            SIM_COUNTS["clip_batch"] * cost.clip_image_s["ViT-L-14@336"],
        ),
        f"ViT-B/32@224 at batch {SIM_COUNTS['clip_batch']}": h200.share(
            CLIP_LAYERS["ViT-B-32@224"] * h200.per_layer_s,
            SIM_COUNTS["clip_batch"] * cost.clip_image_s["ViT-B-32@224"],
        ),
    }
    notes = [
        f"the device's costs, fitted to the H200's measurements: a forward call {cost.call_s * 1e3:.1f} ms, "
        f"an image through the vision tower {cost.image_s * 1e3:.2f} ms, a prompt token (rows x padded "
        f"length) {cost.prefill_token_s * 1e6:.1f} us, a continuation token "
        f"{cost.continuation_token_s * 1e6:.1f} us, a decoding step {cost.step_s * 1e3:.1f} ms + "
        f"{cost.step_row_s * 1e3:.3f} ms per row; a CLIP "
        + ", ".join(f"{key} image {s * 1e3:.3f} ms" for key, s in cost.clip_image_s.items())
        + f"; fitted over measured: {fits} (50 full forwards not fitted: a check)",
        f"launches: this host's LLaVA of 24 vision and 32 language layers at tiny widths takes "
        f"{launches.forward_s * 1e3:.1f} ms of host time a forward and {launches.step_s * 1e3:.2f} ms a "
        f"decoding step; this host decodes + resizes {launches.decode_per_core:.0f} JPEGs per core per s "
        f"against the H200 host's {h200.decode_per_core:.1f} ({ratio:.2f}x), so "
        f"{launches.forward_s * ratio * 1e3:.1f} ms and {launches.step_s * ratio * 1e3:.1f} ms there; the "
        f"launch share (GIL-holding tiny torch operations, the rest asleep) of "
        + ", ".join(f"{what} {share:.2f}" for what, share in shares.items()),
        f"predicted, {h200.cores} cores: each workload's host alone (its launches at this host's speed) on "
        f"one core and on {meta['cpus']} gives its serial and parallel seconds (Amdahl's line; the serial "
        f"ones at least the main thread's CPU seconds); on the H200's host they take {ratio:.2f}x as long "
        f"(the decode + resize per core), and the host takes the larger of the serial seconds and all of "
        f"them over {h200.cores} cores (the thread feeding the device runs beside the decoding workers and "
        f"the image threads); the run there is the first batch's preparation (each part's wait for its "
        f"first call here, times {ratio:.2f}, over a CLIP batch's chunks there: "
        f"{SIM_COUNTS['clip_batch']} files split over {min(h200.cores, 32)} workers against {meta['cpus']} "
        f"here) and then the device's seconds, or the host's and then the last call where the host is the "
        f"slower; plus this run's wall time beyond both of those here (launches the GIL delayed; the "
        f"run's launches, held for the H200 host's time, hold more CPU than the host alone's, which counts "
        f"as host work over this host's cores) times {ratio:.2f}",
    ]
    for row in rows:
        other = row.get("h200_other_workload")
        if other:
            figures = ", ".join(_number(value) for value in other["figures"] if value)
            notes.append(
                f"{row['label']}: the H200 measured {figures} {row['unit']} for {other['workload']}, not "
                f"this run's {row['workload']}: not compared (the calibration runs the H200's workloads)"
            )
        text, within = calibration(row)
        if text:
            notes.append(
                f"{row['label']}: predicted {_number(row['predicted'])} {row['unit']} on {h200.cores} cores, "
                f"{text} measured on the H200: "
                + ("within" if within else "outside")
                + f" {CALIBRATED:.0%}; serial {row['serial_s']:.2f} s and parallel {row['parallel_s']:.2f} s "
                f"of host here, {row['host16_s']:.2f} s there on {h200.cores} cores, the first batch "
                f"{row['first_s']:.2f} s here and {row['first16_s']:.2f} s there, device "
                f"{row['device_s']:.2f} s, {row['unhidden_s']:.2f} s unhidden here"
                + ("" if within else _outside(row))
            )
        if row["variants"]:
            runs = [("as measured", row["wall_s"], row["predicted"])] + [
                (name, variant["wall_s"], variant["predicted"]) for name, variant in row["variants"].items()
            ]
            notes.append(
                f"{row['label']}, against transformers' generate at batch {bs} on the same inputs (the "
                f"device alone: {_number(row['reference'])} {row['unit']}), with each decoding step's launch "
                "share "
                + "; ".join(
                    f"{name}: the run {wall:.2f} s, predicted {_number(rate)} {row['unit']} on "
                    f"{h200.cores} cores, {rate / row['reference']:.2f}x"
                    for name, wall, rate in runs
                )
                + f" (launch-bound: a step's share {_bound_share(h200):.2f})"
            )
    for row in rows:
        if "bare_per_core" in row:
            notes.append(
                f"{row['label']}: the H200's {_rate(h200.clip[row['key']])} img/s need "
                f"{row['h200_cores_needed']:.1f} host cores at its host's {h200.decode_per_core:.1f} decodes "
                f"+ resizes per core per s ({h200.cores} there); vlmgrid's path here decodes "
                f"{row['per_core']:.1f} img per CPU second, a bare decode + resize in one thread "
                f"{row['bare_per_core']:.1f} ({row['per_core_ratio']:.2f}x)"
            )
    notes += [overlap_note(row) for row in rows]
    notes += [
        f"{len(rows)} workloads, runners called in parts of at most {part_size} model requests, as "
        f"`vlmgrid infer` cuts them; the whole run took {meta['seconds']} s",
        f"load average (1 min) at the start {meta['load'][0]:.1f}, at the end {meta['load'][1]:.1f}, on "
        f"{meta['cpus']} CPUs: a load above the CPU count means other work shared them",
    ]
    return notes


def _outside(row: dict) -> str:
    """Why a prediction can lie outside what the H200 measured."""
    if "bare_per_core" in row:
        return (
            "; the H200's figure is of decoding threads in one process (3.78 of its 16 cores used for "
            "ViT-L/14@336, 5.40 for ViT-B/32, speed-h200.md), which contend for the GIL past a few cores: a "
            "ceiling a line through this host's 1 and 2 cores does not see, and one that run-to-run noise in "
            "that line moves by 15% or more"
        )
    return ""


def _bound_share(h200: H200) -> float:
    return generate_variants(h200)["launch-bound steps"]["step_share"]


def overlap_note(row: dict) -> str:
    """How much of a row's host time the device hid, and where the rest went."""
    hidden = row["host_s"] + row["device_s"] - row["wall_s"]
    return (
        f"{row['label']}: wall {row['wall_s']:.2f} s against host + device "
        f"{row['host_s'] + row['device_s']:.2f} s and max(host, device) "
        f"{max(row['host_s'], row['device_s']):.2f} s: {hidden:.2f} s overlapped, of at most "
        f"{min(row['host_s'], row['device_s']):.2f} s" + _unhidden(row)
    )


def _unhidden(row: dict) -> str:
    """Where an LLaVA row's host time that the device did not hide went."""
    if "batches" not in row:
        return ""
    if row["figure"] == "sim rank":
        return (
            f"; {row['wall_s'] - row['device_s']:.2f} s of the wall is host time the device did not hide: "
            f"the first call's wait ({row['first_s']:.2f} s) and the last picture's scores read back; each "
            "other picture's are read once the next picture's prefix and riddles are launched"
        )
    return (
        f"; {row['wall_s'] - row['device_s']:.2f} s of the wall is host time the device did not hide: the "
        f"first of its {row['batches']} batches' images and inputs ({row['first_s']:.2f} s before the "
        "first call), which nothing can run beside; the part's other images are opened while the batches run"
    )


def _rate(value: float) -> str:
    return f"{value:,.0f}"
