"""The hf backend on tiny random checkpoints of each family, built locally and loaded through
from_pretrained."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers.dvc_lock import write_dvc_repo  # noqa: E402

from vlmgrid.errors import VlmgridError  # noqa: E402
from vlmgrid.fileio import sha256_file  # noqa: E402
from vlmgrid.fixtures.models import MODEL_FIXTURES  # noqa: E402
from vlmgrid.fixtures.models.tiny_hf import FAMILIES, write_tiny_checkpoint  # noqa: E402
from vlmgrid.model_requests import GenerateRequest, OptionRequest  # noqa: E402
from vlmgrid.models.hf_backend import Hf  # noqa: E402


def _settings(family: str, **extra) -> dict:
    return {
        "backend": "hf",
        "source": {"type": "fixture", "family": family, "seed": 0},
        "precision": "fp32",
        "generation": {"max_new_tokens": 6},
        **extra,
    }


def _image(seed: int, size=(40, 36)) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_hf")
    made = {}

    def get(family: str):
        if family == "smolvlm":
            pytest.importorskip("num2words", reason="the SmolVLM processor needs num2words")
        if family not in made:
            made[family] = root / family
            Hf.fetch(_settings(family), made[family], fixture=MODEL_FIXTURES.get("hf"))
        return made[family]

    return get


@pytest.fixture(scope="module")
def models(checkpoints):
    loaded = {}

    def get(family: str, **extra) -> Hf:
        key = (family, tuple(sorted(extra.items())))
        if key not in loaded:
            loaded[key] = Hf.load(_settings(family, **extra), checkpoints(family), "cpu")
        return loaded[key]

    return get


def _by_hand_logprobs(model: Hf, image, prompt: str, extra_ids=()):
    """Next-token log-softmax after prompt (+ extra_ids) from one unpadded forward, built from the
    processor."""
    content = ([{"type": "image"}] if image is not None else []) + [{"type": "text", "text": prompt}]
    owner = next(
        (owner for owner in (model.processor, model.processor.tokenizer) if owner.chat_template), None
    )
    text = (
        prompt
        if owner is None
        else owner.apply_chat_template(  # BLIP-2, InstructBLIP: no chat template
            [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
        )
    )
    kwargs = {"text": [text], "return_tensors": "pt"}
    if image is not None:
        kwargs["images"] = [[image]] if model._nested_images() else [image]
    inputs = dict(model.processor(**kwargs))
    if extra_ids:
        extra = torch.tensor([list(extra_ids)])
        length = inputs["input_ids"].shape[1]
        for key, value in list(inputs.items()):  # per-token inputs (mm_token_type_ids...) mark text tokens: 0
            if key not in ("input_ids", "attention_mask") and value.ndim == 2 and value.shape[1] == length:
                inputs[key] = torch.cat([value, torch.zeros_like(extra, dtype=value.dtype)], dim=1)
        inputs["input_ids"] = torch.cat([inputs["input_ids"], extra], dim=1)
        inputs["attention_mask"] = torch.cat([inputs["attention_mask"], torch.ones_like(extra)], dim=1)
    with torch.inference_mode():
        logits = model.model(**inputs, use_cache=False).logits
    return torch.log_softmax(logits[0].float(), dim=-1)


FAMILY_NAMES = sorted(FAMILIES)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_loads_through_from_pretrained_and_generates_deterministically(models, family):
    model = models(family)
    assert model.model.training is False and model.tokenizer.padding_side == "left"
    requests = [GenerateRequest(f"q{i}", _image(i), f"What is in the image {i}?") for i in range(3)]
    first = model.generate(requests)
    assert len(first) == 3 and all(isinstance(text, str) for text in first)
    assert model.generate(requests) == first
    alone = [model.generate([request])[0] for request in requests]
    assert first == alone  # batched (left-padded) generation equals one request at a time
    # the same on the token ids (a random model may well generate only special tokens, which decode to "")
    ids = model.generate_token_ids(requests)
    assert ids == [model.generate_token_ids([request])[0] for request in requests]
    assert all(0 < len(row) <= 6 for row in ids)
    for request, row in zip(requests, ids):  # greedy: the first new token is the argmax after the prompt
        assert row[0] == int(_by_hand_logprobs(model, request.image, request.prompt)[-1].argmax())
    short = [GenerateRequest(r.id, r.image, r.prompt, max_new_tokens=2) for r in requests]
    assert model.generate_token_ids(short) == [row[:2] for row in ids]
    text_only = [GenerateRequest("t", None, "Is there a cat?", max_new_tokens=2)]
    if model.needs_image:  # BLIP-2 and InstructBLIP cannot run without an image
        with pytest.raises(VlmgridError, match="no image"):
            model.generate(text_only)
    else:
        assert isinstance(model.generate(text_only)[0], str)
    provenance = model.provenance()
    assert (
        provenance.model_id == f"fixture:{family}"
        and provenance.device == "cpu"
        and provenance.dtype == "float32"
    )
    assert set(provenance.libraries) == {"torch", "transformers"}
    assert family in model.describe()


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_letter_scores_equal_the_next_token_log_softmax(models, family):
    model = models(family)
    prompts = [
        "Is there a cat?\nA. yes\nB. no\nC. two\nD. red\nAnswer with the letter.",
        "Which one?",
        "Is the dog left?",
    ]
    requests = [
        OptionRequest(f"q{i}", _image(10 + i), prompt, ["yes", "no", "two", "red"], letters="ABCD")
        for i, prompt in enumerate(prompts)
    ]
    scores = model.score_options(requests)
    for request, score in zip(requests, scores):
        assert score.tokens == [1, 1, 1, 1] and all(math.isfinite(value) for value in score.total)
        logprobs = _by_hand_logprobs(model, request.image, request.prompt)[-1]
        expected = [
            max(float(logprobs[token]) for token in model.letter_token_ids(letter)) for letter in "ABCD"
        ]
        np.testing.assert_allclose(score.total, expected, atol=1e-4)
    # both spellings are considered where the tokenizer has them (byte-level BPE: "A" and " A")
    assert len(model.letter_token_ids("A")) == 2


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_continuations_reuse_the_prefix_and_equal_full_forwards(models, family):
    model = models(family, batch_size=3)  # 5 options: chunks of 3 and 2, each from a copy of the prefix cache
    options = [" yes", " no", " a red car", " two dogs in the house", " 7"]
    request = OptionRequest("c0", _image(3), "Describe the image briefly.", options)
    score = model.score_options([request])[0]
    counts = [len(model.tokenizer.encode(option, add_special_tokens=False)) for option in options]
    assert score.tokens == counts and max(counts) > 1
    for option, total in zip(options, score.total):
        ids = model.tokenizer.encode(option, add_special_tokens=False)
        logprobs = _by_hand_logprobs(model, request.image, request.prompt, ids[:-1])
        expected = sum(float(logprobs[len(logprobs) - len(ids) + k, token]) for k, token in enumerate(ids))
        assert total == pytest.approx(expected, abs=1e-4)
    # a lettered request, a text-only one and this one in the same call come back in order
    lettered = OptionRequest("l", _image(4), "Which?", ["x", "y"], letters="AB")
    text_only = OptionRequest("t", None, "Is there a cat?", [" a red car", " two dogs in the house"])
    batch = [lettered, request] if model.needs_image else [lettered, text_only, request]
    mixed = model.score_options(batch)
    assert mixed[-1].total == pytest.approx(score.total, abs=1e-5) and mixed[0].tokens == [1, 1]
    if (
        not model.needs_image
    ):  # scored after image requests: nothing of theirs (e.g. Qwen's rope deltas) lingers
        for option, total in zip(text_only.options, mixed[1].total):
            ids = model.tokenizer.encode(option, add_special_tokens=False)
            logprobs = _by_hand_logprobs(model, None, text_only.prompt, ids[:-1])
            expected = sum(
                float(logprobs[len(logprobs) - len(ids) + k, token]) for k, token in enumerate(ids)
            )
            assert total == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_fixture_fetch_is_byte_identical(tmp_path, family):
    if family == "smolvlm":
        pytest.importorskip("num2words", reason="the SmolVLM processor needs num2words")
    first = Hf.fetch(_settings(family), tmp_path / "one", fixture=MODEL_FIXTURES.get("hf"))
    second = Hf.fetch(_settings(family), tmp_path / "two", fixture=MODEL_FIXTURES.get("hf"))
    assert sorted(first) == sorted(second) and "model.safetensors" in first and "tokenizer.json" in first
    assert {name: sha256_file(path) for name, path in first.items()} == {
        name: sha256_file(path) for name, path in second.items()
    }
    assert sum(path.stat().st_size for path in first.values()) < 2_000_000  # tiny
    other = write_tiny_checkpoint(family, tmp_path / "three", seed=1)
    assert sha256_file(other["model.safetensors"]) != sha256_file(first["model.safetensors"])


def test_unknown_family_is_a_clear_error(tmp_path):
    with pytest.raises(VlmgridError, match="no tiny checkpoint family"):
        write_tiny_checkpoint("nope", tmp_path)


@pytest.mark.parametrize(
    "error_name, match",
    [
        ("GatedRepoError", "accept its licence.*HF_TOKEN"),
        ("RepositoryNotFoundError", "was not found"),
        ("RevisionNotFoundError", "revision 'abc' does not exist in the hub repo org/model"),
        ("LocalEntryNotFoundError", "cannot reach the Hugging Face hub"),
    ],
)
def test_hub_fetch_errors_name_the_fix(monkeypatch, tmp_path, error_name, match):
    import huggingface_hub
    from huggingface_hub import errors

    error_class = getattr(errors, error_name)

    def fail(**kwargs):
        if issubclass(error_class, errors.HfHubHTTPError):
            response = SimpleNamespace(headers={}, request=None, status_code=403)  # what the error reads
            raise error_class("boom", response=response)
        raise error_class("boom")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fail)
    settings = {"backend": "hf", "source": {"type": "hf_hub", "repo": "org/model", "revision": "abc"}}
    with pytest.raises(VlmgridError, match=match):
        Hf.in_place(settings)


def test_a_hub_source_is_its_snapshot_in_the_cache_never_a_copy(monkeypatch, tmp_path):
    import huggingface_hub

    snapshot = tmp_path / "hub" / "models--o--m" / "snapshots" / "c0ffee"

    def download(repo_id, revision, **kwargs):
        assert (repo_id, revision) == ("o/m", "r") and "local_dir" not in kwargs  # the standard cache
        (snapshot / "sub").mkdir(parents=True)
        (snapshot / "config.json").write_text("{}")
        (snapshot / "sub" / "w.safetensors").write_text("x")
        (snapshot / ".gitattributes").write_text("y")
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    checkpoint = Hf.in_place({"source": {"type": "hf_hub", "repo": "o/m", "revision": "r"}})
    assert checkpoint.location == snapshot
    assert checkpoint.files == {
        "config.json": snapshot / "config.json",
        "sub/w.safetensors": snapshot / "sub/w.safetensors",
    }


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(VlmgridError, match="fetch-model"):
        Hf.load(_settings("llava"), tmp_path, "cpu")


@pytest.mark.parametrize(
    "model, pull",
    [
        (
            "llava-1.5-7b",
            "`dvc pull data/models/llava-1.5-7b` fetches it (DVC tracks it: pipelines/paper/dvc.lock), or ",
        ),
        ("llava-untracked", ""),
    ],
)
def test_a_missing_checkpoint_dvc_tracks_says_dvc_pull_first(tmp_path, monkeypatch, model, pull):
    monkeypatch.chdir(write_dvc_repo(tmp_path))
    model_dir = tmp_path / "data" / "models" / model
    with pytest.raises(VlmgridError) as caught:
        Hf.load(_settings("llava"), model_dir, "cpu")
    assert (
        str(caught.value)
        == f"{model_dir / 'config.json'} is missing; {pull}run `vlmgrid fetch-model` for this model first"
    )


def test_auto_batch_size_halves_on_out_of_memory(checkpoints, monkeypatch):
    model = Hf.load(_settings("llava"), checkpoints("llava"), "cpu")
    assert model.settings["batch_size"] == "auto"
    requests = [
        OptionRequest(f"q{i}", _image(20 + i), f"Question {i}?", ["a", "b"], letters="AB") for i in range(5)
    ]
    expected = [model.score_options([request])[0] for request in requests]
    forward = model.model.forward
    sizes = []

    def limited(*args, **kwargs):
        batch = kwargs["input_ids"].shape[0]
        sizes.append(batch)
        if batch > 2:
            raise torch.cuda.OutOfMemoryError("simulated")
        return forward(*args, **kwargs)

    monkeypatch.setattr(model.model, "forward", limited)
    model._limit = 64
    scores = model.score_options(requests)
    assert sizes == [5, 2, 2, 1]  # 5 fails, then 2 + 2 + the last 1
    for got, want in zip(scores, expected):
        np.testing.assert_allclose(got.total, want.total, atol=1e-4)
    assert model.batch_size == 2 and model._limit == 2
    sizes.clear()
    model.score_options(requests)
    assert sizes == [2, 2, 1]  # the size that worked is remembered


def test_fixed_batch_size_does_not_retry_on_out_of_memory(checkpoints, monkeypatch):
    model = Hf.load(_settings("llava", batch_size=4), checkpoints("llava"), "cpu")

    def oom(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("simulated")

    monkeypatch.setattr(model.model, "forward", oom)
    with pytest.raises(VlmgridError, match="batch_size"):
        model.score_options([OptionRequest("q", _image(0), "Q?", ["a", "b"], letters="AB")])


def test_importing_models_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, vlmgrid.models, vlmgrid.models.hf_backend, vlmgrid.fixtures.models.tiny_hf; "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("letters", ["AB", None])
def test_option_scores_that_are_not_finite_stop_the_job_naming_the_item(checkpoints, letters):
    """A damaged checkpoint (or an overflow) gives NaN log-likelihoods, over which an argmax picks the first
    option: never a row, the job stops in one sentence naming the item."""
    from vlmgrid.errors import InferenceFailed

    family = FAMILY_NAMES[0]
    model = Hf.load(_settings(family), checkpoints(family), "cpu")  # its own copy: its weights are spoilt
    requests = [
        OptionRequest(f"q{i}", _image(i), "Is there a cat?", ["yes", "no"], letters) for i in range(2)
    ]
    assert all(math.isfinite(value) for scores in model.score_options(requests) for value in scores.total)
    with torch.no_grad():
        model.model.get_output_embeddings().weight.fill_(float("nan"))
    with pytest.raises(InferenceFailed) as caught:
        model.score_options(requests)
    assert caught.value.stop
    assert str(caught.value).startswith("the option scores of q0 holds NaN or infinite values; ")
    assert "overflowed at its precision (fp32; bf16 or fp32 avoid that)" in str(caught.value)


@pytest.mark.parametrize(
    "fault, said",
    [
        (torch.cuda.OutOfMemoryError("CUDA out of memory"), "ran out of GPU memory on the prefix of item q0"),
        (
            RuntimeError("CUDA error: an illegal memory access was encountered"),
            r"hit a CUDA error \(CUDA error",
        ),
    ],
)
def test_a_device_failure_on_a_ranking_prefix_stops_the_job_in_one_sentence(checkpoints, fault, said):
    """The prefix's forward runs outside the batches: its out-of-memory or CUDA error stops the job as a
    batch's does, never a traceback."""
    from vlmgrid.errors import InferenceFailed

    family = FAMILY_NAMES[0]
    model = Hf.load(_settings(family), checkpoints(family), "cpu")

    class Failing:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, *args, **kwargs):
            raise fault

        def __getattr__(self, name):
            return getattr(self.inner, name)

    model.model = Failing(model.model)
    with pytest.raises(InferenceFailed, match=said) as caught:
        model.score_options([OptionRequest("q0", _image(0), "Which one?", ["a red ball", "a blue cube"])])
    assert caught.value.stop


