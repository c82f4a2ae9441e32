"""The report's figures at a paper's size: the main heatmap (every cell's number or word), the paper figures'
bars, and the one style they share (7 in, 300 dpi, vector PDF, the same bytes on a rerun)."""

from __future__ import annotations

import json
import re

import pytest
from helpers.common import REPO as REPO_ROOT
from helpers.common import heatmap_cells
from helpers.report import BENCHES, MODELS, _write, build, kaleidoscope_obj, mark_not_applicable, write_scores
from PIL import Image

from vlmgrid.report import build_report, load_grid
from vlmgrid.report.bars import grouped_bars
from vlmgrid.report.figures import main_heatmap
from vlmgrid.report.score_file import Estimate
from vlmgrid.report.style import NO_NUMBER_COLOUR, SMALL_PT, figure_style, pyplot, text_colour

DAGGER = "\u2020"


def cividis(value: float) -> tuple:
    import matplotlib

    return tuple(matplotlib.colormaps["cividis"](value / 100.0))


def set_fields(files: dict, model: str, bench: str, **fields) -> None:
    path = files[(model, bench)]
    obj = json.loads(path.read_text())
    obj.update(fields)
    if "value" in fields:
        obj["metrics"][obj["metric"]]["value"] = fields["value"]
    path.write_text(json.dumps(obj))


@pytest.fixture
def grid(tmp_path):
    """clip_tiny cannot run sqa_img; big-vlm scores 0.0 on flowers and is marked on pope (12% format
    errors)."""
    files = write_scores(tmp_path)
    mark_not_applicable(files, "clip_tiny", "sqa_img")
    set_fields(files, "big-vlm", "flowers", value=0.0, ci95=[0.0, 0.0])
    set_fields(files, "big-vlm", "pope-fixture", format_error_rate=12.0)
    return load_grid(files, MODELS, BENCHES)


@pytest.fixture
def heatmap(grid):
    plt = pyplot()
    with figure_style():
        fig = main_heatmap(grid, "T")
        yield fig
    plt.close(fig)


def test_not_applicable_is_grey_and_worded_never_a_colour_of_the_scale(heatmap):
    import numpy as np
    from matplotlib.colors import to_rgba

    words, colour = heatmap_cells(heatmap, MODELS)[("clip_tiny", "sqa_img")]
    assert words == "n/a"
    assert colour == to_rgba(NO_NUMBER_COLOUR)
    scale = np.array([cividis(v) for v in np.linspace(0, 100, 256)])
    assert np.abs(scale - np.array(colour)).max(axis=1).min() > 0.1  # no shade of the colormap is close to it
    patch = next(p for p in heatmap.axes[0].patches if tuple(p.get_xy()) == (1, 0))
    assert patch.get_hatch()


def test_zero_is_written_and_coloured_by_the_scale(heatmap):
    words, colour = heatmap_cells(heatmap, MODELS)[("big-vlm", "flowers")]
    assert words == "0.0" and colour == cividis(0.0)
    words, colour = heatmap_cells(heatmap, MODELS)[("clip_tiny", "pope-fixture")]
    assert words == "50.0" and colour == cividis(50.0)  # a fixed 0-100 scale, not the grid's range


def test_a_marked_value_carries_the_dagger_and_the_note_names_it(heatmap):
    cells = heatmap_cells(heatmap, MODELS)
    assert cells[("big-vlm", "pope-fixture")][0] == "51.2" + DAGGER
    assert cells[("big-vlm", "Average")][0].endswith(DAGGER)  # an average over a marked cell is marked too
    assert cells[("clip_tiny", "flowers")][0] == "18.0"
    texts = " ".join(t.get_text() for ax in heatmap.axes for t in ax.texts)
    assert (
        f"{DAGGER}: format errors above 10% of the prediction rows (big-vlm on pope-fixture 12.0%)" in texts
    )
    assert "n/a: the model cannot run the benchmark." in texts and "bars" not in texts


def test_headers_name_the_metric_and_the_colorbar_its_scale(heatmap):
    headers = [label.get_text() for ax in heatmap.axes[:2] for label in ax.get_xticklabels()]
    assert headers == ["pope-fixture\n(F1)", "sqa_img\n(Acc.)", "flowers\n(Top-1)", "Average"]
    assert any(ax.get_xlabel() == "score (0-100)" for ax in heatmap.axes)
    assert heatmap._suptitle.get_text() == "T"


