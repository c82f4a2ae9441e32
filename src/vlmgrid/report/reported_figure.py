"""The reported figure: each reproduced figure (with its 95% CI as a whisker) against the published value, one
point per compared row, the line y = x for agreement. Percent figures and point figures (MME perception) get a
panel each, so neither scale squeezes the other. A point whose two sides answered by different methods carries
the section sign, and the note names both methods. With nothing to plot, the figure says so in words."""

from __future__ import annotations

import textwrap
from pathlib import Path

from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import interval_label, metric_label
from vlmgrid.report.reported import KIND_LABELS, Comparison, Published, compare, is_points
from vlmgrid.report.style import OKABE_ITO, WIDTH_IN, figure_style, pyplot, save_figure, text
from vlmgrid.report.tables.format import BATCH_MARK, COPY_MARK, METHOD_MARK
from vlmgrid.report.tables.notes import batch_note, copy_note
from vlmgrid.report.tables.reported import method_note

# One marker per benchmark kind, so a point is read without its colour too.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _limits(points: list[Comparison]) -> tuple[float, float]:
    """One range for both axes (so y = x is the diagonal), covering every value and whisker, padded."""
    values = [c.row.value for c in points]
    for c in points:
        values += [
            v for v in (c.reproduced.value, c.reproduced.ci_low, c.reproduced.ci_high) if v is not None
        ]
    low, high = min(values), max(values)
    pad = max((high - low) * 0.08, abs(high) * 0.02, 1.0)
    return low - pad, high + pad


def _not_compared(comparisons: list[Comparison]) -> str:
    skipped = [c for c in comparisons if c.reproduced is None]
    if not skipped:
        return ""
    listed = ", ".join(
        f"{c.model} on {c.benchmark} {metric_label(c.row.figure)} ({c.status})" for c in skipped
    )
    return f"Not compared (no number): {listed}."


def _note(comparisons: list[Comparison], grid: Grid) -> str:
    samples = [
        cell.samples
        for c in comparisons
        if c.reproduced is not None and (cell := grid.cell(c.model, c.benchmark)) is not None
    ]
    notes = [
        f"Whiskers: the reproduced figure's {interval_label(samples)}. Dashed: y = x (reproduced = reported)."
    ]
    marked = sorted(
        {
            (c.model, c.benchmark, c.reproduced.flag)
            for c in comparisons
            if c.reproduced is not None and c.reproduced.flag is not None
        }
    )
    if marked:
        notes.append(
            "Hollow, \u2020: more than "
            + f"{grid.flag_error_rate:g}% format errors: "
            + ", ".join(f"{m} on {b} {rate:.1f}%" for m, b, rate in marked)
            + "."
        )
    batched = {(c.model, c.benchmark) for c in comparisons if c.reproduced is not None and c.reproduced.batch}
    if batched:
        notes.append(batch_note([entry for entry in grid.batch_dependents() if entry[:2] in batched]))
    copied = {
        (c.model, c.benchmark) for c in comparisons if c.reproduced is not None and c.reproduced.partial_copy
    }
    if copied:
        notes.append(copy_note([entry for entry in grid.partial_copies() if entry[:2] in copied]))
    if method := method_note(comparisons):
        notes.append(method)
    if skipped := _not_compared(comparisons):
        notes.append(skipped)
    return " ".join(notes)


def _message_figure(plt, message: str):
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.0))
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        textwrap.fill(text(message), 80),
        ha="center",
        va="center",
        fontsize=10,
        transform=ax.transAxes,
    )
    return fig


