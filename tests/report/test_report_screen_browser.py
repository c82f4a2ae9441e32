"""The Snakemake report of the default grid as a researcher first sees it: a 1280 x 800 screen in headless
Chromium. The first screen holds the main figure and the main table whole, every text on it reads at 11 px or
more (the figure's smallest, 7 pt drawn at 300 dpi, as the picture is shown), nothing scrolls sideways, the
legend is open and the results start at the top of the page."""

import pytest
from helpers.browser import browser  # noqa: F401 (the fixture; without Chromium the module is skipped)
from helpers.common import run
from selenium.webdriver.support.ui import WebDriverWait

from vlmgrid.report.style import DPI, SMALL_PT

WIDTH, HEIGHT = 1280, 800
MIN_PX = 11.0

# Every element that draws text of its own (a non-blank text node) in the first screen, with its computed
# font size, and whether it is inside the results (the first page's text) or the report's frame (Snakemake's).
VISIBLE_TEXT = """
const out = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const element = node.parentElement;
  if (!node.textContent.trim() || !element || element.closest('script, style, #loading-screen')) continue;
  const range = document.createRange();
  range.selectNodeContents(node);
  const box = range.getBoundingClientRect();
  const style = getComputedStyle(element);
  if (box.width === 0 || box.height === 0 \
|| style.visibility === 'hidden' || style.display === 'none') continue;
  if (box.bottom <= 0 || box.top >= innerHeight || box.right <= 0 || box.left >= innerWidth) continue;
  out.push([node.textContent.trim().slice(0, 40), parseFloat(style.fontSize)]);
}
return out;
"""


@pytest.fixture(scope="module")
def first_screen(browser, snakemake_run, tmp_path_factory):
    """The report of the default grid open at 1280 x 800, and a screenshot of its first screen."""
    from helpers.common import copy_workspace

    root = copy_workspace(snakemake_run, tmp_path_factory.mktemp("screen") / "repo")
    run(["snakemake", "--cores", "1", "--report", "results/report.html"], root)
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    browser.get((root / "results/report.html").as_uri())
    WebDriverWait(browser, 60).until(
        lambda b: b.execute_script(
            "const img = document.querySelector('#vlmgrid-front img');"
            "return img !== null && img.complete && img.naturalWidth > 0"
            " && document.querySelector('#vlmgrid-front table') !== null"
        )
    )
    # the report styles its page by script (Tailwind) as it renders: measured once the layout holds still
    layout = (
        "return JSON.stringify(['#vlmgrid-front img', '#vlmgrid-front table', 'nav'].map("
        "s => document.querySelector(s).getBoundingClientRect()))"
    )
    previous = [None]

    def settled(b):
        now = b.execute_script(layout)
        same, previous[0] = now == previous[0], now
        return same

    WebDriverWait(browser, 60, poll_frequency=0.5).until(settled)
    shot = root / "first-screen.png"
    browser.save_screenshot(str(shot))
    yield browser, shot
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def box(browser, selector: str) -> dict:
    return browser.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width};",
        selector,
    )


@pytest.mark.integration
def test_the_first_screen_holds_the_figure_and_the_table_whole(first_screen):
    browser, shot = first_screen
    assert browser.execute_script("return [innerWidth, innerHeight]") == [WIDTH, HEIGHT]
    figure, table = box(browser, "#vlmgrid-front img"), box(browser, "#vlmgrid-front table.vlmgrid-main")
    for name, rect in (("figure", figure), ("table", table)):
        assert 0 <= rect["top"] and rect["bottom"] <= HEIGHT, (name, rect)
        assert 0 <= rect["left"] and rect["right"] <= WIDTH, (name, rect)
    # no blank band above the results: the figure starts within the page's own padding
    assert figure["top"] <= 16, figure
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (WIDTH, HEIGHT)


@pytest.mark.integration
def test_every_text_on_the_first_screen_reads_at_11_px_or_more(first_screen):
    browser, _ = first_screen
    texts = browser.execute_script(VISIBLE_TEXT)
    assert any(text.startswith("textvqa-fixture") for text, _ in texts)  # the table's rows are among them
    small = [(text, size) for text, size in texts if size < MIN_PX]
    assert small == []
    # the figure's smallest text (SMALL_PT at DPI in the picture) at the size the picture is shown
    shown, natural = browser.execute_script(
        "const img = document.querySelector('#vlmgrid-front img');"
        "return [img.getBoundingClientRect().width, img.naturalWidth];"
    )
    assert SMALL_PT / 72 * DPI * shown / natural >= MIN_PX, (shown, natural)


@pytest.mark.integration
def test_nothing_scrolls_sideways_and_the_legend_is_open(first_screen):
    browser, _ = first_screen
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH
    # nor the report's content pane, which scrolls by itself
    pane = browser.execute_script(
        "const pane = document.querySelector('#vlmgrid-front').closest('.overflow-auto');"
        "return [pane.scrollWidth, pane.clientWidth];"
    )
    assert pane[0] <= pane[1], pane
    assert browser.execute_script("return document.querySelector('#vlmgrid-front details').open") is True
    legend = box(browser, "#vlmgrid-front details p")
    assert legend["width"] > 0 and legend["right"] <= WIDTH