def test_text_is_readable_at_print_size_and_contrasts_with_its_cell(heatmap):
    sizes = [
        t.get_fontsize()
        for ax in heatmap.axes
        for t in [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels()]
    ]
    assert min(sizes) >= SMALL_PT >= 7
    assert heatmap.get_figwidth() == 7.0
    assert text_colour(cividis(0.0)) == "white" and text_colour(cividis(100.0)) == "black"
    for ax in heatmap.axes[:2]:
        patches = {tuple(p.get_xy()): p for p in ax.patches}
        for t in ax.texts:
            x, y = t.get_position()
            face = patches[(int(x), int(y))].get_facecolor()
            if t.get_text()[0].isdigit():
                assert t.get_color() == text_colour(face)


def test_the_height_grows_with_the_models(tmp_path):
    files = write_scores(tmp_path)
    one = load_grid(files, MODELS[:1], BENCHES)
    two = load_grid(files, MODELS, BENCHES)
    plt = pyplot()
    with figure_style():
        small, tall = main_heatmap(one, "T"), main_heatmap(two, "T")
    assert tall.get_figheight() > small.get_figheight() and small.get_figwidth() == tall.get_figwidth() == 7.0
    plt.close(small)
    plt.close(tall)


def test_no_average_column_without_an_average(tmp_path):
    files = write_scores(tmp_path)
    for model in MODELS:
        mark_not_applicable(files, model, "sqa_img")
    plt = pyplot()
    with figure_style():
        fig = main_heatmap(load_grid(files, MODELS, BENCHES), "T")
    assert {column for _, column in heatmap_cells(fig, MODELS)} == set(BENCHES)
    plt.close(fig)


def test_a_cell_not_in_the_grid_reads_a_dash(tmp_path):
    files = write_scores(tmp_path)
    del files[("big-vlm", "flowers")]
    plt = pyplot()
    with figure_style():
        fig = main_heatmap(load_grid(files, MODELS, BENCHES), "T")
    cells = heatmap_cells(fig, MODELS)
    assert cells[("big-vlm", "flowers")][0] == "\u2013" and cells[("big-vlm", "Average")][0] == "\u2013"
    plt.close(fig)


# --- the files: PNG at 300 dpi, vector PDF, 7 in, the same bytes twice --------------------------------------


def kaleidoscope_files(root):
    return {
        ("vlm-a", "kal"): _write(
            root, kaleidoscope_obj("vlm-a", "kal", {"ar": (50.0, 0.0, 100.0), "te": (0.0, 0.0, 0.0)})
        ),
        ("clip", "kal"): _write(
            root,
            {
                "model": "clip",
                "benchmark": "kal",
                "applicable": False,
                "reason": "cannot",
                "metric": "accuracy",
            },
        ),
    }


def test_every_figure_is_seven_inches_at_300_dpi_and_a_vector_pdf(tmp_path):
    written = build_report(
        kaleidoscope_files(tmp_path),
        ["vlm-a", "clip"],
        ["kal"],
        tmp_path / "t",
        tmp_path / "f",
        kinds={"kal": "kaleidoscope"},
    )
    pngs = [p for p in written if p.suffix == ".png"]
    assert {p.name for p in pngs} == {"main.png", "reported.png", "kaleidoscope.png"}
    for png in pngs:
        with Image.open(png) as image:
            assert image.info["dpi"][0] == pytest.approx(300, abs=0.01), png.name
            assert image.size[0] == 2100, png.name
            assert "Software" not in image.info
        pdf = png.with_suffix(".pdf").read_bytes()
        assert pdf.startswith(b"%PDF-") and b"CreationDate" not in pdf
        # 7 in = 504 pt wide, and the words are text in an embedded font, not a picture of them
        width = float(re.search(rb"/MediaBox \[\s*0 0 ([\d.]+)", pdf).group(1))
        assert width == pytest.approx(504.0), png.name
        assert b"/FontFile2" in pdf and b"DejaVuSans" in pdf, png.name
    # the main figure's cells are vector shapes: the only picture is the colorbar's gradient
    assert (tmp_path / "f" / "main.pdf").read_bytes().count(b"/Subtype /Image") <= 1


def test_reruns_give_the_same_bytes(tmp_path):
    files = kaleidoscope_files(tmp_path)
    for run in ("a", "b"):
        build_report(
            files,
            ["vlm-a", "clip"],
            ["kal"],
            tmp_path / run / "t",
            tmp_path / run / "f",
            kinds={"kal": "kaleidoscope"},
        )
    names = sorted(p.name for p in (tmp_path / "a" / "f").iterdir())
    assert names == [
        "kaleidoscope.pdf",
        "kaleidoscope.png",
        "main-embedded.html",
        "main.pdf",
        "main.png",
        "reported.pdf",
        "reported.png",
    ]
    for name in names:
        assert (tmp_path / "a" / "f" / name).read_bytes() == (tmp_path / "b" / "f" / name).read_bytes(), name


