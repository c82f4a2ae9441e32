"""Each escaping function on hostile text, with the expected output written out by hand; and the report rule and
captions that Snakemake places in report.html."""

import json
import re

import pytest

from conftest import REPO
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.escaping import report_param, script_json

BREAKOUT = '</script><img src=x onerror="window.__pwned=1">'


def test_script_json_writes_script_breaking_characters_as_json_escapes():
    assert script_json(BREAKOUT) == r'"\u003c/script\u003e\u003cimg src=x onerror=\"window.__pwned=1\"\u003e"'
    assert script_json("<!-- a & b \u2028 c \u2029") == r'"\u003c!-- a \u0026 b \u2028 c \u2029"'
    assert script_json({"b": ["<x>"], "a": 1}) == r'{"a": 1, "b": ["\u003cx\u003e"]}'


def test_script_json_reads_back_as_the_same_value():
    value = {"title": BREAKOUT, "line": "one\u2028two\u2029three", "amp": "&amp;", "ünï": "çödé"}
    text = script_json(value)
    assert json.loads(text) == value
    assert not set("<>&\u2028\u2029") & set(text)


def test_report_param_of_a_title_has_no_markup_and_differs_per_title():
    assert report_param(BREAKOUT) == script_json(BREAKOUT)
    assert "<" not in report_param(BREAKOUT)
    assert report_param("a <b>") != report_param("a <i>")  # a changed title still reruns the report


def test_the_report_rule_passes_the_title_through_report_param():
    rule = (REPO / "workflow/rules/report.smk").read_text()
    assert re.search(r"^\s+title=report_param\(GRID\.title\),$", rule, re.MULTILINE)
    assert "GRID.title" not in rule.replace("report_param(GRID.title)", "")


def test_no_caption_renders_config_or_params():
    # Snakemake renders a caption's Jinja with the config and the job's params and then its reStructuredText:
    # a config string there could become a link or markup. The captions are fixed text.
    for caption in sorted((REPO / "workflow/report").glob("*.rst")):
        text = caption.read_text()
        assert not re.search(r"\{[{%][^}]*snakemake", text), caption.name


def test_a_data_or_results_folder_with_markup_is_refused_in_one_sentence(default_config_data):
    # Snakemake's report lists every output path, unescaped, in JSON inside a <script>: no escaping of ours reaches it
    for key in ("data_dir", "results_dir"):
        data = {**default_config_data, key: f"out/{BREAKOUT}"}
        with pytest.raises(VlmgridError) as error:
            validate_config(data, "grid.yaml")
        assert str(error.value) == (f"grid.yaml: {key}: 'out/{BREAKOUT}' does not match '^[^<]*$'; choose a folder "
                                    "whose path has no '<' (Snakemake's report would read it as markup in its page)")
    validate_config({**default_config_data, "results_dir": "out/a & b > c"}, "grid.yaml")  # no "<": nothing to refuse
