"""The main figure: a heatmap of models x benchmarks, each cell's headline written in it.

Why a heatmap and not bars: a grid of 14 benchmarks and several models is 14 groups of bars, which at a paper
page's 7 in leaves bars a few points wide and value labels too small to read. The main table is a grid, so the
figure that shows it at a glance is one too: a row per model, a column per benchmark (then the average), the
colour for the pattern and the number written in for the value. A cell without a number (n/a, hidden,
failed, missing, or not in the grid) is light grey and hatched with its word, so it never looks like a 0.0.
The colour scale is fixed at 0-100, since every headline is in percent (MME's scaled to 100), so two
reports' figures read alike. A value carries the marks of its cell as in the main table (a dagger for too many
format errors, a pilcrow for a partial copy of the benchmark, ...), which the note under the figure explains
with the cells and their rates or counts.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from vlmgrid.fileio import write_text
from vlmgrid.report.grid import Grid
from vlmgrid.report.labels import metric_label
from vlmgrid.report.score_file import Estimate, PartialCopy
from vlmgrid.report.style import (
    CHAR_IN,
    COLORMAP,
    NO_NUMBER_COLOUR,
    NO_NUMBER_EDGE,
    NO_NUMBER_HATCH,
    SMALL_PT,
    WIDTH_IN,
    WORD_COLOUR,
    add_note,
    figure_style,
    pyplot,
    save_figure,
    text,
    text_colour,
    wrap_note,
)
from vlmgrid.report.tables.format import (
    AVERAGE,
    COPY_MARK,
    DAGGER,
    DASH,
    FAILED,
    HIDDEN,
    MISSING,
    NA,
    Entry,
    fmt,
    marks,
)
from vlmgrid.report.tables.main import average_entry, cell_entry
from vlmgrid.report.tables.notes import batch_note, copy_note, coverage_note

SCALE = (0.0, 100.0)
SCALE_LABEL = "score (0-100)"
# Inches of one model's row.
_ROW_IN = 0.27


def shared_copy(grid: Grid, benchmark: str) -> PartialCopy | None:
    """The partial copy every cell of the benchmark with a score was scored on, whose count the column's
    header gives; None when none was, or their copies differ (the note then names each cell with its own)."""
    copies = {
        grid.partial_copy(model, benchmark)
        for model in grid.models
        if grid.cell(model, benchmark) is not None or grid.is_failed(model, benchmark)
    }
    return copies.pop() if len(copies) == 1 else None


def benchmark_label(grid: Grid, benchmark: str) -> str:
    """ "benchmark\\n(metric label)": the column's header, then the count of a partial copy its cells share
    ("24 of 2,374", a fixture's "16 stand-ins"): the heatmap's note has no room to list the default grid's."""
    metric = grid.metric(benchmark)
    label = f"{benchmark}\n({metric_label(metric)})" if metric else benchmark
    copy = shared_copy(grid, benchmark)
    if copy is None:
        return label
    return label + (
        f"\n{copy.items:,} stand-ins" if copy.fixture else f"\n{copy.items:,} of {copy.published:,}"
    )


def has_averages(grid: Grid) -> bool:
    """The Average column is drawn when some model has an average number."""
    return any(
        isinstance(entry, Estimate) and entry.value is not None
        for entry in (average_entry(grid, model) for model in grid.models)
    )


def main_note(grid: Grid) -> str:
    """What the main figure's marks and words mean, naming the cells: marked (with rates, coverage, the batch
    check's count or the copy's), failed, missing."""
    notes = []
    marked = [(m, b, rate) for m, b, rate in grid.flagged() if not grid.is_failed(m, b)]
    if marked:
        notes.append(
            f"{DAGGER}: format errors above {grid.flag_error_rate:g}% of the prediction rows ("
            + ", ".join(f"{m} on {b} {rate:.1f}%" for m, b, rate in marked)
            + ")."
        )
    partial = coverage_note(grid, grid.partial(), average=has_averages(grid))
    if partial:
        notes.append(partial)
    batched = batch_note(grid.batch_dependents(), average=has_averages(grid))
    if batched:
        notes.append(batched)
    headed = [benchmark for benchmark in grid.benchmarks if shared_copy(grid, benchmark) is not None]
    if headed:  # one line at most: the default grid's figure and table fill a laptop's first screen
        notes.append(f"{COPY_MARK}: over fewer items than the benchmark has, counted under its name.")
    copied = copy_note(
        [entry for entry in grid.partial_copies() if entry[1] not in headed], average=has_averages(grid)
    )
    if copied:
        notes.append(copied)
    if grid.not_applicable:
        notes.append(f"{NA}: the model cannot run the benchmark.")
    if grid.hidden:
        notes.append(f"{HIDDEN}: the benchmark's labels are not public.")
    if grid.failed:
        notes.append(
            f"{FAILED}: every prediction row is an error or unparsable ("
            + ", ".join(f"{m} on {b}" for m in grid.models for b in grid.benchmarks if grid.is_failed(m, b))
            + ")."
        )
    if grid.missing:
        notes.append(
            f"{MISSING}: no score file of the cell's predictions ("
            + ", ".join(f"{m} on {b}" for m in grid.models for b in grid.benchmarks if grid.is_missing(m, b))
            + ")."
        )
    return " ".join(notes)


def _cell_text(entry: Entry) -> tuple[str, float | None]:
    """What a cell says and the value it is coloured by (None: no number, grey)."""
    if isinstance(entry, str):
        return entry, None
    if entry is None or entry.value is None:
        return DASH, None
    return fmt(entry.value) + marks(entry), entry.value


def _draw_cells(ax, rows: list[list[Entry]], cmap, norm) -> None:
    from matplotlib.patches import Rectangle

    for i, entries in enumerate(rows):
        for j, entry in enumerate(entries):
            words, value = _cell_text(entry)
            if value is None:
                ax.add_patch(
                    Rectangle(
                        (j, i),
                        1,
                        1,
                        facecolor=NO_NUMBER_COLOUR,
                        edgecolor=NO_NUMBER_EDGE,
                        hatch=NO_NUMBER_HATCH,
                        linewidth=0,
                    )
                )
                ax.text(
                    j + 0.5,
                    i + 0.5,
                    text(words),
                    ha="center",
                    va="center",
                    fontsize=SMALL_PT,
                    color=WORD_COLOUR,
                    bbox={"facecolor": NO_NUMBER_COLOUR, "edgecolor": "none", "pad": 0.6},
                )
            else:
                colour = cmap(norm(value))
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="none", linewidth=0))
                ax.text(
                    j + 0.5,
                    i + 0.5,
                    words,
                    ha="center",
                    va="center",
                    fontsize=SMALL_PT,
                    color=text_colour(colour),
                )
    # White lines between the cells.
    ax.set_xticks([j for j in range(1, len(rows[0]))], minor=True)
    ax.set_yticks([i for i in range(1, len(rows))], minor=True)
    ax.grid(which="minor", color="white", linewidth=1.0)
    ax.tick_params(which="both", length=0)
    ax.set_xlim(0, len(rows[0]))
    ax.set_ylim(len(rows), 0)  # the first model on top, as in the table
    for spine in ax.spines.values():
        spine.set_visible(False)


