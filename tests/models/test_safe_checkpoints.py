"""A researcher's checkpoint is never written into, removed, misread or half-hashed: fetch-model writes
nothing into a checkpoint folder and removes only what it wrote, hashes every file loading reads, checks what
is cheap to check, and a checkpoint that is damaged, unreadable or of another architecture is one sentence
naming the file; a cache folder that cannot be written only costs hashing again."""

from __future__ import annotations

import builtins
import errno
import hashlib
import json
import logging
import os
import shutil

import pytest
from helpers.common import tiny_open_clip

from vlmgrid import cli, filehashes, fileio
from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import file_hash
from vlmgrid.fixtures.models.tiny_hf import write_tiny_checkpoint
from vlmgrid.fixtures.models.tiny_open_clip import TINY_MODEL_CFG, write_tiny_open_clip
from vlmgrid.stages.fetch import fetch_model, in_place_weights


def hf_local(path):
    return {
        "backend": "hf",
        "source": {"type": "local", "path": str(path)},
        "precision": "fp32",
        "batch_size": 4,
    }


def open_clip_local(path, arch=None):
    source = {"type": "local", "path": str(path), **({"arch": arch} if arch else {})}
    return {"backend": "open_clip", "source": source, "batch_size": 3}


def listing(folder):
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "llava"
    write_tiny_checkpoint("llava", folder)
    return folder


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt") / "clip"
    write_tiny_open_clip(folder)
    return folder


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))


def tiny_safetensors(path, value=0.0):
    import torch
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.full((2, 2), value)}, str(path))


# ---------------------------------------------------------------------------------------- A5: nothing written


def test_a_local_checkpoint_kept_in_its_models_folder_is_refused_and_nothing_is_written_into_it(
    llava, tmp_path
):
    model_dir = tmp_path / "data" / "models" / "mine"
    shutil.copytree(llava, model_dir)
    before = listing(model_dir)
    with pytest.raises(VlmgridError) as caught:
        fetch_model("mine", hf_local(model_dir), model_dir)
    assert str(caught.value).startswith(
        f"model mine: its checkpoint {model_dir} lies in {model_dir} (or holds it), "
        f"the folder fetch-model writes the model's record into"
    )
    assert "move the checkpoint elsewhere (e.g. checkpoints/mine)" in str(caught.value)
    assert listing(model_dir) == before  # no model.json, nothing removed

    inner = model_dir / "epoch_3.pt"  # a single open_clip file inside the models folder: the same
    inner.write_bytes(b"PK\x03\x04" + b"\0" * 30 + b"PK\x05\x06" + b"\0" * 18)
    with pytest.raises(VlmgridError, match="lies in"):
        fetch_model("mine", open_clip_local(inner, arch="ViT-B-32"), model_dir)
    assert not (model_dir / "model.json").exists()


def test_a_fixture_fetch_never_removes_a_file_it_did_not_write(tmp_path):
    model_dir = tmp_path / "data" / "models" / "clip"
    model_dir.mkdir(parents=True)
    (model_dir / "open_clip_config.json").write_text('{"mine": true}')  # a user's file where the fixture goes
    with pytest.raises(VlmgridError) as caught:
        fetch_model("clip", tiny_open_clip(0), model_dir)
    assert str(caught.value).startswith(
        f"{model_dir} holds open_clip_config.json that fetch-model did not write "
        f"(or that changed since); it removes only what it wrote"
    )
    assert (model_dir / "open_clip_config.json").read_text() == '{"mine": true}'

    (model_dir / "open_clip_config.json").unlink()
    first = fetch_model("clip", tiny_open_clip(0), model_dir)
    (model_dir / "notes.txt").write_text("my notes")  # added beside fetch's files
    with pytest.raises(VlmgridError, match=rf"^{model_dir} holds notes.txt that fetch-model did not write"):
        fetch_model("clip", tiny_open_clip(1), model_dir)
    assert (model_dir / "notes.txt").read_text() == "my notes"
    (model_dir / "notes.txt").unlink()
    second = fetch_model("clip", tiny_open_clip(1), model_dir)  # its own files replaced: no refusal
    assert second["fingerprint"] != first["fingerprint"]
    assert sorted(path.name for path in model_dir.iterdir()) == sorted(
        [*second["files"], "model.json", ".fetched.json"]
    )