def test_the_main_figure_of_a_built_report(tmp_path, main_heatmaps):
    files = write_scores(tmp_path)
    build(tmp_path, files, title="My grid")
    [cells] = main_heatmaps
    assert cells[("clip_tiny", "sqa_img")][0] == "25.0" and cells[("clip_tiny", "Average")][0] == "31.0"


# --- the paper figures' bars -------------------------------------------------------------------------------


def bars_figure(groups, series, ylabel="Acc. (%)"):
    plt = pyplot()
    with figure_style():
        fig = grouped_bars("K", groups, series, ylabel, note="a note")
    return fig, plt


def test_bars_keep_words_marks_and_the_page_width():
    marked = Estimate(40.0, 30.0, 50.0, flag=12.0)
    series = [("vlm-a" + DAGGER, [marked, Estimate(0.0, 0.0, 0.0)]), ("clip", ["n/a", "n/a"])]
    fig, plt = bars_figure(["ar", "te"], series)
    [ax] = [ax for ax in fig.axes if ax.patches]
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("n/a") == 2 and "40.0" + DAGGER in texts and "0.0" in texts
    bars = [p for p in ax.patches if p.get_height() > 0]
    assert [p.get_hatch() for p in bars] == ["///"]  # only the marked bar is hatched
    assert ax.get_ylabel() == "Acc. (%)" and fig.get_figwidth() == 7.0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["vlm-a" + DAGGER, "clip"]
    plt.close(fig)


def test_many_groups_wrap_onto_rows_of_panels():
    groups = [f"lang-{i}" for i in range(40)]
    series = [(f"m{k}", [Estimate(float(i + k)) for i in range(40)]) for k in range(3)]
    fig, plt = bars_figure(groups, series)
    panels = [ax for ax in fig.axes if ax.patches]
    assert len(panels) > 1 and fig.get_figwidth() == 7.0
    shown = [label.get_text() for ax in panels for label in ax.get_xticklabels()]
    assert shown == groups  # every group once, in order
    plt.close(fig)


def test_the_paper_figure_labels_its_metric(tmp_path, monkeypatch):
    import vlmgrid.report.bars as bars

    labels = []
    monkeypatch.setattr(
        bars,
        "grouped_bars",
        lambda title, groups, series, ylabel, note="": (labels.append(ylabel), pyplot().figure())[1],
    )
    build_report(
        kaleidoscope_files(tmp_path),
        ["vlm-a", "clip"],
        ["kal"],
        tmp_path / "t",
        tmp_path / "f",
        kinds={"kal": "kaleidoscope"},
    )
    assert labels == ["Acc. (%)"]


def test_bars_without_a_group_draw_an_empty_panel_without_warnings():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. identical x limits
        fig, plt = bars_figure([], [("clip", [])])
    assert fig.get_figwidth() == 7.0
    plt.close(fig)


def all_texts(fig) -> list[str]:
    texts = [*fig.texts, *([fig._suptitle] if fig._suptitle else [])]
    for ax in fig.axes:
        texts += [
            *ax.texts,
            ax.title,
            ax.xaxis.label,
            ax.yaxis.label,
            *ax.get_xticklabels(),
            *ax.get_yticklabels(),
        ]
        if ax.get_legend():
            texts += ax.get_legend().get_texts()
    for legend in fig.legends:
        texts += legend.get_texts()
    return [t.get_text() for t in texts]