def _column_labels(ax, labels: list[str], upright: bool) -> None:
    ax.xaxis.tick_top()
    ax.set_xticks([j + 0.5 for j in range(len(labels))])
    ax.set_xticklabels(
        [text(label) for label in labels],
        rotation=0 if upright else 90,
        ha="center",
        va="bottom",
        fontsize=SMALL_PT,
    )


def main_heatmap(grid: Grid, title: str):
    """The main figure (a matplotlib Figure, 7 in wide): models x benchmarks (then Average), each cell
    coloured by its headline on a fixed 0-100 scale and the value written in; cells without a number grey,
    hatched and worded. Call it inside `figure_style()`."""
    import matplotlib
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    plt = pyplot()
    cmap = matplotlib.colormaps[COLORMAP]
    norm = Normalize(*SCALE)
    rows = [[cell_entry(grid, model, benchmark) for benchmark in grid.benchmarks] for model in grid.models]
    averages = [average_entry(grid, model) for model in grid.models] if has_averages(grid) else None
    headers = [benchmark_label(grid, b) for b in grid.benchmarks]
    note, note_in = wrap_note(main_note(grid))

    columns = len(grid.benchmarks) + (1 if averages else 0)
    labels_in = CHAR_IN * max(len(model) for model in grid.models) + 0.15
    column_in = (WIDTH_IN - labels_in - 0.4) / columns
    lines = [line for label in [*headers, AVERAGE] for line in label.split("\n")]
    # Headers stand upright only when every line fits its column; otherwise they are turned 90 degrees.
    upright = CHAR_IN * max(len(line) for line in lines) <= 0.95 * column_in
    header_in = (
        0.15 * max(2, *(label.count("\n") + 1 for label in headers))
        if upright
        else CHAR_IN * max(len(line) for line in lines) + 0.15
    )
    grid_in = _ROW_IN * len(grid.models)
    height = 0.35 + header_in + grid_in + 0.6 + max(note_in, 0.01)
    fig = plt.figure(figsize=(WIDTH_IN, height), layout="constrained")
    spec = fig.add_gridspec(
        2,
        2 if averages else 1,
        height_ratios=[grid_in, max(note_in, 0.01)],
        width_ratios=[len(grid.benchmarks), 1] if averages else [1],
    )
    ax = fig.add_subplot(spec[0, 0])
    _draw_cells(ax, rows, cmap, norm)
    _column_labels(ax, headers, upright)
    ax.set_yticks([i + 0.5 for i in range(len(grid.models))])
    ax.set_yticklabels([text(model) for model in grid.models], fontsize=SMALL_PT)
    axes = [ax]
    if averages:
        # A column of its own, set apart by the gap between the axes: it is not a benchmark.
        avg_ax = fig.add_subplot(spec[0, 1], sharey=ax)
        _draw_cells(avg_ax, [[entry] for entry in averages], cmap, norm)
        _column_labels(avg_ax, [AVERAGE], upright)
        avg_ax.tick_params(axis="y", labelleft=False)
        axes.append(avg_ax)
    fig.colorbar(
        ScalarMappable(norm=norm, cmap=cmap),
        ax=axes,
        location="bottom",
        shrink=0.5,
        aspect=40,
        pad=0.02,
        label=SCALE_LABEL,
    )
    add_note(fig, spec[1, :], note)
    fig.suptitle(text(title))
    return fig


def write_figures(grid: Grid, figures_dir: Path, title: str) -> list[Path]:
    """main.{png,pdf}: the main heatmap (`main_heatmap`), 7 in wide, PNG at 300 dpi and vector PDF;
    main-embedded.html: the PNG inside an HTML fragment (`embedded_figure`)."""
    plt = pyplot()
    with figure_style():
        fig = main_heatmap(grid, title)
        try:
            written = save_figure(fig, Path(figures_dir), "main")
        finally:
            plt.close(fig)
    # (not main.html: the Snakemake report keeps one file per name, and the main table has that one)
    page = Path(figures_dir) / "main-embedded.html"
    write_text(page, embedded_figure(Path(figures_dir) / "main.png"))
    return written + [page]


def embedded_figure(png: Path) -> str:
    """The PNG as a data URI in an <img> (its note is drawn in it): a fragment the Snakemake report's first
    page includes (its own `embeddedfigure` directive leaves a path the single-file report cannot resolve)."""
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (
        f'<div><img alt="{html.escape(png.name)}" style="width: 100%" '
        f'src="data:image/png;base64,{data}" /></div>\n'
    )