def test_many_candidates_in_chunks_equal_one_batch(models):
    """DANCE's path: 50 candidate texts for one image, in one batch or in chunks of 7, score the same."""
    words = ["cat", "dog", "car", "tree", "house", "red", "blue", "bird", "man", "woman"]
    options = [f" a {words[i % 10]} and {words[(i * 3) % 10]} {i}" for i in range(50)]
    request = OptionRequest("d", _image(7), "Describe the image briefly.", options)
    together = models("llava").score_options([request])[0]
    chunked = models("llava", batch_size=7).score_options([request])[0]
    assert len(together.total) == 50 and together.tokens == chunked.tokens
    np.testing.assert_allclose(together.total, chunked.total, atol=1e-4)
    assert len(set(round(value, 3) for value in together.total)) > 40  # the options are scored, not copied


def test_system_message_and_image_size(models):
    model = models("llava")
    with_system = model.inputs.text(
        GenerateRequest("s", _image(5), "Is there a cat?", system="Answer briefly.")
    )
    assert with_system.startswith("Answer briefly.") and "<image>" in with_system
    assert "<image>" not in model.inputs.text(GenerateRequest("s", None, "Is there a cat?"))
    request = OptionRequest("s", _image(5, size=(50, 20)), "Which?", ["a", "b"], letters="AB")
    plain = model.score_options([request])[0]
    system = model.score_options(
        [OptionRequest("s", request.image, "Which?", ["a", "b"], "AB", "Answer briefly.")]
    )[0]
    assert plain.total != system.total
    resized = models("llava", image_size=16)
    pre_resized = OptionRequest("s", request.image.resize((16, 16)), "Which?", ["a", "b"], letters="AB")
    pre_resized_total = model.score_options([pre_resized])[0].total
    assert resized.score_options([request])[0].total == pytest.approx(pre_resized_total, abs=1e-5)
    assert pre_resized_total != plain.total  # the resize changes what the model sees


