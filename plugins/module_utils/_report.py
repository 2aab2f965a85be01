# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn a node's history and topology facts into things a person reads at a glance.

* ``throughput_chart_svg``: throughput over time as an inline SVG, with GPU power
  on a second axis and vertical markers where experiments and rollbacks happened.
* ``topology_grid`` / ``topology_text``: the GPU link matrix, coloured by link class
  for HTML, aligned columns for a terminal.
* ``redact``: configuration with secrets masked.

Standard library only; no plotting package is needed on the controller.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import datetime
import math

from ansible_collections.inferops.serving.plugins.module_utils._secrets import SECRET_KEY_MARKERS

try:
    from html import escape as _html_escape
except ImportError:  # pragma: no cover - Python 2 is not a supported controller
    from cgi import escape as _html_escape


class ReportError(Exception):
    """Input the report cannot render."""


REDACTED = '(set, not shown)'

# Link classes from fastest to slowest, as nvidia-smi topo -m names them.
LINK_CLASSES = (
    ('self', 'same GPU'),
    ('nvlink', 'NVLink'),
    ('switch', 'PCIe switch (PIX/PXB)'),
    ('hostbridge', 'PCIe host bridge (PHB/NODE)'),
    ('crossnuma', 'across CPU sockets (SYS)'),
    ('unknown', 'unknown'),
)

_OUTCOME_COLOURS = {'kept': '#2e7d32', 'rolled_back': '#c62828', 'refused': '#757575', 'inconclusive': '#f9a825'}
_BASELINE = '#1565c0'
_EXPERIMENT = '#ef6c00'
_POWER = '#8d6e63'
_CAMPAIGN = '#6a1b9a'


def _esc(text):
    return _html_escape(u'%s' % (text,), quote=True)


def link_class(link):
    text = ('%s' % (link,)).strip().upper()
    if text in ('X', 'SELF'):
        return 'self'
    if text.startswith('NV'):
        return 'nvlink'
    if text in ('PIX', 'PXB'):
        return 'switch'
    if text in ('PHB', 'NODE'):
        return 'hostbridge'
    if text == 'SYS':
        return 'crossnuma'
    return 'unknown'


def _matrix(value, size):
    """Accept a matrix as a list of rows or as {gpu: {gpu: link}}; return a list of rows."""
    if value is None:
        return None
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: int(k) if ('%s' % k).isdigit() else ('%s' % k))
        return [[(value[row] or {}).get(col, (value[row] or {}).get(str(col), '')) for col in keys]
                for row in keys]
    if isinstance(value, (list, tuple)):
        rows = [list(r) if isinstance(r, (list, tuple)) else None for r in value]
        if any(r is None for r in rows):
            raise ReportError('a topology matrix must be a list of rows, got %r' % (value,))
        return rows
    raise ReportError('a topology matrix must be a list of rows or a mapping, got %r' % (value,))


def topology_grid(facts):
    """Rows of {'text', 'cls'} cells for the GPU link matrix, with P2P status beside each link.

    Reads the ``nccl_topology`` facts: ``gpu_links`` (link per GPU pair), optional
    ``p2p_read``/``p2p_write`` (OK/NS/... per pair) and ``gpus`` (names).
    """
    facts = facts or {}
    size = facts.get('gpu_count') or 0
    links = _matrix(facts.get('gpu_links'), size) or []
    reads = _matrix(facts.get('p2p_read'), size)
    writes = _matrix(facts.get('p2p_write'), size)
    labels = ['GPU%d' % i for i in range(len(links))]
    rows = []
    for i, row in enumerate(links):
        cells = []
        for j, link in enumerate(row):
            p2p = []
            for name, matrix in (('r', reads), ('w', writes)):
                if matrix and i < len(matrix) and j < len(matrix[i]) and i != j:
                    p2p.append('%s:%s' % (name, matrix[i][j]))
            cells.append({'text': '%s' % link, 'cls': link_class(link), 'p2p': ' '.join(p2p),
                          'p2p_ok': all(p.endswith(':OK') for p in p2p) if p2p else None})
        rows.append({'label': labels[i], 'cells': cells})
    order = [k for k, _d in LINK_CLASSES]
    used = sorted(set(c['cls'] for r in rows for c in r['cells']), key=order.index)
    legend = [{'cls': k, 'text': d} for k, d in LINK_CLASSES if k in used]
    return {'labels': labels, 'rows': rows, 'legend': legend}


