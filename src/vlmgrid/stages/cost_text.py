"""The cost plan as `vlmgrid plan` prints it: per model its cells' units of work, per benchmark the MDD it
allows, the totals, and what the estimate assumes, every line at most WIDTH characters (the CSV, every
column).

The numbers are vlmgrid.stages.cost's; this module only lays them out.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from vlmgrid import fileio
from vlmgrid.config import Config
from vlmgrid.report.labels import counted
from vlmgrid.stages.cost import ASSUMED_DISCORDANCE, cost_table, load_throughput, totals

ASSUMPTIONS = (
    "Assumes: each inference job holds its model's gpus for its time at the throughput table's rates "
    "(measured on one H200 where the table says so; LVLM rates scale by 7B / parameters; a model served by "
    "its job at the hf rates); {tokens} new tokens per generated answer unless the prompt set asks for more; "
    "an API request of {input_tokens} input tokens unless the model's price says otherwise; items from the "
    "prepared data, a generated fixture or the published count. A total leaves out the rows without a count, "
    "an estimate or a price, and says how many."
)

WIDTH = 100  # the printed plan's lines fit a terminal this wide; `--csv` holds every column
_BENCH_WIDTH = 24
_HEADER = ("benchmark", "unit", "items", "shape", "requests", "GPU-h", "USD", "note")


def _number(value, digits: str = ",.0f") -> str:
    return "unknown" if pd.isna(value) else format(value, digits)


def _fit(text: str, width: int) -> str:
    """The text cut to `width` characters, the cut marked by an ellipsis."""
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _model_heading(costs: pd.DataFrame) -> str:
    """What a model's rows share: its size class or why it has no GPU-hours."""
    notes = [str(n) for n in costs["note"].dropna() if not str(n).startswith("n/a")]
    shared = [n for n in notes if n.startswith(("size ", "API model", "runs on the CPU"))]
    return shared[0].split(";")[0] if shared else ""


def _row_note(note) -> str:
    """The part of a row's note its model's heading does not say already."""
    if pd.isna(note):
        return ""
    text = str(note)
    if text.startswith(("size ", "API model", "runs on the CPU")):
        return text.split("; ", 1)[1] if "; " in text else ""
    return text


