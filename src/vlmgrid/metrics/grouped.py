"""Metrics whose unit is a group of items (MME's image pairs, MMVP's pairs, MMBench's circular groups).

The bootstrap of `score_predictions` draws item positions, uniformly within each stratum. A grouped metric
turns those into draws of whole groups, exactly:

- `strata_codes` puts every group into the stratum of (its `stratify_by` value, its size), so that a uniform
  draw of an item within a stratum picks each of the stratum's groups with the same probability;
- every item carries its group's numbers (`group_arrays`), and `compute` reads only the columns of the
  groups' representatives (the first item of each group in records order): in the identity resample those
  columns hold each group exactly once; in a resample they hold as many independent uniform group draws as
  the stratum has groups. So each resample is a bootstrap over groups (stratified by group size, and by
  `stratify_by` where the metric has one).

Groups are keyed by (`stratify_by` value, group column) so that ids reused across subtasks stay apart. A
breakdown column should be constant within groups (it is for the benchmarks' own categories); a group split
by a breakdown is scored in the part that holds its first item only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pandas as pd

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.base import Metric


def _key_columns(metric: GroupedMetric, records: pd.DataFrame) -> list[str]:
    cols = [metric.group_by]
    if metric.stratify_by and metric.stratify_by in records.columns:
        cols.insert(0, metric.stratify_by)
    return cols


def group_codes(records: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Dense group code per record for the combination of `columns` (nulls form a group of their own)."""
    keys = records[columns].astype("string").fillna("\x00null")
    if len(columns) == 1:
        combined = keys[columns[0]]
    else:
        combined = keys[columns[0]].str.cat([keys[c] for c in columns[1:]], sep="\x1f")
    codes, _ = pd.factorize(combined, sort=False, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64)


def group_arrays(codes: np.ndarray, right: np.ndarray) -> dict[str, np.ndarray]:
    """Per item, its group's numbers: `g_right` (items right), `g_size` (items), `g_all` (all right), and
    `is_rep` (True for the first item of each group, in records order)."""
    codes = np.asarray(codes, dtype=np.int64)
    k = int(codes.max()) + 1 if codes.size else 0
    size = np.bincount(codes, minlength=k)
    n_right = np.bincount(codes, weights=np.asarray(right, dtype=float), minlength=k)
    is_rep = np.zeros(codes.shape[0], dtype=bool)
    _, first = np.unique(codes, return_index=True)
    is_rep[first] = True
    return {
        "g_right": n_right[codes].astype(float),
        "g_size": size[codes].astype(float),
        "g_all": n_right[codes] == size[codes],
        "is_rep": is_rep,
    }


class GroupedMetric(Metric):
    """A metric scored over groups of items; the bootstrap resamples groups (see the module docstring)."""

    #: records column holding the group id
    group_by: ClassVar[str]

    def group_codes(self, records: pd.DataFrame) -> np.ndarray:
        if records[self.group_by].isna().any():
            first = records["id"].iloc[int(np.flatnonzero(records[self.group_by].isna().to_numpy())[0])]
            raise VlmgridError(f'record "{first}" has no "{self.group_by}"; the {self.name} metric needs one')
        return group_codes(records, _key_columns(self, records))

    def strata_codes(self, records: pd.DataFrame) -> np.ndarray:
        codes = self.group_codes(records)
        size = np.bincount(codes)[codes]
        if self.stratify_by and self.stratify_by in records.columns:
            outer, _ = pd.factorize(records[self.stratify_by], sort=True, use_na_sentinel=False)
            return np.asarray(outer, dtype=np.int64) * (int(size.max()) + 1) + size
        return size

    @staticmethod
    def drawn_groups(data: dict[str, np.ndarray], idx: np.ndarray, sl: slice) -> np.ndarray:
        """(rows, groups) item positions, one per group draw of stratum `sl`: the columns of the stratum's
        representatives. Read the drawn group's numbers with `data["g_..."][result]`."""
        cols = sl.start + np.flatnonzero(data["is_rep"][sl])
        return idx[:, cols]

    def drawn_totals(
        self, data: dict[str, np.ndarray], idx: np.ndarray, slices: Sequence[slice], keys: Sequence[str]
    ) -> tuple[int, dict[str, np.ndarray]]:
        """The number of groups drawn per resample, and per resample the sum of each `data[key]` over them."""
        groups, totals = 0, {key: np.zeros(idx.shape[0]) for key in keys}
        for sl in slices:
            g = self.drawn_groups(data, idx, sl)
            groups += g.shape[1]
            for key in keys:
                totals[key] += data[key][g].sum(axis=1)
        return groups, totals