def test_no_figure_names_a_metric_by_its_raw_key(tmp_path, monkeypatch):
    import matplotlib.figure
    from helpers.reported import build as build_reported

    saved = {}
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, **kwargs):
        saved[id(fig)] = all_texts(fig)
        return savefig(fig, path, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    build_reported(tmp_path)  # MME scaled, POPE F1, TextVQA (n/a), MMBench circular
    assert len(saved) == 2  # the main figure and the reported figure
    words = " ".join(" ".join(texts) for texts in saved.values())
    assert "mme-b\n(MME scaled)" in words and "mmb\n(circular acc.)" in words
    assert "llava13 on tvqa VQA acc. (n/a)" in words.replace("\n", " ")  # the reported figure's note
    assert not re.search(r"vqa_accuracy|circular_accuracy|acc_at_50|(?<!MME )scaled", words)


def test_value_labels_sit_clear_of_the_whisker_caps_and_inside_the_panel():
    from vlmgrid.report.bars import LABEL_GAP_PT

    # a whisker up to 100 (the highest a label can start), a zero-width one at 0, an ordinary one
    series = [
        ("a", [Estimate(97.5, 90.0, 100.0), Estimate(50.0, 40.0, 62.0)]),
        ("b", [Estimate(0.0, 0.0, 0.0), Estimate(99.0, 95.0, 100.0, flag=12.0)]),
    ]
    fig, plt = bars_figure(["ar", "te"], series)
    [ax] = [ax for ax in fig.axes if ax.patches]
    renderer = fig.canvas.get_renderer()
    px_per_pt = fig.dpi / 72.0
    # the whiskers' upper ends, in pixels, from the error bars' line segments (one per bar, drawing order)
    from matplotlib.container import BarContainer

    tops, cap_tops = [], []
    for container in [c for c in ax.containers if isinstance(c, BarContainer)]:
        _, caps, [whiskers] = container.errorbar.lines
        tops += [ax.transData.transform(segment[1]) for segment in whiskers.get_segments()]
        cap_tops.append(max(cap.get_window_extent(renderer).y1 for cap in caps))
    labels = [t for t in ax.texts if t.get_text() and t.get_text()[0].isdigit()]
    assert [t.get_text() for t in labels] == ["97.5", "50.0", "0.0", "99.0" + DAGGER]
    assert len(tops) == len(labels)
    panel = ax.get_window_extent(renderer)
    for label, (x, top) in zip(labels, tops):
        box = label.get_window_extent(renderer)
        assert label.get_fontsize() >= SMALL_PT >= 7  # readable printed at 7 in
        assert box.x0 < x < box.x1  # over its own bar
        # above the whisker's end by the gap, so neither the cap nor the whisker touches it
        assert box.y0 - top >= (LABEL_GAP_PT - 0.5) * px_per_pt, label.get_text()
        assert box.y1 <= panel.y1, label.get_text()  # inside the panel, under its top
    # and above the caps as drawn (their marker's thickness included): series a's highest cap is at 100
    assert labels[0].get_window_extent(renderer).y0 > cap_tops[0]
    # neighbouring labels do not overlap
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
    assert all(left.x1 <= right.x0 for left, right in zip(boxes, boxes[1:]))
    plt.close(fig)


def test_every_paper_figure_note_names_its_interval(tmp_path, monkeypatch):
    import vlmgrid.report.bars as bars

    notes = []
    monkeypatch.setattr(
        bars,
        "grouped_bars",
        lambda title, groups, series, ylabel, note="": (notes.append(note), pyplot().figure())[1],
    )
    build_report(
        kaleidoscope_files(tmp_path),
        ["vlm-a", "clip"],
        ["kal"],
        tmp_path / "t",
        tmp_path / "f",
        kinds={"kal": "kaleidoscope"},
    )
    # the score files' bootstrap: percentile, over items, 5 resamples (kaleidoscope_obj)
    assert [note.split(". ")[0] for note in notes] == [
        "Whiskers: 95% percentile bootstrap CI over items (5 resamples)"
    ]


def test_the_reported_figure_note_names_its_interval(tmp_path, monkeypatch):
    import matplotlib.figure
    from helpers.reported import build as build_reported

    saved = []
    savefig = matplotlib.figure.Figure.savefig

    def record(fig, path, **kwargs):
        saved.append(" ".join(all_texts(fig)))
        return savefig(fig, path, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    build_reported(tmp_path)
    words = " ".join(saved).replace("\n", " ")
    assert "Whiskers: the reproduced figure's 95% percentile bootstrap CI over items (" in words


def test_every_figure_caption_names_what_its_numbers_and_whiskers_are():
    from vlmgrid.report.outputs import report_files
    from vlmgrid.report.papers import PAPER_LIST

    captions = {
        caption
        for path, caption in report_files(REPO_ROOT / "results", {p.name: p.name for p in PAPER_LIST})
        if path.suffix == ".png"
    }
    assert {"main_figure", "reported", "kaleidoscope_figure", "cvqa_pairs_figure"} <= captions
    for caption in captions:
        words = " ".join((REPO_ROOT / "workflow" / "report" / f"{caption}.rst").read_text().split())
        assert "95% percentile bootstrap" in words and "over items" in words, caption
