# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The all-reduce job that nccl_allreduce_check runs on the node, one process per GPU.

This file is a program, not a library: the module writes its source to a temporary
file and runs it with the interpreter that holds torch (the serving venv), because
the Python that runs Ansible modules usually has no torch. It uses only the standard
library and torch, and imports torch inside main() so that importing this file
(for its source) never needs torch.

It prints one JSON object per line, each behind MARKER, on stdout; NCCL's own log
(NCCL_DEBUG=INFO) goes to the same stream and is read by the caller for the
transports NCCL chose. Events:

  start     python, torch, CUDA and NCCL versions, visible GPU count
  device    index, name, PCI bus id of each GPU taking part
  p2p       torch.cuda.can_device_access_peer for every ordered pair
  result    per rank and size: mismatching elements against the exact expected sum
            (phase "first": the first all-reduce; phase "after": one more after the
            timed loop, to catch corruption that shows only under load)
  timing    per size: mean time of one all-reduce, slowest rank
  error     kind torch_missing | no_cuda | gpu_not_visible | bad_argument | worker_failed
  done      the job ended normally
Exit codes: 0 done, 2 bad arguments, 3 torch missing, 4 too few GPUs visible, 1 anything else.

The comparison (pattern_and_expected, check_sum) takes the collective and the device
functions as arguments and uses only a handful of tensor operations, so that the unit
tests drive this same code without CUDA, through a collective that returns wrong sums.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import argparse
import datetime
import json
import os
import socket
import sys
import time

MARKER = "@@inferops-allreduce "
RC_BAD_ARGUMENT = 2
RC_TORCH_MISSING = 3
RC_GPU_NOT_VISIBLE = 4
# Element i of rank r holds (r + 1) + (i % PATTERN_PERIOD): every sum stays an integer
# far below 2**24, so float32 represents the expected result exactly.
PATTERN_PERIOD = 251


