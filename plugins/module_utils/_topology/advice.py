# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL environment, SGLang flags and the allreduce-fusion verdict that the topology calls for, with reasons.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import re

from ansible_collections.inferops.serving.plugins.module_utils._topology.common import (
    LINK_MEANING,
    P2P_STATUS,
)

from ansible_collections.inferops.serving.plugins.module_utils._topology.matrix import (
    RDMA_NAME,
)


def gpu_pairs(count):
    return [(a, b) for a in range(count) for b in range(a + 1, count)]


def _version_tuple(version):
    parts = re.findall(r"\d+", version or "")
    return tuple(int(part) for part in parts[:3])


FUSION_ARCH_MAJORS = (9, 10)
# SM12x (RTX PRO 6000, RTX 50xx) joined them officially in FlashInfer 0.6.17;
# before that only the collection's opt-in experimental patch builds them.
FUSION_SM12X_SINCE = (0, 6, 17)


def _pair_summary(matrix, pairs, good):
    bad = [(a, b, matrix[a][b]) for a, b in pairs if matrix[a][b] not in good or matrix[b][a] not in good]
    return bad


# How each SGLang release spells the allreduce fusion's switches: 0.5.9 turns it on with
# --enable-flashinfer-allreduce-fusion (and for some models by itself); 0.5.23 deprecates that
# for --flashinfer-allreduce-fusion-backend and adds a switch that keeps it off whatever the model.
FUSION_ON_FLAGS = ('--flashinfer-allreduce-fusion-backend', '--enable-flashinfer-allreduce-fusion')
FUSION_OFF_FLAG = '--enforce-disable-flashinfer-allreduce-fusion'


def fusion_flags(server_flags):
    """The flags that turn the fusion on and keep it off in the SGLang whose option strings are given.

    ``on`` is the first of FUSION_ON_FLAGS the release has; ``off`` is None when the release has
    no such switch (leaving the ``on`` flag out is then all it takes). None when unknown.
    """
    if server_flags is None:
        return None
    flags = set(server_flags)
    on = [flag for flag in FUSION_ON_FLAGS if flag in flags]
    return {"on": on[0] if on else None, "off": FUSION_OFF_FLAG if FUSION_OFF_FLAG in flags else None}


def _fusion_switch_reason(fusion, switches):
    if switches is None:
        return None
    if fusion and switches["on"]:
        value = "=auto" if switches["on"] == FUSION_ON_FLAGS[0] else ""
        return "this SGLang turns it on with %s%s" % (switches["on"], value)
    if not fusion and switches["off"]:
        return "this SGLang keeps it off whatever the model's defaults with %s" % switches["off"]
    if not fusion and switches["on"]:
        return "this SGLang has no switch that forces it off: leave %s out" % switches["on"]
    return None


