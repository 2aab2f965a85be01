# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a benchmark of the server measured, in one line for the operator."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type


def summary(result):
    """One line for the operator: throughput with its spread over repeated runs, tokens per joule,
    requests, latencies and GPU power ('n/a' where the result has none)."""
    spread_of = (result.get('spread') or {}).get('output_throughput') or {}
    spread_text = '' if spread_of.get('stdev') is None else (
        ' +/- %s over %s runs (min %s, max %s, 95%% CI +/- %s)'
        % (spread_of['stdev'], spread_of.get('n'), spread_of.get('min'), spread_of.get('max'), spread_of.get('ci95')))
    gpu = result.get('gpu') or {}
    return ('%s output tok/s%s, %s tok/J (%s requests, median TTFT %s ms, median TPOT %s ms, mean GPU power %s W of %s W)'
            % (result.get('output_throughput'), spread_text, result.get('tokens_per_joule') or 'n/a',
               result.get('completed'), result.get('median_ttft_ms'), result.get('median_tpot_ms'),
               gpu.get('mean_power_w', 'n/a'), gpu.get('power_limit_w', 'n/a')))