def topology_text(facts):
    """The topology facts and advice as aligned text lines, for a terminal."""
    facts = facts or {}
    grid = topology_grid(facts)
    lines = []
    gpus = facts.get('gpus') or []
    names = sorted(set(('%s' % (g.get('name') if isinstance(g, dict) else g)) for g in gpus)) if gpus else []
    lines.append('GPUs: %s%s' % (facts.get('gpu_count', len(grid['rows'])),
                                 (' x ' + ', '.join(names)) if names else ''))
    if grid['rows']:
        width = max([len(c['text']) for r in grid['rows'] for c in r['cells']] + [4]) + 2
        lines.append(' ' * 6 + ''.join(label.rjust(width) for label in grid['labels']))
        for row in grid['rows']:
            lines.append(row['label'].ljust(6) + ''.join(c['text'].rjust(width) for c in row['cells']))
    for key, title in (('p2p_read', 'P2P read'), ('p2p_write', 'P2P write')):
        matrix = _matrix(facts.get(key), 0)
        if matrix:
            values = sorted(set('%s' % v for i, r in enumerate(matrix) for j, v in enumerate(r) if i != j))
            lines.append('%s between GPU pairs: %s' % (title, ', '.join(values)))
    for key, title in (('weakest_link', 'Weakest link'), ('all_pairs_p2p', 'P2P between all pairs'),
                       ('nvlink', 'NVLink')):
        if key in facts:
            lines.append('%s: %s' % (title, _plain(facts[key])))
    if facts.get('nic_names'):
        lines.append('NICs: %s' % ', '.join('%s' % n for n in facts['nic_names']))
    advised = facts.get('allreduce_fusion_advised')
    if advised is not None:
        lines.append('FlashInfer allreduce fusion: %s' % ('advised' if advised else 'NOT advised'))
    for reason in facts.get('reasons') or []:
        lines.append('  - %s' % (reason,))
    for title, key, fmt in (('Recommended environment', 'recommended_env', '%s=%s'),
                            ('Recommended server arguments', 'recommended_sglang_args', '--%s %s')):
        value = facts.get(key)
        if value:
            lines.append('%s:' % title)
            items = value.items() if isinstance(value, dict) else [(v, '') for v in value]
            for name, setting in sorted(items, key=lambda kv: '%s' % kv[0]):
                # A bare flag (true) is written as the flag alone, as on a command line.
                shown = '' if setting is True and key == 'recommended_sglang_args' else _plain(setting)
                lines.append(('  ' + fmt % (name, shown)).rstrip())
    for warning in facts.get('warnings') or []:
        lines.append('warning: %s' % (warning,))
    return lines


def _plain(value):
    if value is True:
        return 'yes'
    if value is False:
        return 'no'
    if isinstance(value, dict):
        return ', '.join('%s=%s' % (k, _plain(v)) for k, v in sorted(value.items()))
    if isinstance(value, (list, tuple)):
        return ' '.join(_plain(v) for v in value)
    return '%s' % (value,)


def redact(mapping, extra_secret_keys=()):
    """Copy of ``mapping`` whose secret-looking keys show only that they are set."""
    result = {}
    for key, value in (mapping or {}).items():
        upper = ('%s' % key).upper().replace('-', '_')
        secret = any(marker in upper for marker in SECRET_KEY_MARKERS) or key in extra_secret_keys
        result[key] = REDACTED if secret and value not in (None, '', False) else value
    return result


def _nice_step(span, target_ticks=5):
    raw = span / float(max(target_ticks, 1))
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _time_label(epoch, span):
    stamp = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    if span < 2 * 3600:
        return stamp.strftime('%H:%M:%S')
    if span < 2 * 86400:
        return stamp.strftime('%H:%M')
    return stamp.strftime('%m-%d %H:%M')


