# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.inferops.serving.plugins.modules import serving_answers
from ansible_collections.inferops.serving.tests.utils.module_result import run_in_process

KEY = 'sk-test-0123456789'
SEEN = []


class _Server(BaseHTTPRequestHandler):
    """Answers like SGLang 0.5.9's chat completions with logprobs=true (ChoiceLogprobs)."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        SEEN.append(body)
        if self.headers.get('Authorization') != 'Bearer %s' % KEY:
            self.send_response(401)
            self.end_headers()
            return
        prompt = body['messages'][0]['content']
        tokens = [prompt.split()[0]] + [' w%d' % i for i in range(body['max_tokens'] - 1)]
        answer = {'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': ''.join(tokens)},
                               'finish_reason': 'length',
                               'logprobs': {'content': [{'token': t, 'bytes': [], 'logprob': -0.5, 'top_logprobs': []}
                                                        for t in tokens]}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server_url():
    del SEEN[:]
    server = ThreadingHTTPServer(('127.0.0.1', 0), _Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()
    server.server_close()


def run(args, capsys):
    """The module's result as the controller shows it, as JSON text and as data."""
    result = run_in_process(serving_answers.main, args, capsys)
    return json.dumps(result), result


def test_answers_are_greedy_tokens_with_logprobs_and_the_key_stays_out(server_url, capsys):
    out, result = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY,
                       'prompts': ['alpha one', 'bravo two'], 'max_tokens': 4}, capsys)
    assert result['changed'] is False and result['logprobs'] is True
    assert [a['tokens'] for a in result['answers']] == [['alpha', ' w0', ' w1', ' w2'], ['bravo', ' w0', ' w1', ' w2']]
    assert result['answers'][0]['logprobs'] == [-0.5] * 4
    assert all(b['temperature'] == 0 and b['seed'] == 1234 and b['logprobs'] is True for b in SEEN)
    assert KEY not in out


def test_a_refused_request_names_the_prompt_not_the_key(server_url, capsys):
    out, result = run({'base_url': server_url, 'model': 'glm-5', 'api_key': 'wrong-key-42',
                       'prompts': ['alpha']}, capsys)
    assert result['failed'] is True and result['msg'].startswith('prompt 1: no answer from ')
    assert '401' in result['msg'] and 'wrong-key-42' not in out


def test_an_empty_prompt_set_is_refused(capsys):
    _out, result = run({'model': 'glm-5', 'prompts': []}, capsys)
    assert result['failed'] is True and 'at least one prompt' in result['msg']


def test_without_a_reference_nothing_is_compared(server_url, capsys):
    _out, result = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['alpha'],
                        'versions': {'sglang': '0.5.9'}}, capsys)
    assert 'lock' not in result and result['versions'] == {'sglang': '0.5.9'}


def test_the_same_answers_hold_the_lock(server_url, capsys):
    args = {'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['alpha one', 'bravo'],
            'max_tokens': 4, 'versions': {'sglang': '0.5.9', 'transformers': '4.57.1'}}
    _out, reference = run(args, capsys)
    _out, check = run(dict(args, reference=reference), capsys)
    assert check['lock']['ok'] is True and check['lock']['agreement'] == 1.0
    assert check['lock']['max_logprob_divergence'] == 0.0 and not check['lock']['release_change']


def test_the_check_asks_what_the_reference_was_asked(server_url, capsys):
    _out, reference = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['alpha one', 'bravo'],
                           'max_tokens': 4, 'seed': 7, 'top_logprobs': 0}, capsys)
    assert reference['request'] == {'prompts': ['alpha one', 'bravo'], 'max_tokens': 4, 'seed': 7, 'top_logprobs': 0}
    del SEEN[:]
    _out, check = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'reference': reference}, capsys)
    assert check['lock']['ok'] is True and check['request'] == reference['request']
    assert [(b['messages'][0]['content'], b['max_tokens'], b['seed'], 'logprobs' in b) for b in SEEN] == [
        ('alpha one', 4, 7, False), ('bravo', 4, 7, False)]


def test_a_check_that_would_ask_other_prompts_than_the_reference_asks_nothing(server_url, capsys):
    _out, reference = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['alpha']}, capsys)
    del SEEN[:]
    _out, check = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['bravo'],
                       'reference': reference}, capsys)
    assert check['failed'] is True and check['msg'].startswith("prompts is ['bravo'], but the reference was asked with")
    assert SEEN == []


def test_answers_that_part_from_the_reference_break_the_lock_and_name_the_release_change(server_url, capsys):
    args = {'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['alpha one', 'bravo'],
            'max_tokens': 4, 'versions': {'sglang': '0.5.23', 'transformers': '4.57.1'}}
    _out, now = run(args, capsys)
    # The baseline answered "x w0 w1 w2" to the first prompt: the answers part at the first token.
    reference = {'answers': [dict(now['answers'][0], tokens=['x'] + now['answers'][0]['tokens'][1:]), now['answers'][1]],
                 'versions': {'sglang': '0.5.9', 'transformers': '4.57.1'}}
    out, check = run(dict(args, reference=reference, min_agreement=0.9), capsys)
    assert check.get('failed') is not True, check
    lock = check['lock']
    assert lock['ok'] is False and lock['agreement'] == 0.5
    assert 'prompt 1' in lock['message'] and '0.5.9' in str(lock['release_change'])
    assert KEY not in out


def test_a_reference_of_other_answers_cannot_be_compared(server_url, capsys):
    _out, check = run({'base_url': server_url, 'model': 'glm-5', 'api_key': KEY, 'prompts': ['alpha'],
                       'reference': {'answers': [], 'versions': {}}}, capsys)
    assert check['failed'] is True and check['msg'].startswith('the correctness lock cannot compare: 1 prompts, but 0')