def test_letters_and_options_that_cannot_be_scored_are_clear_errors(models):
    model = models("llava")
    with pytest.raises(VlmgridError, match="not a single token"):
        model.score_options([OptionRequest("x", _image(0), "Q?", ["a", "b"], letters=["Option1", "Option2"])])
    with pytest.raises(VlmgridError, match="empty option"):
        model.score_options([OptionRequest("x", _image(0), "Q?", ["", " b"])])
    with pytest.raises(VlmgridError, match="2 options but 3 letters"):
        model.score_options([OptionRequest("x", _image(0), "Q?", ["a", "b"], letters="ABC")])


def test_model_class_by_name_and_eager_fallback(checkpoints, monkeypatch, caplog):
    import transformers

    model = Hf.load(
        _settings("instructblip", model_class="InstructBlipForConditionalGeneration"),
        checkpoints("instructblip"),
        "cpu",
    )
    assert type(model.model).__name__ == "InstructBlipForConditionalGeneration"
    with pytest.raises(VlmgridError, match="no class"):
        Hf.load(_settings("llava", model_class="NoSuchModel"), checkpoints("llava"), "cpu")

    original = transformers.AutoModelForImageTextToText.from_pretrained
    seen = []

    def no_sdpa(*args, attn_implementation=None, **kwargs):
        seen.append(attn_implementation)
        if attn_implementation == "sdpa":
            raise ValueError(
                "LlavaForConditionalGeneration does not support an attention implementation through "
                "torch.nn.functional.scaled_dot_product_attention yet."
            )
        return original(*args, attn_implementation=attn_implementation, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", no_sdpa)
    with caplog.at_level("WARNING"):
        model = Hf.load(_settings("llava"), checkpoints("llava"), "cpu")
    assert seen == ["sdpa", "eager"] and "eager" in caplog.text
    assert model.model.config._attn_implementation == "eager"


def test_fetch_model_manifest_and_registry(tmp_path):
    from vlmgrid.models import BACKENDS
    from vlmgrid.stages.fetch import fetch_model

    assert BACKENDS.get("hf") is Hf
    settings = {"backend": "hf", "source": {"type": "fixture", "family": "llava", "seed": 3}}
    manifest = fetch_model("tiny", settings, tmp_path / "tiny")
    assert "model.safetensors" in manifest["files"] and "tokenizer.json" in manifest["files"]
    model = Hf.load(settings, tmp_path / "tiny", "auto")
    assert model.device == "cpu" and model.dtype == torch.float32  # bf16 is asked for, fp32 on the CPU
    provenance = model.provenance()
    assert provenance.revision == "seed=3" and provenance.batch_size is None
    model.score_options([OptionRequest("q", _image(0), "Q?", ["a", "b"], letters="AB")])
    assert model.provenance().batch_size == 1
    assert model.provenance().generation == {"max_new_tokens": 32, "do_sample": False}


def test_hub_provenance(models):
    model = models("llava")
    hub = Hf(
        {"source": {"type": "hf_hub", "repo": "llava-hf/llava-1.5-7b-hf", "revision": "abc123"}},
        model.model,
        model.processor,
        "cpu",
        torch.float32,
    )
    provenance = hub.provenance()
    assert provenance.model_id == "llava-hf/llava-1.5-7b-hf" and provenance.revision == "abc123"
    assert "llava-hf/llava-1.5-7b-hf" in hub.describe()


def test_device_map_without_accelerate_is_a_clear_error(checkpoints, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a)
    )
    with pytest.raises(VlmgridError, match="accelerate"):
        Hf.load(_settings("llava", device_map="auto"), checkpoints("llava"), "cpu")


