"""The paper tables and figures of a benchmark kind (Kaleidoscope, CVQA, DANCE), one set per benchmark of that
kind.

`PAPER_LIST` holds one `Paper` per benchmark kind that has them, in the order the report writes them: the
files it writes (so the workflow knows them before the report runs: `vlmgrid.report.outputs.report_files`) and
the function that writes them, imported only when the report runs (its module needs pandas and matplotlib;
this one stays cheap to import). A grid without a benchmark of a kind gets none of its files. The writers live
in `kaleidoscope`, `cvqa` and `dance`; `base` holds what they share.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vlmgrid.report.grid import Grid


@dataclass(frozen=True)
class PaperFile:
    """One table or figure of a paper: `<folder>/<stem>.<suffix>` under the results folder, one per suffix,
    shown in the Snakemake report with the caption workflow/report/<caption>.rst."""

    folder: str  # "tables" or "figures"
    stem: str
    suffixes: tuple[str, ...]
    caption: str


def paper_stem(stem: str, benchmark: str, same_kind: int) -> str:
    """The file stem of one benchmark's paper table: the kind's own name ("kaleidoscope") when the grid has
    one benchmark of that kind, else the benchmark's name after it ("kaleidoscope-<benchmark>")."""
    return stem if same_kind == 1 else f"{stem}-{benchmark}"


@dataclass(frozen=True)
class Paper:
    """The paper tables and figures of one benchmark kind (`name`), written once per benchmark of that
    kind."""

    name: str
    files: tuple[PaperFile, ...]
    # "module:function", called as function(grid, benchmark, stems, tables_dir, figures_dir) -> files written,
    # where stems maps each PaperFile.stem to the stem of this benchmark's files (`paper_stem`).
    writer: str

    def stems(self, benchmark: str, same_kind: int) -> dict[str, str]:
        return {file.stem: paper_stem(file.stem, benchmark, same_kind) for file in self.files}

    def write(
        self, grid: Grid, benchmark: str, same_kind: int, tables_dir: Path, figures_dir: Path
    ) -> list[Path]:
        module, function = self.writer.split(":")
        write = getattr(import_module(module), function)
        return write(grid, benchmark, self.stems(benchmark, same_kind), Path(tables_dir), Path(figures_dir))


# Every paper, in the order the report writes them and `report_files` lists their files.
PAPER_LIST: tuple[Paper, ...] = (
    Paper(
        "kaleidoscope",
        (
            PaperFile("tables", "kaleidoscope", ("md", "tex", "csv"), "kaleidoscope_table"),
            PaperFile("figures", "kaleidoscope", ("png", "pdf"), "kaleidoscope_figure"),
        ),
        "vlmgrid.report.papers.kaleidoscope:write_kaleidoscope",
    ),
    Paper(
        "cvqa",
        (
            PaperFile("tables", "cvqa", ("md", "tex", "csv"), "cvqa_table"),
            PaperFile("tables", "cvqa-pairs", ("md", "tex", "csv"), "cvqa_pairs_table"),
            PaperFile("figures", "cvqa-pairs", ("png", "pdf"), "cvqa_pairs_figure"),
        ),
        "vlmgrid.report.papers.cvqa:write_cvqa",
    ),
    Paper(
        "dance",
        (PaperFile("tables", "dance", ("md", "tex", "csv"), "dance_table"),),
        "vlmgrid.report.papers.dance:write_dance",
    ),
)


def write_papers(grid: Grid, tables_dir: Path, figures_dir: Path) -> list[Path]:
    """Every paper table and figure of the grid's benchmark kinds, named as their `Paper` says."""
    written = []
    for paper in PAPER_LIST:
        benchmarks = grid.benchmarks_of_kind(paper.name)
        for benchmark in benchmarks:
            written += paper.write(grid, benchmark, len(benchmarks), Path(tables_dir), Path(figures_dir))
    return written
