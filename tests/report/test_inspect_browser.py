"""The inspect page in a real headless Chromium: each filter chosen as a user would, and the rows it shows."""

from helpers.browser import browser  # noqa: F401 (the fixture; without Chromium the module is skipped)
from helpers.inspect_page import BENCH, make_grid
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from vlmgrid import paths
from vlmgrid.stages.inspect import inspect_benchmark


def _choose(browser, select_id: str, text: str) -> None:
    """Open the select and click the option, as a user does."""
    browser.find_element(By.ID, select_id).click()
    Select(browser.find_element(By.ID, select_id)).select_by_visible_text(text)


def _shown(browser) -> list[str]:
    return [
        row.get_attribute("data-id")
        for row in browser.find_elements(By.CSS_SELECTOR, "tr.item")
        if row.is_displayed()
    ]


def test_each_filter_shows_the_rows_it_names(browser, default_config_data, tmp_path):
    config, _, records, wrong_id, error_id = make_grid(default_config_data, tmp_path)
    inspect_benchmark(config, BENCH)
    browser.get(paths.inspect_page_path(config.results_dir, BENCH).resolve().as_uri())
    everything = list(records["id"])
    count = browser.find_element(By.ID, "count")

    assert _shown(browser) == everything
    assert count.text == f"{len(everything)} of {len(everything)} rows shown"
    expected = {
        ("wrong answers", "any model"): [wrong_id],
        ("wrong answers", "alpha"): [wrong_id],
        ("wrong answers", "beta"): [],
        ("format errors", "any model"): [error_id],
        ("format errors", "alpha"): [],
        ("format errors", "beta"): [error_id],
    }
    for (show, model), ids in expected.items():
        _choose(browser, "show", show)
        _choose(browser, "model", model)
        assert _shown(browser) == ids, (show, model)
        assert count.text == f"{len(ids)} of {len(everything)} rows shown"

    _choose(browser, "show", "models disagree")
    assert _shown(browser) == [wrong_id]
    assert not browser.find_element(By.ID, "model").is_enabled()  # the filter compares every model
    _choose(browser, "show", "all items")
    assert _shown(browser) == everything
    # the thumbnails are part of the page: they load without a network
    assert all(
        image.get_attribute("naturalWidth") != "0" for image in browser.find_elements(By.TAG_NAME, "img")
    )