def _wrapped(text: str, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


MDD_NOTE = (
    "MDD: the smallest true difference between two models' headlines (points) that a paired test, two-sided "
    "at 5%, finds with 80% power: {z:.2f} x sqrt({d:g} / units) x 100, assuming two models disagree on "
    "{d:.0%} of the units (one right, the other wrong). Two models closer than that are not told apart by "
    "the benchmark, whatever they are. It scales with the square root of the disagreement (10%: 0.71 x; 50%: "
    "1.58 x), and takes the headline for the mean of its units' scores (a guide where it is not: a mean over "
    "strata, MME's acc + acc+, POPE's F1); `vlmgrid compare` gives each pair its own, from its answers."
)


LIKELIHOOD_NOTE = (
    "Option likelihood (each option scored, the likeliest taken) is the grid's default for an LVLM without a "
    "recipe on yes/no and multiple choice; LLaVA-1.5's paper generated a short answer greedily and parsed "
    "it. A model's recipe (`recipe: llava-1.5`) answers as its authors did: "
    "config/examples/llava-1.5-method.yaml."
)


def _recipe_lines(costs: pd.DataFrame) -> list[str]:
    """The model's recipe (what its authors' evaluation fixed), and any departure from it."""
    recipes = costs["recipe"].dropna().unique() if "recipe" in costs else []
    return _wrapped(f"  recipe {recipes[0]}", "    ") if len(recipes) else []


def _method_lines(costs: pd.DataFrame) -> list[str]:
    """How one model answers its cells, by method: the benchmarks named where a method has three or fewer."""
    cells = costs[costs["strategy"] != "n/a"].drop_duplicates("benchmark")
    parts = []
    for method, benchmarks in cells.groupby("method", sort=False)["benchmark"]:
        names = list(benchmarks)
        parts.append(
            f"{method} ({', '.join(names) if len(names) <= 3 else counted(len(names), 'benchmark')})"
        )
    return _wrapped("  answers by " + "; ".join(parts), "    ") if parts else []


def _mdd_lines(costs: pd.DataFrame) -> list[str]:
    """Per benchmark: its scoring units and the MDD they allow (planned_mdd), then what the figure assumes."""
    from vlmgrid.metrics.power import z_sum

    lines = ["what each benchmark can tell (MDD):"]
    for benchmark, row in costs.drop_duplicates("benchmark").set_index("benchmark").iterrows():
        if pd.isna(row["scoring_units"]):
            units = "units unknown: prepare it to count them"
        elif row["scoring_unit"] == "item":
            units = f"{row['scoring_units']:,} items"
        else:
            units = f"{row['scoring_units']:,} {row['scoring_unit']} groups of {row['items']:,} items"
        mdd = "unknown" if pd.isna(row["mdd"]) else f"{row['mdd']:.1f} points"
        lines.append(
            f"  {_fit(str(benchmark), _BENCH_WIDTH):<{_BENCH_WIDTH}} {_fit(units, 44):<44} MDD {mdd}"
        )
    return lines + _wrapped(MDD_NOTE.format(z=z_sum(), d=ASSUMED_DISCORDANCE))


def render(costs: pd.DataFrame, table: dict | None = None) -> str:
    """`vlmgrid plan`: per model its cells' units of work (a note's number points to the notes under the
    table), per benchmark the MDD its scoring units allow, the totals per model and for the grid with the rows
    each leaves out, and what the estimate assumes; every line at most WIDTH characters (the CSV has the full
    detail)."""
    table = table or load_throughput()
    notes: dict[str, int] = {}
    lines = []
    row_format = "  {:<" + str(_BENCH_WIDTH) + "} {:<12} {:>7} {:>8} {:>11} {:>8} {:>9} {:>5}"
    lines.append(row_format.format(*_HEADER))
    api_models = set(costs.loc[costs["input_tokens"].notna(), "model"])
    for model, frame in costs.groupby("model", sort=False):
        heading = _model_heading(frame)
        lines.append(_fit(f"{model}" + (f" ({heading})" if heading else ""), WIDTH))
        lines += _recipe_lines(frame)
        lines += _method_lines(frame)
        for _, row in frame.iterrows():
            na = row["strategy"] == "n/a"
            shape = (
                ""
                if na or pd.isna(row["variants"])
                else (
                    f"{row['variants']}x"
                    + (
                        "?"
                        if pd.isna(row["candidates"])
                        else f"{row['candidates']:.0f}"
                        if float(row["candidates"]).is_integer()
                        else f"{row['candidates']:.1f}"
                    )
                )
            )
            note = _row_note(row["note"])
            mark = f"[{notes.setdefault(note, len(notes) + 1)}]" if note else ""
            usd = "-" if model not in api_models or na else _number(row["cost_usd"], ",.2f")
            lines.append(
                row_format.format(
                    _fit(str(row["benchmark"]), _BENCH_WIDTH),
                    "n/a" if na else _fit(str(row["unit"]), 12),
                    _number(row["items"]),
                    shape,
                    "-" if na else _number(row["requests"]),
                    "-" if na else _number(row["gpu_hours"], ".3g"),
                    usd,
                    mark,
                )
            )
    lines.append("")
    for note, number in notes.items():
        lines += _wrapped(f"[{number}] {note}", "    ")
    from vlmgrid.protocols.base import ANSWERS_BY

    if (costs["method"] == ANSWERS_BY["score_options"]).any():
        lines += _wrapped(LIKELIHOOD_NOTE)
    lines += [""] + _mdd_lines(costs)
    sums = totals(costs)
    lines += ["", "totals:"]
    total_format = "  {:<24} {:>13} {:>9} {:>10} {:>12} {:>10}"
    lines.append(total_format.format("model", "requests", "GPU-h", "left out", "USD", "left out"))
    for _, row in sums.iterrows():
        api = row["model"] in api_models or (row["model"] == "grid" and api_models)
        lines.append(
            total_format.format(
                _fit(str(row["model"]), 24),
                _number(row["requests"]),
                _number(row["gpu_hours"], ".3g"),
                counted(int(row["rows_without_estimate"]), "row") if row["rows_without_estimate"] else "",
                _number(row["cost_usd"], ",.2f") if api else "-",
                counted(int(row["rows_without_price"]), "row") if row["rows_without_price"] else "",
            )
        )
    lines.append("")
    left_out: dict[tuple, list[str]] = {}  # the rows left out -> which totals leave them out
    for what, column in (("GPU-hours", "gpu_hours"), ("requests", "requests"), ("USD", "cost_usd")):
        # the USD totals are an API model's rows of work only (totals)
        left = costs[costs[column].isna() & ((column != "cost_usd") | costs["input_tokens"].notna())]
        if not left.empty:
            left_out.setdefault(
                tuple(f"{r.model} on {r.benchmark} ({r.unit})" for r in left.itertuples()), []
            ).append(what)
    for named, whats in left_out.items():
        # a cell's two rows of one unit (open- and closed-world templates) are named once, with their number
        listed = [f"{name[:-1]} x{n})" if n > 1 else name for name, n in Counter(named).items()]
        lines += _wrapped(
            f"The {' and '.join(whats)} totals leave out {counted(len(named), 'row')}: {', '.join(listed)}."
        )
    lines += _wrapped(
        ASSUMPTIONS.format(
            tokens=table["lvlm"]["answer_tokens"]["default"],
            input_tokens=table["api"]["input_tokens"]["value"],
        )
    )
    return "\n".join(line.rstrip() for line in lines)


def write_plan(config: Config, csv: Path | None = None) -> str:
    """The plan as text; with `csv`, the table written there as well."""
    table = load_throughput()
    costs = cost_table(config, table)
    if csv is not None:
        with fileio.atomic_path(csv) as tmp:
            costs.to_csv(tmp, index=False)
    return render(costs, table)