def test_a_refetch_after_its_record_was_removed_still_knows_its_own_files(tmp_path):
    """Snakemake removes a job's declared output (model.json) before the job runs: a fixture model whose seed
    changed is fetched again over the files the last fetch wrote, which it still tells from a user's."""
    model_dir = tmp_path / "data" / "models" / "clip"
    first = fetch_model("clip", tiny_open_clip(0), model_dir)
    (model_dir / "model.json").unlink()
    second = fetch_model("clip", tiny_open_clip(1), model_dir)
    assert second["fingerprint"] != first["fingerprint"]
    (model_dir / "model.json").unlink()
    (model_dir / "notes.txt").write_text("my notes")
    with pytest.raises(VlmgridError, match=rf"^{model_dir} holds notes.txt that fetch-model did not write"):
        fetch_model("clip", tiny_open_clip(0), model_dir)
    assert (model_dir / "notes.txt").read_text() == "my notes"


def test_switching_a_fixture_model_to_a_local_checkpoint_removes_only_what_fetch_wrote(clip, tmp_path):
    model_dir = tmp_path / "data" / "models" / "clip"
    written = fetch_model("clip", tiny_open_clip(0), model_dir)
    (model_dir / "notes.txt").write_text("my notes")
    manifest = fetch_model("clip", open_clip_local(clip), model_dir)
    assert manifest["location"] == str(clip)
    assert sorted(path.name for path in model_dir.iterdir()) == ["model.json", "notes.txt"]
    assert not any((model_dir / name).exists() for name in written["files"])


# -------------------------------------------------------------------------------------------- A8: every shard


def sharded(folder, shard_names):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {"total_size": 16},
                "weight_map": {f"t{i}.weight": name for i, name in enumerate(shard_names)},
            }
        )
    )
    return folder


def test_a_shard_in_a_subfolder_is_hashed_so_a_change_to_it_is_seen(tmp_path):
    folder = sharded(tmp_path / "big", ["weights/model-00001-of-00001.safetensors"])
    shard = folder / "weights" / "model-00001-of-00001.safetensors"
    tiny_safetensors(shard)
    model_dir = tmp_path / "data" / "models" / "big"
    manifest = fetch_model("big", hf_local(folder), model_dir)
    digest = hashlib.sha256(shard.read_bytes()).hexdigest()
    assert manifest["files"]["weights/model-00001-of-00001.safetensors"] == digest
    tiny_safetensors(shard, value=1.0)  # other weights, same size
    with pytest.raises(VlmgridError, match=rf"^model big: its checkpoint {folder} changed since"):
        in_place_weights("big", hf_local(folder), model_dir)


@pytest.mark.parametrize("outside", ["../stolen.safetensors", "ABSOLUTE"])
def test_an_index_naming_a_shard_outside_the_folder_is_refused_naming_the_index_and_entry(tmp_path, outside):
    tiny_safetensors(tmp_path / "stolen.safetensors")
    entry = str(tmp_path / "stolen.safetensors") if outside == "ABSOLUTE" else outside
    folder = sharded(tmp_path / "big", [entry])
    model_dir = tmp_path / "data" / "models" / "big"
    with pytest.raises(VlmgridError) as caught:
        fetch_model("big", hf_local(folder), model_dir)
    assert str(caught.value).startswith(
        f"{folder / 'model.safetensors.index.json'} names the shard {entry!r}, "
        f"outside the checkpoint folder {folder}; "
    )
    assert not model_dir.exists()


# ------------------------------------------------------------------------------------------ D1: damaged files


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def cut_json(path):
    path.write_text(path.read_text()[:-10])


