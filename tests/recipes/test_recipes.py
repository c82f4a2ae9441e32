"""Recipes as data: every shipped recipe loads, cites what it follows, and fills a model entry with its
settings; an entry cannot quietly change what its recipe fixes; a cell's settings are its kind's; the prompt
templates render an item's fields byte for byte."""

import re
from importlib import resources

import pytest
import yaml

from vlmgrid.config import load_schema, settings_for_kind, validate_config
from vlmgrid.errors import VlmgridError
from vlmgrid.prompt_templates import PromptTemplate
from vlmgrid.recipes import OWNED, load_recipe, recipe_names

COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _grid(model: dict, kind: str = "pope") -> dict:
    return {
        "benchmarks": {"b": {"kind": kind, "source": {"type": "fixture"}}},
        "models": {"m": model},
        "grid": {"models": ["m"], "benchmarks": ["b"]},
    }


def _hf(**settings) -> dict:
    return {"backend": "hf", "source": {"type": "fixture", "family": "llava"}, **settings}


def test_the_schema_names_every_recipe():
    assert sorted(load_schema()["$defs"]["recipe"]["enum"]) == recipe_names()


@pytest.mark.parametrize("name", recipe_names())
def test_every_recipe_loads_and_cites_each_file_at_a_commit(name):
    recipe = load_recipe(name)
    assert recipe.title and recipe.paper and recipe.backends
    for entry in recipe.follows:
        assert COMMIT.match(entry["commit"]), (name, entry)
        assert "/" in entry["repo"] and entry["path"] and entry["for"]
    assert set(recipe.settings) <= OWNED | {"batch_size"}
    backend = recipe.backends[0]
    model = (
        _hf(recipe=name)
        if backend == "hf"
        else {"backend": "openai", "model": "x", "base_url": "http://h/v1", "recipe": name}
    )
    config = validate_config(_grid(model, next(iter(recipe.kinds), "pope")))
    assert config.model("m")["recipe"] == name


def test_a_recipe_fills_the_entry_and_the_cell_takes_its_kind():
    config = validate_config(_grid(_hf(recipe="llava-1.5", batch_size=4), kind="scienceqa_img"))
    model = config.model("m")
    assert model["precision"] == "fp16" and model["pad_to_square"] is True and model["batch_size"] == 4
    assert model["system"].startswith("A chat between a curious user")
    cell = config.cell_settings("m", "b")
    # ScienceQA-IMG as the paper's code ran it: cropped, 1,024 new tokens, greedy kept from the model's
    # settings
    assert cell["pad_to_square"] is False
    assert cell["generation"] == {"do_sample": False, "max_new_tokens": 1024}
    assert "kinds" not in cell and cell["prompt"]["user"].endswith("directly.")


def test_llava_1_5_asks_mmvp_with_the_image_cropped_as_mmvps_script_did():
    # tsb0601/MMVP@763500597e65c3446f09047837ceda76f4e264bf scripts/evaluate_mllm.py hands the image to the
    # processor itself, no expand2square: "image_tensor = image_processor.preprocess(image,
    # return_tensors='pt')['pixel_values'][0]"
    config = validate_config(_grid(_hf(recipe="llava-1.5"), kind="mmvp"))
    assert config.model("m")["pad_to_square"] is True
    cell = config.cell_settings("m", "b")
    assert cell["pad_to_square"] is False
    assert cell["generation"] == {"do_sample": True, "temperature": 0.2, "max_new_tokens": 1024, "seed": 0}


def test_instructblip_runs_in_fp16_as_lavis_loads_it():
    # salesforce/LAVIS@506965b9c4a18c1e565bd32acaccabe0198433f7: blip2_vicuna_instruct.py
    # "LlamaForCausalLM.from_pretrained(llm_model, torch_dtype=torch.float16)", and
    # lavis/configs/models/blip2/blip2_instruct_vicuna7b.yaml `vit_precision: "fp16"`
    model = {
        "backend": "hf",
        "source": {"type": "fixture", "family": "instructblip"},
        "recipe": "instructblip",
    }
    assert validate_config(_grid(model, kind="textvqa")).model("m")["precision"] == "fp16"


def test_mblip_cites_its_pope_config_at_the_commit_that_holds_it():
    # gregor-ge/mBLIP: configs/datamodule/mblip_halu_pope.yaml is added by 9e06ad15 ("Updated for version 2 on
    # arxiv"); the initial commit a190ce5a has mblip_vqa2.yaml but no POPE config
    commits = {entry["path"]: entry["commit"] for entry in load_recipe("mblip").follows}
    pope = [commit for path, commit in commits.items() if "mblip_halu_pope.yaml" in path]
    assert pope == ["9e06ad152a04bcbfe84eb583b9402b4e7adc9f83"]
    assert commits["configs/datamodule/mblip_vqa2.yaml"] == "a190ce5ae9729f1e2ef265034484169e355e3d93"


def test_settings_for_kind_merges_mappings_and_leaves_other_kinds_alone():
    settings = {
        "generation": {"do_sample": False, "max_new_tokens": 8},
        "system": "s",
        "kinds": {"mme": {"generation": {"max_new_tokens": 16}, "system": "t"}},
    }
    assert settings_for_kind(settings, "mme") == {
        "generation": {"do_sample": False, "max_new_tokens": 16},
        "system": "t",
    }
    assert settings_for_kind(settings, "pope") == {
        "generation": {"do_sample": False, "max_new_tokens": 8},
        "system": "s",
    }


