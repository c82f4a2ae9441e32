"""Model backends (BACKENDS) behind one interface; importing this package does not import torch.
Imported from the floors above (fixtures, stages); it imports only the shared modules.
"""

from vlmgrid.models.base import Backend, OptionRequest
from vlmgrid.models.baseline import Baseline
from vlmgrid.models.hf_backend import Hf
from vlmgrid.models.open_clip_backend import OpenClip
from vlmgrid.models.openai_backend import OpenAI
from vlmgrid.registry import Registry

BACKENDS: Registry[type[Backend]] = Registry("model backend", [Baseline, OpenClip, OpenAI, Hf])

__all__ = ["BACKENDS", "Backend", "OptionRequest"]