def deep_json(path):
    path.write_text("[" * 200_000 + "]" * 200_000)


def not_weights(path):
    path.unlink()
    (path.parent / "pytorch_model.bin").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:abc\n"
    )


@pytest.mark.parametrize(
    "damage, file_name, said",
    [
        (truncate, "model.safetensors", "is not a whole safetensors file (its header describes"),
        (cut_json, "config.json", "is not valid JSON (line"),
        (deep_json, "config.json", "nests its JSON deeper than any checkpoint's file does"),
        (
            not_weights,
            "pytorch_model.bin",
            "is not a PyTorch weights file (it starts as neither a zip archive nor a",
        ),
    ],
    ids=["truncated safetensors", "invalid config.json", "deep config.json", "a Git LFS pointer for weights"],
)
def test_fetch_refuses_a_damaged_hf_checkpoint_naming_the_file(llava, tmp_path, damage, file_name, said):
    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    damage(folder / ("model.safetensors" if damage is not_weights else file_name))
    with pytest.raises(VlmgridError) as caught:
        fetch_model("mine", hf_local(folder), tmp_path / "data" / "models" / "mine")
    assert str(caught.value).startswith(f"{folder / file_name} {said}")
    assert not (tmp_path / "data").exists()


def test_a_safetensors_header_length_over_the_librarys_limit_is_refused_unread(llava, tmp_path):
    """A damaged length field may claim most of a large file as header: it is refused before anything is
    read, where reading it would take the whole file into memory."""
    import struct
    import tracemalloc

    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    weights = folder / "model.safetensors"
    claimed = 150_000_000  # over the library's 100 MB limit, under the file's size
    with open(weights, "wb") as handle:
        handle.write(struct.pack("<Q", claimed))
        handle.truncate(200_000_000)  # sparse: no disk is used
    tracemalloc.start()
    try:
        with pytest.raises(
            VlmgridError, match="is not a safetensors file, or is cut short within its header"
        ):
            fetch_model("mine", hf_local(folder), tmp_path / "data" / "models" / "mine")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000


def test_fetch_refuses_an_invalid_open_clip_config_naming_it(clip, tmp_path):
    folder = tmp_path / "clip"
    shutil.copytree(clip, folder)
    (folder / "open_clip_config.json").write_text('{"model_cfg": {"embed_dim": 32,')
    with pytest.raises(
        VlmgridError, match=rf"^{folder / 'open_clip_config.json'} is not valid JSON \(line 1, "
    ):
        fetch_model("clip", open_clip_local(folder), tmp_path / "data" / "models" / "clip")


def open_clip_grid(write_config, default_config_data, tmp_path, settings):
    data = dict(default_config_data, data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"))
    data["benchmarks"] = {"pope-small": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 2}}}
    data["models"] = {"mine": settings}
    data["grid"] = {"models": ["mine"], "benchmarks": ["pope-small"]}
    return str(write_config(data))


def test_infer_of_weights_of_another_architecture_is_one_sentence_naming_the_file(
    clip, tmp_path, monkeypatch, write_config, default_config_data, capsys
):
    import open_clip
    import torch

    from vlmgrid.models.open_clip_backend import OpenClip

    reference = OpenClip.load(open_clip_local(clip), clip, "cpu")
    weights = tmp_path / "run" / "epoch_3.pt"
    weights.parent.mkdir()
    torch.save({"epoch": 3, "state_dict": reference.model.state_dict()}, weights)
    wider = {**TINY_MODEL_CFG, "embed_dim": 48}  # not the architecture the checkpoint was trained as
    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, "tiny-wider", wider)
    config = open_clip_grid(
        write_config, default_config_data, tmp_path, open_clip_local(weights, arch="tiny-wider")
    )
    for command in (["prepare", "pope-small"], ["fetch-model", "mine"]):
        assert cli.main([*command, "--config", config]) == 0
    capsys.readouterr()
    assert cli.main(["infer", "mine", "pope-small", "--no-progress", "--config", config]) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        f"vlmgrid: error: model mine: {weights} could not be loaded, likely because its weights "
        f"do not match the architecture the model is built as"
    )
    assert "Traceback" not in error and error.count("\n") == 1
    assert not (tmp_path / "results" / "predictions" / "mine" / "pope-small.parquet").exists()


