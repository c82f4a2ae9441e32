"""Model backends, found by name. Importing this package does not import torch."""

from vlmgrid.models.base import Backend, OptionRequest
from vlmgrid.models.baseline import Baseline
from vlmgrid.models.hf_backend import Hf
from vlmgrid.models.open_clip_backend import OpenClip
from vlmgrid.models.openai_backend import OpenAI
from vlmgrid.registry import Registry

BACKENDS: Registry[type[Backend]] = Registry("model backend", [Baseline, OpenClip, OpenAI, Hf])

__all__ = ["BACKENDS", "Backend", "OptionRequest"]
