"""perf/speed.py's results: the goals its figures are judged by, a result row, and the Markdown table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Goal:
    """What a figure must reach: `ratio` (our figure over its reference) or `value` at least `minimum`, or
    `value` under `maximum`. Only `cpu_side` goals are judged with small shapes: the others are about real
    model sizes on a GPU."""

    figure: str
    measure: str  # "ratio" or "value"
    minimum: float | None = None
    maximum: float | None = None
    cpu_side: bool = False
    text: str = ""


GOALS = (
    Goal("clip large", "ratio", minimum=0.9, text=">= 0.9x the image tower"),
    Goal("clip base", "value", minimum=8000, text=">= 8,000 img/s"),
    Goal("clip base cached", "value", minimum=8000, text=">= 8,000 img/s"),
    Goal("generate", "ratio", minimum=0.9, text=">= 0.9x batched generate"),
    Goal("choice", "ratio", minimum=0.85, text=">= 0.85x batched forward"),
    Goal("choice vs per-sample generate", "ratio", minimum=15, text=">= 15x per-sample generate"),
    Goal("rank", "ratio", minimum=7, text=">= 7x 50 full forwards"),
    Goal("dag", "value", maximum=10, cpu_side=True, text="< 10 s"),
)


def verdict(goal: Goal | None, row: dict, shapes: str) -> str:
    """ "met", "missed", "n/a (...)" or "" (no goal) for one result row."""
    if goal is None:
        return ""
    if not goal.cpu_side and shapes != "real":
        return f"n/a ({shapes} shapes)"
    measured = row.get(goal.measure)
    if measured is None:
        return "n/a (not measured)"
    if goal.minimum is not None and measured < goal.minimum:
        return "missed"
    if goal.maximum is not None and measured >= goal.maximum:
        return "missed"
    return "met"


def result_row(
    figure: str,
    label: str,
    unit: str,
    value: float,
    reference: float | None = None,
    reference_label: str = "",
    host_cores: float | None = None,
) -> dict:
    """One line of the results: our figure, the reference measured beside it and their ratio, and the host
    cores vlmgrid's path used meanwhile (CPU seconds over wall seconds)."""
    ratio = value / reference if reference else None
    return {
        "figure": figure,
        "label": label,
        "unit": unit,
        "value": value,
        "reference": reference,
        "reference_label": reference_label,
        "ratio": ratio,
        "host_cores": host_cores,
    }


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


# Above the table, what its figures can say, by shapes; any shapes not named here are at a reduced depth.
CAVEATS = {
    "real": [],
    "small": [
        "**CPU, small shapes.** Tiny random models on the CPU: these figures check that every path runs and ",
        "show ratios between paths on this machine; they say nothing about a GPU or about real model sizes.",
    ],
}
REDUCED_DEPTH = [
    "**Reduced depth.** The shapes' widths with fewer layers in every tower and in the language model: "
    "these figures check that the path of these shapes runs; they say nothing about its speed."
]


def shapes_label(shapes: str, depth: int | None) -> str:
    return shapes if depth is None else f"depth-{depth} {shapes}"


def render_markdown(meta: dict, rows: list[dict]) -> str:
    goals = {goal.figure: goal for goal in GOALS}
    lines = [f"# vlmgrid speed: {meta['device']}, {meta['shapes']} shapes", ""]
    caveat = CAVEATS.get(meta["shapes"], REDUCED_DEPTH)
    if caveat:
        lines += [*caveat, ""]
    lines += [
        f"- {key}: {meta[key]}"
        for key in ("date", "device", "shapes", "precision", "cpus", "libraries", "command")
    ]
    lines += [
        "",
        "| figure | vlmgrid | unit | reference (same run) | reference | ratio | host cores used | goal | "
        "verdict |",
        "|---|---:|---|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        goal = goals.get(row["figure"])
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        cores = "" if row.get("host_cores") is None else f"{row['host_cores']:.2f}"  # absent in older results
        lines.append(
            f"| {row['label']} | {_number(row['value'])} | {row['unit']} | {row['reference_label']} | "
            f"{_number(row['reference'])} | {ratio} | {cores} | {goal.text if goal else ''} | "
            f"{verdict(goal, row, meta['shapes'])} |"
        )
    return _with_notes(lines, meta)


# --- the simulated device ----------------------------------------------------------------------------------

SIM_GOAL = 0.9


def sim_goal(row: dict) -> tuple[str, str]:
    """(goal, verdict) of a simulated-device row: the ceiling where this machine's cores can feed it, else the
    host's rate per core against a bare decode and resize per core (or the cores it lacks, where there is
    none)."""
    if row["cores_needed"] <= row["cpus"]:
        return f">= {SIM_GOAL}x the simulated ceiling", "met" if row["ratio"] >= SIM_GOAL else "missed"
    if "bare_per_core" in row:
        verdict = "met" if row["per_core_ratio"] >= SIM_GOAL else "missed"
        return f">= {SIM_GOAL}x bare decode + resize per core ({row['per_core_ratio']:.2f}x)", verdict
    return f">= {SIM_GOAL}x the simulated ceiling", f"host-bound: needs {row['cores_needed']:.1f} cores"


def render_sim_markdown(meta: dict, rows: list[dict]) -> str:
    lines = [
        f"# vlmgrid speed: {meta['device']}",
        "",
        "**Simulated device.** vlmgrid's own path from files on disk, every model call a stand-in that "
        "sleeps the H200's measured time for its batch (batch size over the items per second measured "
        "there) and returns outputs of the right shape. The ceiling is the stand-ins alone, back to back; "
        "*host alone* is the same run with stand-ins that take no time; the host cores used are the "
        "process's CPU seconds over its wall seconds.",
        "",
    ]
    lines += [
        f"- {key}: {meta[key]}" for key in ("date", "device", "measurements", "cpus", "libraries", "command")
    ]
    lines += [
        "",
        "| workload | vlmgrid | simulated H200 | ratio | unit | host cores used | host alone s | device s | "
        "host + device s | max(host, device) s | wall s | host per core | cores the H200 rate needs | "
        "goal | verdict |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        goal, verdict = sim_goal(row)
        lines.append(
            f"| {row['label']} | {_number(row['value'])} | {_number(row['reference'])} | "
            f"{row['ratio']:.2f}x | {row['unit']} | {row['host_cores']:.2f} | {row['host_s']:.2f} | "
            f"{row['device_s']:.2f} | {row['host_s'] + row['device_s']:.2f} | "
            f"{max(row['host_s'], row['device_s']):.2f} | {row['wall_s']:.2f} | {_number(row['per_core'])} "
            f"| {row['cores_needed']:.1f} | {goal} | {verdict} |"
        )
    return _with_notes(lines, meta)


def _with_notes(lines: list[str], meta: dict) -> str:
    """The table's lines, then the run's notes as a list, as one Markdown text."""
    notes = meta.get("notes") or []
    return "\n".join([*lines, *(["", *[f"- {note}" for note in notes]] if notes else [])]) + "\n"
