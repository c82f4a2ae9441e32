"""Models read where they lie: a local transformers folder, a local open_clip folder or training checkpoint
file, and a hub repo in the Hugging Face cache. Nothing is copied under the data folder; the checkpoint's
hashes are remembered by size and modification time; a bad folder is one sentence naming the path and what is
missing."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers.common import REPO, workflow_env

from vlmgrid import cli, filehashes
from vlmgrid.errors import VlmgridError
from vlmgrid.filehashes import file_hash
from vlmgrid.fixtures.models.tiny_hf import write_tiny_checkpoint
from vlmgrid.fixtures.models.tiny_open_clip import TINY_MODEL_CFG, write_tiny_open_clip
from vlmgrid.models import checkpoints
from vlmgrid.models.open_clip_backend import OpenClip
from vlmgrid.predictions import read_metadata
from vlmgrid.stages.fetch import fetch_model, in_place_weights, model_stamp


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hf_local(path):
    return {
        "backend": "hf",
        "source": {"type": "local", "path": str(path)},
        "precision": "fp32",
        "batch_size": 4,
    }


def bump_mtime(path, seconds=10):
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    """A tiny LLaVA checkpoint as save_pretrained writes it (no fixture source)."""
    folder = tmp_path_factory.mktemp("ckpt") / "llava"
    write_tiny_checkpoint("llava", folder)
    return folder


def copy_of(folder, destination):
    import shutil

    shutil.copytree(folder, destination)
    return destination


# ---------------------------------------------------------------------------------------------- bad folders


def test_a_missing_folder_is_one_sentence(tmp_path):
    with pytest.raises(VlmgridError) as caught:
        fetch_model("mine", hf_local(tmp_path / "nowhere"), tmp_path / "data" / "models" / "mine")
    assert str(caught.value) == (
        f"{tmp_path / 'nowhere'} does not exist; set the model's source path to the folder "
        f"of its transformers checkpoint (config.json and weights)"
    )
    assert not (tmp_path / "data").exists()


def test_a_folder_without_weights_is_one_sentence(llava, tmp_path):
    folder = copy_of(llava, tmp_path / "mine")
    (folder / "model.safetensors").unlink()
    with pytest.raises(
        VlmgridError,
        match=rf"^{folder} has no weights \(model.safetensors, pytorch_model.bin, "
        r"model.safetensors.index.json, pytorch_model.bin.index.json\); copy",
    ):
        fetch_model("mine", hf_local(folder), tmp_path / "m")


def test_a_sharded_checkpoint_missing_a_shard_names_it(tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    shards = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    # transformers' index: metadata and a weight_map from each tensor to its shard
    (folder / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {"total_size": 30},
                "weight_map": {
                    "a.weight": shards[0],
                    "b.weight": shards[1],
                    "c.weight": shards[2],
                    "d.weight": shards[1],
                },
            }
        )
    )
    (folder / shards[0]).write_bytes(b"x")
    with pytest.raises(VlmgridError) as caught:
        fetch_model("big", hf_local(folder), tmp_path / "m")
    assert str(caught.value) == (
        f"{folder / shards[1]} and 1 more of its 3 shards named by "
        f"{folder / 'model.safetensors.index.json'} is missing; copy the missing shard "
        f"files into {folder}"
    )
    (folder / shards[1]).write_bytes(b"y")
    (folder / shards[2]).write_bytes(b"z")
    assert set(checkpoints.hf_folder({"path": str(folder)}).files) == {
        "config.json",
        "model.safetensors.index.json",
        *shards,
    }


def test_an_open_clip_file_needs_its_arch_and_a_folder_its_config(tmp_path):
    weights = tmp_path / "epoch_3.pt"
    weights.write_bytes(b"x")
    with pytest.raises(VlmgridError, match=rf"^{weights} is a single weights file, .* set the source's arch"):
        checkpoints.open_clip_checkpoint({"path": str(weights)})
    with pytest.raises(VlmgridError, match=rf"^{tmp_path} has no open_clip_config.json; point path"):
        checkpoints.open_clip_checkpoint({"path": str(tmp_path)})


# ---------------------------------------------------------------------------------------------- hashes


def test_hashes_are_remembered_by_size_and_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "w.bin"
    path.write_bytes(b"abc")
    reads = []
    real = filehashes.sha256_file
    monkeypatch.setattr(filehashes, "sha256_file", lambda p: reads.append(p) or real(p))
    expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256("abc")
    assert file_hash(path) == expected and len(reads) == 1
    assert file_hash(path) == expected and len(reads) == 1  # remembered: not read again
    bump_mtime(path)
    assert file_hash(path) == expected and len(reads) == 2  # touched: read again
    path.write_bytes(b"abd")
    bump_mtime(path, 20)
    assert file_hash(path) == hashlib.sha256(b"abd").hexdigest() and len(reads) == 3


# -------------------------------------------------------------------------------------------- local hf folder


def test_a_local_folder_is_recorded_in_place_and_never_copied(llava, tmp_path, caplog):
    folder = copy_of(llava, tmp_path / "mine")
    model_dir = tmp_path / "data" / "models" / "mine"
    manifest = fetch_model("mine", hf_local(folder), model_dir)
    assert [p.name for p in model_dir.iterdir()] == ["model.json"]
    assert manifest["location"] == str(folder)
    assert manifest["files"] == {p.name: sha(p) for p in folder.iterdir() if p.is_file()}
    written = (model_dir / "model.json").stat().st_mtime_ns

    bump_mtime(folder / "config.json")  # touched, same bytes: the record stands
    assert fetch_model("mine", hf_local(folder), model_dir) == manifest
    assert (model_dir / "model.json").stat().st_mtime_ns == written

    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config, indent=4))  # edited
    with pytest.raises(
        VlmgridError,
        match=rf"^model mine: its checkpoint {folder} changed since `vlmgrid "
        r"fetch-model mine` recorded it; run that again",
    ):
        in_place_weights("mine", hf_local(folder), model_dir)
    with caplog.at_level(logging.INFO, logger="vlmgrid.stages.fetch"):
        again = fetch_model("mine", hf_local(folder), model_dir)
    assert again["files"]["config.json"] == sha(folder / "config.json") != manifest["files"]["config.json"]
    assert again["fingerprint"] != manifest["fingerprint"]
    assert (
        f"model mine: its checkpoint {folder} changed since it was fetched (config.json, 1 file(s) in all)"
        in caplog.text
    )
    assert in_place_weights("mine", hf_local(folder), model_dir).fingerprint == again["fingerprint"]


def test_the_stamp_lists_the_checkpoint_files_by_content_so_a_touch_changes_nothing(llava, tmp_path):
    folder = copy_of(llava, tmp_path / "mine")
    stamp = model_stamp(hf_local(folder))
    assert stamp["type"] == "local" and stamp["path"] == str(folder)
    assert [entry[0] for entry in stamp["files"]] == sorted(p.name for p in folder.iterdir())
    name, size, digest = stamp["files"][0]
    assert (size, digest) == ((folder / name).stat().st_size, sha(folder / name))
    bump_mtime(folder / "config.json")  # the same bytes
    assert model_stamp(hf_local(folder)) == stamp
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")
    assert model_stamp(hf_local(folder)) != stamp
    assert (
        model_stamp({"backend": "hf", "source": {"type": "local", "path": str(tmp_path / "no")}})["files"]
        == []
    )
    assert model_stamp({"backend": "hf", "source": {"type": "hf_hub", "repo": "o/m", "revision": "r"}}) == {
        "type": "hf_hub"
    }


def local_grid(write_config, default_config_data, tmp_path, models):
    data = dict(default_config_data, data_dir=str(tmp_path / "data"), results_dir=str(tmp_path / "results"))
    data["benchmarks"] = {"pope-small": {"kind": "pope", "source": {"type": "fixture", "seed": 0, "size": 2}}}
    data["models"] = models
    data["grid"] = {"models": list(models), "benchmarks": ["pope-small"]}
    return write_config(data)


def test_a_local_checkpoint_runs_a_cell_with_its_path_and_hash_in_the_provenance(
    llava, tmp_path, write_config, default_config_data
):
    folder = copy_of(llava, tmp_path / "mine")
    config = str(local_grid(write_config, default_config_data, tmp_path, {"mine": hf_local(folder)}))
    for command in (
        ["prepare", "pope-small"],
        ["fetch-model", "mine"],
        ["infer", "mine", "pope-small", "--no-progress"],
    ):
        assert cli.main([*command, "--config", config]) == 0
    metadata = read_metadata(tmp_path / "results/predictions/mine/pope-small.parquet")
    manifest = json.loads((tmp_path / "data/models/mine/model.json").read_text())
    assert metadata["provenance"]["checkpoint"] == {
        "path": str(folder),
        "fingerprint": manifest["fingerprint"],
    }
    assert metadata["provenance"]["model_id"] == str(folder)
    assert not list((tmp_path / "data").rglob("*.safetensors"))


# ---------------------------------------------------------------------------------------------- open_clip


def test_an_open_clip_training_checkpoint_file_loads_as_open_clip_reads_it(tmp_path, monkeypatch):
    import open_clip
    import torch

    folder = tmp_path / "tiny"
    write_tiny_open_clip(folder)
    reference = OpenClip.load(
        {"backend": "open_clip", "source": {"type": "local", "path": str(folder)}}, folder, "cpu"
    )
    # a training run's checkpoint (open_clip's train.py): epoch, name, the DDP-wrapped state_dict, optimizer
    state = {f"module.{key}": value for key, value in reference.model.state_dict().items()}
    weights = tmp_path / "logs" / "run" / "checkpoints" / "epoch_3.pt"
    weights.parent.mkdir(parents=True)
    torch.save(
        {"epoch": 3, "name": "run", "state_dict": state, "optimizer": {"state": {}, "param_groups": []}},
        weights,
    )
    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, "tiny-test", dict(TINY_MODEL_CFG))

    settings = {
        "backend": "open_clip",
        "source": {"type": "local", "path": str(weights), "arch": "tiny-test"},
    }
    checkpoint = OpenClip.in_place(settings)
    assert checkpoint.location == weights and list(checkpoint.files) == ["epoch_3.pt"]
    model = OpenClip.load(settings, checkpoint.location, "cpu")
    texts = ["a photo of a cat", "a dog"]
    assert (model.embed_texts(texts) == reference.embed_texts(texts)).all()
    assert model.identity() != reference.identity()
    assert model.provenance().model_id == str(weights)

    with pytest.raises(VlmgridError, match='open_clip has no architecture "ViT-Nope"'):
        OpenClip.load({**settings, "source": {**settings["source"], "arch": "ViT-Nope"}}, weights, "cpu")


# ---------------------------------------------------------------------------------------------- the HF cache


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_hub_cache(cache, repo, commit, folder):
    """The checkpoint in folder as huggingface_hub lays out a downloaded snapshot: blobs named by their etag
    (an LFS file's sha256, any other file's git blob sha1), snapshots/<commit>/<name> linking to them,
    refs/main."""
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "blobs").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        lfs = path.suffix in (".safetensors", ".bin")
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
        (root / "blobs" / etag).write_bytes(data)
        (snapshot / path.name).symlink_to(os.path.join("..", "..", "blobs", etag))
    return snapshot


def run_offline(write_config, default_config_data, tmp_path, hub: dict, cache) -> None:
    """fetch-model and infer of the model `hub` on a small POPE, with the hub cache `cache`, offline and
    behind a proxy that does not exist: no network at all."""
    config = str(local_grid(write_config, default_config_data, tmp_path, {"hub": hub}))
    assert cli.main(["prepare", "pope-small", "--config", config]) == 0
    env = workflow_env(
        {
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(cache),
            "HF_HOME": str(tmp_path / "hf"),
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "PYTHONPATH": str(REPO / "src"),
        }
    )
    for command in (["fetch-model", "hub"], ["infer", "hub", "pope-small", "--no-progress"]):
        result = subprocess.run(
            [sys.executable, "-m", "vlmgrid.cli", *command, "--config", config],
            env=env,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr


def test_an_offline_hub_model_runs_from_the_cache_with_no_copy(
    llava, tmp_path, write_config, default_config_data
):
    from huggingface_hub import scan_cache_dir

    cache = tmp_path / "hf" / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = write_hub_cache(cache, "someone/tiny-llava", commit, llava)
    scanned = scan_cache_dir(cache)  # huggingface_hub's own reading of the layout
    assert [(r.repo_id, [rev.commit_hash for rev in r.revisions]) for r in scanned.repos] == [
        ("someone/tiny-llava", [commit])
    ]
    assert not scanned.warnings

    hub = {
        "backend": "hf",
        "source": {"type": "hf_hub", "repo": "someone/tiny-llava", "revision": commit},
        "precision": "fp32",
        "batch_size": 4,
    }
    run_offline(write_config, default_config_data, tmp_path, hub, cache)
    manifest = json.loads((tmp_path / "data/models/hub/model.json").read_text())
    assert manifest["location"] == str(snapshot)
    assert manifest["files"] == {p.name: sha(p) for p in llava.iterdir()}
    assert [p.name for p in (tmp_path / "data/models/hub").iterdir()] == ["model.json"]
    assert not [p for p in (tmp_path / "data").rglob("*") if p.name in {q.name for q in llava.iterdir()}]
    metadata = read_metadata(tmp_path / "results/predictions/hub/pope-small.parquet")
    assert metadata["provenance"]["checkpoint"]["path"] == str(snapshot)
    assert metadata["provenance"]["revision"] == commit


# ---------------------------------------------------------------------------------------------- open_clip hub


def hub_repo_folder(destination, files):
    """A folder holding the given files (name -> source path) under their names, as a hub repo holds them."""
    destination.mkdir(parents=True)
    for name, path in files.items():
        (destination / name).write_bytes(path.read_bytes())
    return destination


def test_an_offline_open_clip_hub_repo_runs_from_the_cache_with_no_copy(
    tmp_path, write_config, default_config_data
):
    tiny = tmp_path / "tiny"
    write_tiny_open_clip(tiny)
    cache = tmp_path / "hf" / "hub"
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    snapshot = write_hub_cache(cache, "someone/tiny-clip", commit, tiny)
    hub = {
        "backend": "open_clip",
        "source": {"type": "hf_hub", "repo": "someone/tiny-clip", "revision": commit},
        "batch_size": 4,
    }
    run_offline(write_config, default_config_data, tmp_path, hub, cache)
    manifest = json.loads((tmp_path / "data/models/hub/model.json").read_text())
    assert manifest["location"] == str(snapshot)
    assert manifest["files"] == {
        name: sha(tiny / name) for name in ("open_clip_config.json", "open_clip_model.safetensors")
    }
    assert [p.name for p in (tmp_path / "data/models/hub").iterdir()] == ["model.json"]
    assert not [p for p in (tmp_path / "data").rglob("*") if p.name in {q.name for q in tiny.iterdir()}]
    metadata = read_metadata(tmp_path / "results/predictions/hub/pope-small.parquet")
    assert metadata["provenance"]["checkpoint"] == {
        "path": str(snapshot),
        "fingerprint": manifest["fingerprint"],
    }
    assert metadata["provenance"]["model_id"] == "someone/tiny-clip"
    assert metadata["provenance"]["revision"] == commit


def test_a_pretrained_tag_and_its_text_tower_are_read_from_the_cache(tmp_path, monkeypatch):
    """A pretrained tag names a hub repo holding its weights file alone; open_clip_config.json is built as
    open_clip builds it (the architecture's config, the tag's preprocessing); the transformers text tower's
    config and tokenizer come from the tower's own repo in the cache, at text_tower_revision."""
    import open_clip
    from huggingface_hub import constants
    from PIL import Image

    tiny = tmp_path / "tiny"
    tiny.mkdir()
    write_tiny_open_clip(tiny, text_tower={"width": 32, "layers": 1, "heads": 2})
    written = json.loads((tiny / "open_clip_config.json").read_text())
    cache = tmp_path / "hf" / "hub"
    clip_commit, tower_commit = "1" * 40, "2" * 40
    snapshot = write_hub_cache(
        cache,
        "someone/tiny-mclip",
        clip_commit,
        hub_repo_folder(
            tmp_path / "clip-repo", {"open_clip_model.safetensors": tiny / "open_clip_model.safetensors"}
        ),
    )
    tower_files = {
        "config.json": tiny / "text_tower" / "config.json",
        **{
            name: tiny / name
            for name in ("tokenizer.json", "tokenizer_config.json")
            if (tiny / name).is_file()
        },
    }
    write_hub_cache(
        cache, "xlm-roberta-base", tower_commit, hub_repo_folder(tmp_path / "tower-repo", tower_files)
    )
    mean, std = (0.5, 0.25, 0.125), (0.5, 0.5, 0.25)  # not the fixture's: the tag's preprocessing must win
    monkeypatch.setitem(open_clip.factory._MODEL_CONFIGS, "tiny-mclip", written["model_cfg"])
    monkeypatch.setitem(
        open_clip.pretrained._PRETRAINED,
        "tiny-mclip",
        {"tag": {"hf_hub": "someone/tiny-mclip/", "mean": mean, "std": std}},
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    settings = {
        "backend": "open_clip",
        "source": {
            "type": "pretrained",
            "arch": "tiny-mclip",
            "tag": "tag",
            "revision": clip_commit,
            "text_tower_revision": tower_commit,
        },
    }
    model_dir = tmp_path / "data" / "models" / "m"
    manifest = fetch_model("m", settings, model_dir)
    assert manifest["location"] == str(snapshot)
    assert manifest["files"] == {"open_clip_model.safetensors": sha(tiny / "open_clip_model.safetensors")}
    assert [p.name for p in model_dir.iterdir()] == ["model.json"]

    checkpoint = in_place_weights("m", settings, model_dir)
    model = OpenClip.load(settings, checkpoint.location, "cpu")
    reference = OpenClip.load(
        {"backend": "open_clip", "source": {"type": "local", "path": str(tiny)}}, tiny, "cpu"
    )
    assert model.weights_fingerprint == manifest["fingerprint"] == checkpoint.fingerprint
    assert (
        tuple(model.preprocess.transforms[-1].mean) == mean
        and tuple(model.preprocess.transforms[-1].std) == std
    )
    texts = ["a photo of a cat", "猫の写真"]
    assert model.tokenizer(texts).tolist() == reference.tokenizer(texts).tolist()
    assert np.allclose(model.embed_texts(texts), reference.embed_texts(texts), atol=1e-6)
    image = Image.new("RGB", (40, 40), (200, 30, 60))
    pixels = model.preprocess(image)
    assert torch.allclose(model.model.encode_image(pixels[None]), reference.model.encode_image(pixels[None]))


def test_an_open_clip_tower_missing_from_the_offline_cache_is_one_sentence(tmp_path, monkeypatch):
    from huggingface_hub import constants

    tiny = tmp_path / "tiny"
    tiny.mkdir()
    write_tiny_open_clip(tiny, text_tower={"width": 32, "layers": 1, "heads": 2})
    cache = tmp_path / "hub"
    commit = "3" * 40
    write_hub_cache(
        cache,
        "someone/tiny-mclip",
        commit,
        hub_repo_folder(
            tmp_path / "repo",
            {name: tiny / name for name in ("open_clip_config.json", "open_clip_model.safetensors")},
        ),
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    settings = {
        "backend": "open_clip",
        "source": {
            "type": "hf_hub",
            "repo": "someone/tiny-mclip",
            "revision": commit,
            "text_tower_revision": "4" * 40,
        },
    }
    with pytest.raises(
        VlmgridError,
        match=r"^the config.json of the text tower xlm-roberta-base@4{40} is not in the "
        r"Hugging Face cache; run `vlmgrid fetch-model`",
    ):
        fetch_model("m", settings, tmp_path / "m")
    assert not (tmp_path / "m").exists()
