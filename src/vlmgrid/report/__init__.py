"""Paper-style tables and figures from score files (docs/formats.md); reads score files only.
Imported from the floors above (stages); it imports only the shared modules.

`build_report` writes, atomically:

- `tables_dir/main.{md,tex,html,csv}`: models x benchmarks (headline value and 95% CI), then the average
  column;
- `tables_dir/breakdown.{md,csv}`: per-group results (e.g. POPE splits) of the benchmarks that have them;
- `tables_dir/variants.{md,csv}`: per prompt variant, for the cells that ran several, and their mean;
- `tables_dir/cells.{md,csv}`: how each cell's numbers were answered (log-likelihood, generation + parser,
  embedding similarity), its decoding, n, valid answers and format error rate;
- `tables_dir/comparisons.{md,tex,csv}`: per pair of models and benchmark, the difference with its paired
  bootstrap CI, the paired permutation test's p and its Holm adjustment over the pair's benchmarks, from the
  comparison files (`comparisons`); with a reference model, the main table marks the cells significantly
  better or worse than it;
- `figures_dir/main.{png,pdf}`: a heatmap of models x benchmarks (then the average), each cell's headline
  written in and coloured on a fixed 0-100 scale; `main-embedded.html` the PNG inside HTML for the
  Snakemake report's first page;
- `tables_dir/reported.{md,tex,csv}` and `figures_dir/reported.{png,pdf}`: papers' published numbers beside
  the grid's reproduction of them (`reported`: the rows and how they match; always written);
- the paper tables and figures of the grid's benchmark kinds (`vlmgrid.report.papers`: Kaleidoscope, CVQA,
  DANCE);
- `results_dir/metrics/<benchmark>.json` and `metrics/Average.json`: the headline numbers for DVC's metrics
  (`vlmgrid.report.dvc_files`); DVC's plots are the figures' PNGs.

`vlmgrid.report.outputs.report_files` lists every file written, before the report runs. The modules: `grid`
(the grid of cells, `load_grid`), `score_file` (one score file read and checked, `read_score`), `comparisons`
(the comparison files read and checked, Holm's correction), `labels` (names in words), `tables` (the tables
above), `style` (the figures' one style and `save_figure`), `figures` (the main heatmap), `bars` (the paper
figures' grouped bars), `papers` (the paper tables and figures), `outputs` (the list of files), `reported`
(published numbers: read, matched, compared), `reported_figure` (their figure). Importing this package does
not import pandas or matplotlib.

A cell whose model cannot run the benchmark (its score file says `"applicable": false`) is "n/a" in the
tables, and so is that model's average; the main figure writes the word in a grey, hatched cell. A cell whose
benchmark hides its labels (`"labels_hidden": true`) is "hidden" the same way.

A cell whose `format_error_rate` exceeds `flag_error_rate` (percent) is marked in every table (a dagger, and a
footnote with its rate), carries the dagger in the main figure and is hatched in the paper figures; a cell at
100% has no number ("failed", and so is that model's average). A cell whose score file has a `coverage` (it
answers a subset of its benchmark by construction: an imported MME eval-tool folder) carries a double dagger
in every table and figure, with a footnote naming its coverage; it stays out of that model's average unless
`partial_cells` is "include", and the average is marked either way. A cell scored on a copy of its benchmark
that holds fewer items than the published benchmark (its score file's `partial_copy`: a fixture's stand-ins, a
local subset) carries a pilcrow in every table and figure, with a note naming the count; so does the average
over it. With `allow_missing`, a cell whose score file does not exist reads "missing" the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from vlmgrid.report.comparisons import read_comparisons
from vlmgrid.report.grid import FLAG_ERROR_RATE, PARTIAL_CELLS, Grid, load_grid
from vlmgrid.report.reported import Published, load_reported
from vlmgrid.report.score_file import Hidden, NotApplicable, read_score

__all__ = [
    "build_report",
    "load_grid",
    "load_reported",
    "read_score",
    "Grid",
    "Hidden",
    "NotApplicable",
    "Published",
]


def build_report(
    score_files: Mapping[tuple[str, str], Path],
    models: Sequence[str],
    benchmarks: Sequence[str],
    tables_dir: Path,
    figures_dir: Path,
    *,
    title: str = "vlmgrid results",
    kinds: Mapping[str, str] | None = None,
    flag_error_rate: float = FLAG_ERROR_RATE,
    allow_missing: bool = False,
    results_dir: Path | None = None,
    published: Published | None = None,
    comparison_files: Mapping[str, Path] | None = None,
    reference_model: str | None = None,
    partial_cells: str = PARTIAL_CELLS[0],
    outdated: Collection[tuple[str, str]] = (),
) -> list[Path]:
    """Write the report and return the files written.

    `score_files` maps (model, benchmark) to the score JSON of that cell; `models` and `benchmarks` give
    the row and column order. A (model, benchmark) pair without a key is not in the grid: "–" in the
    tables and the main figure, and no average for that model. `kinds` ({benchmark: kind}) decides which
    paper tables are written (`vlmgrid.report.outputs.report_files` lists them all). Every score file is read
    and checked before anything is written; a bad one raises VlmgridError naming it, and so does one that does
    not exist unless `allow_missing` (then its cell reads "missing" and the legends list it). A cell whose
    format error rate exceeds `flag_error_rate` percent is marked; one at 100% has no number. `published`
    holds the papers' numbers to set beside the grid's (`vlmgrid.report.reported`); without it the reported
    table says that none matches. DVC's metrics files go to `results_dir` (default: the folder that holds
    `tables_dir`, as in the grid's layout).
    `comparison_files` ({benchmark: path}) are the comparison files (`vlmgrid compare`) against
    `reference_model` (None: every pair); one that does not exist leaves its benchmark without comparisons,
    which the comparisons table says. `partial_cells` (exclude / include): whether a model's average takes in
    its cells that answer a subset of their benchmark. With `allow_missing`, the cells in `outdated` (whose
    score file was made from predictions they no longer have) read "missing" too.
    """
    from vlmgrid.report.dvc_files import write_dvc_files
    from vlmgrid.report.figures import write_figures
    from vlmgrid.report.papers import write_papers
    from vlmgrid.report.reported_figure import write_reported_figure
    from vlmgrid.report.tables import write_tables
    from vlmgrid.report.tables.reported import no_match_sentence, write_reported_tables

    grid = load_grid(
        score_files,
        models,
        benchmarks,
        kinds,
        flag_error_rate=flag_error_rate,
        allow_missing=allow_missing,
        partial_cells=partial_cells,
        outdated=outdated,
    )
    published = published or Published()
    comparisons = read_comparisons(comparison_files or {}, models, benchmarks, reference_model, score_files)
    written = write_tables(grid, Path(tables_dir), title, comparisons)
    written += write_reported_tables(grid, published, Path(tables_dir), title)
    written += write_figures(grid, Path(figures_dir), title)
    written += write_reported_figure(grid, published, Path(figures_dir), title, no_match_sentence(published))
    written += write_papers(grid, Path(tables_dir), Path(figures_dir))
    written += write_dvc_files(
        grid, Path(results_dir) if results_dir is not None else Path(tables_dir).parent
    )
    return written
