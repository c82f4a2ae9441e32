"""Model backends (BACKENDS) behind one interface; importing this package does not import torch.
Imported from the floors above (fixtures, stages); it imports only the shared modules.
"""

from vlmgrid.models.base import Backend, OptionRequest
from vlmgrid.models.baseline import Baseline
from vlmgrid.models.hf_backend import Hf
from vlmgrid.models.open_clip_backend import OpenClip
from vlmgrid.models.openai_backend import OpenAI
from vlmgrid.registry import Registry
from vlmgrid.serving import recorded_settings

BACKENDS: Registry[type[Backend]] = Registry("model backend", [Baseline, OpenClip, OpenAI, Hf])


def answer_settings(settings: dict) -> dict:
    """A model's settings as a cell's identity takes them (the workflows' params, the job's fingerprint): as
    recorded (`recorded_settings`), without its backend's `run_only` settings, which change how the answers
    are computed, never what they are."""
    backend = settings.get("backend")
    run_only = BACKENDS.get(backend).run_only if backend in BACKENDS else frozenset()
    return {key: value for key, value in recorded_settings(settings).items() if key not in run_only}


__all__ = ["BACKENDS", "Backend", "OptionRequest", "answer_settings"]
