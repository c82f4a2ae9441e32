"""Each escaping function on hostile text, with the expected output written out by hand; the report rule and
captions that Snakemake places in report.html; and the lines the commands print on a terminal."""

import json
import logging
import re

import pytest
import yaml
from helpers.common import REPO
from helpers.inspect_page import BENCH, make_grid

from vlmgrid import messages
from vlmgrid.cli import main
from vlmgrid.config import validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.escaping import report_param, script_json, terminal_json, terminal_message, terminal_text

BREAKOUT = '</script><img src=x onerror="window.__pwned=1">'
# What a terminal acts on instead of showing it: a window title set (OSC ... BEL), a colour (CSI), a carriage
# return and a line break (a row overwritten or split), a right-to-left override (the rest of the line
# reversed).
TERMINAL = "\x1b]0;pwned\x07\x1b[31m\r\n\u202e"
TERMINAL_SHOWN = r"\x1b]0;pwned\x07\x1b[31m\r\n\u202e"
# Every character a terminal or a viewer acts on (the C0 and C1 controls, DEL, the bidirectional controls, the
# Unicode line and paragraph separators), written out here rather than taken from the code under test.
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def assert_no_raw_control(output: str) -> None:
    """Each of the output's lines (its own line breaks apart) holds no character a terminal acts on."""
    for line in output.split("\n"):
        assert not RAW.search(line), repr(line)


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
    # Snakemake's report lists every output path, unescaped, in JSON inside a <script>: no escaping of ours
    # reaches it
    for key in ("data_dir", "results_dir"):
        data = {**default_config_data, key: f"out/{BREAKOUT}"}
        with pytest.raises(VlmgridError) as error:
            validate_config(data, "grid.yaml")
        assert str(error.value) == (
            f"grid.yaml: {key}: 'out/{BREAKOUT}' does not match '^[^<]*$'; choose a folder "
            "whose path has no '<' (Snakemake's report would read it as markup in its page)"
        )
    validate_config(
        {**default_config_data, "results_dir": "out/a & b > c"}, "grid.yaml"
    )  # no "<": nothing to refuse


# --- the terminal -------------------------------------------------------------------------------------------


def test_terminal_text_writes_controls_and_direction_marks_as_visible_escapes():
    assert terminal_text(f"id{TERMINAL}gpt") == f"id{TERMINAL_SHOWN}gpt"
    assert terminal_text("\x00\t\x7f\x85\x9b\u061c\u200e\u200f\u202a\u2066\u2069\u2028\u2029") == (
        r"\x00\t\x7f\x85\x9b\u061c\u200e\u200f\u202a\u2066\u2069\u2028\u2029"
    )
    assert terminal_text("\ud800") == r"\ud800"  # a lone surrogate, which a UTF-8 terminal cannot be sent


def test_terminal_text_keeps_other_text_and_a_backslash_cannot_forge_an_escape():
    text = "Straße 東京 مرحبا a\u200db “quoted” – é"  # a zero-width joiner is part of ordinary text
    assert terminal_text(text) == text
    assert terminal_text(r"C:\x1b") == r"C:\\x1b"
    assert terminal_text(r"C:\x1b") != terminal_text("C:\x1b")


def test_terminal_message_escapes_what_a_terminal_acts_on_and_leaves_a_libraries_backslashes():
    assert terminal_message(f"item a{TERMINAL} is unknown") == f"item a{TERMINAL_SHOWN} is unknown"
    said = r"found character '\t' that cannot start any token"  # YAML's own words for a tab
    assert terminal_message(said) == said


def test_terminal_json_reads_back_as_the_same_value_and_acts_on_no_terminal():
    value = {"raw": f"answer {TERMINAL}\x85\u2066\x7f", "text": "é 東京", "path": "a\\b"}
    text = terminal_json(value)
    assert json.loads(text) == value
    assert not RAW.search(text) and "é 東京" in text  # readable: only what a terminal acts on is escaped


