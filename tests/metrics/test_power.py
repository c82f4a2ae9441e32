"""The minimum detectable difference of a paired comparison (vlmgrid.metrics.power) against hand-computed
values."""

import math

import pytest

from vlmgrid.errors import VlmgridError
from vlmgrid.metrics.power import mdd_differences, mdd_discordance, mdd_from_se, z_sum

# z_{0.975} = 1.959964, z_{0.8} = 0.841621 (normal tables)
Z = 1.959964 + 0.841621


def test_the_z_sum_at_5_percent_and_80_percent_power():
    assert z_sum() == pytest.approx(Z, abs=1e-6)
    # z_{0.995} = 2.575829, z_{0.9} = 1.281552
    assert z_sum(0.01, 0.9) == pytest.approx(2.575829 + 1.281552, abs=1e-6)
    with pytest.raises(VlmgridError, match="strictly between 0 and 1"):
        z_sum(0.05, 1.0)


def test_the_mdd_from_the_discordance():
    # 20 items, 10 discordant: 2.801585 x sqrt(0.5 / 20) = 2.801585 x 0.158114 = 0.442970
    assert mdd_discordance(0.5, 20) == pytest.approx(0.442970, abs=1e-6)
    # 150 units, 20% discordant: 2.801585 x sqrt(0.2 / 150) = 2.801585 x 0.0365148 = 0.102299
    assert mdd_discordance(0.2, 150) == pytest.approx(0.102299, abs=1e-6)
    assert mdd_discordance(0.0, 150) == 0.0  # two models that never disagree: any difference is no difference
    assert mdd_from_se(0.1) == pytest.approx(0.1 * Z, abs=1e-6)


def test_the_mdd_from_per_unit_differences():
    # 0/1 scores: d is +1 on 8 items, -1 on 2, 0 on 10; mean(d^2) = 10/20, the discordance
    d = [1] * 8 + [-1] * 2 + [0] * 10
    assert mdd_differences(d) == pytest.approx(mdd_discordance(0.5, 20), abs=1e-12)
    # continuous scores: mean(d^2) = (0.25 + 0.25 + 0.0625 + 0) / 4 = 0.140625; sqrt(0.140625 / 4) = 0.1875
    assert mdd_differences([0.5, -0.5, 0.25, 0.0]) == pytest.approx(0.1875 * Z, abs=1e-6)
    # the spread about 0, not about the mean: a constant difference is not a difference of no spread
    assert mdd_differences([0.5] * 4) == pytest.approx(math.sqrt(0.25 / 4) * Z, abs=1e-6)


def test_bad_input_is_one_sentence():
    with pytest.raises(VlmgridError, match="positive integer"):
        mdd_discordance(0.2, 0)
    with pytest.raises(VlmgridError, match="share between 0 and 1"):
        mdd_discordance(1.5, 10)
    with pytest.raises(VlmgridError, match="no paired differences"):
        mdd_differences([])
    with pytest.raises(VlmgridError, match="not a finite number"):
        mdd_differences([0.1, float("nan")])
    with pytest.raises(VlmgridError, match="non-negative"):
        mdd_from_se(-1.0)
