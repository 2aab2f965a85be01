# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The correctness lock compares greedy answers token by token and says where they parted."""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._correctness import (
    CorrectnessError,
    asked,
    compare,
    line,
    parse_answer,
    request_body,
    summary,
)

PROMPTS = ['What is 17 multiplied by 23?', 'List the first ten prime numbers.']


def _response(tokens, logprobs=None, reasoning=None):
    """A chat completion as SGLang 0.5.9 returns it with logprobs=true (ChoiceLogprobs.content)."""
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': ''.join(tokens)}, 'finish_reason': 'length'}
    if reasoning is not None:
        choice['message']['reasoning_content'] = reasoning
    if logprobs is not None:
        choice['logprobs'] = {'content': [
            {'token': t, 'bytes': list(t.encode()), 'logprob': lp,
             'top_logprobs': [{'token': t, 'bytes': list(t.encode()), 'logprob': lp}]}
            for t, lp in zip(tokens, logprobs)]}
    return {'id': 'chatcmpl-1', 'object': 'chat.completion', 'choices': [choice]}


RIGHT = ['17', ' times', ' 23', ' is', ' 391', '.']
WRONG = ['17', ' times', ' 23', ' is', ' 392', '.']
PRIMES = ['2', ',', ' 3', ',', ' 5', ',']


def _answers(first, second=None, lp=-0.1):
    second = PRIMES if second is None else second
    return [parse_answer(_response(first, [lp] * len(first))), parse_answer(_response(second, [lp] * len(second)))]


def test_request_is_greedy_with_a_seed_and_logprobs():
    body = request_body('glm-5', 'hi', 32, 1234, 1)
    assert body['temperature'] == 0 and body['seed'] == 1234 and body['max_tokens'] == 32
    assert body['logprobs'] is True and body['top_logprobs'] == 1 and body['stream'] is False
    assert body['return_token_ids'] is True
    assert 'logprobs' not in request_body('glm-5', 'hi', 32, 1234, 0)


def test_parse_reads_sglang_tokens_and_logprobs():
    answer = parse_answer(_response(RIGHT, [-0.01, -0.2, -0.03, -0.1, -0.4, -0.05]))
    assert answer['tokens'] == RIGHT and answer['logprobs'][4] == -0.4 and answer['text'] == '17 times 23 is 391.'


def test_parse_without_logprobs_falls_back_to_words():
    answer = parse_answer(_response(RIGHT))
    assert answer['tokens'] == ['17', 'times', '23', 'is', '391.'] and answer['logprobs'] is None


def test_reasoning_content_is_part_of_the_answer():
    assert parse_answer(_response(['391'], reasoning='thinking '))['text'] == 'thinking 391'


def test_parse_refuses_an_answer_without_choices():
    with pytest.raises(CorrectnessError, match='without choices'):
        parse_answer({'error': 'overloaded'})


def test_identical_answers_pass():
    result = compare(PROMPTS, _answers(RIGHT), _answers(RIGHT))
    assert result['ok'] and result['agreement'] == 1.0 and result['max_logprob_divergence'] == 0.0
    assert result['message'] == ''


def test_a_wrong_sum_fails_and_says_where():
    result = compare(PROMPTS, _answers(RIGHT), _answers(WRONG), min_agreement=0.9)
    assert not result['ok']
    assert result['agreement'] == pytest.approx(10 / 12.0, abs=1e-4)
    first = result['prompts'][0]['first_difference']
    assert first['position'] == 4
    assert first['baseline'] == {'before': '17 times 23 is', 'from': ' 391.'}
    assert first['experiment'] == {'before': '17 times 23 is', 'from': ' 392.'}
    assert "First difference: prompt 1 ('What is 17 multiplied by 23?') at token 4 of 6" in result['message']
    assert 'baseline ...17 times 23 is[ 391.]..., experiment ...17 times 23 is[ 392.]...' in result['message']
    assert '(1 of 2 prompts differ)' in result['message']


def test_agreement_threshold_is_a_setting():
    assert compare(PROMPTS, _answers(RIGHT), _answers(WRONG), min_agreement=0.8)['ok']


def test_logprob_divergence_on_agreed_tokens_fails():
    result = compare(PROMPTS, _answers(RIGHT, lp=-0.1), _answers(RIGHT, lp=-1.6), max_logprob_divergence=1.0)
    assert not result['ok'] and result['agreement'] == 1.0
    assert result['max_logprob_divergence'] == pytest.approx(1.5)
    assert 'log-probabilities of agreed tokens differ by up to 1.500' in result['message']


