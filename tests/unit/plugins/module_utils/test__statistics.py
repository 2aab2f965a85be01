# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Percentiles of one run, and the spread of repeated runs that the experiment gate weighs."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._statistics import (
    mean,
    percentile,
    rounded,
    spread,
    t95,
)


@pytest.mark.parametrize('values, pct, expected', [
    ([5.0], 50, 5.0),
    ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
    ([3.0, 1.0, 2.0], 50, 2.0),
    (list(range(1, 101)), 99, 99.01),
    ([10.0, 20.0], 0, 10.0),
    ([10.0, 20.0], 100, 20.0),
])
def test_percentile_interpolates_like_numpy(values, pct, expected):
    assert percentile(values, pct) == pytest.approx(expected)


def test_percentile_of_nothing_is_none_and_bad_rank_is_refused():
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_spread_of_three_runs():
    result = spread([1867.0, 1838.0, 1893.0])
    assert result['n'] == 3 and result['min'] == 1838.0 and result['max'] == 1893.0
    assert result['mean'] == pytest.approx(1866.0)
    assert result['stdev'] == pytest.approx(27.51, abs=0.01)
    # t(2) = 4.303: three runs give a wide interval, as they should.
    assert result['ci95'] == pytest.approx(4.303 * 27.51 / 3 ** 0.5, abs=0.05)


def test_one_run_has_no_spread():
    result = spread([1867.0])
    assert result['stdev'] is None and result['ci95'] is None and result['mean'] == 1867.0


def test_t_quantiles():
    assert t95(1) == 12.706 and t95(4.7) == 2.776 and t95(200) == 1.96 and t95(0) is None


def test_missing_readings_stay_missing():
    assert mean([None, 2.0, 4.0]) == 3.0 and mean([None]) is None and mean([]) is None
    assert rounded(None) is None and rounded(2.345, 1) == 2.3
