"""The report's own tables, written for every grid: `main` (models x benchmarks), `breakdown` (per-group
results), `variants` (per prompt variant), `cells` (how each number was answered) and `comparisons` (pairs of
models: differences, paired CIs and tests); `format` holds what they share (and the paper tables,
`vlmgrid.report.papers`, use)."""

from __future__ import annotations

from pathlib import Path

from vlmgrid.fileio import write_text
from vlmgrid.report.comparisons import Comparisons
from vlmgrid.report.grid import Grid
from vlmgrid.report.tables.breakdown import breakdown_frame, breakdown_markdown
from vlmgrid.report.tables.cells import cells_frame, cells_markdown
from vlmgrid.report.tables.comparisons import comparisons_frame, comparisons_latex, comparisons_markdown
from vlmgrid.report.tables.format import write_csv
from vlmgrid.report.tables.main import main_frame, main_html, main_latex, main_markdown
from vlmgrid.report.tables.variants import variants_frame, variants_markdown


def write_tables(
    grid: Grid, tables_dir: Path, title: str, comparisons: Comparisons | None = None
) -> list[Path]:
    """`comparisons`: the grid's comparison files, read (None: none to read; the comparisons table says
    so)."""
    tables_dir = Path(tables_dir)
    written = []
    for name, text in (
        ("main.md", main_markdown(grid, title, comparisons)),
        ("main.tex", main_latex(grid, title, comparisons)),
        ("main.html", main_html(grid, title, comparisons)),
    ):
        write_text(tables_dir / name, text)
        written.append(tables_dir / name)
    write_csv(tables_dir / "main.csv", main_frame(grid, comparisons))
    written.append(tables_dir / "main.csv")
    write_text(tables_dir / "breakdown.md", breakdown_markdown(grid, title))
    written.append(tables_dir / "breakdown.md")
    write_csv(tables_dir / "breakdown.csv", breakdown_frame(grid))
    written.append(tables_dir / "breakdown.csv")
    write_text(tables_dir / "variants.md", variants_markdown(grid, title))
    written.append(tables_dir / "variants.md")
    write_csv(tables_dir / "variants.csv", variants_frame(grid))
    written.append(tables_dir / "variants.csv")
    write_text(tables_dir / "cells.md", cells_markdown(grid, title))
    written.append(tables_dir / "cells.md")
    write_csv(tables_dir / "cells.csv", cells_frame(grid))
    written.append(tables_dir / "cells.csv")
    comparisons = comparisons or Comparisons(None)
    write_text(tables_dir / "comparisons.md", comparisons_markdown(comparisons, title, grid))
    write_text(tables_dir / "comparisons.tex", comparisons_latex(comparisons, title, grid))
    write_csv(tables_dir / "comparisons.csv", comparisons_frame(comparisons, grid))
    written += [tables_dir / "comparisons.md", tables_dir / "comparisons.tex", tables_dir / "comparisons.csv"]
    return written