def test_sampling_is_seeded(checkpoints):
    settings = _settings(
        "llava", generation={"max_new_tokens": 6, "do_sample": True, "temperature": 1.5, "seed": 4}
    )
    model = Hf.load(settings, checkpoints("llava"), "cpu")
    requests = [GenerateRequest(f"q{i}", _image(i), "What is it?") for i in range(2)]
    first = model.generate_token_ids(requests)
    assert model.generate_token_ids(requests) == first
    greedy = Hf.load(_settings("llava"), checkpoints("llava"), "cpu").generate_token_ids(requests)
    assert first != greedy  # sampling at temperature 1.5 from a random model differs from greedy decoding


def test_generation_preset_is_what_runs_and_what_the_provenance_says(checkpoints):
    settings = _settings("llava", generation={"preset": "kaleidoscope", "max_new_tokens": 4, "seed": 1})
    model = Hf.load(settings, checkpoints("llava"), "cpu")
    assert model.settings["image_size"] == 512
    assert model.provenance().generation == {
        "preset": "kaleidoscope",
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 0,
        "repetition_penalty": 1.0,
        "max_new_tokens": 4,
        "seed": 1,
    }
    requests = [GenerateRequest(f"q{i}", _image(i), "What is it?") for i in range(2)]
    sampled = model.generate_token_ids(requests)
    assert model.generate_token_ids(requests) == sampled  # seeded
    greedy = Hf.load(_settings("llava", generation={"max_new_tokens": 4}), checkpoints("llava"), "cpu")
    assert greedy.provenance().generation == {"max_new_tokens": 4, "do_sample": False}