def _benchmarks(records):
    points = []
    for record in records:
        if record.get('event') != 'benchmark':
            continue
        metrics = record.get('metrics') or {}
        throughput = metrics.get('output_throughput')
        if throughput is None or record.get('epoch') is None:
            continue
        spread = (metrics.get('spread') or {}).get('output_throughput') or {}
        points.append({'epoch': float(record['epoch']), 'throughput': float(throughput),
                       'low': spread.get('min') if spread.get('stdev') is not None else None,
                       'high': spread.get('max') if spread.get('stdev') is not None else None,
                       'stdev': spread.get('stdev'), 'runs': spread.get('n'),
                       'power': (metrics.get('gpu') or {}).get('mean_power_w'),
                       'limit': (metrics.get('gpu') or {}).get('power_limit_w'),
                       'experiment': record.get('experiment')})
    return points


def _markers(records):
    markers = []
    for record in records:
        event = record.get('event')
        if record.get('epoch') is None:
            continue
        if event == 'experiment':
            outcome = record.get('outcome') or 'kept'
            markers.append({'epoch': float(record['epoch']), 'colour': _OUTCOME_COLOURS.get(outcome, '#6a1b9a'),
                            'label': '%s: %s' % (record.get('experiment') or 'experiment', outcome_words(record)),
                            'dash': ''})
        elif event == 'rollback':
            markers.append({'epoch': float(record['epoch']), 'colour': _OUTCOME_COLOURS['rolled_back'],
                            'label': 'rollback to baseline', 'dash': '6 4'})
        elif event == 'campaign':
            markers.append({'epoch': float(record['epoch']), 'colour': _CAMPAIGN,
                            'label': 'campaign %s: %s' % (record.get('campaign') or '', kept_words(record.get('kept'))),
                            'dash': '2 3'})
    return markers


def outcome_words(record):
    """An experiment's outcome as a person says it: a failed converge is not a measured regression."""
    outcome = record.get('outcome') or 'kept'
    if outcome == 'rolled_back' and record.get('reason') in ('failed', 'unhealthy', 'no_result'):
        return {'failed': 'failed, rolled back', 'unhealthy': 'unhealthy, rolled back',
                'no_result': 'no result, rolled back'}[record['reason']]
    return outcome.replace('_', ' ')


def kept_words(kept):
    if not kept:
        return 'baseline kept'
    if isinstance(kept, (list, tuple)):
        return 'kept ' + ', '.join('%s' % k for k in kept)
    return 'kept %s' % (kept,)


# Width of one character of the chart's bold 12 px labels, on the wide side so that a label never
# takes less room than the browser draws (Chromium draws system-ui bold 12 px at 6.2-7.3 px).
LABEL_CHAR_W = 7.5
LABEL_GAP = 8.0
LABEL_ROW_H = 16


def layout_labels(positions, widths, low, high, gap=LABEL_GAP):
    """Rows and anchors for event labels so that no label overprints another label or line.

    ``positions`` are the x of each event's line, ``widths`` each label's width; labels stay
    within ``low``..``high``. Row 0 is nearest the plot, and an event's line runs from its label
    down through the rows below it. A label starts just right of its line, or ends just left of
    it where it would run past ``high``, and takes the first row where it keeps ``gap`` from every
    label and every line already there while its own line crosses no label below it. Returns, per
    label, ``(row, anchor, text_x, left, right)``; anchor is ``start`` or ``end``.
    """
    labels = []  # per row, the (left, right) spans of its labels
    lines = []   # per row, the x of the lines that cross it
    placed = [None] * len(positions)
    for index in sorted(range(len(positions)), key=lambda i: positions[i]):
        x, width = positions[index], widths[index]
        if x + 4 + width <= high or x - 4 - width < low:
            anchor, left = 'start', max(low, min(x + 4, high - width))
            text_x = left
        else:
            anchor, left, text_x = 'end', x - 4 - width, x - 4
        right = left + width
        labels.append([])
        lines.append([])

        def fits(row):
            return (all(right + gap <= a or left >= b + gap for a, b in labels[row])
                    and all(line < left - gap or line > right + gap for line in lines[row]))

        def crosses_nothing(row):
            return all(all(x < a - gap or x > b + gap for a, b in labels[below]) for below in range(row))

        # A row where the label fits and its line passes no label below; else (a label below already
        # covers this x, so every row above it is crossed) the first row where the label fits.
        # The empty row appended above always fits.
        candidates = [row for row in range(len(labels)) if fits(row)]
        row = next((r for r in candidates if crosses_nothing(r)), candidates[0])
        labels[row].append((left, right))
        for below in range(row):
            lines[below].append(x)
        placed[index] = (row, anchor, text_x, left, right)
        while labels and not labels[-1]:
            labels.pop()
            lines.pop()
    return placed