def _scatter_figure(plt, comparisons: list[Comparison], grid: Grid, title: str):
    from matplotlib.lines import Line2D

    points = [c for c in comparisons if c.reproduced is not None]
    panels = [
        (name, group)
        for name, group in (
            ("percent", [c for c in points if not is_points(c.row.benchmark, c.row.figure)]),
            ("points", [c for c in points if is_points(c.row.benchmark, c.row.figure)]),
        )
        if group
    ]
    models = list(dict.fromkeys(c.model for c in points))
    kinds = list(dict.fromkeys(c.row.benchmark for c in points))
    colour = {m: OKABE_ITO[i % len(OKABE_ITO)] for i, m in enumerate(models)}
    marker = {k: _MARKERS[i % len(_MARKERS)] for i, k in enumerate(kinds)}
    handles = [Line2D([], [], color=colour[m], marker="o", linestyle="", label=text(m)) for m in models]
    handles += [
        Line2D([], [], color="#444444", marker=marker[k], linestyle="", label=KIND_LABELS.get(k, k))
        for k in kinds
    ]
    legend_rows = -(-len(handles) // 4)
    note = textwrap.fill(text(_note(comparisons, grid)), 115)
    # Fixed inches from the bottom: the note, then the legend, then the axes (x label included); the width
    # stays 7 in.
    note_in = 0.14 * (note.count("\n") + 1) + 0.1
    legend_in = 0.22 * legend_rows + 0.25
    panel_in = min(3.2, (WIDTH_IN - 0.8) / len(panels) - 0.5)
    height = note_in + legend_in + panel_in + 1.1
    fig, axes = plt.subplots(1, len(panels), figsize=(WIDTH_IN, height), squeeze=False)
    for ax, (unit, group) in zip(axes[0], panels):
        low, high = _limits(group)
        ax.plot([low, high], [low, high], linestyle="--", color="#777777", linewidth=1, zorder=1)
        for c in group:
            est = c.reproduced
            err = None
            if est.ci_low is not None and est.ci_high is not None:
                err = [[max(est.value - est.ci_low, 0.0)], [max(est.ci_high - est.value, 0.0)]]
            hollow = est.flag is not None
            ax.errorbar(
                [c.row.value],
                [est.value],
                yerr=err,
                fmt=marker[c.row.benchmark],
                color=colour[c.model],
                markerfacecolor="white" if hollow else colour[c.model],
                markersize=6,
                capsize=3,
                elinewidth=1.2,
                zorder=3,
            )
            # the point's marks beside it: answered by another method, answers that depend on the batch, a
            # partial copy of the benchmark
            beside = (
                (METHOD_MARK if c.same_method is False else "")
                + (BATCH_MARK if est.batch else "")
                + (COPY_MARK if est.partial_copy else "")
            )
            if beside:
                ax.annotate(
                    beside,
                    (c.row.value, est.value),
                    xytext=(5, 3),
                    textcoords="offset points",
                    fontsize=8,
                    color=colour[c.model],
                    zorder=4,
                )
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_aspect("equal", adjustable="box")
        words = "points (MME)" if unit == "points" else "percent"
        ax.set_title(f"{words}", fontsize=9)
        ax.set_xlabel("reported", fontsize=9)
        ax.set_ylabel("reproduced", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, color="#dddddd", linewidth=0.6, zorder=0)
    bottom = (note_in + legend_in) / height
    fig.suptitle(text(f"{title}: reproduced vs reported"), fontsize=10)
    fig.tight_layout(rect=(0.0, bottom, 1.0, 1.0 - 0.05 / height))
    fig.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, bottom - 0.08 / height),
        ncol=min(4, len(handles)),
        fontsize=8,
        frameon=False,
    )
    fig.text(0.5, note_in / height, note, ha="center", va="top", fontsize=7.5)
    return fig


def write_reported_figure(
    grid: Grid, published: Published, figures_dir: Path, title: str, no_match: str
) -> list[Path]:
    """`reported.png` (300 dpi) and `reported.pdf`, 7 in wide; `no_match` is the sentence written instead when
    no published number matches the grid."""
    plt = pyplot()
    comparisons = compare(grid, published)
    with figure_style():
        if not comparisons:
            fig = _message_figure(plt, no_match)
        elif all(c.reproduced is None for c in comparisons):
            fig = _message_figure(
                plt,
                "No published number could be compared: every matched cell lacks a number. "
                + _not_compared(comparisons),
            )
        else:
            fig = _scatter_figure(plt, comparisons, grid, title)
        try:
            return save_figure(fig, Path(figures_dir), "reported")
        finally:
            plt.close(fig)