def test_infer_of_a_damaged_fixture_copy_names_the_damaged_file(
    tmp_path, write_config, default_config_data, capsys
):
    config = open_clip_grid(write_config, default_config_data, tmp_path, tiny_open_clip(0))
    for command in (["prepare", "pope-small"], ["fetch-model", "mine"]):
        assert cli.main([*command, "--config", config]) == 0
    weights = tmp_path / "data" / "models" / "mine" / "open_clip_model.safetensors"
    truncate(weights)
    capsys.readouterr()
    assert cli.main(["infer", "mine", "pope-small", "--no-progress", "--config", config]) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        f"vlmgrid: error: model mine could not be loaded: {weights} is not a whole safetensors "
        f"file (its header describes"
    )
    assert error.count("\n") == 1


# --------------------------------------------------------------------------------------------- unsafe pickles


class RunsCode:
    """What a hostile checkpoint's pickle holds: unpickling it calls os.system (here to leave `marker`
    behind)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def unsafe(model, where, held):
    return (
        f"model {model}: {where} is unsafe: its pickle {held} (a pickle that calls code can run any code), "
        "so vlmgrid refuses it; use the weights as a safetensors file, or, if the checkpoint comes from a "
        f"source you trust, convert it to safetensors, then run `vlmgrid fetch-model {model}` again"
    )


CALLS = "calls posix.system when loaded"


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy pickle"])
def test_infer_of_a_checkpoint_whose_pickle_runs_code_refuses_it_as_unsafe_and_runs_nothing(
    tmp_path, write_config, default_config_data, capsys, monkeypatch, legacy
):
    import open_clip
    import torch

    marker = tmp_path / "ran"
    weights = tmp_path / "run" / "epoch_3.pt"
    weights.parent.mkdir()
    torch.save(
        {"epoch": 3, "state_dict": {"w": RunsCode(marker)}},
        weights,
        _use_new_zipfile_serialization=not legacy,
    )
    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, "tiny-test", dict(TINY_MODEL_CFG))
    config = open_clip_grid(
        write_config, default_config_data, tmp_path, open_clip_local(weights, arch="tiny-test")
    )
    for command in (["prepare", "pope-small"], ["fetch-model", "mine"]):
        assert cli.main([*command, "--config", config]) == 0
    capsys.readouterr()
    assert cli.main(["infer", "mine", "pope-small", "--no-progress", "--config", config]) == 2
    assert capsys.readouterr().err == f"vlmgrid: error: {unsafe('mine', weights, CALLS)}\n"
    assert not marker.exists()
    assert not (tmp_path / "results" / "predictions" / "mine" / "pope-small.parquet").exists()


def test_an_hf_checkpoint_whose_pickle_runs_code_is_named_unsafe_whatever_the_pickle_says(llava, tmp_path):
    """A pickle written by pickle.dump (protocol 5) calls through an operation torch's safe loading does not
    know, so its error names no function: the file is still unsafe, never "damaged"."""
    import pickle

    import torch

    from vlmgrid.models.checkpoints import load_failure

    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    (folder / "model.safetensors").unlink()
    weights = folder / "pytorch_model.bin"
    for write, held in (
        (lambda: torch.save({"w": RunsCode(tmp_path / "ran")}, weights), CALLS),
        (
            lambda: weights.write_bytes(pickle.dumps({"w": RunsCode(tmp_path / "ran")}, protocol=5)),
            "holds more than tensors, which torch's safe loading refuses",
        ),
    ):
        write()
        with pytest.raises(pickle.UnpicklingError) as loading:
            torch.load(weights)  # as transformers loads it: safely (weights_only, torch's default)
        message = str(load_failure("mine", folder, loading.value))
        assert message == unsafe("mine", weights, held)
        assert "weights_only" not in message and "damaged" not in message
    assert not (tmp_path / "ran").exists()


# --------------------------------------------------------------------------------------------- D2: unreadable


def test_a_config_that_is_not_utf8_is_one_sentence_naming_it(llava, tmp_path):
    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    config = json.loads((folder / "config.json").read_text())
    config["_name_or_path"] = "modèle affiné"
    (folder / "config.json").write_bytes(json.dumps(config, ensure_ascii=False).encode("latin-1"))
    with pytest.raises(VlmgridError) as caught:
        fetch_model("mine", hf_local(folder), tmp_path / "data" / "models" / "mine")
    assert str(caught.value).startswith(f"{folder / 'config.json'} is not UTF-8 text (byte 0xe8 at position ")
    assert str(caught.value).endswith("; save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) and run again")


def refuse_reading(monkeypatch, path):
    """open() of `path` fails as it does for a file of mode 000 (root reads those anyway)."""
    real = builtins.open

    def guarded(file, *args, **kwargs):
        if os.fspath(file) == os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)


@pytest.mark.parametrize("file_name", ["model.safetensors", "preprocessor_config.txt"])
def test_an_unreadable_checkpoint_file_is_one_sentence_naming_it(llava, tmp_path, monkeypatch, file_name):
    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    (folder / "preprocessor_config.txt").write_text("a file only hashed")
    refuse_reading(monkeypatch, folder / file_name)
    with pytest.raises(VlmgridError) as caught:
        fetch_model("mine", hf_local(folder), tmp_path / "data" / "models" / "mine")
    assert str(caught.value) == (
        f"{folder / file_name} cannot be read by this user (permission denied); make it "
        f"readable (`chmod a+r {folder / file_name}`) and run again"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_a_mode_000_weights_file_is_one_sentence_naming_it(llava, tmp_path):
    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    (folder / "model.safetensors").chmod(0)
    with pytest.raises(VlmgridError, match=rf"^{folder / 'model.safetensors'} cannot be read by this user"):
        fetch_model("mine", hf_local(folder), tmp_path / "data" / "models" / "mine")


# ---------------------------------------------------------------------------------------------- D3: the cache


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC], ids=["read-only", "full"])
def test_a_cache_folder_that_cannot_be_written_costs_one_warning_and_the_fetch_carries_on(
    llava, tmp_path, monkeypatch, caplog, code
):
    cache = tmp_path / "cache"
    real = fileio.create_temporary

    def create_temporary(path):
        if cache in type(tmp_path)(path).parents:
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real(path)

    monkeypatch.setattr(fileio, "create_temporary", create_temporary)
    folder = tmp_path / "mine"
    shutil.copytree(llava, folder)
    with caplog.at_level(logging.WARNING):
        manifest = fetch_model("mine", hf_local(folder), tmp_path / "data" / "models" / "mine")
    assert (
        manifest["files"]["model.safetensors"]
        == hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    )
    warnings = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"the cache folder {cache} (VLMGRID_CACHE_DIR) cannot be written")
    assert warnings[0].endswith("set VLMGRID_CACHE_DIR to a writable folder to avoid that")


@pytest.mark.parametrize(
    "damage",
    [
        lambda entry: {key: value for key, value in entry.items() if key != "sha256"},
        lambda entry: [entry],
        lambda entry: {**entry, "sha256": "../../not-a-hash"},
        lambda entry: {**entry, "sha256": None},
    ],
    ids=["no sha256", "a list", "not a hash", "null"],
)
def test_a_damaged_cache_entry_is_ignored_and_the_file_read_again(tmp_path, damage):
    path = tmp_path / "w.bin"
    path.write_bytes(b"abc")
    expected = hashlib.sha256(b"abc").hexdigest()
    assert file_hash(path) == expected
    entry_path = filehashes._entry_path(path.resolve())
    entry_path.write_text(json.dumps(damage(json.loads(entry_path.read_text()))))
    assert file_hash(path) == expected
