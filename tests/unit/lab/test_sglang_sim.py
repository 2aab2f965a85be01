# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's simulated server: rates that respond to the campaign's settings, seeded noise, and
greedy answers that change only under INFEROPS_LAB_SIM_DIVERGE_AT."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import statistics
import sys

import pytest

SIM = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'molecule', 'resources', 'lab', 'sglang_sim')
sys.path.insert(0, os.path.abspath(SIM))

from inferops_lab_sglang_sim import launch_server as sim  # noqa: E402  pylint: disable=wrong-import-position


def test_the_known_good_settings_run_at_the_seed_rate():
    assert sim.running_requests_factor(1024) == 1.0 and sim.nccl_channels_factor('8') == 1.0
    assert sim.running_requests_factor(None) == 1.0 and sim.nccl_channels_factor(None) == 1.0


def test_the_shipped_campaign_has_winners_and_a_loser():
    # Effects well beyond the gate's noise on a busy test host (a few percent per run).
    assert sim.running_requests_factor(2048) == pytest.approx(1.2)
    assert sim.nccl_channels_factor('16') == pytest.approx(1.15)
    assert sim.nccl_channels_factor('4') == pytest.approx(0.85)
    assert sim.running_requests_factor(512) == pytest.approx(0.8)
    # Past the optimum the gain shrinks again.
    assert sim.running_requests_factor(4096) < sim.running_requests_factor(2048)
    assert sim.nccl_channels_factor('32') < sim.nccl_channels_factor('16')


def test_noise_is_seeded_and_about_two_percent():
    draws = [sim.noise_factor('7', window) for window in range(2000)]
    assert draws == [sim.noise_factor('7', window) for window in range(2000)]
    assert draws != [sim.noise_factor('8', window) for window in range(2000)]
    assert statistics.mean(draws) == pytest.approx(1.0, abs=0.005)
    assert statistics.pstdev(draws) == pytest.approx(0.02, abs=0.003)