@pytest.mark.parametrize(
    "generation, passed",
    [
        ({"do_sample": True, "top_k": 0, "repetition_penalty": 1.0}, {"top_k": 0, "repetition_penalty": 1.0}),
        ({"do_sample": False, "repetition_penalty": 1.0}, {"top_k": None, "repetition_penalty": 1.0}),
        ({"do_sample": False}, {"top_k": None}),  # unset: the checkpoint's generation_config decides
    ],
)
def test_top_k_and_repetition_penalty_reach_generate_over_the_checkpoints_own(
    checkpoints, monkeypatch, generation, passed
):
    """A checkpoint's generation_config.json may set top_k 1 or a repetition penalty (Qwen2.5-VL's does); an
    entry that names them gets them in every generate call, greedy decoding included."""
    model = Hf.load(
        _settings("llava", generation={**generation, "max_new_tokens": 2}), checkpoints("llava"), "cpu"
    )
    seen = []
    original = model.model.generate

    def generate(**kwargs):
        seen.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(model.model, "generate", generate)
    model.generate([GenerateRequest("q", _image(0), "What is it?")])
    assert {key: seen[0].get(key, "absent") for key in passed} == passed
    if "repetition_penalty" not in generation:
        assert "repetition_penalty" not in seen[0]


def test_a_job_holding_several_gpus_spreads_the_model_over_them(checkpoints, monkeypatch):
    from vlmgrid.models import hf_loading

    asked = {}

    class Loaded:
        """What from_pretrained returns: spread by accelerate (its map), or moved whole by `.to`."""

        hf_device_map = {"model.vision_tower": 0, "model.language_model": 1, "lm_head": 1}

        def to(self, device):
            asked["moved_to"] = device
            return self

        def eval(self):
            return self

    def loaded(model_class, model_dir, attn, kwargs):
        asked.update(kwargs)
        return Loaded()

    monkeypatch.setattr(hf_loading, "_from_pretrained", loaded)
    settings = {**Hf.defaults, **_settings("llava")}
    monkeypatch.setattr(
        torch.cuda, "device_count", lambda: 2
    )  # CUDA_VISIBLE_DEVICES shows the job's two GPUs
    hf_loading.load_pretrained(settings, checkpoints("llava"), "cuda")
    assert asked["device_map"] == "auto" and "moved_to" not in asked
    asked.clear()
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    hf_loading.load_pretrained(settings, checkpoints("llava"), "cuda")
    assert (
        "device_map" not in asked and asked["moved_to"] == "cuda"
    )  # one GPU: the model is moved there whole


