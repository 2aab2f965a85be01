# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The report renders every history the roles write, and reads right in a real browser.

The history below holds one record of each kind the roles write with the ``history`` module
(tasks/steps/converge.yml, restore.yml, measure.yml, trial.yml, campaign_result.yml,
experiment.yml's refusal, host_experiment.yml and host_experiment_rollback.yml), written by
hand with the fields those tasks record and stamped by ``_history.make_record``. The template
is rendered by ansible-playbook itself (ansible-core's templating and the collection's
filters), once per way a history can end; headless Chromium then loads the page: no console
error, no event label over another, the throughput figure on one line, and a screenshot kept in
build/report-screenshots/.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.inferops.serving.plugins.module_utils import _history
from ansible_collections.inferops.serving.tests.utils.playbook import ANSIBLE_PLAYBOOK, run_playbook

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
TEMPLATE = os.path.join(REPO_ROOT, 'roles', 'serving', 'templates', 'report.html.j2')
SCREENSHOTS = os.path.join(REPO_ROOT, 'build', 'report-screenshots')
CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE_PLAYBOOK),
                                reason='needs ansible-playbook next to the test interpreter')

T0 = 1771509223.0
SERVER = {'url': 'http://127.0.0.1:30000', 'model': 'glm-5', 'model_path': '/srv/models/glm-5', 'revision': 'main',
          'module': 'sglang.launch_server', 'python': '/opt/sglang/0.5.9/bin/python',
          'args': {'tp-size': 2, 'api-key': 'sk-secret', 'mem-fraction-static': 0.85, 'enable-metrics': True},
          'from_topology': ['--disable-custom-all-reduce'], 'env': {'HF_TOKEN': 'hf_secret', 'NCCL_P2P_LEVEL': '5'}}
VERSIONS = {
    '0.5.9': {'sglang': '0.5.9', 'flashinfer-python': '0.6.3', 'flashinfer-cubin': '0.6.3', 'sgl-kernel': '0.3.21',
              'torch': '2.9.1'},
    '0.5.23': {'sglang': '0.5.23', 'flashinfer-python': '0.7.2', 'sglang-kernel': '0.4.10', 'torch': '2.14.1'},
}
WORKLOAD = {'num_prompts': 64, 'max_concurrency': 16, 'random_input_len': 1024, 'random_output_len': 256,
            'dataset_name': 'random'}


def deploy(fingerprint, release_set='0.5.9', experiment=None, patch=False):
    return ('deploy', {'fingerprint': fingerprint, 'experiment': experiment, 'server': SERVER,
                       'release_set': release_set, 'venv': '/opt/sglang/' + release_set,
                       'versions': VERSIONS[release_set], 'patches': {}, 'sm120_allreduce_fusion_patch': patch})


def benchmark(fingerprint, throughput, experiment=None, stdev=12.5):
    return ('benchmark', {'fingerprint': fingerprint, 'experiment': experiment, 'workload': WORKLOAD, 'metrics': {
        'output_throughput': throughput, 'completed': 64, 'output_len': 256, 'concurrency': 16,
        'median_ttft_ms': 41.2, 'p99_ttft_ms': 97.0, 'median_tpot_ms': 8.1, 'p99_tpot_ms': 9.9,
        'tokens_per_joule': round(throughput / 412.0, 3),
        'spread': {'output_throughput': {'n': 5, 'mean': throughput, 'stdev': stdev, 'min': throughput - 20,
                                         'max': throughput + 18, 'ci95': 15.5}},
        'gpu': {'mean_power_w': 412.0, 'power_limit_w': 600.0, 'power_fraction': 0.687, 'mean_util_pct': 93,
                'gpus': [{'index': 0}, {'index': 1}]}}})


