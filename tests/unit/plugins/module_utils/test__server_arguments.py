# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.address import probe_url, server_address
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import (
    ServerArgumentsError,
    effective_arguments,
    flag_name,
    merge_layers,
    server_port,
)


@pytest.mark.parametrize('key, flag', [('--tp', 'tp-size'), ('tp_size', 'tp-size'), ('tensor-parallel-size', 'tp-size'),
                                       ('--model', 'model-path'), ('PORT', 'port'), (' --served-model-name', 'served-model-name')])
def test_every_spelling_names_one_flag(key, flag):
    assert flag_name(key) == flag


def test_later_layers_win_and_false_or_null_removes():
    args = {'model-path': 'zai-org/GLM-5', 'tp': 8, 'port': 8000, 'enable-metrics': True}
    extra = {'tensor_parallel_size': 4, '--port': None, 'enable-metrics': False}
    assert effective_arguments({'disable-custom-all-reduce': True}, args, extra) == {
        'disable-custom-all-reduce': True, 'model-path': 'zai-org/GLM-5', 'tp-size': 4}
    assert effective_arguments(None, args, 'not a mapping')['port'] == 8000


@pytest.mark.parametrize('host, port, url, loopback', [
    (None, None, 'http://127.0.0.1:30000', True),
    ('0.0.0.0', 8000, 'http://127.0.0.1:8000', False),
    ('::', '8000', 'http://[::1]:8000', False),
    ('::1', 8000, 'http://[::1]:8000', True),
    ('127.0.0.2', 8000, 'http://127.0.0.2:8000', True),
    ('10.0.0.5', 8000, 'http://10.0.0.5:8000', False),
])
def test_where_the_server_answers_from_the_node_itself(host, port, url, loopback):
    expected = {'host': host if host is not None else '127.0.0.1', 'port': int(port) if port is not None else 30000,
                'url': url, 'loopback': loopback}
    assert server_address(host, port) == expected
    assert probe_url(host if host is not None else '127.0.0.1', port or 30000) == url


def test_the_port_as_prometheus_reads_it():
    assert server_port({'port': 8000}, {'port': 8001}, 9999) == 8001
    assert server_port({'port': 8000}, {'port': False}, 9999) == 9999
    assert server_port(None, None, 8000) == 8000
    with pytest.raises(ServerArgumentsError, match='--port needs a whole number'):
        server_port({'port': 'http'})


def test_the_merge_keeps_the_last_word_on_each_flag_where_the_flag_first_appeared():
    topology = {'nsa-decode-backend': 'trtllm', 'cuda-graph-max-bs': 64}
    inventory = {'nsa_decode_backend': 'trtllm', 'tp': 8, 'port': 8000}
    overlay = {'--nsa-decode-backend': False, 'tensor-parallel-size': None, 'dsa-decode-backend': 'trtllm', 'port': 8001}
    merged = merge_layers(topology, inventory, overlay)
    assert list(merged) == ['nsa-decode-backend', 'cuda-graph-max-bs', 'tp-size', 'port', 'dsa-decode-backend']
    assert [(s.key, s.value, s.layer, s.removes) for s in merged.values()] == [
        ('--nsa-decode-backend', False, 2, True), ('cuda-graph-max-bs', 64, 0, False),
        ('tensor-parallel-size', None, 2, True), ('port', 8001, 2, False), ('dsa-decode-backend', 'trtllm', 2, False)]
    # What reaches the command line: the removals taken out.
    assert effective_arguments(topology, inventory, overlay) == {
        'cuda-graph-max-bs': 64, 'port': 8001, 'dsa-decode-backend': 'trtllm'}
    # Set again after a removal: kept.
    assert merge_layers({'a': 1}, {'a': False}, {'a': 2})['a'].value == 2
    assert merge_layers(None, {'a': 1}) == {'a': (('a', 1, 1, None))}


def test_two_spellings_of_one_flag_in_one_layer_are_told():
    assert merge_layers({'tp': 2, 'tp-size': 4})['tp-size'].repeated == 'tp'
    assert merge_layers({'tp': 2}, {'tp-size': 4})['tp-size'].repeated is None
