# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parser of `nvidia-smi topo -p2p r|w`: the P2P status matrix.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    P2P_STATUS,
    TopologyError,
    read_matrix,
)

from ansible_collections.inferops.serving.plugins.module_utils._topology.matrix import (
    GPU_LABEL,
)


_P2P_CELL = re.compile(r"^[A-Z]{1,4}$")


def parse_p2p_matrix(text):
    """Parse `nvidia-smi topo -p2p r|w|n|a|p`: N x N statuses (X on the diagonal)."""
    what = "P2P matrix"
    lines, header_at, header, warnings = read_matrix(text, what)
    labels = header.split()
    expected = ["GPU%d" % index for index in range(len(labels))]
    if labels != expected:
        raise TopologyError("P2P matrix header is %r: expected GPU0, GPU1, ... in order" % header.strip())
    count = len(labels)
    rows = {}
    for number in range(header_at + 1, len(lines)):
        tokens = lines[number].split()
        if not tokens and rows:
            break
        if not tokens or not GPU_LABEL.match(tokens[0]):
            continue
        label = tokens[0]
        stripped = lines[number].strip()
        if label not in labels:
            raise TopologyError("P2P matrix row %r: %s is not in the header" % (stripped, label))
        if label in rows:
            raise TopologyError("P2P matrix row %r: a second row for %s" % (stripped, label))
        cells = tokens[1:]
        if len(cells) != count:
            raise TopologyError("P2P matrix row %r: %d cells where the header has %d GPUs"
                                % (stripped, len(cells), count))
        own = labels.index(label)
        for position, cell in enumerate(cells):
            if position == own and cell != "X":
                raise TopologyError("P2P matrix row %r: %s to itself is %r, expected X" % (stripped, label, cell))
            if not _P2P_CELL.match(cell):
                raise TopologyError("P2P matrix row %r: cell %r is not a P2P status (OK, NS, CNS, GNS, TNS, ...)"
                                    % (stripped, cell))
            if cell not in P2P_STATUS:
                warnings.append("P2P matrix: unknown status %r (GPU%d to GPU%d) counted as not OK"
                                % (cell, own, position))
        rows[label] = cells
    missing = [label for label in labels if label not in rows]
    if missing:
        raise TopologyError("P2P matrix has no row for %s: the output is cut" % ", ".join(missing))
    return {"matrix": [rows[label] for label in labels], "warnings": warnings}