def outcome(name, verdict, reason, change=None, noise=None, message='', campaign=None):
    return ('experiment', {'experiment': name, 'campaign': campaign, 'outcome': verdict, 'forced': False,
                           'reason': reason, 'objective': 'output_throughput', 'change_pct': change,
                           'noise_pct': noise, 'baseline_throughput': 1867.0,
                           'experiment_throughput': None if change is None else 1867.0 * (1 + change / 100),
                           'baseline_spread': None, 'experiment_spread': None, 'baseline_tokens_per_joule': 4.5,
                           'experiment_tokens_per_joule': None, 'answers': {}, 'message': message})


def rollback(name, reason, how, message):
    return ('rollback', {'experiment': name, 'reason': reason, 'message': message, 'error': '',
                         'fingerprint': 'f' * 40, 'how': how, 'recovery_s': 21.4})


REFUSED = ('experiment', {'experiment': 'sm120_allreduce_fusion', 'outcome': 'refused',
                          'blocked_by': ['GPU pairs without P2P: allreduce fusion needs peer-to-peer access'],
                          'reasons': ['topology: P2P NS between GPU0 and GPU1']})
# A close run of events (seconds apart): their labels are the ones that overprinted.
STORY = [
    deploy('a' * 40),
    benchmark('a' * 40, 1867.0),
    deploy('b' * 40, experiment='sm120_allreduce_fusion', patch=True),
    benchmark('b' * 40, 236.0, experiment='sm120_allreduce_fusion'),
    rollback('sm120_allreduce_fusion', 'regression', 'files put back: /opt/sglang/0.5.9/lib/python3.11/'
             'site-packages/sglang/srt/layers/communicator.py', 'output tok/s regressed -87.4%'),
    outcome('sm120_allreduce_fusion', 'rolled_back', 'regression', -87.4, 3.7,
            'output tok/s regressed -87.4%, beyond the measured noise of +/- 3.7%'),
    deploy('c' * 40, experiment='bad_flag'),
    rollback('bad_flag', 'failed', 'converged', 'Start the server failed: unrecognized arguments --bogus'),
    outcome('bad_flag', 'rolled_back', 'failed', None, None, 'Start the server failed: unrecognized arguments'),
    deploy('d' * 40, experiment='chunked_prefill_8k'),
    benchmark('d' * 40, 1990.0, experiment='chunked_prefill_8k'),
    outcome('chunked_prefill_8k', 'kept', 'improved', 6.6, 3.1,
            'output tok/s +6.6%, beyond the measured noise of +/- 3.1%', campaign='tune'),
    deploy('e' * 40, experiment='cuda_graph_bs_32'),
    benchmark('e' * 40, 2001.0, experiment='cuda_graph_bs_32'),
    outcome('cuda_graph_bs_32', 'inconclusive', 'inconclusive', 0.6, 3.4,
            'inconclusive: output tok/s +0.6% is within the measured noise', campaign='tune'),
    ('campaign', {'campaign': 'tune', 'objective': 'output_throughput', 'kept': ['chunked_prefill_8k'],
                  'rows': [{'experiment': 'chunked_prefill_8k', 'verdict': 'kept', 'change_pct': 6.6},
                           {'experiment': 'cuda_graph_bs_32', 'verdict': 'inconclusive', 'change_pct': 0.6}],
                  'promotion': {'serving_sglang_args': {'chunked-prefill-size': 8192}}}),
    ('experiment', {'experiment': 'acs_off', 'outcome': 'rolled_back', 'layer': 'host', 'host': 'pve1',
                    'vmid': 101, 'message': 'P2P is not present on every pair', 'evidence': ['NS'],
                    'allreduce_before': [], 'allreduce_after': []}),
    ('rollback', {'experiment': 'acs_off', 'reason': 'wrong_or_no_p2p', 'message': 'P2P is not present on every pair',
                  'evidence': ['NS'], 'host': 'pve1', 'vmid': 101, 'recovery_s': 64.0}),
    deploy('g' * 40, release_set='0.5.23'),
    benchmark('g' * 40, 2150.0),
]
# Gaps between events: seconds within an experiment, minutes between them.
GAPS = [0, 60, 300, 40, 3, 2, 600, 4, 1, 900, 50, 2, 5, 50, 2, 1, 1800, 2, 1200, 60]