class _Clock(object):
    """time as TokenBudget reads it, advanced only by its sleeps and by stalls the test makes."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self):
        return self.now

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _seconds_for(budget, clock, chunks, stall_after=None, stall_s=0.0):
    budget.enter()
    started = clock.now
    for chunk in range(chunks):
        if chunk == stall_after:
            clock.now += stall_s
        budget.take(10)
    budget.leave()
    return clock.now - started


def test_a_stalled_request_thread_makes_up_its_slots_so_a_busy_host_measures_the_simulated_rate(monkeypatch, tmp_path):
    clock = _Clock()
    monkeypatch.setattr(sim, 'time', clock)
    monkeypatch.setattr(sim, 'LOAD_FILE', str(tmp_path / 'gpu-load.json'))
    budget = sim.TokenBudget(1000.0, {}, stdev=0.0)
    # 5,000 tokens at 1,000 tok/s: five seconds, with or without a 0.5 s stall.
    assert _seconds_for(budget, clock, 500) == pytest.approx(5.0)
    assert _seconds_for(budget, clock, 500, stall_after=50, stall_s=0.5) == pytest.approx(5.0)
    # Beyond CATCH_UP_S the slots are lost, as a host that stalls that long loses them.
    assert _seconds_for(budget, clock, 500, stall_after=50, stall_s=sim.CATCH_UP_S + 1.0) == pytest.approx(6.0)


def test_an_idle_spell_is_no_credit_for_the_next_run(monkeypatch, tmp_path):
    clock = _Clock()
    monkeypatch.setattr(sim, 'time', clock)
    monkeypatch.setattr(sim, 'LOAD_FILE', str(tmp_path / 'gpu-load.json'))
    budget = sim.TokenBudget(1000.0, {}, stdev=0.0)
    _seconds_for(budget, clock, 10)
    clock.now += 60.0
    assert _seconds_for(budget, clock, 100) == pytest.approx(1.0)


def test_greedy_answers_are_deterministic_with_logprobs():
    first = sim.greedy_answer('What is 17 multiplied by 23?', 32)
    assert first == sim.greedy_answer('What is 17 multiplied by 23?', 32)
    assert len(first) == 32 and all(lp < 0 for _token, lp in first)
    assert first != sim.greedy_answer('List the first ten prime numbers.', 32)


def test_a_wrong_kernel_changes_answers_from_the_given_token_on():
    right = sim.greedy_answer('What is 17 multiplied by 23?', 32)
    wrong = sim.greedy_answer('What is 17 multiplied by 23?', 32, diverge_at=6)
    assert wrong[:6] == right[:6]
    assert [token for token, _lp in wrong[6:]] != [token for token, _lp in right[6:]]


def test_logprobs_follow_sglang_chat_format():
    content = sim.logprobs_content([('17', -0.1), (' times', -0.2)], 1)['content']
    assert content[0] == {'token': '17', 'bytes': [49, 55], 'logprob': -0.1,
                          'top_logprobs': [{'token': '17', 'bytes': [49, 55], 'logprob': -0.1}]}


@pytest.fixture()
def rank_1_server():
    """The simulated server as node rank 1 of a replica across nodes, with an API key, ready."""
    import threading

    state = {"node_rank": 1, "api_key": "key", "metrics": None, "ready": threading.Event()}
    state["ready"].set()
    server = sim.Server(("127.0.0.1", 0), sim.make_handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


def _status(url, method="GET"):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=b"{}" if method == "POST" else None, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_rank_above_0_answers_only_health_as_sglang_does(rank_1_server):
    # SGLang's launch_dummy_health_check_server: no API key check, and no API at all.
    for path in ("/health", "/health_generate", "/ping"):
        assert _status(rank_1_server + path) == 200, path
    assert _status(rank_1_server + "/v1/models") == 404
    assert _status(rank_1_server + "/metrics") == 404
    assert _status(rank_1_server + "/v1/chat/completions", "POST") == 404


def test_the_first_start_with_a_kernel_cache_compiles_and_later_starts_reuse(tmp_path, monkeypatch):
    monkeypatch.delenv('TRITON_CACHE_DIR', raising=False)
    monkeypatch.delenv('SGLANG_CACHE_DIR', raising=False)
    assert sim.warm_kernel_cache() == 'none'
    monkeypatch.setenv('SGLANG_CACHE_DIR', str(tmp_path))
    assert sim.warm_kernel_cache() == 'compiled'
    assert (tmp_path / 'triton' / 'inferops-lab-sim' / 'kernel.cubin').is_file()
    assert sim.warm_kernel_cache() == 'reused'


def test_sigterm_turns_health_to_503_and_exits_once_the_last_request_is_done():
    import threading
    import time
    import urllib.error
    import urllib.request

    state = {'node_rank': 0, 'api_key': None, 'metrics': None, 'ready': threading.Event(), 'draining': False,
             'in_flight': sim.InFlight()}
    state['ready'].set()
    server = sim.Server(('127.0.0.1', 0), sim.make_handler(state))
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    url = 'http://127.0.0.1:%d/health' % server.server_address[1]
    assert urllib.request.urlopen(url, timeout=5).status == 200
    # A request in flight, as a stream being generated holds it.
    held = state['in_flight'].hold('POST /v1/chat/completions')
    held.__enter__()
    drain = threading.Thread(target=sim.drain_then_exit, args=(server, state, 0.05), daemon=True)
    drain.start()
    time.sleep(0.3)
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(url, timeout=5)
    assert answer.value.code == 503
    # No bound of its own: the server waits for as long as the request runs.
    assert serving.is_alive() and drain.is_alive()
    assert 'POST /v1/chat/completions for ' in state['in_flight'].describe()
    held.__exit__(None, None, None)
    drain.join(5)
    serving.join(5)
    assert not serving.is_alive()
    server.server_close()


@pytest.mark.parametrize('has_ready, loaded, draining, status', [
    (True, True, False, 200),
    (True, False, False, 503),
    (True, True, True, 503),
    (False, True, False, 404),
])
def test_ready_is_answered_as_the_installed_release_answers_it(has_ready, loaded, draining, status):
    import threading
    import urllib.error
    import urllib.request

    state = {'node_rank': 0, 'api_key': None, 'metrics': None, 'ready': threading.Event(), 'draining': draining,
             'in_flight': sim.InFlight(), 'has_ready': has_ready}
    if loaded:
        state['ready'].set()
    server = sim.Server(('127.0.0.1', 0), sim.make_handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        urllib.request.urlopen('http://127.0.0.1:%d/ready' % server.server_address[1], timeout=5)
        answered = 200
    except urllib.error.HTTPError as exc:
        answered = exc.code
    finally:
        server.shutdown()
        server.server_close()
    assert answered == status


FAMILIES = os.path.join(os.path.dirname(__file__), '..', 'plugins', 'module_utils', 'fixtures', 'sglang_metrics')


def _declared_families(version):
    with open(os.path.join(FAMILIES, 'sglang-%s-metric-families.txt' % version)) as handle:
        return dict(line.split() for line in handle if line.strip())


def _scrape_after_two_requests(release):
    metrics = sim.Metrics('glm-5', None, release)
    for ident, stream in (('a', True), ('b', False)):
        metrics.start(ident, 12, stream)
        metrics.tokens(ident, 4)
        metrics.tokens(ident, 4)
        metrics.finish(ident)
    return metrics.exposition()


@pytest.mark.parametrize('version, release', [('0.5.9', (0, 5, 9)), ('0.5.23', (0, 5, 23))])
def test_the_server_exports_its_releases_metric_names(version, release):
    import yaml
    text = _scrape_after_two_requests(release)
    declared = _declared_families(version)
    exported = dict(line.split()[2:4] for line in text.splitlines() if line.startswith('# TYPE '))
    # Every family it exports is one the release's wheel declares, with the same type.
    assert exported and all(declared.get(name) == kind for name, kind in exported.items()), exported
    with open(os.path.join(SIM, '..', '..', '..', '..', 'roles', 'sglang', 'vars', 'release_sets.yml')) as handle:
        recorded = yaml.safe_load(handle)['_sglang_release_sets'][version]['metrics']
    # And every family monitoring reads of that release (its release set's list).
    assert sorted(set(recorded) - set(exported)) == []
    # 0.5.23 times each request's output tokens and splits the tokenizer's series by is_streaming.
    assert ('sglang:request_time_per_output_token_seconds' in exported) is (release >= (0, 5, 23))
    streaming = [line for line in text.splitlines() if line.startswith('sglang:generation_tokens_total{')]
    if release >= (0, 5, 23):
        assert sorted(line.split('is_streaming="')[1][:4] for line in streaming) == ['fals', 'true']
        assert sum(float(line.split()[-1]) for line in streaming) == 16.0
    else:
        assert streaming == ['sglang:generation_tokens_total{model_name="glm-5"} 16.0']


@pytest.mark.parametrize('release, argv, started', [
    ((0, 5, 23), ['serve', '--model', 'm', '--port', '1'], ['--model', 'm', '--port', '1']),
    ((0, 5, 9), ['serve', '--model-path', 'm'], ['--model-path', 'm']),
])
def test_sglang_serve_starts_the_server_with_the_arguments_after_it(monkeypatch, release, argv, started):
    from inferops_lab_sglang_sim.cli import main as cli
    calls = []
    monkeypatch.setattr(sim, 'installed_release', lambda: release)
    monkeypatch.setattr(sim, 'main', lambda args: calls.append(args) or 0)
    monkeypatch.setattr(sys, 'argv', ['sglang'] + argv)
    assert cli.main() == 0 and calls == [started]


def test_sglang_serve_of_0_5_9_needs_model_path_as_its_cli_does(monkeypatch):
    from inferops_lab_sglang_sim.cli import main as cli
    monkeypatch.setattr(sim, 'installed_release', lambda: (0, 5, 9))
    monkeypatch.setattr(sim, 'main', lambda args: pytest.fail('started'))
    monkeypatch.setattr(sys, 'argv', ['sglang', 'serve', '--model', 'm'])
    with pytest.raises(Exception, match='sglang serve --model-path'):
        cli.main()
