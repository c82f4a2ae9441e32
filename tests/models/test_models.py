import json

import numpy as np
import pytest
from helpers.common import tiny_open_clip
from PIL import Image

from vlmgrid.errors import VlmgridError
from vlmgrid.models import BACKENDS, OptionRequest
from vlmgrid.stages.fetch import fetch_model

TINY = tiny_open_clip(seed=0)


def test_baseline_is_seeded_per_item_not_per_batch():
    model = BACKENDS.get("baseline").load({"backend": "baseline", "seed": 0}, None, "cpu")
    requests = [OptionRequest(f"q{i}", None, "", ["a", "b", "c"]) for i in range(5)]
    together = model.score_options(requests)
    alone = [model.score_options([request])[0] for request in reversed(requests)][::-1]
    assert together == alone
    other_seed = BACKENDS.get("baseline").load({"backend": "baseline", "seed": 1}, None, "cpu")
    assert other_seed.score_options(requests) != together


def test_baseline_guesses_are_roughly_uniform():
    model = BACKENDS.get("baseline").load({"backend": "baseline", "seed": 0}, None, "cpu")
    picks = [
        int(np.argmax(s.total))
        for s in model.score_options(
            [OptionRequest(str(i), None, "", ["a", "b", "c", "d"]) for i in range(4000)]
        )
    ]
    counts = np.bincount(picks, minlength=4)
    assert counts.min() > 850 and counts.max() < 1150


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("models") / "tiny"
    manifest = fetch_model("tiny", TINY, model_dir)
    return model_dir, manifest


def test_fixture_model_is_saved_in_open_clip_layout(tiny_clip):
    model_dir, manifest = tiny_clip
    assert set(manifest["files"]) == {"open_clip_config.json", "open_clip_model.safetensors"}
    config = json.loads((model_dir / "open_clip_config.json").read_text())
    assert config["model_cfg"]["embed_dim"] == 16


def test_fixture_model_loads_and_embeds_normalised(tiny_clip):
    model_dir, _ = tiny_clip
    model = BACKENDS.get("open_clip").load(TINY, model_dir, "cpu")
    images = [Image.new("RGB", (40, 30), (i * 40, 0, 0)) for i in range(5)]
    features = model.embed_images(images)
    assert features.shape == (5, 16)
    assert np.allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)
    texts = model.embed_texts(["a photo of a rose", "a photo of a tulip"])
    assert texts.shape == (2, 16) and not np.allclose(texts[0], texts[1])


def test_embeddings_that_are_not_finite_stop_the_job_naming_the_image_or_text(tiny_clip, tmp_path):
    """Damaged weights (or an overflow at fp16) give NaN embeddings, over which an argmax picks the first
    class: never a row, the job stops in one sentence naming what was embedded."""
    import torch

    from vlmgrid.errors import InferenceFailed

    model_dir, _ = tiny_clip
    model = BACKENDS.get("open_clip").load(TINY, model_dir, "cpu")
    picture = tmp_path / "cat.jpg"
    Image.new("RGB", (40, 30), (200, 10, 60)).save(picture)
    assert np.isfinite(model.embed_images([Image.open(picture)])).all()
    with torch.no_grad():
        for parameter in model.model.visual.parameters():
            parameter.fill_(float("nan"))
    for embed, named in (
        (lambda: model.embed_images([Image.open(picture)] * 2), "image 1 of the 2 in the call"),
        (lambda: model.embed_image_files([picture]), str(picture)),
    ):
        with pytest.raises(InferenceFailed) as caught:
            embed()
        assert caught.value.stop
        assert str(caught.value).startswith(f"the image embedding of {named} holds NaN or infinite values; ")
        assert "overflowed at its precision (precision: fp32 avoids that)" in str(caught.value)
    assert np.isfinite(model.embed_texts(["a cat"])).all()
    with torch.no_grad():
        model.model.token_embedding.weight.fill_(float("inf"))
    with pytest.raises(InferenceFailed, match="^the text embedding of 'a cat' holds NaN or infinite values"):
        model.embed_texts(["a cat"])