def throughput_chart_svg(records, width=900, height=360):
    """Inline SVG: output throughput per benchmark over time, GPU power on the right axis."""
    if not isinstance(records, (list, tuple)):
        raise ReportError('the chart needs a list of history records, got %s' % type(records).__name__)
    points = _benchmarks(records)
    markers = _markers(records)
    deploys = [float(r['epoch']) for r in records if r.get('event') == 'deploy' and r.get('epoch') is not None]
    head = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" '
            'aria-label="Output throughput over time" font-family="system-ui, sans-serif" font-size="12">')
    out = [head % (width, height)]
    if not points:
        out.append('<text x="%d" y="%d" text-anchor="middle" fill="#666" font-size="15">No benchmark '
                   'recorded yet: run playbooks/experiment.yml or playbooks/benchmark.yml.</text></svg>'
                   % (width // 2, height // 2))
        return ''.join(out)
    out = []

    left, right, bottom = 70, 70, 50
    plot_w = width - left - right
    times = [p['epoch'] for p in points] + [m['epoch'] for m in markers] + deploys
    t0, t1 = min(times), max(times)
    if t1 - t0 < 60:
        t0, t1 = t0 - 30, t1 + 30
    pad = (t1 - t0) * 0.04
    t0, t1 = t0 - pad, t1 + pad

    def x(epoch):
        return left + (epoch - t0) / (t1 - t0) * plot_w

    # Event labels stand in rows above the plot, as many rows as close events need; the plot
    # keeps its height and the chart grows.
    placed = layout_labels([x(m['epoch']) for m in markers], [LABEL_CHAR_W * len(m['label']) for m in markers],
                           4, width - 4)
    label_rows = max([p[0] for p in placed] + [-1]) + 1
    top = 40 + LABEL_ROW_H * label_rows + 8
    plot_h = height - 60 - bottom
    height = top + plot_h + bottom
    y_step = _nice_step(max(p['throughput'] for p in points) * 1.15)
    y_max = y_step * math.ceil(max(p['throughput'] for p in points) * 1.15 / y_step)
    powers = [p['power'] for p in points if p['power'] is not None]
    limits = [p['limit'] for p in points if p['limit']]
    p_max = max(limits) if limits else (max(powers) * 1.25 if powers else None)

    def y(value):
        return top + plot_h - value / y_max * plot_h

    def y_power(value):
        return top + plot_h - value / p_max * plot_h

    # Legend.
    legend = [('circle', _BASELINE, 'baseline tok/s'), ('diamond', _EXPERIMENT, 'experiment tok/s')]
    if powers:
        legend.append(('square', _POWER, 'mean GPU power (W, right axis)'))
    lx = left
    for shape, colour, text in legend:
        out.append(_symbol(shape, lx + 6, 22, colour))
        out.append('<text x="%.1f" y="26" fill="#333">%s</text>' % (lx + 16, _esc(text)))
        lx += 30 + 7 * len(text)
    # Grid and axes.
    value = 0.0
    while value <= y_max + 1e-9:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/>'
                   % (left, y(value), left + plot_w, y(value)))
        out.append('<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>'
                   % (left - 8, y(value) + 4, '{0:,.0f}'.format(value)))
        value += y_step
    out.append('<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="#333">'
               'output tokens/s</text>' % (top + plot_h // 2))
    if p_max:
        p_step = _nice_step(p_max)
        value = 0.0
        while value <= p_max + 1e-9:
            out.append('<text x="%d" y="%.1f" fill="%s">%.0f W</text>'
                       % (left + plot_w + 8, y_power(value) + 4, _POWER, value))
            value += p_step
    for i in range(6):
        epoch = t0 + (t1 - t0) * i / 5.0
        out.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>'
                   % (x(epoch), top + plot_h + 18, _esc(_time_label(epoch, t1 - t0))))
    out.append('<text x="%d" y="%d" text-anchor="middle" fill="#333">time (UTC)</text>'
               % (left + plot_w // 2, height - 8))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#bbb"/>'
               % (left, top, plot_w, plot_h))
    # Deploys as ticks on the time axis.
    for epoch in deploys:
        out.append('<path d="M%.1f %d l-5 9 h10 z" fill="#9e9e9e"><title>deploy %s</title></path>'
                   % (x(epoch), top + plot_h - 9, _esc(_time_label(epoch, 0))))
    # Experiment, rollback and campaign markers: a line from the event's label row down through the plot.
    for marker, (row, anchor, text_x, _left, _right) in zip(markers, placed):
        mx = x(marker['epoch'])
        baseline_y = top - 8 - LABEL_ROW_H * row
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/>'
                   % (mx, baseline_y - 11, mx, top + plot_h, marker['colour'],
                      ' stroke-dasharray="%s"' % marker['dash'] if marker['dash'] else ''))
        out.append('<text class="event-label" x="%.1f" y="%d" text-anchor="%s" fill="%s" font-weight="600">%s</text>'
                   % (text_x, baseline_y, anchor, marker['colour'], _esc(marker['label'])))
    # Power line under the throughput series.
    if powers:
        path = ['%s%.1f %.1f' % ('M' if i == 0 else 'L', x(p['epoch']), y_power(p['power']))
                for i, p in enumerate(p for p in points if p['power'] is not None)]
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="3 3"/>'
                   % (' '.join(path), _POWER))
        for p in points:
            if p['power'] is not None:
                out.append(_symbol('square', x(p['epoch']), y_power(p['power']), _POWER, size=3.5,
                                   title='%.0f W mean GPU power' % p['power']))
    baseline = [p for p in points if not p['experiment']]
    if len(baseline) > 1:
        path = ['%s%.1f %.1f' % ('M' if i == 0 else 'L', x(p['epoch']), y(p['throughput']))
                for i, p in enumerate(baseline)]
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"/>' % (' '.join(path), _BASELINE))
    shown = []  # boxes of the value labels drawn: a label that would overprint one is left to the tooltip
    for p in points:
        colour = _EXPERIMENT if p['experiment'] else _BASELINE
        title = '%s: %s tok/s' % (p['experiment'] or 'baseline', '{0:,.1f}'.format(p['throughput']))
        if p.get('low') is not None and p.get('high') is not None:
            # The spread of repeated runs: a change inside these bars is noise.
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>'
                       % (x(p['epoch']), y(p['low']), x(p['epoch']), y(p['high']), colour))
            title += ' +/- %s over %s runs (min %s, max %s)' % (p['stdev'], p['runs'], p['low'], p['high'])
        out.append(_symbol('diamond' if p['experiment'] else 'circle', x(p['epoch']), y(p['throughput']),
                           colour, size=6, title=title))
        text = '{0:,.0f}'.format(p['throughput'])
        half = LABEL_CHAR_W * len(text) / 2.0
        box = (x(p['epoch']) - half, x(p['epoch']) + half, y(p['throughput']) - 23, y(p['throughput']) - 9)
        if any(box[0] < b[1] and b[0] < box[1] and box[2] < b[3] and b[2] < box[3] for b in shown):
            continue
        shown.append(box)
        out.append('<text class="value-label" x="%.1f" y="%.1f" text-anchor="middle" fill="%s" font-weight="600">%s</text>'
                   % (x(p['epoch']), y(p['throughput']) - 11, colour, text))
    out.append('</svg>')
    return head % (width, height) + ''.join(out)


def _symbol(shape, cx, cy, colour, size=5, title=None):
    tip = '<title>%s</title>' % _esc(title) if title else ''
    if shape == 'circle':
        return '<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s">%s</circle>' % (cx, cy, size, colour, tip)
    if shape == 'diamond':
        return ('<path d="M%.1f %.1f l%.1f %.1f l%.1f %.1f l%.1f %.1f z" fill="%s">%s</path>'
                % (cx, cy - size - 1, size + 1, size + 1, -(size + 1), size + 1, -(size + 1), -(size + 1),
                   colour, tip))
    return '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s</rect>' % (
        cx - size, cy - size, 2 * size, 2 * size, colour, tip)