@pytest.mark.parametrize(
    "key, value",
    [
        ("precision", "bf16"),
        ("system", "other"),
        ("image_size", 336),
        ("generation", {"max_new_tokens": 8}),
        ("answer_mode", "generate"),
    ],
)
def test_an_entry_cannot_change_what_its_recipe_fixes(key, value):
    with pytest.raises(VlmgridError, match=f"models.m.{key}: recipe llava-1.5 fixes {key}"):
        validate_config(_grid(_hf(recipe="llava-1.5", **{key: value})))


def test_likelihood_is_the_one_departure_and_it_is_recorded_for_every_kind():
    config = validate_config(_grid(_hf(recipe="llava-1.5", answer_mode="likelihood"), kind="cvqa"))
    model = config.model("m")
    assert model["answer_mode"] == "likelihood"
    assert model["departs_from_recipe"] == [
        "answer_mode: likelihood (scores the options; the recipe reads a generated answer)"
    ]
    assert all("answer_mode" not in spec for spec in model["kinds"].values())
    assert config.cell_settings("m", "b")["answer_mode"] == "likelihood"


def test_a_recipe_for_another_backend_or_an_unknown_one_is_one_sentence():
    with pytest.raises(VlmgridError, match="recipe kaleidoscope-api is for the openai backend, not hf"):
        validate_config(_grid(_hf(recipe="kaleidoscope-api")))
    with pytest.raises(
        VlmgridError, match='models.m.recipe: "llava-15" is not a valid value \\(did you mean'
    ):
        validate_config(_grid(_hf(recipe="llava-15")))
    with pytest.raises(VlmgridError, match='there is no recipe "llava-15" \\(did you mean "llava-1.5"'):
        load_recipe("llava-15")


def test_kaleidoscope_recipes_carry_the_authors_texts_not_a_name():
    spec = load_recipe("kaleidoscope-qwen2.5-vl").kinds["kaleidoscope"]["prompt"]
    table = yaml.safe_load(
        resources.files("vlmgrid").joinpath("recipes/data/kaleidoscope.yaml").read_text("utf-8")
    )
    assert spec["data"] == table
    assert sorted(table["languages"]) == sorted(
        [
            "ar",
            "bn",
            "de",
            "en",
            "es",
            "fa",
            "fr",
            "hi",
            "hr",
            "hu",
            "lt",
            "ne",
            "nl",
            "pt",
            "ru",
            "sr",
            "te",
            "uk",
        ]
    )
    assert "\n\\ONLY output" in table["sys_message"]  # the published string's backslash, kept


# --- prompt templates ---------------------------------------------------------------------------------------


def test_a_template_renders_fields_exactly_and_marks_the_image():
    template = PromptTemplate.of(
        {
            "user": "{{ question | capitalize }}{{ image }}\n{% for o in options %}"
            "{{ letters[loop.index0] }}. {{ o }}\n{% endfor %}  "
        }
    )
    rendered = template.render({"question": "what is it?", "options": ["a", "b"], "letters": ["A", "B"]})
    assert rendered.text == "What is it?\nA. a\nB. b\n  "  # trailing whitespace kept
    assert rendered.image_at == len("What is it?") and not rendered.formatted and rendered.system is None


def test_filters_and_missing_values():
    template = PromptTemplate.of(
        {
            "user": "{% if hint %}{{ hint }}\n{% endif %}"
            "{{ question | without_suffix('Please answer yes or no.') }}|"
            "{{ name | upper_first }}"
        }
    )
    fields = {"hint": float("nan"), "question": "Is it red?  Please answer yes or no. ", "name": "dAKOTA"}
    assert template.render(fields).text == "Is it red?|DAKOTA"


def test_a_raw_template_is_the_whole_string_and_a_system_template_goes_with_the_item():
    raw = PromptTemplate.of({"raw": "<s>{{ question }}</s>"}).render({"question": "q"})
    assert raw.formatted and raw.text == "<s>q</s>"
    system = PromptTemplate.of(
        {"system": "{{ data.words[language] }}", "user": "{{ question }}", "data": {"words": {"es": "hola"}}}
    ).render({"question": "q", "language": "es"})
    assert system.system == "hola" and system.text == "q"


@pytest.mark.parametrize(
    "spec, problem",
    [
        ({"user": "{{ question"}, "not a valid template"),
        ({"raw": "x", "user": "y"}, "cannot be given with `user` or `system`"),
        ({"system": "x"}, "give `user`"),
        ({"user": "x", "shape": "y"}, "unknown key 'shape'"),
        ({"answers": "Yes"}, "must be a list of non-empty texts"),
    ],
)
def test_a_malformed_prompt_is_one_sentence(spec, problem):
    with pytest.raises(VlmgridError, match=re.escape(problem)):
        PromptTemplate.of(spec)


def test_an_unknown_field_names_the_item_and_the_fields():
    template = PromptTemplate.of({"user": "{{ questoin }}"}, where="the prompt of pope for m")
    with pytest.raises(
        VlmgridError, match=r"the prompt of pope for m.user: cannot be rendered for item 7 .*questoin"
    ):
        template.render({"id": "7", "question": "q"})


def test_a_template_cannot_reach_python_internals():
    template = PromptTemplate.of({"user": "{{ question.__class__.__mro__ }}"})
    with pytest.raises(VlmgridError, match="cannot be rendered"):
        template.render({"question": "q"})


def test_an_items_text_is_text_never_a_template():
    """A dataset's question holding Jinja syntax (or a template's own image mark) is shown as written: fields
    are values of the template, never its source."""
    template = PromptTemplate.of({"user": "{{ question }}\nA. {{ options[0] }}"})
    hostile = "{{ 7 * 7 }} {% for x in range(3) %}x{% endfor %} {{ ''.__class__ }}"
    rendered = template.render({"question": hostile, "options": ["{{ options }}"]})
    assert rendered.text == hostile + "\nA. {{ options }}" and rendered.image_at is None
