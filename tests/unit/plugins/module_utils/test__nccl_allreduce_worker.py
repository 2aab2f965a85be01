# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The all-reduce job's own comparison code, run without CUDA or torch.

pattern_and_expected and check_sum are the functions every rank runs on its GPU; here they
get tensors over Python lists and collectives that return right or wrong sums, and what
they emit is read back by the module's parser and summary. The same collectives were
played on an H200 with CUDA tensors (fixtures/nccl_allreduce/h200x1-2026-12-01/
check_sum_on_cuda.py.txt); the list tensors must give exactly the events CUDA gave.
"""

import argparse
import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils import _nccl_allreduce_worker as worker
from ansible_collections.inferops.serving.plugins.module_utils._nccl_allreduce import (
    inject_wrong_problem,
    parse_events,
    parse_nccl_log,
    summarize,
    worker_argv,
)

CUDA_CAPTURE = os.path.join(os.path.dirname(__file__), "fixtures", "nccl_allreduce", "h200x1-2026-12-01",
                            "check_sum_on_cuda.log")
WORLD = 2
ELEMENTS = 1000


class ListTensor(object):
    """A one-dimensional tensor over a Python list, with the operations the job's check uses and no more."""

    def __init__(self, values):
        self.values = list(values)

    def __len__(self):
        return len(self.values)

    def _zip(self, other):
        others = other.values if isinstance(other, ListTensor) else [other] * len(self.values)
        return zip(self.values, others)

    def __mod__(self, other):
        return ListTensor(a % b for a, b in self._zip(other))

    def __mul__(self, other):
        return ListTensor(a * b for a, b in self._zip(other))

    def __add__(self, other):
        return ListTensor(a + b for a, b in self._zip(other))

    def __ne__(self, other):
        return ListTensor(a != b for a, b in self._zip(other))

    def float(self):
        return ListTensor(float(value) for value in self.values)

    def clone(self):
        return ListTensor(self.values)

    def sum(self):
        return ListTensor([sum(self.values)])

    def nonzero(self):
        return ListTensor(at for at, value in enumerate(self.values) if value)

    def item(self):
        if len(self.values) != 1:
            raise ValueError("item() of a tensor with %d elements" % len(self.values))
        return self.values[0]

    def __getitem__(self, at):
        return ListTensor([self.values[at]])

    def __setitem__(self, at, value):
        self.values[at] = value.item() if isinstance(value, ListTensor) else value


def arange(elements):
    return ListTensor(range(elements))


def synchronize():
    pass


