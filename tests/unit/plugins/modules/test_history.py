# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os

from ansible.module_utils.testing import patch_module_args
from ansible_collections.inferops.serving.plugins.modules import history, history_info
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process


MODULE = os.path.join(os.path.dirname(__file__), '..', '..', '..', '..', 'plugins', 'modules', 'history.py')


def run(module, args, capsys):
    return run_in_process(module.main, args, capsys)


def deploy(path, fingerprint, **extra):
    args = {'path': str(path), 'event': 'deploy', 'node': 'gpu-node', 'once_per_fingerprint': True,
            'fields': {'fingerprint': fingerprint}}
    args.update(extra)
    return args


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_deploy_is_recorded_once_per_configuration(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    first = run(history, deploy(path, 'a'), capsys)
    again = run(history, deploy(path, 'a'), capsys)
    other = run(history, deploy(path, 'b'), capsys)
    assert (first['changed'], again['changed'], other['changed']) == (True, False, True)
    assert [r['fingerprint'] for r in lines(path)] == ['a', 'b']


def test_check_mode_reports_the_append_without_writing(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    result = run(history, deploy(path, 'a', _ansible_check_mode=True), capsys)
    assert result['changed'] is True and result['appended'] is True
    assert not path.exists()


def test_check_mode_before_the_first_deploy_reports_the_append(tmp_path, capsys):
    result = run(history, deploy(tmp_path / 'absent' / 'history.jsonl', 'a', _ansible_check_mode=True), capsys)
    assert result['changed'] is True and not result.get('failed')
    assert not (tmp_path / 'absent').exists()


def test_a_missing_folder_fails_before_writing(tmp_path, capsys):
    result = run(history, deploy(tmp_path / 'absent' / 'history.jsonl', 'a'), capsys)
    assert result['failed'] and 'deploy the node first' in result['msg']


def test_reserved_fields_are_refused(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    args = deploy(path, 'a')
    args['fields']['event'] = 'benchmark'
    result = run(history, args, capsys)
    assert result['failed'] and 'may not set event' in result['msg']
    assert not path.exists()


def test_info_finds_the_benchmark_of_the_deployed_configuration(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    for event, fields in [('deploy', {'fingerprint': 'base'}),
                          ('benchmark', {'fingerprint': 'base', 'experiment': None,
                                         'metrics': {'output_throughput': 1867.0}}),
                          ('benchmark', {'fingerprint': 'fused', 'experiment': 'sm120_allreduce_fusion',
                                         'metrics': {'output_throughput': 236.0}}),
                          ('rollback', {'experiment': 'sm120_allreduce_fusion'})]:
        run(history, {'path': str(path), 'event': event, 'node': 'gpu-node', 'fields': fields}, capsys)
    path.write_text(path.read_text() + '{"torn')
    info = run(history_info, {'path': str(path), 'max_age': 600}, capsys)
    assert info['changed'] is False
    assert info['total'] == 4 and info['skipped_lines'] == [5]
    # Without a fingerprint: the configuration of the latest deploy.
    assert info['fingerprint'] == 'base'
    assert info['benchmark']['metrics']['output_throughput'] == 1867.0
    fused = run(history_info, {'path': str(path), 'fingerprint': 'fused'}, capsys)
    assert fused['benchmark']['metrics']['output_throughput'] == 236.0
    assert info['latest']['rollback']['experiment'] == 'sm120_allreduce_fusion'
    assert info['latest']['benchmark']['fingerprint'] == 'fused'


def test_info_returns_a_baseline_only_of_the_workload_asked_for(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    workload = {'mode': 'chat', 'num_prompts': 64, 'concurrency': 32, 'input_len': 128, 'output_len': 64}
    for event, fields in [('deploy', {'fingerprint': 'base'}),
                          ('benchmark', {'fingerprint': 'base', 'metrics': {'output_throughput': 1867.0},
                                         'workload': workload})]:
        run(history, {'path': str(path), 'event': event, 'node': 'gpu-node', 'fields': fields}, capsys)
    same = run(history_info, {'path': str(path), 'workload': workload}, capsys)
    assert same['benchmark']['metrics']['output_throughput'] == 1867.0
    other = run(history_info, {'path': str(path), 'workload': dict(workload, concurrency=64)}, capsys)
    assert other['benchmark'] is None


def test_info_of_a_new_node_is_empty(tmp_path, capsys):
    info = run(history_info, {'path': str(tmp_path / 'none.jsonl'), 'fingerprint': 'x'}, capsys)
    assert info['records'] == [] and info['benchmark'] is None and info['latest'] == {}


def warnings(result):
    # ansible-core 2.19 returns warnings as structured events.
    return [w['event']['msg'] if isinstance(w, dict) else w for w in result.get('warnings', [])]


def _record(fingerprint):
    return json.dumps({'ts': 'x', 'epoch': 1.0, 'event': 'deploy', 'node': 'n', 'fingerprint': fingerprint})


def test_a_torn_last_line_is_set_aside_and_the_next_record_is_not_lost(tmp_path, capsys, run_module):
    path = tmp_path / 'history.jsonl'
    path.write_text(_record('a') + '\n' + '{"ts": "x", "event": "depl')
    # In a process of its own, as on a node: warnings are what the user sees.
    result = run_module(**deploy(path, 'b'))
    assert result['appended'] is True
    assert any('line 2 is a torn record' in w for w in warnings(result))
    text = path.read_text()
    assert text.endswith('\n')
    info = run(history_info, {'path': str(path)}, capsys)
    assert [r['fingerprint'] for r in info['records']] == ['a', 'b']
    assert info['skipped_lines'] == [2]
    # The torn fragment is kept: nothing that was written is ever removed.
    assert '{"ts": "x", "event": "depl\n' in text


def test_a_whole_record_without_its_newline_is_repaired(tmp_path, run_module):
    path = tmp_path / 'history.jsonl'
    path.write_text(_record('a') + '\n' + _record('b'))
    result = run_module(**deploy(path, 'c'))
    assert any('the newline was added' in w for w in warnings(result))
    assert [r['fingerprint'] for r in lines(path)] == ['a', 'b', 'c']


def test_a_repeat_after_a_torn_line_still_ends_the_line(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    path.write_text(_record('a') + '\n' + _record('a'))
    result = run(history, deploy(path, 'a'), capsys)
    assert result['appended'] is False and result['changed'] is True
    assert path.read_text().endswith('\n')
    assert run(history, deploy(path, 'a'), capsys)['changed'] is False


def test_check_mode_leaves_a_torn_file_alone(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    path.write_text(_record('a') + '\n{"torn')
    result = run(history, deploy(path, 'b', _ansible_check_mode=True), capsys)
    assert result['changed'] is True
    assert path.read_text() == _record('a') + '\n{"torn'


def test_concurrent_appends_never_interleave(tmp_path):
    # Eight processes append 25 records each at once: every record arrives whole, none is lost.
    import multiprocessing
    path = tmp_path / 'history.jsonl'
    path.write_text('')
    with multiprocessing.get_context('fork').Pool(8) as pool:
        pool.map(_append_many, [(str(path), worker) for worker in range(8)])
    records = lines(path)
    assert len(records) == 200
    assert sorted(r['fingerprint'] for r in records) == sorted('%d-%d' % (w, i) for w in range(8) for i in range(25))


def _append_many(job):
    import io
    import sys
    path, worker = job
    for index in range(25):
        args = {'path': path, 'event': 'deploy', 'node': 'n', 'fields': {'fingerprint': '%d-%d' % (worker, index)}}
        out = io.StringIO()
        old = sys.stdout
        sys.stdout = out
        try:
            with patch_module_args(args):
                try:
                    history.main()
                except SystemExit:
                    pass
        finally:
            sys.stdout = old


def test_concurrent_deploys_of_one_configuration_record_it_once(tmp_path):
    # The read-decide-append of once_per_fingerprint happens under the lock.
    import multiprocessing
    path = tmp_path / 'history.jsonl'
    with multiprocessing.get_context('fork').Pool(8) as pool:
        pool.map(_deploy_same, [str(path)] * 32)
    assert [r['fingerprint'] for r in lines(path)] == ['same']


def _deploy_same(path):
    import io
    import sys
    old = sys.stdout
    sys.stdout = io.StringIO()
    try:
        with patch_module_args(deploy(path, 'same')):
            try:
                history.main()
            except SystemExit:
                pass
    finally:
        sys.stdout = old


def test_info_names_the_venvs_every_deploy_served_from_oldest_first(tmp_path, capsys):
    path = tmp_path / 'history.jsonl'
    records = [{'event': 'deploy', 'fingerprint': 'a'},
               {'event': 'deploy', 'fingerprint': 'b', 'venv': '/opt/sglang/venvs/sglang-0.5.9-cu128'},
               {'event': 'benchmark', 'fingerprint': 'b', 'venv': '/not/a/deploy'},
               {'event': 'deploy', 'fingerprint': 'c', 'venv': '/opt/sglang/venvs/sglang-0.5.23-cu130'},
               {'event': 'deploy', 'fingerprint': 'd', 'venv': '/opt/sglang/venvs/sglang-0.5.9-cu128'}]
    path.write_text(''.join(json.dumps(dict(record, ts='x', epoch=1.0 + index, node='n')) + '\n'
                            for index, record in enumerate(records)))
    # The whole history counts, whatever number of records is returned.
    info = run(history_info, {'path': str(path), 'last': 0}, capsys)
    assert info['records'] == []
    assert info['venvs_served'] == ['/opt/sglang/venvs/sglang-0.5.9-cu128', '/opt/sglang/venvs/sglang-0.5.23-cu130',
                                    '/opt/sglang/venvs/sglang-0.5.9-cu128']