def emit(event, **fields):
    fields["event"] = event
    # One write per line: lines of several ranks on one pipe never interleave.
    sys.stdout.write(MARKER + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-size", type=int, default=0)
    parser.add_argument("--sizes", default="4096,1048576,67108864")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--init-timeout", type=int, default=60)
    # Only for proving the check on real GPUs: one element of one rank's result is made wrong.
    parser.add_argument("--inject-wrong", type=wrong_element, default=None, metavar="RANK:INDEX")
    return parser.parse_args(argv)


def wrong_element(text):
    """RANK:INDEX of --inject-wrong, two non-negative integers."""
    rank, colon, index = text.partition(":")
    if not colon or not rank.strip().isdigit() or not index.strip().isdigit():
        raise argparse.ArgumentTypeError("expected RANK:INDEX, two non-negative integers, got %r" % text)
    return int(rank), int(index)


def injection_problem(inject_wrong, world, sizes):
    """Why --inject-wrong could never change an element of this job, or None."""
    if inject_wrong is None:
        return None
    rank, index = inject_wrong
    if rank >= world:
        return "--inject-wrong names rank %d; the job has ranks 0 to %d" % (rank, world - 1)
    largest = max(max(1, size // 4) for size in sizes)
    if index >= largest:
        return "--inject-wrong names element %d; the largest size holds %d float32 elements" % (index, largest)
    return None


def free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def bus_id(props):
    domain = getattr(props, "pci_domain_id", None)
    bus = getattr(props, "pci_bus_id", None)
    device = getattr(props, "pci_device_id", None)
    if bus is None or device is None:
        return None
    return "%08X:%02X:%02X.0" % (domain or 0, bus, device)


def pattern_and_expected(rank, world, elements, arange):
    """This rank's input and the exact sum that every rank must get back.

    arange(n) returns the integers 0 .. n-1 as an int64 tensor on the rank's device;
    only %, *, + and .float() (float32) are applied to it.
    """
    index = arange(elements) % PATTERN_PERIOD
    expected = (index * world + world * (world + 1) // 2).float()
    pattern = (index + (rank + 1)).float()
    return pattern, expected


def check_sum(rank, phase, pattern, expected, all_reduce, synchronize, inject_wrong=None):
    """All-reduce a copy of pattern, compare every element with expected, emit the result.

    all_reduce(tensor) sums the tensor in place across the ranks and synchronize() waits
    for the device. inject_wrong is --inject-wrong's (rank, index): on that rank the result
    of the first all-reduce gets that element changed, which the comparison must report.
    Returns the number of wrong elements.
    """
    elements = len(pattern)
    buf = pattern.clone()
    all_reduce(buf)
    if inject_wrong is not None and inject_wrong[0] == rank and phase == "first" and inject_wrong[1] < elements:
        buf[inject_wrong[1]] += 1
    synchronize()
    mismatching = buf != expected
    mismatches = int(mismatching.sum().item())
    first = None
    if mismatches:
        at = int(mismatching.nonzero()[0].item())
        first = {"index": at, "got": float(buf[at].item()), "expected": float(expected[at].item())}
    emit("result", rank=rank, bytes=elements * 4, elements=elements, phase=phase,
         mismatches=mismatches, first_mismatch=first)
    return mismatches


def rank_main(rank, world, sizes, iters, warmup, port, init_timeout, inject_wrong=None):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    kwargs = dict(backend="nccl", rank=rank, world_size=world,
                  timeout=datetime.timedelta(seconds=init_timeout))
    try:
        dist.init_process_group(device_id=device, **kwargs)
    except TypeError:
        dist.init_process_group(**kwargs)

    def arange(elements):
        return torch.arange(elements, device=device, dtype=torch.int64)

    def synchronize():
        torch.cuda.synchronize(device)

    for size in sizes:
        elements = max(1, size // 4)
        pattern, expected = pattern_and_expected(rank, world, elements, arange)
        check_sum(rank, "first", pattern, expected, dist.all_reduce, synchronize, inject_wrong)
        scratch = pattern.clone()
        for _warm in range(warmup):
            dist.all_reduce(scratch)
        torch.cuda.synchronize(device)
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _timed in range(iters):
            dist.all_reduce(scratch)
        end.record()
        torch.cuda.synchronize(device)
        mean_us = begin.elapsed_time(end) * 1000.0 / max(1, iters)
        # nccl-tests reports the slowest rank: a collective is only as fast as it.
        slowest = torch.tensor([mean_us], device=device, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            emit("timing", bytes=elements * 4, elements=elements, iters=iters, time_us=float(slowest.item()))
        del scratch
        check_sum(rank, "after", pattern, expected, dist.all_reduce, synchronize, inject_wrong)
        del pattern, expected
        torch.cuda.empty_cache()
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as exc:
        emit("error", kind="torch_missing", python=sys.executable,
             msg="%s cannot import torch (%s)" % (sys.executable, exc))
        return RC_TORCH_MISSING
    nccl = None
    try:
        nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
    except Exception:  # pylint: disable=broad-except
        pass
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    world = args.world_size or visible
    emit("start", python=sys.executable, torch=torch.__version__, cuda=torch.version.cuda, nccl=nccl,
         visible=visible, world_size=world, cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
         inject_wrong=list(args.inject_wrong) if args.inject_wrong else None)
    if visible == 0:
        emit("error", kind="no_cuda", msg="torch %s sees no CUDA device (torch.cuda.is_available() is False)"
             % torch.__version__)
        return RC_GPU_NOT_VISIBLE
    if world > visible:
        emit("error", kind="gpu_not_visible",
             msg="%d GPUs asked for, torch sees %d (CUDA_VISIBLE_DEVICES=%s)"
             % (world, visible, os.environ.get("CUDA_VISIBLE_DEVICES", "unset")))
        return RC_GPU_NOT_VISIBLE
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    problem = injection_problem(args.inject_wrong, world, sizes)
    if problem:
        emit("error", kind="bad_argument", msg=problem)
        return RC_BAD_ARGUMENT
    for index in range(world):
        props = torch.cuda.get_device_properties(index)
        emit("device", index=index, name=props.name, bus_id=bus_id(props),
             memory_mib=int(props.total_memory // (1024 * 1024)))
    emit("p2p", matrix=[[i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(world)]
                        for i in range(world)])
    started = time.time()
    try:
        mp.spawn(rank_main, nprocs=world, join=True,
                 args=(world, sizes, args.iters, args.warmup, free_port(), args.init_timeout, args.inject_wrong))
    except Exception as exc:  # pylint: disable=broad-except
        emit("error", kind="worker_failed", msg=str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc))
        return 1
    emit("done", seconds=round(time.time() - started, 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