def test_an_error_is_one_line_with_the_data_it_names_escaped_and_quoted_lines_stay_lines():
    assert messages.error_text(VlmgridError(f'item "a{TERMINAL}" is unknown')) == (
        f'vlmgrid: error: item "a{TERMINAL_SHOWN}" is unknown'
    )
    assert (
        messages.error_text(VlmgridError("it failed"), "llava on mme")
        == "vlmgrid: error: llava on mme: it failed"
    )
    # a server's last log lines, quoted below the sentence: a line each, each escaped
    failure = VlmgridError(
        "model m: the serve command exited; the last lines of its log s.log:",
        quoted="INFO start\n\x1b[31mERROR\x1b[0m out of memory\rgone",
    )
    assert str(failure) == (
        "model m: the serve command exited; the last lines of its log s.log:\nINFO start\n"
        "\x1b[31mERROR\x1b[0m out of memory\rgone"
    )
    assert messages.error_text(failure) == (
        "vlmgrid: error: model m: the serve command exited; the last lines of "
        "its log s.log:\nINFO start\n" + r"\x1b[31mERROR\x1b[0m out of memory\rgone"
    )


def test_log_lines_on_stderr_show_the_data_they_name_escaped(capsys):
    with messages.on_stderr():
        logging.getLogger("vlmgrid.stages.test").info(f"wrote a{TERMINAL}b")
        for handler in logging.getLogger("vlmgrid").handlers:  # as a piece of `vlmgrid row` labels its lines
            handler.setFormatter(logging.Formatter("llava on mme: %(message)s"))
        logging.getLogger("vlmgrid.stages.test").info(f"done c{TERMINAL}")
    assert capsys.readouterr().err == f"wrote a{TERMINAL_SHOWN}b\nllava on mme: done c{TERMINAL_SHOWN}\n"


def test_a_model_or_benchmark_name_cannot_hold_a_line_break(default_config_data):
    # A name is printed as it is by `vlmgrid plan`, `cells`, `models` and `benchmarks`: the schema's pattern
    # alone lets a final line break through (Python's `$` matches before one).
    for section in ("models", "benchmarks"):
        data = json.loads(json.dumps(default_config_data))
        name = next(iter(data["grid"][section]))
        data[section][f"{name}\n"] = data[section].pop(name)
        data["grid"][section] = [f"{name}\n" if n == name else n for n in data["grid"][section]]
        with pytest.raises(VlmgridError, match=f'{section}: "{re.escape(name)}\n" is not a valid name'):
            validate_config(data, "grid.yaml")


def test_the_listings_show_hostile_config_and_results_paths_escaped(default_config_data, tmp_path, capsys):
    root = tmp_path / f"grid{TERMINAL}"
    root.mkdir()
    path = root / "grid.yaml"
    path.write_text(
        yaml.safe_dump(
            {**default_config_data, "data_dir": str(root / "data"), "results_dir": str(root / "results")}
        )
    )
    shown = terminal_text(str(path))
    for command, line in (
        (["check-config"], f"{shown}: valid; "),
        (["models"], f"models in {shown}:"),
        (["benchmarks"], f"benchmarks in {shown}:"),
        (["cells", "--paths"], f"{terminal_text(str(root))}/results/predictions/"),
    ):
        assert main([*command, "--config", str(path)]) == 0
        out = capsys.readouterr().out
        assert_no_raw_control(out)
        assert any(printed.startswith(line) for printed in out.splitlines()), (command, out)


def test_the_inspect_commands_console_line_shows_a_hostile_results_path_escaped(
    default_config_data, tmp_path, capsys
):
    root = tmp_path / f"grid{TERMINAL}"
    root.mkdir()
    config, config_path, *_ = make_grid(default_config_data, root, size=3)
    capsys.readouterr()
    assert main(["inspect", BENCH, "--config", str(config_path)]) == 0
    err = capsys.readouterr().err
    assert_no_raw_control(err)
    assert f"wrote {terminal_text(str(root))}/results/inspect/{BENCH}/index.html" in err, err


def test_the_inputs_commands_json_lines_read_back_and_act_on_no_terminal(tmp_path, capsys):
    system = f"Be brief.{TERMINAL}\x85\u2066"  # a config's text, handed to the model as it is
    data = {
        "data_dir": str(tmp_path / "data"),
        "results_dir": str(tmp_path / "results"),
        "benchmarks": {"pope": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 1}}},
        "models": {
            "api": {
                "backend": "openai",
                "model": "m",
                "base_url": "http://127.0.0.1:9/v1",
                "system": system,
                "image_size": 16,
            }
        },
        "grid": {"models": ["api"], "benchmarks": ["pope"]},
    }
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(data))
    assert main(["prepare", "pope", "--config", str(path)]) == 0
    capsys.readouterr()
    assert main(["inputs", "api", "pope", "--config", str(path), "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert_no_raw_control(out)
    requests = [json.loads(line) for line in out.splitlines()]
    assert requests and requests[0]["messages"][0] == {
        "role": "system",
        "content": system,
    }  # read back as it was