ENDINGS = {
    'refused': [REFUSED],
    'failed': [deploy('h' * 40, release_set='0.5.23', experiment='bad_flag'),
               rollback('bad_flag', 'failed', 'converged', 'Start the server failed'),
               outcome('bad_flag', 'rolled_back', 'failed', None, None, 'Start the server failed')],
    'killed': [deploy('k' * 40, release_set='0.5.23', experiment='long_prefill'),
               benchmark('k' * 40, 2101.0, experiment='long_prefill')],
    'host_kept': [('experiment', {'experiment': 'acs_on', 'outcome': 'kept', 'layer': 'host', 'host': 'pve1',
                                  'vmid': 101, 'message': 'every sum right and P2P on every pair',
                                  'evidence': [], 'allreduce_before': [], 'allreduce_after': []})],
}


def history(ending):
    records, epoch = [], T0
    events = STORY + ENDINGS[ending]
    for n, (event, fields) in enumerate(events):
        epoch += GAPS[n] if n < len(GAPS) else 30
        records.append(_history.make_record(event, 'gpu-node', fields, epoch))
    latest = {}
    for event in _history.EVENTS:
        record = _history.latest(records, event)
        if record is not None:
            latest[event] = record
    return records, latest


TOPOLOGY = {'gpu_count': 2, 'gpus': [{'name': 'NVIDIA RTX PRO 6000 Blackwell Server Edition'}] * 2,
            'gpu_links': [['X', 'SYS'], ['SYS', 'X']], 'p2p_read': [['X', 'NS'], ['NS', 'X']],
            'allreduce_fusion_advised': False, 'weakest_link': 'SYS', 'all_pairs_p2p': False,
            'reasons': ['GPU pairs without P2P: allreduce fusion needs peer-to-peer access']}


@pytest.fixture(scope='module')
def rendered(tmp_path_factory):
    """Every ending rendered by one ansible-playbook run (one start of Ansible for all)."""
    folder = tmp_path_factory.mktemp('report')
    pages = []
    for ending in ENDINGS:
        records, latest = history(ending)
        pages.append({'name': ending, 'records': records, 'latest': latest})
    playbook = folder / 'render.yml'
    playbook.write_text(json.dumps([{
        'hosts': 'all', 'gather_facts': False,
        'tasks': [{'name': 'Render', 'ansible.builtin.template': {
            'src': TEMPLATE, 'dest': str(folder) + '/{{ item.name }}.html', 'mode': '0644'},
            'loop': '{{ pages }}', 'loop_control': {'label': '{{ item.name }}'},
            'vars': {'__serving_report_records': '{{ item.records }}', '__serving_report_latest': '{{ item.latest }}',
                     '__serving_report_topology': TOPOLOGY, '__serving_report_health': 200,
                     'serving_history_path': '/var/lib/inferops/history.jsonl'}}]}]))
    (folder / 'pages.json').write_text(json.dumps({'pages': pages, 'ansible_python_interpreter': sys.executable}))
    result = run_playbook(['-i', 'gpu-node,', '-c', 'local', str(playbook), '-e', '@' + str(folder / 'pages.json')])
    assert result.returncode == 0, result.summary
    return {ending: (folder / (ending + '.html')) for ending in ENDINGS}


@pytest.mark.parametrize('ending', sorted(ENDINGS))
def test_every_record_kind_reads_in_the_history_table(rendered, ending):
    page = rendered[ending].read_text()
    for text in ('release set 0.5.9 (sglang 0.5.9)', 'release set 0.5.23 (sglang 0.5.23)',
                 'files put back: /opt/sglang/0.5.9', '; converged; healthy baseline after 21.4 s',
                 'failed, rolled back: Start the server failed',
                 'rolled back -87.4% (noise +/- 3.7%): output tok/s regressed',
                 'kept +6.6% (noise +/- 3.1%)', 'inconclusive +0.6% (noise +/- 3.4%)',
                 'tune: kept chunked_prefill_8k (objective output_throughput); chunked_prefill_8k kept +6.6%;'
                 ' cuda_graph_bs_32 inconclusive +0.6%',
                 'host pve1, VM 101: rolled back: P2P is not present on every pair',
                 '1,867.0 tok/s +/- 12.5 (5 runs, 1847.0-1885.0)'):
        assert text in page, text
    # Secrets of the running configuration stay masked.
    assert 'sk-secret' not in page and 'hf_secret' not in page


