import copy

import pytest
import yaml

from vlmgrid.cli import main
from vlmgrid.config import load_config, validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.stages.plan import not_applicable


def test_default_config_is_valid_and_has_every_fixture_benchmark(default_config_data):
    config = validate_config(default_config_data, source="config/config.yaml")
    assert [c.name for c in config.cells][:2] == [
        "clip-tiny-imagenet-fixture",
        "clip-tiny-caltech101-fixture",
    ]
    assert len(config.cells) == 3 * 14
    kinds = {config.benchmark(b)["kind"] for b in config.benchmarks}
    assert kinds == {
        "imagenet",
        "caltech101",
        "flowers102",
        "food101",
        "scienceqa_img",
        "textvqa",
        "pope",
        "mme",
        "mmbench",
        "cvbench",
        "mmvp",
        "kaleidoscope",
        "cvqa",
        "dance",
    }
    assert config.bootstrap == {"samples": 1000, "seed": 0}
    assert config.infer["part_size"] == 64


def test_defaults_are_filled(default_config_data):
    data = copy.deepcopy(default_config_data)
    del data["bootstrap"], data["results_dir"]
    config = validate_config(data)
    assert config.bootstrap == {"samples": 1000, "seed": 0}
    assert str(config.results_dir) == "results"


def _error(data) -> str:
    with pytest.raises(VlmgridError) as info:
        validate_config(data, source="cfg.yaml")
    return str(info.value)


