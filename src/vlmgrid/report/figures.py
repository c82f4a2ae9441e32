"""Figures: grouped bars of estimates with their 95% CIs (the main figure: headline scores per benchmark).

A bar whose estimate is marked (`Estimate.flag`: built on more format errors than the report's threshold) is
hatched and its value label carries a dagger; the note under the figure says what that means.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from vlmgrid.fileio import atomic_path
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.score_file import Estimate

# Metadata that would embed dates or versions; dropped so a rerun gives the same bytes.
_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}

# One bar series: a label (the model) and its estimate per group (None: no bar; a word such as "failed": no
# bar, the word written small where the bar would stand).
Series = tuple[str, Sequence[Estimate | str | None]]


def _text(text: str) -> str:
    """Keep "$" in names from starting matplotlib mathtext."""
    return text.replace("$", r"\$")


DAGGER = "\u2020"


def write_grouped_bars(
    figures_dir: Path, stem: str, title: str, groups: Sequence[str], series: Sequence[Series], ylabel: str,
    *, note: str = "",
) -> list[Path]:
    """`stem`.png and `stem`.pdf: one group of bars per entry of `groups`, one bar per series, side by side,
    with CI error bars and a value label; an entry without a value has no bar (a word entry is written where the
    bar would stand), a marked one is hatched with a dagger after its value. `note` is printed under the axes."""
    from matplotlib.patches import Patch

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures_dir = Path(figures_dir)
    n_series = max(len(series), 1)
    n_groups = max(len(groups), 1)
    width = 0.8 / n_series
    written = []
    with plt.style.context("default"), matplotlib.rc_context({"svg.hashsalt": "vlmgrid", "pdf.compression": 6}):
        # Each group gets room for a two-line label whatever the number of series.
        fig, ax = plt.subplots(figsize=(max(4.0, 1.5 + max(1.6, 0.45 * n_series) * n_groups), 3.8))
        try:
            colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
            handles = []
            for i, (label, estimates) in enumerate(series):
                xs, heights, low_err, high_err, marked = [], [], [], [], []
                for j, est in enumerate(estimates):
                    if isinstance(est, str):
                        ax.text(j - 0.4 + width * (i + 0.5), 0, " " + _text(est), rotation=90, ha="center",
                                va="bottom", fontsize="xx-small", color="dimgray")
                        continue
                    if est is None or est.value is None:
                        continue
                    xs.append(j - 0.4 + width * (i + 0.5))
                    heights.append(est.value)
                    low = est.ci_low if est.ci_low is not None else est.value
                    high = est.ci_high if est.ci_high is not None else est.value
                    low_err.append(max(est.value - low, 0.0))
                    high_err.append(max(high - est.value, 0.0))
                    marked.append(est.flag is not None)
                bars = ax.bar(
                    xs,
                    heights,
                    width,
                    yerr=[low_err, high_err],
                    capsize=2,
                    label=_text(label),
                    color=colors[i % len(colors)],
                    error_kw={"elinewidth": 0.8, "capthick": 0.8},
                )
                for bar, mark in zip(bars, marked):
                    if mark:  # built on too many format errors
                        bar.set_hatch("///")
                        bar.set_edgecolor("black")
                        bar.set_linewidth(0.5)
                # The legend's swatch is hatched only when every bar of the series is.
                hatched = bool(marked) and all(marked)
                handles.append(Patch(facecolor=colors[i % len(colors)], label=_text(label),
                                     hatch="///" if hatched else None, edgecolor="black" if hatched else None,
                                     linewidth=0.5 if hatched else None))
                # A value label on each bar, so a score of 0 is told apart from a missing cell.
                ax.bar_label(bars, labels=[f"{h:.1f}" + (DAGGER if m else "") for h, m in zip(heights, marked)],
                             fontsize="x-small", padding=1)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([_text(g) for g in groups], rotation=20 if n_groups > 6 else 0,
                               ha="right" if n_groups > 6 else "center")
            ax.set_xlim(-0.5, n_groups - 0.5)
            ax.set_ylim(bottom=0)
            ax.set_ylabel(ylabel)
            ax.set_title(_text(title))
            ax.grid(axis="y", linewidth=0.5, alpha=0.5)
            ax.set_axisbelow(True)
            ax.legend(handles=handles, fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            fig.tight_layout()
            if note:
                # Below the laid-out axes and tick labels; bbox_inches="tight" grows the saved figure to hold it.
                fig.text(0.01, -0.01, _text(textwrap.fill(note, max(60, int(fig.get_figwidth() * 16)))),
                         ha="left", va="top", fontsize="x-small")
            for fmt in ("png", "pdf"):
                path = figures_dir / f"{stem}.{fmt}"
                with atomic_path(path) as tmp:
                    fig.savefig(tmp, format=fmt, dpi=150, metadata=_METADATA[fmt], bbox_inches="tight")
                written.append(path)
        finally:
            plt.close(fig)
    return written


def main_note(grid: Grid) -> str:
    """What the main figure's marks mean, naming the cells: marked (with rates), failed and missing."""
    notes = []
    marked = [(m, b, rate) for m, b, rate in grid.flagged() if not grid.is_failed(m, b)]
    if marked:
        notes.append(f"{DAGGER} and hatched bars: format errors above {grid.flag_error_rate:g}% of the prediction "
                     f"rows (" + ", ".join(f"{m} on {b} {rate:.1f}%" for m, b, rate in marked) + ").")
    if grid.failed:
        notes.append("No bar, failed: every prediction row is an error or unparsable ("
                     + ", ".join(f"{m} on {b}" for m in grid.models for b in grid.benchmarks
                                 if grid.is_failed(m, b)) + ").")
    if grid.missing:
        notes.append("No bar, missing: no score file ("
                     + ", ".join(f"{m} on {b}" for m in grid.models for b in grid.benchmarks
                                 if grid.is_missing(m, b)) + ").")
    return " ".join(notes)


def write_figures(grid: Grid, figures_dir: Path, title: str) -> list[Path]:
    """main.{png,pdf}: the headline of every cell per benchmark; n/a, hidden, failed and missing cells have no
    bar (their word stands there instead); a marked cell's bar is hatched."""
    from vlmgrid.report.tables.format import status

    groups = []
    for benchmark in grid.benchmarks:
        metric = grid.metric(benchmark)
        groups.append(f"{benchmark}\n({metric_label(metric)})" if metric else benchmark)
    series = []
    for model in grid.models:
        estimates = []
        for benchmark in grid.benchmarks:
            cell = grid.cell(model, benchmark)
            flag = grid.flag(model, benchmark)
            estimates.append(status(grid, model, benchmark) if cell is None else
                             cell.estimate if flag is None else replace(cell.estimate, flag=flag))
        series.append((model, estimates))
    return write_grouped_bars(figures_dir, "main", title, groups, series, "score (%)", note=main_note(grid))