def test_a_model_that_does_not_fit_its_gpus_stops_instead_of_running_from_the_cpu(tmp_path):
    from vlmgrid.models.hf_loading import _check_on_gpus

    _check_on_gpus(SimpleNamespace(hf_device_map={"model": 0, "lm_head": 1}), tmp_path, 2)
    spilled = SimpleNamespace(hf_device_map={"model.layers.0": 0, "model.layers.1": "cpu", "lm_head": "disk"})
    with pytest.raises(
        VlmgridError,
        match=r"does not fit on the 2 GPU\(s\) this job holds \(2 of its 3 modules "
        r"would lie on the CPU or disk, the first model.layers.1\); give the "
        r"model more gpus",
    ):
        _check_on_gpus(spilled, tmp_path, 2)


def test_device_map_auto_loads_through_accelerate_on_the_cpu(checkpoints):
    model = Hf.load({**_settings("llava"), "device_map": "auto"}, checkpoints("llava"), "cpu")
    assert {parameter.device.type for parameter in model.model.parameters()} == {"cpu"}
    assert model.generate([GenerateRequest(id="q1", image=_image(0), prompt="What is it?")])[0] is not None


def test_packed_mask_lets_each_option_see_the_prefix_and_its_own_earlier_tokens():
    from vlmgrid.models.hf_scoring import _packed_mask

    mask = _packed_mask([2, 1], 1, torch.float32, "cpu")
    assert mask.shape == (1, 1, 3, 4)
    low = torch.finfo(torch.float32).min
    # columns: the prefix token, then option 0's two tokens, then option 1's one token
    expected = torch.tensor([[0, 0, low, low], [0, 0, 0, low], [0, low, low, 0]])
    assert torch.equal(mask[0, 0], expected)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_packed_continuations_equal_one_row_per_option(checkpoints, family):
    """Class names packed into one row score as each in its own row (a long prompt, many names of 1-4
    tokens)."""
    names = [
        f" {a} {b}" if i % 3 else f" {a}"
        for i, (a, b) in enumerate(
            (x, y)
            for x in ("cat", "dog", "red", "tree", "house", "bird")
            for y in ("car", "blue", "man", "woman")
        )
    ]
    prompt = "Choose one of: " + ",".join(names) + "."
    requests = [
        OptionRequest("p0", _image(21), prompt, names),
        OptionRequest("p1", _image(22), "Which one?", names[:5]),
    ]
    model = Hf.load(_settings(family, batch_size=7), checkpoints(family), "cpu")
    if family in ("llava", "llava_next"):  # their text model is llama: the packed path is the one that runs
        assert model._packable(model._text_model())
    packed = model.score_options(requests)
    model.pack_options = False
    assert not model._packable(model._text_model())
    plain = model.score_options(requests)
    for a, b in zip(packed, plain):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.total, b.total, atol=1e-5)
        assert int(np.argmax(a.normalised)) == int(np.argmax(b.normalised))


