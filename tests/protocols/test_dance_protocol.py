"""The ranking protocol: one score per candidate, both directions, embed and likelihood strategies."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from vlmgrid.model_requests import OptionScores, ScoreResult
from vlmgrid.protocols import PROTOCOLS, strategy_for
from vlmgrid.protocols.ranking import embed_strategy, likelihood_strategy

PROMPTS = Path("config/prompts")
RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


@dataclass
class Bench:
    root: Path
    prompts_dir: Path = PROMPTS


def pictures(tmp_path):
    for name, colour in (("red", RED), ("green", GREEN), ("blue", BLUE)):
        Image.new("RGB", (4, 4), colour).save(tmp_path / f"{name}.png")
    (tmp_path / "broken.png").write_bytes(b"\x89PNG broken")
    return Bench(tmp_path)


def records():
    return pd.DataFrame(
        [
            {
                "id": "r2i",
                "direction": "riddle-to-image",
                "image": None,
                "question": "This is green.",
                "options": ["red.png", "green.png", "blue.png"],
            },
            {
                "id": "i2r",
                "direction": "image-to-riddle",
                "image": "blue.png",
                "question": "",
                "options": ["This is red.", "This is blue.", "This is green."],
            },
            {
                "id": "bad",
                "direction": "riddle-to-image",
                "image": None,
                "question": "This is red.",
                "options": ["red.png", "broken.png", "blue.png"],
            },
        ]
    )


class ColourEmbedder:
    """Pictures embed as their colour; "This is <colour>." embeds as that colour."""

    model_capabilities = frozenset({"embed"})

    def __init__(self):
        self.images_embedded = 0

    def embed_images(self, images):
        self.images_embedded += len(images)
        vectors = np.array([np.asarray(image, dtype=float)[0, 0] for image in images])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def embed_texts(self, texts):
        colours = {"red": RED, "green": GREEN, "blue": BLUE}
        vectors = np.array([colours[t.split()[-1].rstrip(".")] for t in texts], dtype=float)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_embed_ranks_by_cosine_in_both_directions_and_embeds_each_picture_once(tmp_path):
    model = ColourEmbedder()
    rows = embed_strategy(model, pictures(tmp_path))(records())
    assert rows[0]["scores"] == pytest.approx([0.0, 1.0, 0.0]) and rows[0]["prediction"] == "green.png"
    assert rows[1]["scores"] == pytest.approx([0.0, 1.0, 0.0]) and rows[1]["prediction_index"] == 1
    assert rows[2]["error"] and rows[2]["scores"] is None  # a candidate picture cannot be read
    assert model.images_embedded == 3  # red, green, blue: shared by the queries, opened and embedded once


class ColourScorer:
    """Log-likelihood 0 for a riddle naming the picture's colour, -1 otherwise; records the requests."""

    model_capabilities = frozenset({"score_options"})
    settings: dict = {}

    def __init__(self):
        self.requests = []

    def score_results(self, requests):
        self.requests.extend(requests)
        names = {RED: "red", GREEN: "green", BLUE: "blue"}
        results = []
        for request in requests:
            colour = names[tuple(np.asarray(request.image)[0, 0])]
            results.append(
                ScoreResult(
                    OptionScores(
                        total=[0.0 if colour in o else -2.0 for o in request.options],
                        tokens=[2] * len(request.options),
                    )
                )
            )
        return results


def test_likelihood_scores_the_riddle_under_each_picture_and_the_riddles_under_one_picture(tmp_path):
    model = ColourScorer()
    rows = likelihood_strategy(model, pictures(tmp_path))(records())
    assert rows[0]["scores"] == pytest.approx([-1.0, 0.0, -1.0]) and rows[0]["prediction"] == "green.png"
    assert rows[1]["scores"] == pytest.approx([-1.0, 0.0, -1.0]) and rows[1]["prediction"] == "This is blue."
    assert rows[2]["error"] and rows[2]["scores"] is None  # a candidate picture cannot be read: not sent
    assert len(model.requests) == 4
    to_image, to_riddle = model.requests[:3], model.requests[3:]
    # riddle -> pictures: one request per picture (its own prefix), ids apart so seeded baselines differ
    assert [r.id for r in to_image] == ["r2i#0", "r2i#1", "r2i#2"]
    assert all(r.options == [" This is green."] for r in to_image)
    # picture -> riddles: one request, the riddles continue one shared picture + prompt prefix
    assert len(to_riddle) == 1 and to_riddle[0].options == [
        " This is red.",
        " This is blue.",
        " This is green.",
    ]
    assert to_riddle[0].prompt == to_image[0].prompt and to_riddle[0].letters is None


def test_registered_with_embed_and_likelihood_only():
    assert set(PROTOCOLS.get("ranking").strategies) == {"embed", "score_options"}
    assert strategy_for("ranking", {"generate"}) is None


def test_fifty_riddles_under_one_picture_score_as_fifty_full_forwards(llava, tmp_path):
    """DANCE on the tiny LLaVA: the picture + prompt prefix computed once and its 50 riddles packed after it
    give each riddle the per-token log-likelihood of its own full forward (picture, prompt and riddle, no
    cache), within 1e-4 in fp32."""
    import torch

    from vlmgrid.model_requests import OptionRequest
    from vlmgrid.protocols.ranking import ranking_prompt

    words = "a red small animal with fur that you can find in the house or on a tree and it is green".split()
    rng = np.random.default_rng(0)
    riddles = [" ".join(rng.choice(words, 20)) + " ." for _ in range(50)]
    Image.fromarray(rng.integers(0, 256, (36, 40, 3), dtype=np.uint8)).save(tmp_path / "entity.png")
    query = pd.DataFrame(
        [
            {
                "id": "q",
                "direction": "image-to-riddle",
                "image": "entity.png",
                "question": "",
                "options": riddles,
            }
        ]
    )
    (row,) = likelihood_strategy(llava, Bench(tmp_path))(query)

    prefix = llava._inputs(
        [OptionRequest("q", Image.open(tmp_path / "entity.png").convert("RGB"), ranking_prompt(), [" x"])]
    )
    expected = []
    for riddle in riddles:
        ids = llava.tokenizer.encode(f" {riddle}", add_special_tokens=False)
        extra = torch.tensor([ids])
        inputs = {
            **prefix,
            "input_ids": torch.cat([prefix["input_ids"], extra], dim=1),
            "attention_mask": torch.cat([prefix["attention_mask"], torch.ones_like(extra)], dim=1),
        }
        with torch.inference_mode():
            logprobs = torch.log_softmax(llava.model(**inputs, use_cache=False).logits[0].float(), dim=-1)
        start = (
            prefix["input_ids"].shape[1] - 1
        )  # the prompt's last position predicts the riddle's first token
        expected.append(sum(float(logprobs[start + k, token]) for k, token in enumerate(ids)) / len(ids))
    np.testing.assert_allclose(row["scores"], expected, atol=1e-4, rtol=0)
    assert row["prediction_index"] == int(np.argmax(expected))