def advise(facts, tp_size=None, flashinfer_version=None, server_flags=None):
    """Recommended NCCL environment, SGLang flags and the allreduce-fusion verdict, with reasons.

    Each rule only fires on evidence; where an input is missing the reason says
    so rather than assuming the better or the worse case. ``server_flags``: the option strings
    of the installed SGLang, so that the verdict names the switch that release understands.
    """
    env = {}
    args = {}
    reasons = []
    count = facts["gpu_count"]
    tp = tp_size if tp_size else count
    pairs = gpu_pairs(count)
    links = facts["gpu_links"]
    p2p = facts["all_pairs_p2p"]
    weakest = facts["weakest_link"]

    switches = fusion_flags(server_flags)
    if count == 0:
        return {"tp_size": tp, "recommended_env": env, "recommended_sglang_args": args,
                "allreduce_fusion_advised": False, "allreduce_fusion_flags": switches,
                "reasons": ["no GPU found: nothing to advise"]}
    if tp > count:
        reasons.append("tp_size %d is larger than the %d GPUs on this node; tensor parallelism across nodes "
                       "needs a network transport and is not judged here" % (tp, count))

    if weakest:
        reasons.append("%d GPUs; the weakest GPU-GPU link is %s (%s)"
                       % (count, weakest, LINK_MEANING.get(weakest, "NVLink")))

    # P2P evidence, as the driver reports it per pair.
    p2p_matrices = [(name, facts[key]) for name, key in (("read", "p2p_read"), ("write", "p2p_write"))
                    if facts[key] is not None]
    if count > 1 and p2p is False:
        for name, matrix in p2p_matrices:
            bad = _pair_summary(matrix, pairs, ("OK",))
            if bad:
                statuses = sorted(set(status for _a, _b, status in bad))
                reasons.append("P2P %s is not available on %d of %d GPU pairs (%s), e.g. GPU%d-GPU%d: every "
                               "transfer between those GPUs is staged through host memory"
                               % (name, len(bad), len(pairs),
                                  ", ".join("%s = %s" % (status, P2P_STATUS.get(status, "unknown status"))
                                            for status in statuses), bad[0][0], bad[0][1]))
    elif count > 1 and p2p is None:
        reasons.append("P2P status unknown: `nvidia-smi topo -p2p r` was not read and not every pair is NVLink")

    # NCCL_P2P_LEVEL: NCCL only uses P2P up to a path type (PXB by default on
    # Intel and ARM hosts). Where the driver reports P2P OK on every pair but
    # the path crosses the host bridge, raising the level to SYS lets NCCL use
    # it, as the known-good server for the target machine does (NCCL_P2P_LEVEL=5,
    # the legacy integer for SYS). Where P2P is missing no level changes
    # anything: NCCL asks CUDA (cudaDeviceCanAccessPeer) per pair and falls
    # back to shared memory by itself, so no P2P variable is recommended; a
    # blanket NCCL_P2P_DISABLE would also switch off pairs that do work.
    if count > 1 and p2p is True and weakest in ("PHB", "NODE", "SYS", "SOC"):
        env["NCCL_P2P_LEVEL"] = "SYS"
        reasons.append("NCCL_P2P_LEVEL=SYS: P2P is OK on every pair but the links cross %s; without it NCCL "
                       "stops using P2P past PXB on Intel and ARM hosts" % weakest)
    elif count > 1 and p2p is False:
        reasons.append("no NCCL P2P variable: NCCL checks P2P per pair and uses shared memory where it is "
                       "missing; NCCL_P2P_DISABLE would also turn off pairs that work")

    # NCCL_IB_DISABLE: without an RDMA device the IB transport has nothing to
    # drive; disabling it skips the verbs probe and keeps NCCL from picking a
    # stray RoCE/virtual device. Only recommended when the NIC list is known.
    nics = facts["nic_names"]
    if nics is not None:
        rdma = [name for name in nics if RDMA_NAME.match(name or "")]
        if not rdma:
            env["NCCL_IB_DISABLE"] = "1"
            reasons.append("NCCL_IB_DISABLE=1: no InfiniBand/RoCE device (%s); GPUs on one node talk over "
                           "P2P or shared memory" % ("no NIC listed" if not nics else "NICs: " + ", ".join(nics)))
        else:
            reasons.append("RDMA NICs present (%s): NCCL's IB transport left enabled" % ", ".join(rdma))
    else:
        reasons.append("NIC list unknown (no topology matrix, NCCL XML or sysfs read): IB setting left alone")

    # SGLang's custom allreduce exchanges CUDA IPC buffers and needs P2P
    # between every pair; SGLang assumes P2P works unless --enable-p2p-check is
    # given, so at TP=2 on a machine without P2P it would try it anyway.
    if count > 1 and tp > 1 and p2p is False:
        args["disable-custom-all-reduce"] = True
        reasons.append("--disable-custom-all-reduce: SGLang's custom allreduce needs P2P (CUDA IPC) between all "
                       "GPUs and SGLang does not check for it by default; NCCL does the allreduce instead")

    fusion = True
    why_not = []
    if tp < 2:
        fusion = False
        why_not.append("tensor parallel size is %d: there is no allreduce to fuse" % tp)
    if p2p is not True:
        fusion = False
        if count > 1:
            why_not.append("FlashInfer's TRT-LLM allreduce fusion reads peer GPUs' memory directly and needs P2P "
                           "on every pair; %s" % ("P2P is missing here" if p2p is False else "P2P is unknown here"))
    sms = [gpu["sm"] for gpu in facts["gpus"]]
    if count and any(sm is None for sm in sms):
        fusion = False
        why_not.append("compute capability unknown: read `nvidia-smi --query-gpu=compute_cap`")
    elif count:
        majors = sorted(set(sm // 10 for sm in sms))
        sm12x_ok = _version_tuple(flashinfer_version) >= FUSION_SM12X_SINCE if flashinfer_version else False
        unsupported = [major for major in majors
                       if major not in FUSION_ARCH_MAJORS and not (major == 12 and sm12x_ok)]
        if unsupported:
            fusion = False
            arch = ", ".join("SM%d" % sm for sm in sorted(set(sms)))
            if unsupported == [12]:
                why_not.append("%s: FlashInfer's TRT-LLM allreduce kernels support SM90/SM100; SM12x only from "
                               "FlashInfer 0.6.17 (%s), or through the experimental patch, which cut throughput "
                               "by about 87%% on a PCIe-only SM120 VM"
                               % (arch, "installed %s" % flashinfer_version if flashinfer_version
                                  else "the pinned 0.6.3 is older"))
            else:
                why_not.append("%s: FlashInfer's TRT-LLM allreduce kernels support SM90 and SM100 only" % arch)
    switch = _fusion_switch_reason(fusion, switches)
    if fusion:
        reasons.append("allreduce fusion advised: P2P on every pair, TP %d, supported architecture; %smeasure it "
                       "against the unfused server before keeping it" % (tp, (switch + "; ") if switch else ""))
    else:
        reasons.append("allreduce fusion not advised: " + "; ".join(why_not + ([switch] if switch else [])))

    return {"tp_size": tp, "recommended_env": env, "recommended_sglang_args": args,
            "allreduce_fusion_advised": fusion, "allreduce_fusion_flags": switches, "reasons": reasons}