def test_unknown_top_level_key_names_closest(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["bootstrapp"] = {"samples": 10}
    message = _error(data)
    assert message.startswith("cfg.yaml: ")
    assert 'unknown key "bootstrapp"' in message and 'did you mean "bootstrap"' in message


def test_unknown_model_key_names_closest(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["models"]["clip-tiny"]["batchsize"] = 8
    message = _error(data)
    assert 'unknown key "batchsize" in models.clip-tiny' in message
    assert 'did you mean "batch_size"' in message


def test_wrong_type_names_the_key(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["models"]["clip-tiny"]["batch_size"] = "big"
    assert "models.clip-tiny.batch_size: expected integer, got 'big'" in _error(data)


def test_backend_typo_names_closest(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["models"]["clip-tiny"]["backend"] = "open-clip"
    message = _error(data)
    assert "models.clip-tiny.backend" in message and 'did you mean "open_clip"' in message


@pytest.mark.parametrize(
    "keys, value, expected",
    [
        (
            ("grid", "models"),
            ["clip-tny", "random"],
            ('grid.models names "clip-tny"', 'did you mean "clip-tiny"'),
        ),
        (
            ("benchmarks", "pope-fixture", "kind"),
            "popes",
            ('benchmarks.pope-fixture.kind: "popes" is not a valid value', 'did you mean "pope"'),
        ),
    ],
    ids=["grid name that does not exist", "unknown benchmark kind"],
)
def test_a_misspelt_name_is_told_the_closest(default_config_data, keys, value, expected):
    data = copy.deepcopy(default_config_data)
    *parents, last = keys
    target = data
    for key in parents:
        target = target[key]
    target[last] = value
    message = _error(data)
    assert all(part in message for part in expected), message


def test_source_key_unknown_for_its_type(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["benchmarks"]["pope-fixture"]["source"]["revision"] = "abc"
    assert 'unknown key "revision" in benchmarks.pope-fixture.source' in _error(data)


def test_hub_source_needs_a_pinned_revision(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["benchmarks"]["pope-fixture"]["source"] = {"type": "hf_hub"}
    assert "'revision' is a required property" in _error(data)


def test_reserved_benchmark_name(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["benchmarks"]["models"] = data["benchmarks"].pop("pope-fixture")
    assert '"models" is not a valid name' in _error(data)


def test_missing_config_file(tmp_path):
    with pytest.raises(VlmgridError, match=r"config file .*nope.yaml not found; pass --config"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    "text, said",
    [
        # an unclosed flow list: the parser notices at the next key, the fix points back at the bracket
        (
            'title: "x"\nmodels:\n  a: [1, 2\nbenchmarks: {}\n',
            "is not valid YAML at line 4, column 11 (expected ',' or ']', but got ':'); close the [ opened "
            "at line 3, column 6 with ], or separate its items with commas",
        ),
        (
            "models:\n\trandom: {}\n",
            "is not valid YAML at line 2, column 1 (found character '\\t' that cannot start any token); "
            "indent with spaces, not tabs",
        ),
        (
            'title: "my grid\nmodels: {}\n',
            "is not valid YAML at line 3, column 1 (found unexpected end of stream); close the quote opened "
            "at line 1, column 8",
        ),
        (
            "title: grid: two\n",
            "is not valid YAML at line 1, column 12 (mapping values are not allowed here); quote the value, "
            "which holds a ': ', or put the key on a line of its own",
        ),
        (
            "title: x\nmodels\nbenchmarks: {}\n",
            "is not valid YAML at line 3, column 1 (could not find expected ':'); end the key at line 2, "
            "column 1 with ': ', or quote the text",
        ),
        # a tag that would build a Python object (and run a command) is never constructed
        (
            'title: !!python/object/apply:os.system ["touch pwned"]\n',
            "is not valid YAML at line 1, column 8 (could not determine a constructor for the tag "
            "'tag:yaml.org,2002:python/object/apply:os.system'); remove the tag (the !name before the "
            "value): a grid config is plain YAML",
        ),
    ],
)
def test_invalid_yaml_is_one_sentence_naming_the_file_line_column_and_fix(tmp_path, capsys, text, said):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(VlmgridError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path} {said}"
    # check-config, which a user runs on a config before Snakemake, says the same sentence and no traceback
    assert main(["check-config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == f"vlmgrid: error: {path} {said}"


def test_model_fingerprint_changes_only_with_that_model(default_config_data):
    base = validate_config(copy.deepcopy(default_config_data))
    data = copy.deepcopy(default_config_data)
    data["models"]["random"]["seed"] = 1
    changed = validate_config(data)
    assert base.model_fingerprint("random") != changed.model_fingerprint("random")
    assert base.model_fingerprint("clip-tiny") == changed.model_fingerprint("clip-tiny")


def test_every_catalog_model_is_valid_and_pinned_or_marked(default_config_data):
    """config/models.yaml: each entry passes the schema inside a grid, and an unpinned one says so."""
    from helpers.common import REPO

    text = (REPO / "config" / "models.yaml").read_text()
    catalog = yaml.safe_load(text)["models"]
    assert len(catalog) >= 20
    for name, entry in catalog.items():
        data = copy.deepcopy(default_config_data)
        data["models"] = {name: entry}
        data["grid"] = {"models": [name], "benchmarks": ["pope-fixture"]}
        config = validate_config(data, source="config/models.yaml")
        not_applicable(config, name, "pope-fixture")  # every backend answers the question
        revision = entry.get("source", {}).get("revision")
        block = text.split(f"\n  {name}:\n", 1)[1].split("\n\n", 1)[0]
        if revision == "main":
            assert "# unpinned" in block, name
        elif revision is not None:
            assert len(revision) == 40 and int(revision, 16) >= 0, name


def test_a_pair_that_cannot_run_is_not_applicable_not_an_error(default_config_data):
    config = validate_config(default_config_data)
    assert "textvqa-fixture" in config.benchmarks
    assert not_applicable(config, "clip-tiny", "textvqa-fixture") == (
        'model "clip-tiny" (open_clip backend, capability embed) cannot run benchmark "textvqa-fixture" '
        "(short_answer protocol needs generate)"
    )
    assert not_applicable(config, "random", "textvqa-fixture") == (
        'model "random" (baseline backend, capability score_options) cannot run benchmark "textvqa-fixture" '
        "(short_answer protocol needs generate)"
    )
    assert not_applicable(config, "llava-tiny", "textvqa-fixture") is None
    assert all(
        not_applicable(config, m, b) is None
        for m in config.models
        for b in config.benchmarks
        if b != "textvqa-fixture"
    )


def test_not_applicable_follows_settings_dependent_capabilities(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["models"]["api"] = {"backend": "openai", "base_url": "http://localhost:1/v1", "model": "m"}
    data["grid"]["models"] = ["api"]
    config = validate_config(data)
    # Generation alone runs yes/no by reading the answer; option scoring would need logprobs.
    assert not_applicable(config, "api", "pope-fixture") is None
    with pytest.raises(VlmgridError, match='no model named "clip-tin"'):
        not_applicable(config, "clip-tin", "pope-fixture")


def test_prompts_dir_default_and_override(default_config_data):
    assert str(validate_config(copy.deepcopy(default_config_data)).prompts_dir) == "config/prompts"
    data = copy.deepcopy(default_config_data)
    data["prompts_dir"] = "my/prompts"
    assert str(validate_config(data).prompts_dir) == "my/prompts"
    data["prompts_dir"] = 3
    assert "prompts_dir: expected string" in _error(data)


def test_prompt_file_hashes(tmp_path):
    from vlmgrid.fileio import sha256_file
    from vlmgrid.prompts import prompt_file_hashes

    assert prompt_file_hashes(tmp_path / "absent") == {}
    (tmp_path / "lvlm.yaml").write_text("templates: [a]\n")
    (tmp_path / "README.md").write_text("not a prompt set\n")
    hashes = prompt_file_hashes(tmp_path)
    assert hashes == {"lvlm.yaml": sha256_file(tmp_path / "lvlm.yaml")}
    (tmp_path / "lvlm.yaml").write_text("templates: [b]\n")
    assert prompt_file_hashes(tmp_path) != hashes


@pytest.mark.parametrize(
    "name, kinds",
    [
        (
            "carpe",
            {
                "imagenet",
                "caltech101",
                "flowers102",
                "food101",
                "scienceqa_img",
                "textvqa",
                "pope",
                "mme",
                "mmbench",
                "cvbench",
                "mmvp",
            },
        ),
        ("kaleidoscope", {"kaleidoscope"}),
        ("cvqa", {"cvqa"}),
    ],
)
def test_paper_grids_validate_on_real_sources(name, kinds):
    from helpers.common import REPO

    config = load_config(REPO / "config" / f"{name}.yaml")
    assert {config.benchmark(b)["kind"] for b in config.benchmarks} == kinds
    assert all(config.benchmark(b)["source"]["type"] != "fixture" for b in config.benchmarks)
    assert all(
        config.model(m)["source"]["type"] != "fixture" for m in config.models if "source" in config.model(m)
    )


# ---------------------------------------------------------------------------------------- the workflow's file


def test_workflow_config_file_is_the_given_one_else_the_default():
    from vlmgrid.config import DEFAULT_CONFIG, workflow_config_file

    assert workflow_config_file() == DEFAULT_CONFIG
    assert workflow_config_file([], ["/venv/bin/snakemake", "-n"]) == DEFAULT_CONFIG
    assert (
        str(
            workflow_config_file(["/r/config/carpe.yaml"], ["snakemake", "--configfile", "config/carpe.yaml"])
        )
        == "/r/config/carpe.yaml"
    )
    # another program's command line (the workflow run through the Python API) is not read
    assert str(workflow_config_file(["/r/a.yaml"], ["myscript.py", "--configfile", "x", "y"])) == "/r/a.yaml"


@pytest.mark.parametrize(
    "argv",
    [
        ["/venv/bin/snakemake", "--configfile", "a.yaml", "b.yaml"],
        ["/venv/bin/snakemake", "--configfile", "a.yaml", "-n", "--configfiles", "b.yaml"],
        ["/venv/bin/snakemake", "--configfile=a.yaml", "--configfile=b.yaml", "--cores", "2"],
        [
            "/venv/lib/python3/site-packages/snakemake/__main__.py",
            "--configfile",
            "a.yaml",
            "--configfile",
            "b.yaml",
        ],
    ],
)
def test_workflow_config_file_refuses_more_than_one(argv):
    from vlmgrid.config import workflow_config_file

    # Snakemake keeps only the last of repeated --configfile options: the command line shows them all
    with pytest.raises(
        VlmgridError,
        match=r"^--configfile was given 2 files \(a.yaml, b.yaml\), but a run reads one "
        r"grid config: put the grid in one file and pass only that one$",
    ):
        workflow_config_file(["b.yaml"], argv)
    with pytest.raises(VlmgridError, match="--configfile was given 2 files"):
        workflow_config_file(["a.yaml", "b.yaml"])


def test_gpus_zero_is_refused_with_the_fix(default_config_data):
    data = copy.deepcopy(default_config_data)
    data["models"]["llava-tiny"]["gpus"] = 0
    with pytest.raises(
        VlmgridError,
        match=r"^<config>: models\.llava-tiny\.gpus: 0 is less than the minimum of 1; a "
        r"job holds 1 GPU or more; to run the model on the CPU, set device: cpu",
    ):
        validate_config(data)


def test_gpus_per_job_follow_the_backend_device_and_gpus(default_config_data):
    from vlmgrid.stages.plan import gpu_problems, gpus

    data = copy.deepcopy(default_config_data)
    data["models"]["llava-tiny"]["gpus"] = 4
    data["models"]["llava-cpu"] = {**data["models"]["llava-tiny"], "device": "cpu"}
    data["grid"]["models"] = ["llava-tiny", "llava-cpu", "clip-tiny", "random"]
    config = validate_config(data, source="grid.yaml")
    assert [gpus(config, model) for model in config.models] == [4, 0, 1, 0]
    assert gpu_problems(config, ["0", "1", "2", "3"]) == [] and gpu_problems(config, []) == []
    short = gpu_problems(config, ["0", "1"])
    assert short == [
        'model "llava-tiny" cannot run here: it needs 4 GPUs at once, but this machine shows only 2 '
        "(0, 1), so it would wait forever; give it fewer gpus in grid.yaml, or run the grid on a machine "
        "with 4 GPUs"
    ]
    limited = gpu_problems(config, ["0", "1", "2", "3"], limit=2)
    assert len(limited) == 1 and "--resources gpu=2 lets all running jobs hold only 2" in limited[0]
    assert gpu_problems(config, [], limit=0)[0].startswith('model "llava-tiny" cannot run: it needs 4 GPUs')
    assert len(gpu_problems(config, [], limit=0)) == 2  # clip-tiny's one GPU is more than 0 too


SERVED = {
    "backend": "openai",
    "model": "{model_dir}",
    "source": {"type": "fixture", "family": "llava", "seed": 0},
    "serve": {"command": ["transformers", "serve", "{model_dir}", "--port", "{port}"]},
}


@pytest.mark.parametrize(
    "change, said",
    [
        (
            {"base_url": "http://localhost:8000/v1"},
            r"models\.served has both base_url and serve: a served model's "
            r"address is the server its job starts; remove base_url$",
        ),
        (
            {"serve": None},
            r"models\.served needs base_url \(a running server's address\), or serve \(a server its jobs "
            r"start\)$",
        ),
        (
            {"serve": None, "base_url": "http://localhost:8000/v1", "gpus": 2},
            r"models\.served\.gpus means something only for a server the jobs start \(serve\); remove gpus, "
            r"or add serve$",
        ),
        ({"serve": {"command": []}}, r"models\.served\.serve\.command: \[\] should be non-empty"),
        (
            {"serve": {"command": ["x"], "ready_path": "v1/models"}},
            r"models\.served\.serve\.ready_path: 'v1/models' does "
            r"not match",
        ),
    ],
)
def test_a_served_model_entry_is_checked(default_config_data, change, said):
    data = copy.deepcopy(default_config_data)
    entry = {**SERVED, **change}
    data["models"] = {"served": {key: value for key, value in entry.items() if value is not None}}
    data["grid"]["models"] = ["served"]
    with pytest.raises(VlmgridError, match=said):
        validate_config(data)


def test_a_served_model_holds_its_gpus_an_api_model_none(default_config_data):
    from vlmgrid.stages.plan import gpus

    data = copy.deepcopy(default_config_data)
    data["models"] = {
        "served": SERVED,
        "served-wide": {**SERVED, "gpus": 4},
        "api": {"backend": "openai", "base_url": "https://api.example.com/v1", "model": "m"},
    }
    data["grid"]["models"] = list(data["models"])
    config = validate_config(data)
    assert [gpus(config, model) for model in config.models] == [1, 4, 0]


def test_a_config_whose_aliases_expand_to_billions_of_values_is_refused_at_once(
    tmp_path, default_config_data
):
    """Aliases of aliases (the "billion laughs"): a few lines that every later walk of the config would expand
    to billions of values; and one that refers to itself. A config that uses aliases plainly still loads."""
    laughs = ["lol0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"lol{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]" for n in range(1, 9)]
    for text in ("\n".join(laughs) + "\n", "loop: &me [*me]\n"):
        path = tmp_path / "bomb.yaml"
        path.write_text(text)
        with pytest.raises(VlmgridError, match=rf"^{path} expands to over 1,000,000 values through its YAML"):
            load_config(path)
    shared = {**default_config_data, "models": dict(default_config_data["models"])}
    shared["models"]["random-again"] = shared["models"]["random"]  # one object: the dump writes an alias
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(shared, sort_keys=False))
    assert "*id001" in plain.read_text()
    assert load_config(plain).model("random-again") == load_config(plain).model("random")


def test_a_config_nested_too_deeply_is_one_sentence_naming_it(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(VlmgridError, match=rf"^{path} nests its YAML deeper than a grid config does"):
        load_config(path)


def test_a_config_that_cannot_be_read_is_one_sentence_naming_it(tmp_path):
    """Mode 000 for real; as root, under capsh with the permission bypass dropped (helpers.permissions)."""
    from helpers.permissions import vlmgrid_held_back

    config = tmp_path / "grid.yaml"
    config.write_text("title: t\n", encoding="utf-8")
    config.chmod(0)
    result = vlmgrid_held_back("check-config", "--config", str(config))
    assert (result.returncode, result.stderr) == (
        2,
        f"vlmgrid: error: config file {config} cannot be read by this user (permission denied); make it "
        f"readable (`chmod a+r {config}`) and run again\n",
    )


def test_a_config_in_a_folder_that_cannot_be_entered_is_one_sentence_naming_it(tmp_path):
    """The folder of mode 0644 (listed, not entered): finding the file fails, not reading it. As root, under
    capsh with the permission bypass dropped (helpers.permissions)."""
    from helpers.permissions import vlmgrid_held_back

    folder = tmp_path / "grids"
    folder.mkdir()
    config = folder / "grid.yaml"
    config.write_text("title: t\n", encoding="utf-8")
    folder.chmod(0o644)
    try:
        result = vlmgrid_held_back("check-config", "--config", str(config))
    finally:
        folder.chmod(0o755)
    assert (result.returncode, result.stderr) == (
        2,
        f"vlmgrid: error: config file {config} cannot be read by this user (permission denied); make it "
        f"readable (`chmod a+r {config}`) and run again\n",
    )


def test_a_config_that_cannot_be_read_for_another_reason_is_one_sentence_naming_it(tmp_path, capsys):
    """Any other OS error (here a name longer than the file system takes; a disk's EIO alike): the file and
    the system's reason."""
    config = tmp_path / f"{'g' * 300}.yaml"
    assert main(["check-config", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"vlmgrid: error: config file {config} cannot be read (File name too long); "
        f"check the file and run again\n"
    )