@pytest.mark.parametrize(
    "rows, broken",
    [
        ([[0.0, -1.0], [-2.0, -3.0]], None),
        ([[0.0, float("-inf")], [-2.0, -3.0]], None),  # a token the model rules out: one option's -inf
        ([[float("-inf"), float("-inf")], [-2.0, -3.0]], "q0"),  # every option ruled out: no answer
        ([[0.0, -1.0], [float("nan"), -3.0]], "q1"),
        ([[0.0, float("inf")], [-2.0, -3.0]], "q0"),
    ],
)
def test_option_scores_may_rule_an_option_out_but_never_be_nan_or_all_minus_infinity(rows, broken):
    from vlmgrid.errors import InferenceFailed
    from vlmgrid.models.base import require_finite

    if broken is None:
        require_finite(rows, ["q0", "q1"], "the option scores", "fix it", scores=True)
        return
    with pytest.raises(
        InferenceFailed, match=f"^the option scores of {broken} holds NaN or infinite values; fix it$"
    ):
        require_finite(rows, ["q0", "q1"], "the option scores", "fix it", scores=True)


def test_same_seed_same_weights(tiny_clip, tmp_path):
    _, manifest = tiny_clip
    again = fetch_model("tiny", TINY, tmp_path / "again")
    assert again["files"] == manifest["files"]


def test_fetch_twice_rewrites_nothing(tiny_clip):
    model_dir, _ = tiny_clip
    before = {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()}
    fetch_model("tiny", {**TINY, "batch_size": 7}, model_dir)  # a non-source setting: weights stay
    assert {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()} == before


def test_tampered_weights_are_refused(tmp_path):
    model_dir = tmp_path / "tiny"
    fetch_model("tiny", TINY, model_dir)
    weights = model_dir / "open_clip_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(VlmgridError, match="does not match its manifest"):
        fetch_model("tiny", TINY, model_dir)


def test_missing_weights_folder_is_a_clear_error(tmp_path):
    with pytest.raises(VlmgridError, match="run `vlmgrid fetch-model`"):
        BACKENDS.get("open_clip").load(TINY, tmp_path / "absent", "cpu")


def test_zero_shot_classifier_is_cached_per_model_classes_and_templates(tiny_clip, tmp_path, monkeypatch):
    from vlmgrid.protocols.classification import zero_shot_weights

    monkeypatch.setenv("VLMGRID_CACHE_DIR", str(tmp_path / "cache"))
    model_dir, _ = tiny_clip
    model = BACKENDS.get("open_clip").load(TINY, model_dir, "cpu")
    first = zero_shot_weights(model, ["rose", "tulip"], ["a photo of a {c}.", "a {c}."])
    assert first.shape == (2, 16)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert len(list((tmp_path / "cache" / "classifiers").glob("*.npy"))) == 1

    calls = []
    monkeypatch.setattr(model, "embed_texts", lambda texts: calls.append(texts))
    again = zero_shot_weights(model, ["rose", "tulip"], ["a photo of a {c}.", "a {c}."])
    assert calls == [] and np.array_equal(first, again)  # served from the cache
    with pytest.raises(AttributeError):  # other classes: not cached, so the (patched) text tower is asked
        zero_shot_weights(model, ["rose", "lily"], ["a photo of a {c}.", "a {c}."])
    assert calls == [["a photo of a rose.", "a rose.", "a photo of a lily.", "a lily."]]


def test_open_clip_provenance(tiny_clip):
    model_dir, _ = tiny_clip
    provenance = BACKENDS.get("open_clip").load(TINY, model_dir, "cpu").provenance()
    assert provenance.model_id == "fixture" and provenance.dtype == "float32" and provenance.device == "cpu"
    assert provenance.batch_size == 3 and "torch" in provenance.libraries


def _baseline(strategy):
    return BACKENDS.get("baseline").load({"backend": "baseline", "strategy": strategy}, None, "cpu")


def test_first_option_baseline_always_picks_the_first():
    picks = [
        int(np.argmax(s.total))
        for s in _baseline("first").score_options(
            [OptionRequest(str(i), None, "", ["a", "b", "c"][: 2 + i % 2]) for i in range(6)]
        )
    ]
    assert picks == [0] * 6


def test_majority_baseline_picks_the_most_frequent_gold_index():
    model = _baseline("majority")
    model.set_answer_prior([2, 1, 2, -1, 0, 2, 1])
    scores = model.score_options(
        [OptionRequest("a", None, "", ["w", "x", "y", "z"]), OptionRequest("b", None, "", ["yes", "no"])]
    )
    assert int(np.argmax(scores[0].total)) == 2
    assert int(np.argmax(scores[1].total)) == 0  # index 2 does not exist there: first option
    tie = _baseline("majority")
    tie.set_answer_prior([1, 0, 0, 1])
    assert int(np.argmax(tie.score_options([OptionRequest("c", None, "", ["p", "q"])])[0].total)) == 0