@pytest.mark.parametrize('ending, pill, words', [
    ('refused', 'gray', 'refused'),
    ('failed', 'bad', 'failed, rolled back'),
    ('killed', 'warn', 'no verdict recorded'),
    ('host_kept', 'ok', 'kept'),
])
def test_the_last_experiment_card_says_how_it_ended(rendered, ending, pill, words):
    page = rendered[ending].read_text()
    card = page[page.index('Last experiment'):page.index('Throughput over time')]
    assert '<span class="pill %s">%s</span>' % (pill, words) in card
    if ending == 'refused':
        assert 'GPU pairs without P2P' in card
    if ending == 'killed':
        assert 'experiment without a verdict long_prefill' in page
    if ending == 'failed':
        assert 'back to baseline in 21.4 s' in card


# Loaded before the page's own content: collects every error (scripts, resources) and console
# error, then measures what the eye would see once the page has laid out.
PROBE = '''<script>
window.__errors = [];
addEventListener('error', function (e) { __errors.push(String(e.message || (e.target && (e.target.src || e.target.href)))); }, true);
['error', 'warn'].forEach(function (level) {
  var original = console[level];
  console[level] = function () { __errors.push(level + ': ' + Array.prototype.join.call(arguments, ' ')); original.apply(console, arguments); };
});
addEventListener('load', function () {
  var boxes = Array.prototype.map.call(document.querySelectorAll('text.event-label, text.value-label'), function (t) {
    var r = t.getBoundingClientRect(); return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  });
  var big = document.querySelector('.card .big');
  var style = getComputedStyle(big);
  var result = {errors: __errors, labels: boxes, bigLines: Math.round(big.getBoundingClientRect().height / parseFloat(style.lineHeight))};
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
});
</script>'''


def chromium(*args):
    return subprocess.run([CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
                           '--window-size=1280,2200', '--enable-logging=stderr', '--v=0'] + list(args),
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason='needs chromium (Debian package chromium)')
@pytest.mark.parametrize('ending', ['refused', 'killed'])
def test_the_page_reads_in_a_browser(rendered, tmp_path, ending):
    page = rendered[ending]
    os.makedirs(SCREENSHOTS, exist_ok=True)
    shot = os.path.join(SCREENSHOTS, 'report-%s.png' % ending)
    proc = chromium('--screenshot=' + shot, 'file://' + str(page))
    assert os.path.getsize(shot) > 10000, proc.stderr[-2000:]
    assert 'CONSOLE' not in proc.stderr, proc.stderr[-2000:]

    probed = tmp_path / 'probed.html'
    probed.write_text(page.read_text().replace('<head>', '<head>' + PROBE, 1))
    proc = chromium('--dump-dom', 'file://' + str(probed))
    dom = proc.stdout
    result = json.loads(dom[dom.index('<pre id="probe">') + len('<pre id="probe">'):dom.index('</pre>', dom.index('<pre id="probe">'))]
                        .replace('&quot;', '"').replace('&lt;', '<').replace('&gt;', '>').replace('&amp;', '&'))
    assert result['errors'] == []
    labels = result['labels']
    assert len(labels) >= 12
    for n, a in enumerate(labels):
        for b in labels[n + 1:]:
            apart = a['right'] <= b['left'] or b['right'] <= a['left'] or a['bottom'] <= b['top'] or b['bottom'] <= a['top']
            assert apart, 'label %r overprints %r' % (a['text'], b['text'])
    assert result['bigLines'] == 1
