"""Before the GPU measurements (perf/gpu_checks.sh): is there a CUDA device, and is every module they import
installed? Prints the device's short name (h200, h100, ...) for the results' file names, or says in one
sentence what is missing and exits with 2, so that a run on a rented GPU is not spent building a 14 GB model
before a missing package stops it.

    python perf/gpu_preflight.py            # prints e.g. "h200"
    python perf/gpu_preflight.py --cpu      # the modules alone (no device needed): what the tests run
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

# The modules perf/speed.py and perf/decode_tolerance.py import, by the distribution that installs each (the
# name pip downloads). A PyTorch image usually has the first group; the second is what such an image tends to
# lack: open_clip and what it and jsonschema need.
MODULES = {
    "torch": "torch",
    "torchvision": "torchvision",
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "safetensors": "safetensors",
    "accelerate": "accelerate",
    "huggingface_hub": "huggingface_hub",
    "timm": "timm",
    "numpy": "numpy",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "scipy": "scipy",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "jinja2": "jinja2",
    "regex": "regex",
    "tqdm": "tqdm",
    "attrs": "attrs",
    "open_clip": "open_clip_torch",
    "ftfy": "ftfy",
    "wcwidth": "wcwidth",
    "jsonschema": "jsonschema",
    "jsonschema_specifications": "jsonschema-specifications",
    "referencing": "referencing",
    "rpds": "rpds-py",
}
# vlmgrid's own modules the measurements run: importing them finds what the list above may have missed
ENTRY_POINTS = (
    "vlmgrid.models.open_clip_backend",
    "vlmgrid.models.hf_backend",
    "vlmgrid.models.clip_device_decode",
    "vlmgrid.protocols.short_answer",
    "vlmgrid.protocols.ranking",
)
REPO = Path(__file__).resolve().parent.parent


def missing_distributions(find_spec=importlib.util.find_spec) -> list[str]:
    """The distributions whose modules cannot be found, in MODULES' order."""
    return [distribution for module, distribution in MODULES.items() if find_spec(module) is None]


def import_failure() -> str | None:
    """The first module an entry point cannot import, or None where all import."""
    for name in ENTRY_POINTS:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:
            return f"{error.name} (imported by {name})"
    return None


def device_slug(name: str) -> str:
    """The short name of a CUDA device for file names: 'NVIDIA H200' -> 'h200', 'NVIDIA H100 80GB HBM3' ->
    'h100', 'NVIDIA A100-SXM4-80GB' -> 'a100'."""
    words = name.replace("-", " ").split()
    if words and words[0].upper() == "NVIDIA":
        words = words[1:]
    return words[0].lower() if words else "gpu"


def problem(cpu_only: bool) -> str | None:
    """One sentence saying why the measurements cannot run here, or None."""
    missing = missing_distributions()
    if missing:
        return (
            f"not installed: {', '.join(missing)}; install them (on a machine without network, as wheels "
            "downloaded elsewhere: docs/speed.md, 'On a GPU machine') and run again"
        )
    failure = import_failure()
    if failure is not None:
        return f"a module the measurements import is not installed: {failure}; install it and run again"
    if cpu_only:
        return None
    import torch

    if not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False); run this "
            "on a machine with an NVIDIA GPU and a CUDA build of torch"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="check the modules alone, without a device")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))  # the checkout's vlmgrid, as gpu_checks.sh runs it
    reason = problem(args.cpu)
    if reason is not None:
        print(f"gpu_preflight: {reason}", file=sys.stderr)
        return 2
    if args.cpu:
        print("cpu")
        return 0
    import torch

    print(device_slug(torch.cuda.get_device_name()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
