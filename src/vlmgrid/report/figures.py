"""The main figure: grouped bars of the headline scores with their 95% CIs."""

from __future__ import annotations

from pathlib import Path

from vlmgrid.fileio import atomic_path
from vlmgrid.report.scores import Grid, metric_label

# Metadata that would embed dates or versions; dropped so a rerun gives the same bytes.
_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}


def _text(text: str) -> str:
    """Keep "$" in names from starting matplotlib mathtext."""
    return text.replace("$", r"\$")


def write_figures(grid: Grid, figures_dir: Path, title: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures_dir = Path(figures_dir)
    n_models = max(len(grid.models), 1)
    n_bench = max(len(grid.benchmarks), 1)
    width = 0.8 / n_models
    written = []
    with plt.style.context("default"), matplotlib.rc_context({"svg.hashsalt": "vlmgrid", "pdf.compression": 6}):
        # Each benchmark gets room for its two-line label whatever the number of models.
        fig, ax = plt.subplots(figsize=(max(4.0, 1.5 + max(1.6, 0.45 * n_models) * n_bench), 3.8))
        try:
            colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
            for i, model in enumerate(grid.models):
                xs, heights, low_err, high_err = [], [], [], []
                for j, benchmark in enumerate(grid.benchmarks):
                    cell = grid.cell(model, benchmark)
                    if cell is None:
                        continue
                    est = cell.estimate
                    xs.append(j - 0.4 + width * (i + 0.5))
                    heights.append(est.value)
                    low_err.append(max(est.value - est.ci_low, 0.0))
                    high_err.append(max(est.ci_high - est.value, 0.0))
                bars = ax.bar(
                    xs,
                    heights,
                    width,
                    yerr=[low_err, high_err],
                    capsize=2,
                    label=_text(model),
                    color=colors[i % len(colors)],
                    error_kw={"elinewidth": 0.8, "capthick": 0.8},
                )
                # A value label on each bar, so a score of 0 is told apart from a missing cell.
                ax.bar_label(bars, labels=[f"{h:.1f}" for h in heights], fontsize="x-small", padding=1)
            ax.set_xticks(range(len(grid.benchmarks)))
            labels = []
            for benchmark in grid.benchmarks:
                metric = grid.metric(benchmark)
                labels.append(_text(f"{benchmark}\n({metric_label(metric)})" if metric else benchmark))
            ax.set_xticklabels(labels, rotation=20 if n_bench > 6 else 0, ha="right" if n_bench > 6 else "center")
            ax.set_xlim(-0.5, n_bench - 0.5)
            ax.set_ylim(bottom=0)
            ax.set_ylabel("score (%)")
            ax.set_title(_text(title))
            ax.grid(axis="y", linewidth=0.5, alpha=0.5)
            ax.set_axisbelow(True)
            ax.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            fig.tight_layout()
            for fmt in ("png", "pdf"):
                path = figures_dir / f"main.{fmt}"
                with atomic_path(path) as tmp:
                    fig.savefig(tmp, format=fmt, dpi=150, metadata=_METADATA[fmt], bbox_inches="tight")
                written.append(path)
        finally:
            plt.close(fig)
    return written
