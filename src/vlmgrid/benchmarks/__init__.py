"""Benchmarks: kinds (a registry), sources, fixture generators, adapters, and prepare/load/verify.

    from vlmgrid.benchmarks import BENCHMARKS, prepare_benchmark, load_benchmark, verify_benchmark, SOURCE_TYPES

A kind is one module that registers a `BenchmarkKind` (see kinds.py); importing this package registers
flowers102, pope and scienceqa_img.
"""

from vlmgrid.benchmarks.kinds import BENCHMARKS, Adapted, BenchmarkKind
from vlmgrid.benchmarks.sources import SOURCE_TYPES, SOURCES, check_source
from vlmgrid.benchmarks.prepare import Benchmark, load_benchmark, prepare_benchmark, verify_benchmark

# Each import registers one kind.
from vlmgrid.benchmarks import flowers102, pope, scienceqa  # noqa: E402,F401
from vlmgrid.benchmarks import pope_coco  # noqa: E402,F401
from vlmgrid.benchmarks import mme  # noqa: E402,F401
from vlmgrid.benchmarks import mmbench  # noqa: E402,F401
from vlmgrid.benchmarks import cvbench  # noqa: E402,F401
from vlmgrid.benchmarks import mmvp  # noqa: E402,F401
from vlmgrid.benchmarks import textvqa  # noqa: E402,F401
from vlmgrid.benchmarks import food101  # noqa: E402,F401
from vlmgrid.benchmarks import caltech101  # noqa: E402,F401
from vlmgrid.benchmarks import imagenet  # noqa: E402,F401
from vlmgrid.benchmarks import kaleidoscope  # noqa: E402,F401
from vlmgrid.benchmarks import cvqa  # noqa: E402,F401
from vlmgrid.benchmarks import dance  # noqa: E402,F401

__all__ = [
    "BENCHMARKS",
    "SOURCE_TYPES",
    "SOURCES",
    "Adapted",
    "Benchmark",
    "BenchmarkKind",
    "check_source",
    "load_benchmark",
    "prepare_benchmark",
    "verify_benchmark",
]
