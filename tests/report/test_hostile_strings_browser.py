"""Hostile strings in a real headless Chromium: the Snakemake report and the main table of a tiny grid whose
title and descriptions carry markup, and an inspect page whose item text, answers and names do. No element the
strings would create exists, no script of theirs runs, and the report's own scripts still read their data."""

import pytest
import yaml
from helpers.browser import browser  # noqa: F401 (the fixture; without Chromium the module is skipped)
from helpers.common import copy_workflow, run, small_grid_config
from selenium.webdriver.common.by import By

from vlmgrid.report.inspect_page import FORMAT_ERROR, WRONG, Answer, InspectPage, Item, render_page

# Each would create an element or run a script if it reached the page as markup.
HOSTILE = [
    '</script><img src=x onerror="window.__pwned=1">',
    "</script><img src=x onerror=window.__pwned=1>",
    '"><svg onload="window.__pwned=1">',
    "'><svg onload=window.__pwned=1>",
    "<!--<script>",
    "javascript:window.__pwned=1",
    "line\u2028separator\u2029paragraph",
]
EVIL = " ".join(HOSTILE)
# Elements or attributes that only the strings above could have put in a page.
INJECTED = 'img[src="x"], [onerror], [onload], a[href^="javascript:window.__pwned"]'


def assert_nothing_injected(browser, where: str) -> None:
    assert browser.execute_script("return typeof window.__pwned") == "undefined", where
    assert browser.find_elements(By.CSS_SELECTOR, INJECTED) == [], where


@pytest.fixture(scope="module")
def hostile_grid(tmp_path_factory):
    """The random baseline on the POPE fixture through Snakemake, with a hostile title and descriptions, and
    its report.html."""
    root = copy_workflow(tmp_path_factory.mktemp("hostile") / "repo")
    data = small_grid_config({"models": ["random"], "benchmarks": ["pope-fixture"]})
    data["title"] = f"Results {EVIL}"
    data["models"]["random"]["description"] = f"model {EVIL}"
    data["benchmarks"]["pope-fixture"]["description"] = f"benchmark {EVIL}"
    config = root / "config" / "hostile.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    run(["snakemake", "--cores", "2", "--configfile", str(config)], root)
    run(["snakemake", "--cores", "1", "--configfile", str(config), "--report", "results/report.html"], root)
    return root


@pytest.mark.integration
def test_snakemake_report_runs_no_script_of_a_hostile_title(browser, hostile_grid):
    browser.get((hostile_grid / "results/report.html").as_uri())
    assert_nothing_injected(browser, "report.html")
    # the report's data scripts were not cut short: the report job's params hold the title, whole
    params = browser.execute_script(
        "return Object.values(results).find(r => r.job_properties.rule === 'report').job_properties.params"
    )
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=" in params
    assert browser.find_element(By.ID, "app").find_elements(By.CSS_SELECTOR, "*")  # the app rendered


@pytest.mark.integration
def test_main_table_shows_a_hostile_title_as_text(browser, hostile_grid):
    browser.get((hostile_grid / "results/tables/main.html").as_uri())
    assert_nothing_injected(browser, "tables/main.html")
    assert browser.find_element(By.TAG_NAME, "b").text.startswith("Results </script><img src=x onerror=")


def test_inspect_page_shows_hostile_items_and_answers_as_text(browser, tmp_path):
    answers = [
        Answer(
            variant=f"v {EVIL}", raw=f"raw {EVIL}", reading=f"read {EVIL}", verdict=WRONG, note=f"note {EVIL}"
        ),
        Answer(variant="v2", raw=f"long {EVIL} " * 20, reading=None, verdict=FORMAT_ERROR, note=EVIL),
    ]
    item = Item(
        item_id=f"id {EVIL}",
        thumbnail=None,
        image_note=f"no image {EVIL}",
        question=f"question {EVIL}",
        options=[f"option {text}" for text in HOSTILE],
        labels="letters",
        gold=f"gold {EVIL}",
        answers={f"model {EVIL}": answers},
        disagree=False,
    )
    page = InspectPage(
        benchmark=f"bench {EVIL}",
        kind=f"kind {EVIL}",
        metric="accuracy",
        rule=f"rule {EVIL}",
        models=[f"model {EVIL}"],
        not_applicable={f"other {EVIL}": f"reason {EVIL}"},
        items=[item],
        n_items=1,
        sample_note=f"sample {EVIL}",
        notes=[f"notice {EVIL}"],
    )
    path = tmp_path / "index.html"
    path.write_text(render_page(page), encoding="utf-8")
    browser.get(path.as_uri())
    assert_nothing_injected(browser, "inspect page")
    assert (
        browser.find_element(By.CSS_SELECTOR, ".question").get_attribute("textContent") == f"question {EVIL}"
    )
    # the page's own filters still run
    assert browser.find_element(By.ID, "count").text == "1 of 1 rows shown"
