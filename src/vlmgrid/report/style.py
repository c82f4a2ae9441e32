"""The one style of the report's figures: a paper page's width (7 in), 300 dpi, fonts readable at print size,
colour-blind-safe colours (Okabe-Ito for series, cividis for values), and one way to save a figure (PNG and
vector PDF, atomically, the same bytes on every rerun).

Importing this module does not import matplotlib; `pyplot()` does, with the Agg backend.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vlmgrid.fileio import atomic_path

WIDTH_IN = 7.0  # a paper page's text width, both columns
DPI = 300
# Okabe-Ito: told apart with the common colour-vision deficiencies (one colour per series, e.g. per model).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
# Sequential and colour-blind safe, its lightness rising with the value: a value is read without its hue.
COLORMAP = "cividis"
# A cell or bar without a number: light grey with a hatch, never a colour of the colormap.
NO_NUMBER_COLOUR = "#e8e8e8"
NO_NUMBER_HATCH = "////"
NO_NUMBER_EDGE = "#b0b0b0"
WORD_COLOUR = "#404040"
# A marked (flagged) bar's hatch.
MARKED_HATCH = "///"

# Points at print size (7 in wide): nothing under 7 pt.
FONT_PT = 8.0
SMALL_PT = 7.0
TITLE_PT = 9.0
# Inches per character of a 7 pt label (DejaVu Sans, a little generous), and per line of the note under a
# figure; the note wraps at NOTE_CHARS characters to fit 7 in.
CHAR_IN = 0.056
NOTE_LINE_IN = 0.125
NOTE_CHARS = 125

# Metadata that would embed dates or versions; dropped so a rerun gives the same bytes.
_METADATA = {
    "png": {"Software": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
}
_RC = {
    "svg.hashsalt": "vlmgrid",
    "pdf.compression": 6,
    "pdf.fonttype": 42,  # TrueType: the PDF's text stays text (searchable, editable), not outlines
    "font.size": FONT_PT,
    "axes.titlesize": TITLE_PT,
    "axes.labelsize": FONT_PT,
    "xtick.labelsize": SMALL_PT,
    "ytick.labelsize": SMALL_PT,
    "legend.fontsize": SMALL_PT,
    "figure.titlesize": TITLE_PT,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def figure_style() -> Iterator[None]:
    """matplotlib's default style with the report's fonts, colours and fixed output settings."""
    import matplotlib
    from cycler import cycler

    plt = pyplot()
    with (
        plt.style.context("default"),
        matplotlib.rc_context({**_RC, "axes.prop_cycle": cycler(color=OKABE_ITO)}),
    ):
        yield


def text(words: str) -> str:
    """Keep "$" in names from starting matplotlib mathtext."""
    return words.replace("$", r"\$")


def text_colour(rgba) -> str:
    """Black or white, whichever reads better on a cell of this colour (by its relative luminance)."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgba[:3])
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.18 else "white"


def wrap_note(note: str) -> tuple[str, float]:
    """The note under a figure wrapped to the page's width, and the inches it takes (0 when there is none)."""
    if not note:
        return "", 0.0
    wrapped = textwrap.fill(text(note), NOTE_CHARS)
    return wrapped, NOTE_LINE_IN * (wrapped.count("\n") + 1) + 0.05


def add_note(fig, spec, note: str) -> None:
    """The wrapped note written at the top left of grid cell `spec` (an axes of its own, no frame), so the
    figure's layout leaves room for it."""
    ax = fig.add_subplot(spec)
    ax.axis("off")
    if note:
        ax.text(0.0, 1.0, note, ha="left", va="top", fontsize=SMALL_PT, transform=ax.transAxes)


def save_figure(fig, figures_dir: Path, stem: str) -> list[Path]:
    """`stem`.png (300 dpi) and `stem`.pdf (vector) in `figures_dir`, each written atomically, the figure's
    own size kept (no tight bounding box: a 7 in figure stays 7 in); returns both paths."""
    written = []
    for fmt in ("png", "pdf"):
        path = Path(figures_dir) / f"{stem}.{fmt}"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=DPI, metadata=_METADATA[fmt])
        written.append(path)
    return written
