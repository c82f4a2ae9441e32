"""The benchmark kinds vlmgrid knows: `BENCHMARKS`, built once from one explicit list of the kind modules'
KINDs.

A new kind is one module (its `KIND = BenchmarkKind(...)`), one line here, and its fixture in
vlmgrid.fixtures.kinds.
"""

from __future__ import annotations

from vlmgrid.benchmarks import (
    caltech101,
    cvbench,
    cvqa,
    dance,
    flowers102,
    food101,
    imagenet,
    kaleidoscope,
    mmbench,
    mme,
    mmvp,
    pope,
    pope_coco,
    scienceqa,
    textvqa,
)
from vlmgrid.benchmarks.kinds import BenchmarkKind
from vlmgrid.registry import Registry

BENCHMARKS: Registry[BenchmarkKind] = Registry(
    "benchmark kind",
    [
        flowers102.KIND,
        pope.KIND,
        scienceqa.KIND,
        pope_coco.KIND,
        mme.KIND,
        mmbench.KIND,
        cvbench.KIND,
        mmvp.KIND,
        textvqa.KIND,
        food101.KIND,
        caltech101.KIND,
        imagenet.KIND,
        imagenet.ILSVRC_KIND,
        kaleidoscope.KIND,
        cvqa.KIND,
        dance.KIND,
    ],
)