MULTILINGUAL = tiny_open_clip(seed=0, multilingual=True)


def test_multilingual_text_tower_embeds_other_scripts(tmp_path):
    model_dir = tmp_path / "mclip"
    manifest = fetch_model("mclip", MULTILINGUAL, model_dir)
    assert "text_tower/config.json" in manifest["files"] and "tokenizer.json" in manifest["files"]
    model = BACKENDS.get("open_clip").load(MULTILINGUAL, model_dir, "cpu")
    texts = ["a photo of a cat", "une photo du chat", "猫の写真", "صورة قطة", "फूल की तस्वीर"]
    features = model.embed_texts(texts)
    assert features.shape == (5, 16)
    assert np.allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)
    assert len({tuple(np.round(f, 5)) for f in features}) == 5  # every script is encoded, none collapses
    tokens = model.tokenizer(["猫の写真"])[0].tolist()
    unk = model.tokenizer.tokenizer.unk_token_id
    assert unk not in tokens


def test_text_tower_needs_a_pinned_revision():
    from vlmgrid.models.open_clip_loading import _text_tower_files

    config = {"model_cfg": {"text_cfg": {"hf_model_name": "xlm-roberta-base"}}}
    with pytest.raises(VlmgridError, match="pin it with `text_tower_revision`"):
        _text_tower_files(
            config, {"type": "pretrained", "arch": "x", "tag": "y", "revision": "abc"}, download=True
        )


def test_open_clip_hub_errors_name_the_fix(monkeypatch, tmp_path):
    import huggingface_hub
    from huggingface_hub import errors

    def gated(**kwargs):
        raise errors.GatedRepoError(
            "boom", response=__import__("types").SimpleNamespace(headers={}, request=None, status_code=403)
        )

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", gated)
    settings = {"backend": "open_clip", "source": {"type": "hf_hub", "repo": "org/clip", "revision": "abc"}}
    with pytest.raises(
        VlmgridError, match=r"org/clip is gated; accept its licence on https://huggingface.co/org/clip"
    ):
        BACKENDS.get("open_clip").in_place(settings)


def test_generation_preset_fills_the_keys_the_model_does_not_set():
    from vlmgrid.models.base import resolve_generation

    plain = {"backend": "hf", "generation": {"max_new_tokens": 8}}
    assert resolve_generation(plain) == plain  # no preset: greedy decoding as configured
    resolved = resolve_generation({"backend": "hf", "generation": {"preset": "kaleidoscope", "seed": 2}})
    assert resolved["generation"] == {
        "preset": "kaleidoscope",
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 0,  # vLLM's SamplingParams default, where transformers' own is 50
        "repetition_penalty": 1.0,
        "max_new_tokens": 1024,
        "seed": 2,
    }
    assert resolved["image_size"] == 512
    own = resolve_generation(
        {"generation": {"preset": "kaleidoscope", "max_new_tokens": 64}, "image_size": 336}
    )
    assert own["generation"]["max_new_tokens"] == 64 and own["image_size"] == 336
    with pytest.raises(VlmgridError, match="generation preset 'paper' is unknown; use one of kaleidoscope"):
        resolve_generation({"generation": {"preset": "paper"}})


def test_a_fixture_source_is_written_by_the_writer_it_is_handed(tmp_path):
    from vlmgrid.fixtures.models import MODEL_FIXTURES

    assert MODEL_FIXTURES.names() == ["hf", "open_clip", "openai"] and all(
        name in BACKENDS for name in MODEL_FIXTURES
    )
    hf = {"backend": "hf", "source": {"type": "fixture", "family": "llava", "seed": 0}}
    for settings in (TINY, hf):
        with pytest.raises(
            VlmgridError, match="is a tiny test model that only `vlmgrid fetch-model` can build"
        ):
            BACKENDS.get(settings["backend"]).fetch(settings, tmp_path)
    seen = []
    fixture = MODEL_FIXTURES.get("open_clip").__class__(
        "open_clip", lambda source, folder: seen.append(source) or {}
    )
    assert BACKENDS.get("open_clip").fetch(TINY, tmp_path, fixture=fixture) == {} and seen == [TINY["source"]]
