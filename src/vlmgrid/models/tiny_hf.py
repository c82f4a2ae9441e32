"""Tiny random-initialised transformers checkpoints, one per vision-language family, built without the network.

`write_tiny_checkpoint(family, out_dir, seed)` writes a checkpoint of a few MB (two layers, hidden size 32, a
small image size) with a byte-level BPE tokenizer trained here on a fixed word list, the family's image
processor and a chat template, all through `save_pretrained`: `AutoProcessor.from_pretrained(out_dir)` and the
family's auto model class load it exactly as they load a downloaded checkpoint, so the `hf` backend's whole
path (processor, chat template, batching, scoring, generation) runs in the tests on the CPU.

Each family is one declarative `Family` entry: its special tokens, a chat template, a config builder and a
processor builder. The same seed gives byte-identical files (weights, tokenizer, configs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from vlmgrid.errors import VlmgridError
from vlmgrid.models.local_tokenizer import train_bpe

# The word list the tokenizer is trained on: letters, yes/no, digits, and the common words of prompts.
_WORDS = (
    "A B C D E F a b c d e f yes no Yes No 0 1 2 3 4 5 6 7 8 9 10 true false "
    "the a an is are was of in on at to and or not what which how many where who there this that "
    "image picture photo question answer option options choose letter one two three four five "
    "cat dog car person man woman bird tree house red green blue black white small large left right "
    "Is there in the image ? . , : ; ! ' \" ( ) - Answer with the option's letter from the given choices directly "
    "USER ASSISTANT User Assistant system user assistant Question Describe describe briefly"
).split()

_PAD, _BOS, _EOS = "<pad>", "<s>", "</s>"
_TEXT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "max_position_embeddings": 1024, "tie_word_embeddings": False}
_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}


def _chat_template(user: str, assistant: str, end: str, image: str, system: str = "{text}\n",
                   bos: str = "") -> str:
    """A Jinja chat template: `user`/`assistant` open a turn, `end` closes one, `image` stands for an image item.

    Message content may be a string or a list of {"type": "image"} / {"type": "text", "text": ...} items.
    """
    def literal(text: str) -> str:
        return json.dumps(text)

    sys_prefix, sys_suffix = system.split("{text}")
    return (
        "{{- " + literal(bos) + " -}}"
        "{%- for message in messages -%}"
        "{%- if message['role'] == 'system' -%}{{- " + literal(sys_prefix) + " -}}"
        "{%- elif message['role'] == 'user' -%}{{- " + literal(user) + " -}}"
        "{%- else -%}{{- " + literal(assistant) + " -}}{%- endif -%}"
        "{%- if message['content'] is string -%}{{- message['content'] -}}"
        "{%- else -%}{%- for item in message['content'] -%}"
        "{%- if item['type'] == 'image' -%}{{- " + literal(image) + " -}}"
        "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
        "{%- endfor -%}{%- endif -%}"
        "{%- if message['role'] == 'system' -%}{{- " + literal(sys_suffix) + " -}}"
        "{%- else -%}{{- " + literal(end) + " -}}{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- " + literal(assistant) + " -}}{%- endif -%}"
    )


@dataclass(frozen=True)
class Family:
    """One architecture family: how to build its config, processor, tokenizer tokens and chat template."""

    name: str
    special_tokens: tuple[str, ...]  # the family's extra special tokens (beside <pad>, <s>, </s>)
    chat_template: str
    config: Callable[[dict], object]  # token ids by token -> the model's PretrainedConfig
    processor: Callable[[object], object]  # tokenizer -> the model's processor
    model_class: str = "AutoModelForImageTextToText"
    token_attributes: dict = field(default_factory=dict)  # tokenizer attributes, e.g. {"image_token": "<image>"}


# --- family builders ------------------------------------------------------------------------------------

def _llava_config(ids: dict):
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig

    return LlavaConfig(
        vision_config=CLIPVisionConfig(**_VISION, image_size=30, patch_size=6, projection_dim=32),
        text_config=LlamaConfig(**_TEXT, vocab_size=ids["__vocab__"], bos_token_id=ids[_BOS],
                                eos_token_id=ids[_EOS], pad_token_id=ids[_PAD]),
        image_token_id=ids["<image>"], vision_feature_layer=-2, vision_feature_select_strategy="default",
        projector_hidden_act="gelu", image_seq_length=25,
    )


def _llava_processor(tokenizer):
    from transformers import CLIPImageProcessor, LlavaProcessor

    image_processor = CLIPImageProcessor(size={"shortest_edge": 30}, crop_size={"height": 30, "width": 30})
    return LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=6,
                          vision_feature_select_strategy="default", num_additional_image_tokens=1,
                          chat_template=FAMILIES["llava"].chat_template)


def _llava_next_config(ids: dict):
    from transformers import CLIPVisionConfig, LlamaConfig, LlavaNextConfig

    return LlavaNextConfig(
        vision_config=CLIPVisionConfig(**_VISION, image_size=30, patch_size=6, projection_dim=32),
        text_config=LlamaConfig(**_TEXT, vocab_size=ids["__vocab__"], bos_token_id=ids[_BOS],
                                eos_token_id=ids[_EOS], pad_token_id=ids[_PAD]),
        image_token_id=ids["<image>"], vision_feature_layer=-2, vision_feature_select_strategy="default",
        image_grid_pinpoints=_PINPOINTS, image_seq_length=25,
    )


_PINPOINTS = [[30, 30], [30, 60], [60, 30], [60, 60]]


def _llava_next_processor(tokenizer):
    from transformers import LlavaNextImageProcessor, LlavaNextProcessor

    image_processor = LlavaNextImageProcessor(size={"shortest_edge": 30}, crop_size={"height": 30, "width": 30},
                                              image_grid_pinpoints=_PINPOINTS)
    return LlavaNextProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=6,
                              vision_feature_select_strategy="default", num_additional_image_tokens=1,
                              chat_template=FAMILIES["llava_next"].chat_template)


_AYA_TOKENS = ("<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>", "<|IMG_LINE_BREAK|>", "TILE",
               "TILE_GLOBAL", "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
               "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>")


def _aya_vision_config(ids: dict):
    from transformers import AyaVisionConfig, Cohere2Config, SiglipVisionConfig

    text = Cohere2Config(**{**_TEXT, "tie_word_embeddings": True}, vocab_size=ids["__vocab__"],
                         bos_token_id=ids[_BOS], eos_token_id=ids["<|END_OF_TURN_TOKEN|>"], pad_token_id=ids[_PAD],
                         sliding_window=512, layer_types=["sliding_attention", "full_attention"])
    return AyaVisionConfig(vision_config=SiglipVisionConfig(**_VISION, image_size=32, patch_size=4),
                           text_config=text, downsample_factor=2, image_token_index=ids["<|IMG_PATCH|>"],
                           tie_word_embeddings=True)


def _aya_vision_processor(tokenizer):
    from transformers import AyaVisionProcessor, GotOcr2ImageProcessor

    image_processor = GotOcr2ImageProcessor(size={"height": 32, "width": 32}, crop_to_patches=False)
    return AyaVisionProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=4, img_size=32,
                              downsample_factor=2, chat_template=FAMILIES["aya_vision"].chat_template)


_IDEFICS_TOKENS = ("<image>", "<fake_token_around_image>", "<end_of_utterance>", "<global-img>", "<video>")
_IDEFICS_TEMPLATE = _chat_template(user="User:", assistant="Assistant:", end="<end_of_utterance>\n", image="<image>",
                                   system="System:{text}<end_of_utterance>\n", bos=_BOS)
# Images are 32 x 32 (no splitting into tiles): 8 x 8 patches of 4, pixel-shuffled by 2 into 16 image tokens.
_IDEFICS_IMAGE = {"size": {"longest_edge": 32}, "max_image_size": {"longest_edge": 32}, "do_image_splitting": False}


def _idefics_config(config_name: str):
    def build(ids: dict):
        import transformers

        config_class = getattr(transformers, config_name)
        vision = {**_VISION, "image_size": 32, "patch_size": 4}
        text = {**_TEXT, "model_type": "llama", "vocab_size": ids["__vocab__"], "bos_token_id": ids[_BOS],
                "eos_token_id": ids["<end_of_utterance>"], "pad_token_id": ids[_PAD]}
        return config_class(vision_config=vision, text_config=text, scale_factor=2, image_token_id=ids["<image>"],
                            pad_token_id=ids[_PAD])
    return build


def _idefics3_processor(tokenizer):
    from transformers import Idefics3ImageProcessor, Idefics3Processor

    return Idefics3Processor(image_processor=Idefics3ImageProcessor(**_IDEFICS_IMAGE), tokenizer=tokenizer,
                             image_seq_len=16, chat_template=FAMILIES["idefics3"].chat_template)


def _smolvlm_processor(tokenizer):
    from transformers import SmolVLMImageProcessor, SmolVLMProcessor, SmolVLMVideoProcessor

    return SmolVLMProcessor(image_processor=SmolVLMImageProcessor(**_IDEFICS_IMAGE),
                            video_processor=SmolVLMVideoProcessor(**_IDEFICS_IMAGE), tokenizer=tokenizer,
                            image_seq_len=16, chat_template=FAMILIES["smolvlm"].chat_template)


def _blip_config(config_name: str):
    def build(ids: dict):
        import transformers

        config_class = getattr(transformers, config_name)
        text = {"model_type": "opt", "vocab_size": ids["__vocab__"], "hidden_size": 32, "ffn_dim": 64,
                "num_hidden_layers": 2, "num_attention_heads": 4, "word_embed_proj_dim": 32,
                "max_position_embeddings": 1024, "bos_token_id": ids[_BOS], "eos_token_id": ids[_EOS],
                "pad_token_id": ids[_PAD]}
        qformer = {"vocab_size": ids["__vocab__"], "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "intermediate_size": 64, "encoder_hidden_size": 32, "pad_token_id": ids[_PAD]}
        vision = {**_VISION, "image_size": 30, "patch_size": 6}
        return config_class(vision_config=vision, qformer_config=qformer, text_config=text, num_query_tokens=4,
                            image_token_index=ids["<image>"])
    return build


def _blip_image_processor():
    from transformers import BlipImageProcessor

    return BlipImageProcessor(size={"height": 30, "width": 30})


def _blip2_processor(tokenizer):
    from transformers import Blip2Processor

    tokenizer.chat_template = FAMILIES["blip2"].chat_template  # the processor takes no chat template of its own
    return Blip2Processor(image_processor=_blip_image_processor(), tokenizer=tokenizer, num_query_tokens=4)


def _instructblip_processor(tokenizer):
    import copy

    from transformers import InstructBlipProcessor

    qformer_tokenizer = copy.deepcopy(tokenizer)
    qformer_tokenizer.padding_side = "right"  # the Q-Former has absolute positions, as BERT (its usual tokenizer)
    tokenizer.chat_template = FAMILIES["instructblip"].chat_template  # the processor takes no chat template
    return InstructBlipProcessor(image_processor=_blip_image_processor(), tokenizer=tokenizer,
                                 qformer_tokenizer=qformer_tokenizer, num_query_tokens=4)


# BLIP-2 and InstructBLIP have no chat format: their processors put the query tokens before the text themselves.
_BLIP_TEMPLATE = _chat_template(user="Question: ", assistant="Answer:", end=" ", image="")

_QWEN_TOKENS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                "<|video_pad|>")
_QWEN_TEMPLATE = _chat_template(user="<|im_start|>user\n", assistant="<|im_start|>assistant\n", end="<|im_end|>\n",
                                image="<|vision_start|><|image_pad|><|vision_end|>",
                                system="<|im_start|>system\n{text}<|im_end|>\n")


def _qwen_text(ids: dict) -> dict:
    # head_dim 8 -> 4 rotary frequencies, split over the temporal, height and width position ids
    return {**_TEXT, "vocab_size": ids["__vocab__"], "bos_token_id": ids[_BOS], "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids[_PAD],
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}}


def _qwen_ids(ids: dict) -> dict:
    return {"image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
            "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"]}


def _qwen2_vl_config(ids: dict):
    from transformers import Qwen2VLConfig

    vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2, "patch_size": 4,
              "spatial_merge_size": 2, "temporal_patch_size": 2}
    return Qwen2VLConfig(text_config=_qwen_text(ids), vision_config=vision, **_qwen_ids(ids))


def _qwen2_5_vl_config(ids: dict):
    from transformers import Qwen2_5_VLConfig

    vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 4, "out_hidden_size": 32,
              "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 16,
              "fullatt_block_indexes": [1]}
    return Qwen2_5_VLConfig(text_config=_qwen_text(ids), vision_config=vision, **_qwen_ids(ids))


def _qwen_processor(family: str):
    def build(tokenizer):
        from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor

        pixels = 32 * 32  # every image becomes 32 x 32: 8 x 8 patches of 4, merged 2 x 2 into 16 tokens
        options = {"min_pixels": pixels, "max_pixels": pixels, "patch_size": 4, "merge_size": 2, "temporal_patch_size": 2}
        processor_class = _processor_class(family)
        return processor_class(image_processor=Qwen2VLImageProcessor(**options),
                               video_processor=Qwen2VLVideoProcessor(**options), tokenizer=tokenizer,
                               chat_template=FAMILIES[family].chat_template)
    return build


def _processor_class(family: str):
    import transformers

    return {"qwen2_vl": transformers.Qwen2VLProcessor, "qwen2_5_vl": transformers.Qwen2_5_VLProcessor}[family]


FAMILIES: dict[str, Family] = {}


def _register(family: Family) -> None:
    FAMILIES[family.name] = family


_register(Family(
    name="llava",
    special_tokens=("<image>",),
    chat_template=_chat_template(user="USER: ", assistant="ASSISTANT:", end=" ", image="<image>\n"),
    config=_llava_config,
    processor=_llava_processor,
    token_attributes={"image_token": "<image>"},
))


_register(Family(
    name="llava_next",
    special_tokens=("<image>",),
    chat_template=_chat_template(user="[INST] ", assistant="[/INST]", end=" ", image="<image>\n"),
    config=_llava_next_config,
    processor=_llava_next_processor,
    token_attributes={"image_token": "<image>"},
))

_register(Family(
    name="aya_vision",
    special_tokens=_AYA_TOKENS,
    chat_template=_chat_template(
        user="<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", assistant="<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
        end="<|END_OF_TURN_TOKEN|>", image="<image>",
        system="<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{text}<|END_OF_TURN_TOKEN|>", bos=_BOS),
    config=_aya_vision_config,
    processor=_aya_vision_processor,
))

_register(Family(
    name="idefics3", special_tokens=_IDEFICS_TOKENS, chat_template=_IDEFICS_TEMPLATE,
    config=_idefics_config("Idefics3Config"), processor=_idefics3_processor,
))
_register(Family(
    name="smolvlm", special_tokens=_IDEFICS_TOKENS, chat_template=_IDEFICS_TEMPLATE,
    config=_idefics_config("SmolVLMConfig"), processor=_smolvlm_processor,
    token_attributes={"image_token": "<image>", "fake_image_token": "<fake_token_around_image>",
                      "end_of_utterance_token": "<end_of_utterance>", "global_image_token": "<global-img>",
                      "video_token": "<video>"},
))

_register(Family(
    name="blip2", special_tokens=("<image>",), chat_template=_BLIP_TEMPLATE, config=_blip_config("Blip2Config"),
    processor=_blip2_processor,  # no image_token attribute: these processors need theirs to be an AddedToken
))
_register(Family(
    name="instructblip", special_tokens=("<image>",), chat_template=_BLIP_TEMPLATE,
    config=_blip_config("InstructBlipConfig"), processor=_instructblip_processor,
))

for _name, _config in (("qwen2_vl", _qwen2_vl_config), ("qwen2_5_vl", _qwen2_5_vl_config)):
    _register(Family(
        name=_name, special_tokens=_QWEN_TOKENS, chat_template=_QWEN_TEMPLATE, config=_config,
        processor=_qwen_processor(_name),
        token_attributes={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
    ))


# --- writing --------------------------------------------------------------------------------------------

def _build_tokenizer(family: Family):
    from transformers import PreTrainedTokenizerFast

    backend = train_bpe(_WORDS, (_PAD, _BOS, _EOS, *family.special_tokens))
    # The family's tokens are already special tokens of the trained tokenizer; the named ones (image_token...)
    # also become tokenizer attributes, which the processors read.
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=_BOS, eos_token=_EOS, pad_token=_PAD,
        extra_special_tokens=dict(family.token_attributes), padding_side="left",
    )
    return tokenizer


def write_tiny_checkpoint(family: str, out_dir: Path, seed: int = 0) -> dict[str, Path]:
    """Write a tiny random checkpoint of `family` into out_dir; return the files written by relative name."""
    import torch
    import transformers

    if family not in FAMILIES:
        raise VlmgridError(f'there is no tiny checkpoint family "{family}"; choose one of {", ".join(FAMILIES)}')
    spec = FAMILIES[family]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = _build_tokenizer(spec)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in (_PAD, _BOS, _EOS, *spec.special_tokens)}
    ids["__vocab__"] = len(tokenizer)
    config = spec.config(ids)
    model_class = getattr(transformers, spec.model_class)
    torch.manual_seed(seed)
    model = model_class.from_config(config, dtype=torch.float32)
    model.eval()
    model.save_pretrained(out_dir)
    spec.processor(tokenizer).save_pretrained(out_dir)
    return {str(path.relative_to(out_dir)): path for path in sorted(out_dir.rglob("*")) if path.is_file()}
