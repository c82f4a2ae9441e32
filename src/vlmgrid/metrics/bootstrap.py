"""Seeded percentile bootstrap over items, vectorised over chunks of resamples.

A resample is a row of item positions. `bootstrap_indices` yields them as integer matrices of shape
(rows, n_items), a few million entries at a time, so that 50,000 items x 1,000 resamples stays fast and
small in memory. When the items fall into strata (POPE's splits), each stratum is resampled within
itself: the columns of every matrix are grouped by stratum, stratum k always occupies the columns
`stratum_slices(strata)[k]`, so every resample keeps every stratum's size.

The matrices depend only on (strata, samples, seed): the same call gives the same resamples, which is
what makes the bootstrap paired across the variants of a protocol.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

# Entries per index matrix (int64: 32 MiB); the number of resamples per chunk follows from it.
CHUNK_ENTRIES = 1 << 22


def strata_from_codes(codes: np.ndarray) -> list[np.ndarray]:
    """Item positions of each stratum, for stratum codes 0..k-1 (one code per item)."""
    codes = np.asarray(codes)
    if codes.size == 0:
        return [np.arange(0)]
    k = int(codes.max()) + 1
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(k + 1))
    return [order[bounds[i] : bounds[i + 1]] for i in range(k) if bounds[i + 1] > bounds[i]]


def stratum_slices(strata: Sequence[np.ndarray]) -> list[slice]:
    """Column range of each stratum in the matrices built by `identity_indices`/`bootstrap_indices`."""
    out, start = [], 0
    for positions in strata:
        out.append(slice(start, start + len(positions)))
        start += len(positions)
    return out


def identity_indices(strata: Sequence[np.ndarray]) -> np.ndarray:
    """The original sample as a (1, n) index matrix laid out like the resamples (columns by stratum)."""
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in strata])[None, :]


def bootstrap_indices(
    strata: Sequence[np.ndarray], samples: int, seed: int, *, chunk_entries: int = CHUNK_ENTRIES
) -> Iterator[np.ndarray]:
    """Yield `samples` resamples in total, as (rows, n) matrices of item positions.

    Uses `numpy.random.default_rng(seed)`; stratum k of every resample draws len(strata[k]) positions
    with replacement from strata[k] and fills the columns `stratum_slices(strata)[k]`.
    """
    rng = np.random.default_rng(seed)
    strata = [np.asarray(p, dtype=np.int64) for p in strata]
    n = sum(len(p) for p in strata)
    rows = max(1, chunk_entries // max(n, 1))
    # a stratum that is a contiguous range of positions is drawn by a shift instead of a gather
    # (same resamples, faster)
    contiguous = [len(p) > 0 and bool(np.all(np.diff(p) == 1)) for p in strata]
    done = 0
    while done < samples:
        b = min(rows, samples - done)
        parts = []
        for p, shift in zip(strata, contiguous):
            offsets = rng.integers(0, len(p), size=(b, len(p)))
            if shift:
                offsets += p[0]
                parts.append(offsets)
            else:
                parts.append(p[offsets])
        yield parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        done += b


def percentile_ci(draws: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the bootstrap draws (percentile bootstrap, linear
    interpolation)."""
    lo, hi = np.percentile(np.asarray(draws, dtype=float), [2.5, 97.5])
    return float(lo), float(hi)
