"""Benchmark kinds (BENCHMARKS), their sources and raw-format adapters, and a prepared folder's manifest and
loading. Imported from the floors above (fixtures, stages, cli); it imports only the shared modules.

    from vlmgrid.benchmarks import BENCHMARKS, SOURCE_TYPES, load_benchmark, verify_benchmark

A kind's fixture (the small fake copy the tests and the offline grid use) is not here: vlmgrid.fixtures holds
the writers, and the prepare stage (vlmgrid.stages.prepare) hands the kind's one to `prepare_benchmark`.
"""

from vlmgrid.benchmarks.catalog import BENCHMARKS
from vlmgrid.benchmarks.dataset import Benchmark, load_benchmark, prepare_benchmark, verify_benchmark
from vlmgrid.benchmarks.kinds import Adapted, BenchmarkKind
from vlmgrid.benchmarks.sources import SOURCE_TYPES, SOURCES, check_source

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