def test_small_logprob_noise_passes():
    assert compare(PROMPTS, _answers(RIGHT, lp=-0.1), _answers(RIGHT, lp=-0.12))['ok']


def test_without_logprobs_only_tokens_count():
    base = [parse_answer(_response(RIGHT)), parse_answer(_response(PRIMES))]
    result = compare(PROMPTS, base, base)
    assert result['ok'] and result['max_logprob_divergence'] is None


@pytest.mark.parametrize('kwargs, message', [
    ({'min_agreement': 1.5}, 'serving_lock_min_agreement'),
    ({'max_logprob_divergence': -1}, 'serving_lock_max_logprob_divergence'),
])
def test_bad_thresholds_are_named(kwargs, message):
    with pytest.raises(CorrectnessError, match=message):
        compare(PROMPTS, _answers(RIGHT), _answers(RIGHT), **kwargs)


def test_answer_counts_must_match_the_prompts():
    with pytest.raises(CorrectnessError, match='2 prompts, but 2 baseline and 1 experiment answers'):
        compare(PROMPTS, _answers(RIGHT), _answers(RIGHT)[:1])


def test_summary_keeps_the_first_difference():
    kept = summary(compare(PROMPTS, _answers(RIGHT), _answers(WRONG)))
    assert kept['prompts_differing'] == 1 and kept['first_difference']['position'] == 4
    assert kept['first_difference']['prompt'] == PROMPTS[0]
    assert summary(None) is None


# --- the chat completions of both releases, built with their own protocol classes ---------------

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'correctness')


def release_fixture(release):
    """fixtures/correctness/chat_<release>.json, written by make_chat_responses.py there."""
    with open(os.path.join(FIXTURES, 'chat_%s.json' % release)) as handle:
        return json.load(handle)


@pytest.mark.parametrize('release', ['0.5.9', '0.5.23'])
def test_both_releases_read_the_lock_request_as_a_greedy_request_with_logprobs(release):
    recorded = release_fixture(release)
    assert recorded['release'] == release
    # The fixture's request is this collection's, so a change to it regenerates the fixtures.
    assert recorded['request'] == request_body('glm-5', recorded['request']['messages'][0]['content'], 32, 1234)
    as_read = recorded['request_as_read']
    assert (as_read['temperature'], as_read['seed'], as_read['logprobs'], as_read['top_logprobs'],
            as_read['max_tokens'], as_read['stream']) == (0, 1234, True, 1, 32, False)
    # 0.5.9 does not know return_token_ids and drops it rather than refusing the request.
    assert as_read['return_token_ids'] == {'0.5.9': 'dropped', '0.5.23': True}[release]


@pytest.mark.parametrize('release, token_ids', [('0.5.9', None), ('0.5.23', [1234, 353, 1419, 374, 220, 18, 13])])
def test_the_answer_of_each_release_is_read_the_same_way(release, token_ids):
    answer = parse_answer(release_fixture(release)['response'])
    assert answer['tokens'] == ['17', ' times', ' 23', ' is', ' ', '391', '.']
    assert answer['logprobs'] == [-0.0012, -0.0301, -0.0005, -0.0102, -0.2871, -0.0009, -0.015]
    assert answer['text'] == '17 times 23 is 391.' and answer['finish_reason'] == 'stop'
    assert answer['token_ids'] == token_ids


def _read_differently(answer):
    """The same answer as a release whose tokenizer library decodes ' ' + '391' as ' 391' would give it."""
    answer = dict(answer)
    answer['tokens'] = answer['tokens'][:4] + ['', ' 391', '.']
    return answer


V059 = {'sglang': '0.5.9', 'torch': '2.9.1'}
V0523 = {'sglang': '0.5.23', 'transformers': '5.19.0', 'torch': '2.14.1'}


def test_token_ids_are_compared_where_both_answers_carry_them():
    base = parse_answer(release_fixture('0.5.23')['response'])
    result = compare(PROMPTS[:1], [base], [_read_differently(base)], baseline_versions=V0523,
                     candidate_versions=dict(V0523, transformers='5.20.0'))
    assert result['ok'] and result['agreement'] == 1.0 and result['prompts'][0]['compared'] == 'token_ids'
    assert result['release_change'] == 'transformers 5.19.0 -> 5.20.0'
    other = dict(base, token_ids=base['token_ids'][:5] + [19, 13])
    result = compare(PROMPTS[:1], [base], [other])
    assert not result['ok'] and result['prompts'][0]['first_difference']['position'] == 5


