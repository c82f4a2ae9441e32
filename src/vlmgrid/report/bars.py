"""The paper figures' grouped bars (Kaleidoscope per language, CVQA per country-language pair): one group per
language or pair, one bar per model, with the 95% bootstrap CI as a whisker and the value written above it,
clear of the whisker's cap.

At 7 in a bar is kept at least a value label wide; when the groups do not fit one row they wrap onto several
rows of panels, so a grid of many languages stays readable. A model's entry without a number has no bar: its
word (n/a, failed, ...) stands where the bar would. A marked bar (`Estimate.flag`: built on more format
errors than the report's threshold) is hatched and its value carries a dagger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from vlmgrid.report.score_file import Estimate
from vlmgrid.report.style import (
    CHAR_IN,
    MARKED_HATCH,
    OKABE_ITO,
    SMALL_PT,
    WIDTH_IN,
    WORD_COLOUR,
    add_note,
    figure_style,
    pyplot,
    save_figure,
    text,
    wrap_note,
)
from vlmgrid.report.tables.format import fmt, marks

# One bar series: a label (the model) and its estimate per group (None: no bar; a word such as "failed": no
# bar, the word written where the bar would stand).
Series = tuple[str, Sequence[Estimate | str | None]]

# Inches: the narrowest bar (a 7 pt label written upright fits it), the gap between groups, the width the
# panels have, one panel's plot height.
_BAR_IN = 0.12
_GAP_IN = 0.14
_PANEL_WIDTH_IN = WIDTH_IN - 0.8
_PANEL_IN = 1.7
# The y axis: percent, with room above 100 for the upright value labels.
_Y_TOP = 128.0
# Points between a whisker's end (its cap) and the value written above it.
LABEL_GAP_PT = 3.0


def _rows_of(groups: Sequence[str], n_series: int) -> list[range]:
    """The groups' indices per row of panels, as few rows as fit and balanced."""
    per_row = max(1, int(_PANEL_WIDTH_IN // (n_series * _BAR_IN + _GAP_IN)))
    n_rows = max(1, math.ceil(len(groups) / per_row))
    size = math.ceil(len(groups) / n_rows) if groups else 1
    return [range(start, min(start + size, len(groups))) for start in range(0, max(len(groups), 1), size)]


def _panel(
    ax, indices: range, groups: Sequence[str], series: Sequence[Series], width: float, slots: int
) -> None:
    for i, (_, estimates) in enumerate(series):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        xs, heights, low_err, high_err, tops, marked, words = [], [], [], [], [], [], []
        for k, j in enumerate(indices):
            est = estimates[j]
            x = k - 0.4 + width * (i + 0.5)
            if isinstance(est, str):
                ax.text(
                    x,
                    1.5,
                    text(est),
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=SMALL_PT,
                    color=WORD_COLOUR,
                )
                continue
            if est is None or est.value is None:
                continue
            low = est.ci_low if est.ci_low is not None else est.value
            high = est.ci_high if est.ci_high is not None else est.value
            xs.append(x)
            heights.append(est.value)
            low_err.append(max(est.value - low, 0.0))
            high_err.append(max(high - est.value, 0.0))
            tops.append(max(high, est.value))
            marked.append(est.flag is not None)
            words.append(marks(est))
        if not xs:
            continue
        bars = ax.bar(
            xs,
            heights,
            width,
            color=colour,
            yerr=[low_err, high_err],
            capsize=1.5,
            error_kw={"elinewidth": 0.7, "capthick": 0.7},
        )
        for bar, x, value, top, mark, word in zip(bars, xs, heights, tops, marked, words):
            if mark:  # built on too many format errors
                bar.set_hatch(MARKED_HATCH)
                bar.set_edgecolor("black")
                bar.set_linewidth(0.4)
            # The value above its whisker (a gap in points, clear of the cap at any scale), so a 0.0 is told
            # apart from a missing bar.
            ax.annotate(
                fmt(value) + word,
                (x, top),
                xytext=(0, LABEL_GAP_PT),
                textcoords="offset points",
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=SMALL_PT,
            )
    labels = [text(groups[j]) for j in indices]
    longest = max((len(label) for label in labels), default=0)
    upright = longest * CHAR_IN <= 0.95 * _PANEL_WIDTH_IN / slots
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(
        labels, rotation=0 if upright else 45, ha="center" if upright else "right", rotation_mode="anchor"
    )
    ax.set_xlim(-0.5, slots - 0.5)  # every row's groups as wide as the first row's
    ax.set_ylim(0, _Y_TOP)
    ax.set_yticks(range(0, 101, 20))
    ax.grid(axis="y", linewidth=0.5, alpha=0.5)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)


def grouped_bars(title: str, groups: Sequence[str], series: Sequence[Series], ylabel: str, *, note: str = ""):
    """The figure (7 in wide): a group of bars per entry of `groups`, one bar per series, wrapped onto rows of
    panels when they do not fit one. Call it inside `figure_style()`."""
    from matplotlib.patches import Patch

    plt = pyplot()
    n_series = max(len(series), 1)
    width = 0.8 / n_series
    rows = _rows_of(groups, n_series)
    slots = max(max(len(r) for r in rows), 1)
    labels_in = CHAR_IN * max((len(g) for g in groups), default=1) * 0.75 + 0.15
    note, note_in = wrap_note(note)
    legend_in = 0.2 * math.ceil(len(series) / 5) + 0.1
    height = 0.35 + legend_in + len(rows) * (_PANEL_IN + labels_in) + note_in
    fig = plt.figure(figsize=(WIDTH_IN, height), layout="constrained")
    spec = fig.add_gridspec(len(rows) + 1, 1, height_ratios=[_PANEL_IN] * len(rows) + [max(note_in, 0.01)])
    axes = [fig.add_subplot(spec[r, 0]) for r in range(len(rows))]
    for ax, indices in zip(axes, rows):
        _panel(ax, indices, groups, series, width, slots)
        ax.set_ylabel(text(ylabel))
    add_note(fig, spec[len(rows), 0], note)
    handles = []
    for i, (label, estimates) in enumerate(series):
        marks = [e.flag is not None for e in estimates if isinstance(e, Estimate) and e.value is not None]
        # The legend's swatch is hatched only when every bar of the series is.
        hatched = bool(marks) and all(marks)
        handles.append(
            Patch(
                facecolor=OKABE_ITO[i % len(OKABE_ITO)],
                label=text(label),
                hatch=MARKED_HATCH if hatched else None,
                edgecolor="black" if hatched else "none",
                linewidth=0.4 if hatched else 0,
            )
        )
    # Above the first panel, under the title (a figure legend "outside" the axes would sit on the title).
    axes[0].legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.02),
        ncol=min(len(handles), 5),
        frameon=False,
    )
    fig.suptitle(text(title))
    return fig


def write_grouped_bars(
    figures_dir: Path,
    stem: str,
    title: str,
    groups: Sequence[str],
    series: Sequence[Series],
    ylabel: str,
    *,
    note: str = "",
) -> list[Path]:
    """`stem`.png (300 dpi) and `stem`.pdf: the grouped bars of `grouped_bars`, `note` printed under them."""
    plt = pyplot()
    with figure_style():
        fig = grouped_bars(title, groups, series, ylabel, note=note)
        try:
            return save_figure(fig, Path(figures_dir), stem)
        finally:
            plt.close(fig)
