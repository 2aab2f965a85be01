# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU topology of a node, read from nvidia-smi, NCCL's dump and sysfs, one job per file.

``common`` (what every parser shares), the parsers ``matrix`` (``nvidia-smi topo -m``), ``p2p``
(``topo -p2p``), ``query_gpu`` (``--query-gpu``) and ``nccl_xml`` (NCCL_TOPO_DUMP_FILE), then
``merge`` (the nccl_topology facts) and ``advice`` (NCCL settings and SGLang flags).

Nothing is imported here: the node_metrics role installs only ``common`` and ``query_gpu`` on
the node, and importing this package must not need the others.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type