def collective(scenario, rank, inputs):
    """all_reduce as one rank sees it: the sum of every rank's input, or the fault of the scenario."""
    total = [sum(column) for column in zip(*(tensor.values for tensor in inputs))]

    def all_reduce(buf):
        if scenario == "all_off":
            return  # a peer's data never arrived: the rank keeps its own input
        buf.values[:] = total
        if scenario == "one_off" and rank == 1:
            buf.values[300] += 2
        elif scenario == "half_off":
            for at in range(len(total) // 2, len(total)):
                buf.values[at] -= inputs[1].values[at]
    return all_reduce


def run_ranks(scenario, world=WORLD, elements=ELEMENTS, inject_wrong=None):
    """Both checks of one size on every rank, through the job's own functions."""
    inputs = [worker.pattern_and_expected(rank, world, elements, arange)[0] for rank in range(world)]
    for rank in range(world):
        pattern, expected = worker.pattern_and_expected(rank, world, elements, arange)
        for phase in ("first", "after"):
            worker.check_sum(rank, phase, pattern, expected, collective(scenario, rank, inputs), synchronize,
                             inject_wrong)


def emitted(capsys, scenario, **kwargs):
    run_ranks(scenario, **kwargs)
    return parse_events(capsys.readouterr().out)


def summary(capsys, scenario, world=WORLD, **kwargs):
    """What the module would conclude from a job whose ranks saw this collective."""
    worker.emit("start", world_size=world, visible=world,
                inject_wrong=list(kwargs["inject_wrong"]) if kwargs.get("inject_wrong") else None)
    run_ranks(scenario, world=world, **kwargs)
    worker.emit("done", seconds=0.1)
    return summarize(parse_events(capsys.readouterr().out), parse_nccl_log(""), 0, False, 180)


def cuda_events(scenario):
    with open(CUDA_CAPTURE) as handle:
        events = parse_events(handle.read())
    starts = [at for at, event in enumerate(events) if event["event"] == "scenario"]
    for begin, end in zip(starts, starts[1:] + [len(events)]):
        if events[begin]["name"] == scenario:
            return events[begin + 1:end]
    raise AssertionError("no scenario %s in %s" % (scenario, CUDA_CAPTURE))


@pytest.mark.parametrize("scenario", ["correct", "one_off", "half_off", "all_off", "injected"])
def test_list_tensors_emit_what_cuda_tensors_emitted(scenario, capsys):
    inject_wrong = (1, 777) if scenario == "injected" else None
    events = emitted(capsys, "correct" if scenario == "injected" else scenario, inject_wrong=inject_wrong)
    assert events == cuda_events(scenario)


@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_right_sums_pass_on_every_rank(world, capsys):
    facts = summary(capsys, "correct", world=world, elements=600)
    assert facts["ok"] and facts["failure"] is None and facts["inject_wrong"] is None
    [row] = facts["results"]
    assert (row["bytes"], row["elements"], row["mismatches"], row["first_mismatch"]) == (2400, 600, 0, None)
    assert row["correct"] and row["complete"]


# (scenario, wrong elements per (rank, phase), first mismatch the summary names, its message)
WRONG = [
    ("one_off", {(1, "first"): 1, (1, "after"): 1},
     {"index": 300, "got": 103.0, "expected": 101.0, "rank": 1, "phase": "first"},
     "2 wrong elements at 4000 bytes (first: element 300 on rank 1, got 103.0, expected 101.0)"),
    ("half_off", {(0, "first"): 500, (0, "after"): 500, (1, "first"): 500, (1, "after"): 500},
     {"index": 500, "got": 250.0, "expected": 501.0, "rank": 0, "phase": "first"},
     "2000 wrong elements at 4000 bytes (first: element 500 on rank 0, got 250.0, expected 501.0)"),
    ("all_off", {(0, "first"): 1000, (0, "after"): 1000, (1, "first"): 1000, (1, "after"): 1000},
     {"index": 0, "got": 1.0, "expected": 3.0, "rank": 0, "phase": "first"},
     "4000 wrong elements at 4000 bytes (first: element 0 on rank 0, got 1.0, expected 3.0)"),
]


@pytest.mark.parametrize("scenario, per_rank, first, words", WRONG, ids=[case[0] for case in WRONG])
def test_wrong_sums_are_counted_and_the_first_is_named(scenario, per_rank, first, words, capsys):
    events = emitted(capsys, scenario)
    assert {(e["rank"], e["phase"]): e["mismatches"] for e in events if e["mismatches"]} == per_rank
    assert len(events) == 2 * WORLD and all(e["event"] == "result" and e["elements"] == ELEMENTS for e in events)

    facts = summary(capsys, scenario)
    assert not facts["ok"] and facts["failure"]["kind"] == "wrong_result"
    assert facts["failure"]["msg"] == "the all-reduce returned wrong sums: " + words
    row = facts["results"][0]
    assert not row["correct"] and row["complete"]
    assert row["mismatches"] == sum(per_rank.values()) and row["first_mismatch"] == first


def test_an_injected_element_is_the_only_one_reported(capsys):
    events = emitted(capsys, "correct", inject_wrong=(1, 777))
    assert [(e["rank"], e["phase"], e["mismatches"]) for e in events] == [
        (0, "first", 0), (0, "after", 0), (1, "first", 1), (1, "after", 0)]
    assert events[2]["first_mismatch"] == {"index": 777, "got": 52.0, "expected": 51.0}

    facts = summary(capsys, "correct", inject_wrong=(1, 777))
    assert facts["failure"]["kind"] == "wrong_result" and facts["inject_wrong"] == {"rank": 1, "index": 777}
    assert facts["failure"]["msg"] == (
        "the all-reduce returned wrong sums: 1 wrong element at 4000 bytes (first: element 777 on rank 1, "
        "got 52.0, expected 51.0); inject_wrong was set: element 777 of rank 1 was made wrong on purpose")


def test_an_injection_beyond_a_size_leaves_that_size_alone(capsys):
    assert all(e["mismatches"] == 0 for e in emitted(capsys, "correct", inject_wrong=(1, ELEMENTS)))


def test_the_module_argument_reaches_the_job_parser():
    argv = worker_argv("python", "job.py", 2, [4096], 20, 5, 60, {"rank": 1, "index": 777})
    assert argv[-2:] == ["--inject-wrong", "1:777"]
    assert worker.parse_args(argv[2:]).inject_wrong == (1, 777)
    assert worker.parse_args(worker_argv("python", "job.py", 2, [4096], 20, 5, 60)[2:]).inject_wrong is None


@pytest.mark.parametrize("text", ["1", "1:", ":7", "a:7", "1:-7", "-1:7"])
def test_a_malformed_injection_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="RANK:INDEX"):
        worker.wrong_element(text)


@pytest.mark.parametrize("inject_wrong, world, sizes, words", [
    ((1, 777), 2, [4096], None),
    ((2, 0), 2, [4096], "names rank 2; the job has ranks 0 to 1"),
    ((0, 1024), 2, [4096], "names element 1024; the largest size holds 1024 float32 elements"),
    ((0, 1024), 2, [4096, 8192], None),
])
def test_the_job_refuses_an_injection_that_could_change_nothing(inject_wrong, world, sizes, words):
    problem = worker.injection_problem(inject_wrong, world, sizes)
    assert problem is None if words is None else words in problem


@pytest.mark.parametrize("inject_wrong, words", [
    (None, None),
    ({"rank": 0, "index": 262143}, None),
    ({"rank": 0, "index": 262144}, "inject_wrong.index is 262144 but the largest size holds 262144"),
    ({"rank": -1, "index": 0}, "must not be negative"),
])
def test_the_module_refuses_an_injection_that_could_change_nothing(inject_wrong, words):
    problem = inject_wrong_problem(inject_wrong, [4096, 1048576])
    assert problem is None if words is None else words in problem
