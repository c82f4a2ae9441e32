"""The minimum detectable difference (MDD) of a paired comparison: the smallest true difference between two
models that a two-sided test at level `alpha` finds with probability `power` on this many items.

Two models answer the same n units (items, or the groups a metric scores). Per unit, d = A's score minus
B's (0/1 scores: d is -1, 0 or +1). With the normal approximation to the paired test,

    MDD = (z_{1 - alpha/2} + z_{power}) * sqrt(mean(d^2) / n)

in the scores' unit (times 100 for a percent headline). For 0/1 scores mean(d^2) is the discordance
p_disc = (b + c) / n, the share of units exactly one model got right, and this is the McNemar
sample-size formula solved for the difference: Connor (1987), "Sample size for testing differences in
proportions for the paired-sample design", Biometrics 43(1):207-211, with the variance under the
alternative (p_disc - MDD^2) taken as p_disc, which errs on the side of a larger MDD. mean(d^2) (the
spread of d about zero, the variance of the mean difference under the test's null of no difference) rather
than the sample variance of d keeps the two formulas one: sd(d)^2 = p_disc - mean(d)^2 would make the MDD
of the same 0/1 scores depend on the observed difference.

At alpha = 0.05 and power = 0.8, z_{0.975} + z_{0.8} = 1.95996 + 0.84162 = 2.80158.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from vlmgrid.errors import VlmgridError

ALPHA = 0.05
POWER = 0.8


@cache
def z_sum(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_{1 - alpha/2} + z_{power}: how many standard errors of the difference the MDD is."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise VlmgridError(f"alpha and power must lie strictly between 0 and 1, got {alpha!r} and {power!r}")
    from scipy.stats import norm

    return float(norm.ppf(1.0 - alpha / 2.0) + norm.ppf(power))


def mdd_from_se(standard_error: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDD of a difference whose standard error under the null (no difference) is `standard_error`."""
    if not math.isfinite(standard_error) or standard_error < 0:
        raise VlmgridError(f"a standard error must be a non-negative number, got {standard_error!r}")
    return z_sum(alpha, power) * standard_error


def mdd_discordance(p_disc: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDD (a share, 0-1) of two models' 0/1 scores on `n` units of which the share `p_disc` is
    discordant (exactly one model right): (z_a + z_b) * sqrt(p_disc / n). Also what `vlmgrid plan` tells
    before anything runs, from n and an assumed p_disc."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise VlmgridError(f"the number of units must be a positive integer, got {n!r}")
    if not 0.0 <= p_disc <= 1.0:
        raise VlmgridError(f"a discordance is a share between 0 and 1, got {p_disc!r}")
    return mdd_from_se(math.sqrt(p_disc / n), alpha, power)


def mdd_differences(differences, alpha: float = ALPHA, power: float = POWER) -> float:
    """The MDD (in the scores' unit) from the per-unit differences of two models' scores, A's minus B's:
    (z_a + z_b) * sqrt(mean(d^2) / n). For 0/1 scores it equals `mdd_discordance`."""
    d = np.asarray(differences, dtype=float).ravel()
    if d.size == 0:
        raise VlmgridError("there are no paired differences to size the test by")
    if not np.isfinite(d).all():
        raise VlmgridError("a paired difference is not a finite number")
    return mdd_from_se(math.sqrt(float(np.mean(d * d)) / d.size), alpha, power)
