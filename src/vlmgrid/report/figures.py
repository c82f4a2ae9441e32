"""Figures: grouped bars of estimates with their 95% CIs (the main figure: headline scores per benchmark)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from vlmgrid.fileio import atomic_path
from vlmgrid.report.scores import Estimate, Grid, metric_label

# Metadata that would embed dates or versions; dropped so a rerun gives the same bytes.
_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}

# One bar series: a label (the model) and its estimate per group (None: no bar).
Series = tuple[str, Sequence[Estimate | None]]


def _text(text: str) -> str:
    """Keep "$" in names from starting matplotlib mathtext."""
    return text.replace("$", r"\$")


def write_grouped_bars(
    figures_dir: Path, stem: str, title: str, groups: Sequence[str], series: Sequence[Series], ylabel: str
) -> list[Path]:
    """`stem`.png and `stem`.pdf: one group of bars per entry of `groups`, one bar per series, side by side,
    with CI error bars and a value label; an entry without a value has no bar."""
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
            for i, (label, estimates) in enumerate(series):
                xs, heights, low_err, high_err = [], [], [], []
                for j, est in enumerate(estimates):
                    if est is None or est.value is None:
                        continue
                    xs.append(j - 0.4 + width * (i + 0.5))
                    heights.append(est.value)
                    low = est.ci_low if est.ci_low is not None else est.value
                    high = est.ci_high if est.ci_high is not None else est.value
                    low_err.append(max(est.value - low, 0.0))
                    high_err.append(max(high - est.value, 0.0))
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
                # A value label on each bar, so a score of 0 is told apart from a missing cell.
                ax.bar_label(bars, labels=[f"{h:.1f}" for h in heights], fontsize="x-small", padding=1)
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([_text(g) for g in groups], rotation=20 if n_groups > 6 else 0,
                               ha="right" if n_groups > 6 else "center")
            ax.set_xlim(-0.5, n_groups - 0.5)
            ax.set_ylim(bottom=0)
            ax.set_ylabel(ylabel)
            ax.set_title(_text(title))
            ax.grid(axis="y", linewidth=0.5, alpha=0.5)
            ax.set_axisbelow(True)
            ax.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            fig.tight_layout()
            for fmt in ("png", "pdf"):
                path = figures_dir / f"{stem}.{fmt}"
                with atomic_path(path) as tmp:
                    fig.savefig(tmp, format=fmt, dpi=150, metadata=_METADATA[fmt], bbox_inches="tight")
                written.append(path)
        finally:
            plt.close(fig)
    return written


def write_figures(grid: Grid, figures_dir: Path, title: str) -> list[Path]:
    """main.{png,pdf}: the headline of every cell per benchmark; n/a and hidden cells have no bar."""
    groups = []
    for benchmark in grid.benchmarks:
        metric = grid.metric(benchmark)
        groups.append(f"{benchmark}\n({metric_label(metric)})" if metric else benchmark)
    series = []
    for model in grid.models:
        cells = [grid.cell(model, benchmark) for benchmark in grid.benchmarks]
        series.append((model, [cell.estimate if cell is not None else None for cell in cells]))
    return write_grouped_bars(figures_dir, "main", title, groups, series, "score (%)")