@pytest.mark.parametrize("packed", [True, False])
def test_options_make_no_device_tensor_that_waits_for_the_device(checkpoints, monkeypatch, packed):
    """No tensor is made with torch.tensor(..., device=...), nor copied to the device with a blocking .to(),
    neither between a prefix's forward and its options' nor for the next request's inputs: on CUDA that copy
    waits for every queued kernel (the prefix's forward), so the device would idle while the host prepares
    what comes next. Host tensors go by a non-blocking copy (`host_device.to_device`), packed options or one
    a row."""
    import inspect

    made = []
    tensor, to = torch.tensor, torch.Tensor.to

    def caller() -> str:
        return inspect.currentframe().f_back.f_back.f_globals.get("__name__", "")

    def watched(*args, **kwargs):
        if caller().startswith("vlmgrid") and kwargs.get("device") is not None:
            made.append(("tensor", caller()))
        return tensor(*args, **kwargs)

    def moved(self, *args, **kwargs):
        to_a_device = bool(args) and isinstance(args[0], (str, torch.device))  # not a cast to a dtype
        if caller().startswith("vlmgrid.models.hf_") and to_a_device and not kwargs.get("non_blocking"):
            made.append(("to", caller()))
        return to(self, *args, **kwargs)

    model = Hf.load(_settings("llava"), checkpoints("llava"), "cpu")
    model.pack_options = packed
    assert model._packable(model._text_model()) == packed
    request = OptionRequest("p0", _image(23), "Which one?", [" a cat", " two dogs", " red"])
    expected = model.score_options([request])
    monkeypatch.setattr(torch, "tensor", watched)
    monkeypatch.setattr(torch.Tensor, "to", moved)
    assert model.score_options([request]) == expected and made == []


def test_packed_mask_is_made_on_the_device_it_is_for():
    """No host tensor of the mask's size: on a GPU the mask is the device's work, not the host's between
    calls."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    from vlmgrid.models.hf_scoring import _packed_mask

    made = []

    class Made(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            made.extend((t.device.type, t.numel()) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
            return out

    lengths, prefix = [5, 3, 4], 7
    with Made():
        mask = _packed_mask(lengths, prefix, torch.float32, "meta")
    assert mask.device.type == "meta" and mask.shape == (1, 1, 12, 19)
    assert max((n for device, n in made if device == "cpu"), default=0) <= sum(lengths)