def test_an_upgrade_whose_token_strings_differ_says_the_releases_differ():
    base = parse_answer(release_fixture('0.5.9')['response'])
    cand = _read_differently(parse_answer(release_fixture('0.5.23')['response']))
    result = compare(PROMPTS[:1], [base], [cand], baseline_versions=V059, candidate_versions=V0523)
    assert not result['ok'] and result['prompts'][0]['compared'] == 'tokens'
    assert result['release_change'] == 'SGLang 0.5.9 -> 0.5.23'
    assert 'different releases (SGLang 0.5.9 -> 0.5.23)' in result['message']
    assert 'the strings can differ where the ids agree' in result['message']
    assert summary(result)['release_change'] == 'SGLang 0.5.9 -> 0.5.23'
    # Answers that read the same across the upgrade pass, and nothing is said of the releases.
    same = compare(PROMPTS[:1], [base], [parse_answer(release_fixture('0.5.23')['response'])],
                   baseline_versions=V059, candidate_versions=V0523)
    assert same['ok'] and same['message'] == '' and same['release_change'] == 'SGLang 0.5.9 -> 0.5.23'


def test_a_difference_on_one_release_says_nothing_of_releases():
    base = parse_answer(release_fixture('0.5.9')['response'])
    result = compare(PROMPTS[:1], [base], [_read_differently(base)], baseline_versions=V059, candidate_versions=V059)
    assert not result['ok'] and result['release_change'] is None and 'releases' not in result['message']


def test_the_line_a_run_shows_gives_both_figures_and_the_bound():
    lock = compare(PROMPTS, _answers(RIGHT), _answers(RIGHT), min_agreement=0.9, max_logprob_divergence=1.0)
    assert line(lock, '0.9') == ('Correctness lock: token agreement 100.0% (at least 90.0%), log-probability'
                                 ' divergence ' + str(lock['max_logprob_divergence']))


def test_the_line_of_a_failed_lock_says_why_and_a_missing_divergence_says_so():
    lock = compare(PROMPTS, _answers(RIGHT), _answers(WRONG), min_agreement=0.95, max_logprob_divergence=1.0)
    said = line(dict(lock, max_logprob_divergence=None), 0.95)
    assert said.startswith('Correctness lock: token agreement %s%% (at least 95.0%%), log-probability divergence n/a'
                           ' (the server returned none) - ' % round(lock['agreement'] * 100, 1)), said
    assert said.endswith(lock['message'])
    assert not lock['ok']


NOTHING_GIVEN = {'prompts': None, 'max_tokens': None, 'seed': None, 'top_logprobs': None}


def test_without_a_reference_the_given_request_is_asked_with_the_defaults_for_the_rest():
    assert asked(dict(NOTHING_GIVEN, prompts=PROMPTS, max_tokens=8)) == {
        'prompts': PROMPTS, 'max_tokens': 8, 'seed': 1234, 'top_logprobs': 1}


def test_a_reference_fixes_what_is_asked():
    recorded = {'prompts': PROMPTS, 'max_tokens': 16, 'seed': 7, 'top_logprobs': 0}
    assert asked(NOTHING_GIVEN, {'answers': [], 'request': recorded}) == recorded
    # Given again as the reference was asked, the same request.
    assert asked(dict(recorded), {'request': recorded}) == recorded


@pytest.mark.parametrize('name, value', [('prompts', PROMPTS[:1]), ('max_tokens', 32), ('seed', 1), ('top_logprobs', 1)])
def test_a_request_other_than_the_references_is_refused_by_name(name, value):
    recorded = {'prompts': PROMPTS, 'max_tokens': 16, 'seed': 7, 'top_logprobs': 0}
    with pytest.raises(CorrectnessError, match=r'^%s is .* but the reference was asked with .*leave %s out' % (name, name)):
        asked(dict(NOTHING_GIVEN, **{name: value}), {'request': recorded})


def test_a_reference_that_records_no_request_leaves_the_given_one():
    assert asked(dict(NOTHING_GIVEN, prompts=PROMPTS), {'answers': []})['prompts'] == PROMPTS


@pytest.mark.parametrize('given, message', [
    (NOTHING_GIVEN, 'prompts is empty'),
    (dict(NOTHING_GIVEN, prompts=[]), 'prompts is empty'),
    (dict(NOTHING_GIVEN, prompts=PROMPTS, max_tokens=0), 'max_tokens must be at least 1'),
    (dict(NOTHING_GIVEN, prompts=PROMPTS, top_logprobs=-1), 'top_logprobs 0 or more'),
])
def test_a_request_that_asks_nothing_is_refused(given, message):
    with pytest.raises(CorrectnessError, match=message):
        asked(given)
