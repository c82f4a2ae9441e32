"""Loading a transformers checkpoint for the `hf` backend, and finding one in place (the Hugging Face cache, a
local folder).

`load_pretrained` always goes through `AutoProcessor` and `AutoModelForImageTextToText` (or the class named by
`model_class`), with the asked attention implementation or the next one that is available.
"""

from __future__ import annotations

import logging
from pathlib import Path

from vlmgrid.dvc_outputs import or_pull
from vlmgrid.errors import VlmgridError
from vlmgrid.hub import hub_errors
from vlmgrid.models.checkpoints import Checkpoint, hf_folder

log = logging.getLogger(__name__)


def hub_snapshot(source: dict) -> Checkpoint:
    """A pinned snapshot of a hub repo (`source: {type: hf_hub, repo, revision}`) in the Hugging Face cache
    (HF_HOME / HF_HUB_CACHE, shared by every project), downloaded there when it is not yet; never copied. With
    HF_HUB_OFFLINE=1 a snapshot already in the cache is found without the network."""
    from huggingface_hub import snapshot_download

    repo, revision = source["repo"], source["revision"]
    with hub_errors(repo, revision, f"model {repo}"):
        folder = Path(snapshot_download(repo_id=repo, revision=revision))
    files = {
        path.relative_to(folder).as_posix(): path
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.relative_to(folder).parts[0].startswith(".")
    }
    return Checkpoint(folder, files)


#: How a transformers checkpoint of each source type is read in place (a fixture is written by fetch instead).
IN_PLACE = {"hf_hub": hub_snapshot, "local": hf_folder}


def checkpoint_in_place(source: dict | None) -> Checkpoint | None:
    """The checkpoint of a hub or local source where it lies; None for a fixture (or no source)."""
    reader = IN_PLACE.get((source or {}).get("type"))
    return reader(source) if reader is not None else None


def needs_image(model) -> bool:
    """Whether the model's forward cannot run without pixel_values (BLIP-2, InstructBLIP)."""
    import inspect

    parameter = inspect.signature(model.forward).parameters.get("pixel_values")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _from_pretrained(model_class, model_dir: Path, attn: str, kwargs: dict):
    """Load with the asked attention implementation, falling back (flash_attention_2 -> sdpa -> eager) with a
    note."""
    order = ["flash_attention_2", "sdpa", "eager"]
    candidates = [attn] + [name for name in order[order.index(attn) + 1 :]] if attn in order else [attn]
    for position, name in enumerate(candidates):
        try:
            return model_class.from_pretrained(model_dir, attn_implementation=name, **kwargs)
        except (ValueError, ImportError) as exc:
            message = str(exc).lower()
            if position == len(candidates) - 1 or not any(
                word in message for word in ("attn", "attention", "sdpa")
            ):
                raise
            log.warning(
                "%s: attn_implementation=%s is not available (%s); trying %s",
                model_dir,
                name,
                exc,
                candidates[position + 1],
            )
    raise AssertionError("unreachable")


def _check_on_gpus(model, model_dir: Path, gpus: int) -> None:
    """A model spread over GPUs must lie on them whole: layers that accelerate put on the CPU or the disk
    because the GPUs were full would run hundreds of times slower, a job that never ends."""
    placed = getattr(model, "hf_device_map", None) or {}
    off = [name for name, where in placed.items() if str(where) in ("cpu", "disk")]
    if off:
        raise VlmgridError(
            f"{model_dir}: the model does not fit on the {gpus} GPU(s) this job holds "
            f"({len(off)} of its {len(placed)} modules would lie on the CPU or disk, the first "
            f"{off[0]}); give the model more gpus"
        )


def _resolve_class(name: str):
    import transformers

    cls = getattr(transformers, name, None)
    if cls is None:
        raise VlmgridError(
            f'transformers {transformers.__version__} has no class "{name}"; fix the model\'s model_class'
        )
    return cls


def load_processor(settings: dict, model_dir: Path):
    """The checkpoint's processor (AutoProcessor, with the settings' processor_kwargs), its tokenizer padding
    on the left: what `load_pretrained` loads beside the model, and all `vlmgrid inputs` needs."""
    from transformers import AutoProcessor

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise VlmgridError(
            f"{model_dir / 'config.json'} is missing; "
            f"{or_pull(model_dir, 'run `vlmgrid fetch-model` for this model first')}"
        )
    processor = AutoProcessor.from_pretrained(
        model_dir,
        trust_remote_code=bool(settings.get("trust_remote_code", False)),
        **dict(settings.get("processor_kwargs") or {}),
    )
    tokenizer = getattr(processor, "tokenizer", processor)
    # Left: a batch's prompts then all end where generation starts. `padding_side: right` exists only to show
    # what the batch check catches (the bug of padding a decoder-only model on the right).
    tokenizer.padding_side = settings.get("padding_side") or "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return processor


def load_pretrained(settings: dict, model_dir: Path, device: str) -> tuple:
    """(model, processor, device, dtype) of the checkpoint in model_dir, as the (complete) settings ask: on
    `device` ("auto": cuda when available), in eval mode, its tokenizer padding on the left."""
    import torch

    model_dir = Path(model_dir)
    processor = load_processor(settings, model_dir)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[settings["precision"]]
    if device == "cpu":
        dtype = torch.float32  # half precision on the CPU is slow and not what a reference run uses
    remote = bool(settings.get("trust_remote_code", False))
    model_class = _resolve_class(settings.get("model_class") or "AutoModelForImageTextToText")
    kwargs: dict = {"dtype": dtype, "trust_remote_code": remote}
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    if settings.get("device_map") == "auto" or gpus > 1:
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:
            raise VlmgridError(
                "spreading a model over several GPUs needs the accelerate package; "
                "`pip install accelerate`, or give the model gpus: 1 and no device_map"
            )
        # The job sees exactly the GPUs it holds (CUDA_VISIBLE_DEVICES), so "auto" spreads over those alone.
        kwargs["device_map"] = "auto"
    model = _from_pretrained(model_class, model_dir, settings.get("attn_implementation") or "sdpa", kwargs)
    if "device_map" not in kwargs:
        model = model.to(device)
    elif device == "cuda":
        _check_on_gpus(model, model_dir, gpus)
    model.eval()
    return model, processor, device, dtype
