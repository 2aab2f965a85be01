# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The statistics the benchmark and the experiment gate share: percentiles, means and spreads.

Standard library only, so that the benchmark runs on a node without numpy; the percentile
interpolates the way numpy's default does, so numbers match those of ``sglang.bench_serving``.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import math

# Two-sided 95% quantiles of Student's t by degrees of freedom; beyond 30 the normal 1.96.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def rounded(value, digits=2):
    """``value`` rounded, None kept: a measurement that is missing stays missing."""
    return None if value is None else round(value, digits)


def mean(values):
    """Mean of the values that are set; None when none is (a sensor a VM hides)."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def percentile(values, pct):
    """Percentile with linear interpolation between closest ranks (numpy's default).

    A ``pct`` outside 0..100 is a mistake of the caller, not of the measurement: ValueError.
    """
    if not values:
        return None
    if not 0 <= pct <= 100:
        raise ValueError('percentile must be within 0..100, got %r' % (pct,))
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(math.floor(rank))
    high = int(math.ceil(rank))
    if low == high:
        return float(ordered[low])
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def t95(degrees):
    """Two-sided 95% quantile of Student's t; ``degrees`` may be fractional (Welch), rounded down."""
    if degrees is None or degrees < 1:
        return None
    degrees = int(math.floor(degrees))
    return _T95[degrees - 1] if degrees <= len(_T95) else 1.96


def spread(values):
    """Mean, sample standard deviation, min, max and the 95% confidence half-width of the mean.

    One value has no spread: ``stdev`` and ``ci95`` are None, so that nobody reads noise into it.
    """
    values = [float(v) for v in values if v is not None]
    if not values:
        return {'n': 0, 'mean': None, 'stdev': None, 'min': None, 'max': None, 'ci95': None, 'cv_pct': None}
    count = len(values)
    average = sum(values) / count
    stdev = None
    ci95 = None
    cv_pct = None
    if count > 1:
        stdev = math.sqrt(sum((v - average) ** 2 for v in values) / (count - 1))
        ci95 = t95(count - 1) * stdev / math.sqrt(count)
        cv_pct = 100.0 * stdev / average if average else None
    return {'n': count, 'mean': rounded(average, 3), 'stdev': rounded(stdev, 3), 'min': rounded(min(values), 3),
            'max': rounded(max(values), 3), 'ci95': rounded(ci95, 3), 'cv_pct': rounded(cv_pct, 2)}
