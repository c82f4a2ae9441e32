"""Loading an open_clip checkpoint skips the random initialisation its weights then overwrite, and changes
nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.common import tiny_open_clip
from helpers.dvc_lock import write_dvc_repo
from PIL import Image
from safetensors.torch import load_file

from vlmgrid.errors import VlmgridError
from vlmgrid.models import BACKENDS
from vlmgrid.models.open_clip_loading import (
    TEXT_TOWER_DIR,
    WEIGHTS_NAME,
    _checkpoint_sets_every_weight,
    load_model,
    local_text_tower,
)
from vlmgrid.stages.fetch import fetch_model

TINY = tiny_open_clip(seed=3)  # its batch of 3 holds the three images below, as the reference encodes them
# A transformers text tower as well: transformers initialises its modules through torch.nn.init too.
MULTILINGUAL = tiny_open_clip(seed=3, multilingual=True)


def _initialised_as_usual(model_dir):
    """The same folder through open_clip with its random initialisation run first."""
    import json

    import open_clip

    model_cfg = json.loads((model_dir / "open_clip_config.json").read_text())["model_cfg"]
    return open_clip.create_model(
        f"local-dir:{model_dir}", device="cpu", **local_text_tower(model_cfg, model_dir)
    ).eval()


@pytest.mark.parametrize("settings", [TINY, MULTILINGUAL], ids=["open_clip text", "transformers text tower"])
def test_the_loaded_model_is_the_checkpoint_and_embeds_as_before(tmp_path, settings):
    model_dir = tmp_path / "model"
    fetch_model("tiny", settings, model_dir)
    loaded = BACKENDS.get("open_clip").load(settings, model_dir, "cpu")
    saved = load_file(str(model_dir / WEIGHTS_NAME))
    state = loaded.model.state_dict()
    assert set(state) == set(saved)
    assert all(torch.equal(state[key], saved[key]) for key in saved)
    usual = _initialised_as_usual(model_dir)
    # the buffers a checkpoint does not hold (the text attention mask) are built, not drawn: the same
    ours, theirs = dict(loaded.model.named_buffers()), dict(usual.named_buffers())
    assert set(ours) == set(theirs) and all(torch.equal(ours[name], theirs[name]) for name in ours)
    images = [Image.new("RGB", (40, 30), (i * 60, 20, 200 - i * 50)) for i in range(3)]
    texts = ["a photo of a rose", "une photo du chat"]
    with torch.inference_mode():
        pixels = torch.stack([loaded.preprocess(image) for image in images])
        expected_images = usual.encode_image(pixels, normalize=True).numpy()
        expected_texts = usual.encode_text(loaded.tokenizer(texts), normalize=True).numpy()
    assert np.array_equal(loaded.embed_images(images), expected_images)
    assert np.array_equal(loaded.embed_texts(texts), expected_texts)


def _counting(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name in ("normal_", "uniform_", "kaiming_uniform_", "trunc_normal_", "ones_", "zeros_"):
        original = getattr(torch.nn.init, name)

        def counted(tensor, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.nn.init, name, counted)
    return calls


@pytest.mark.parametrize(
    "model, pull",
    [
        ("clip-tiny", "`dvc pull data/models/clip-tiny` fetches it (DVC tracks it: dvc.lock), or "),
        ("clip-untracked", ""),
    ],
)
def test_a_missing_checkpoint_dvc_tracks_says_dvc_pull_first(tmp_path, monkeypatch, model, pull):
    monkeypatch.chdir(write_dvc_repo(tmp_path))
    model_dir = tmp_path / "data" / "models" / model
    with pytest.raises(VlmgridError) as caught:
        load_model({"backend": "open_clip", "source": {"type": "fixture"}}, model_dir, "cpu")
    assert str(caught.value) == (
        f"{model_dir / 'open_clip_config.json'} is missing; {pull}run `vlmgrid fetch-model` "
        f"for this model first"
    )


def test_no_random_initialisation_runs_while_a_checkpoint_loads(tmp_path, monkeypatch):
    model_dir = tmp_path / "model"
    fetch_model("tiny", MULTILINGUAL, model_dir)
    assert (model_dir / TEXT_TOWER_DIR / "config.json").is_file()
    calls = _counting(monkeypatch)
    counted = torch.nn.init.normal_
    BACKENDS.get("open_clip").load(MULTILINGUAL, model_dir, "cpu")
    assert calls == []
    assert torch.nn.init.normal_ is counted  # put back afterwards
    torch.nn.init.normal_(torch.empty(2))
    assert calls == ["normal_"]


def test_without_a_checkpoint_the_initialisation_runs(monkeypatch):
    calls = _counting(monkeypatch)
    with _checkpoint_sets_every_weight(False):
        torch.nn.Linear(4, 4)
    assert "kaiming_uniform_" in calls
    calls.clear()
    with _checkpoint_sets_every_weight(True):
        torch.nn.Linear(4, 4)
    assert calls == []


def test_the_initialisers_are_put_back_when_building_fails(monkeypatch):
    original = torch.nn.init.normal_
    with pytest.raises(RuntimeError):
        with _checkpoint_sets_every_weight(True):
            raise RuntimeError("the model could not be built")
    assert torch.nn.init.normal_ is original
