# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The correctness lock: the same prompts, greedy, before and after a change; compare the answers.

A change to a collective kernel can return wrong sums and still serve, faster. Greedy decoding
(temperature 0, fixed seed) makes the answers a function of the weights and the arithmetic, so
the baseline's answers are the reference: an experiment whose answers drift beyond the
thresholds is rolled back like a slow one.

Answers are compared token by token. Where both answers carry the ids of their tokens
(``choices[0].response_token_ids``, which SGLang returns from 0.5.23 on when asked with
``return_token_ids``), the ids are compared. Otherwise, where the server returns per-token
log-probabilities (SGLang's OpenAI-compatible chat completions with ``logprobs: true``:
``choices[0].logprobs.content[i].token`` and ``.logprob``, the same fields in 0.5.9 and
0.5.23), the tokens are the server's own strings; otherwise the text is split on whitespace.
The log-probabilities of the tokens both runs agree on are compared too.

A token's string is its id decoded by the server's tokenizer library, which a change of SGLang
release changes too (transformers 4.57 under 0.5.9, 5.19 under 0.5.23): the same ids may then
read differently. 0.5.9 returns no ids, so an answer of each side of such an upgrade can only be
compared as strings; a comparison that fails across releases says so in its message.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

# Characters of text shown either side of the first differing token.
CONTEXT_CHARS = 60


class CorrectnessError(Exception):
    """A response or a setting the lock cannot work with."""


def request_body(model, prompt, max_tokens, seed, top_logprobs=1):
    """A greedy chat completion: the same prompt gives the same answer on the same arithmetic."""
    body = {
        'model': model,
        'messages': [{'role': 'user', 'content': prompt}],
        'max_tokens': max_tokens,
        'temperature': 0,
        'seed': seed,
        'stream': False,
        # 0.5.23 then returns the answer's token ids (non-streaming only); 0.5.9's request
        # model drops fields it does not know, so the same body serves both.
        'return_token_ids': True,
    }
    if top_logprobs:
        body['logprobs'] = True
        body['top_logprobs'] = top_logprobs
    return body


# What a request asks besides the model: the reference's answers are comparable only with answers to these.
REQUEST_DEFAULTS = {'prompts': None, 'max_tokens': 32, 'seed': 1234, 'top_logprobs': 1}


def asked(given, reference=None):
    """The prompts and decoding settings to ask: those ``reference`` (an earlier result) was asked.

    ``given`` maps the names of ``REQUEST_DEFAULTS`` to a value or None. A reference that records
    its request fixes it, so that the answers compared are answers to the same questions; a given
    value that differs from the recorded one is refused rather than compared. Without a recorded
    request, the given values and then the defaults apply.
    """
    recorded = (reference or {}).get('request') or {}
    request = {}
    for name, default in REQUEST_DEFAULTS.items():
        value = given.get(name)
        if name in recorded:
            if value is not None and value != recorded[name]:
                raise CorrectnessError('%s is %r, but the reference was asked with %r: a comparison asks what the '
                                       'reference answered (leave %s out to take the reference\'s)'
                                       % (name, value, recorded[name], name))
            value = recorded[name]
        request[name] = default if value is None else value
    if not request['prompts']:
        raise CorrectnessError('prompts is empty: the correctness lock needs at least one prompt')
    if request['max_tokens'] < 1 or request['top_logprobs'] < 0:
        raise CorrectnessError('max_tokens must be at least 1 and top_logprobs 0 or more')
    return request


def parse_answer(response):
    """Text, tokens and per-token log-probabilities (None when absent) of one chat completion."""
    if not isinstance(response, dict) or not response.get('choices'):
        raise CorrectnessError('the server answered without choices: %r' % (str(response)[:300],))
    choice = response['choices'][0]
    message = choice.get('message') or {}
    # A reasoning parser (glm45) moves the first part of the answer to reasoning_content.
    text = (message.get('reasoning_content') or '') + (message.get('content') or '')
    content = (choice.get('logprobs') or {}).get('content')
    if content:
        tokens = [entry.get('token', '') for entry in content]
        logprobs = [entry.get('logprob') for entry in content]
        if any(lp is None for lp in logprobs):
            logprobs = None
    else:
        tokens = text.split()
        logprobs = None
    token_ids = choice.get('response_token_ids')
    if not (isinstance(token_ids, list) and token_ids and all(isinstance(i, int) for i in token_ids)):
        token_ids = None
    return {'text': text, 'tokens': tokens, 'token_ids': token_ids, 'logprobs': logprobs,
            'finish_reason': choice.get('finish_reason')}


def _context(tokens, position):
    """The text around token ``position``: what came before, and the differing part onwards."""
    before = ''.join(tokens[:position]) if _joined(tokens) else ' '.join(tokens[:position])
    after = ''.join(tokens[position:]) if _joined(tokens) else ' '.join(tokens[position:])
    return {'before': before[-CONTEXT_CHARS:], 'from': after[:CONTEXT_CHARS]}


def _joined(tokens):
    # Server tokens carry their own spaces ("Ġ" decoded to " "); whitespace-split words do not.
    return any(t[:1].isspace() or t[-1:].isspace() for t in tokens if t)


def compare(prompts, baseline, candidate, min_agreement=0.9, max_logprob_divergence=1.0,
            baseline_versions=None, candidate_versions=None):
    """Compare two lists of ``parse_answer`` results for the same ``prompts``.

    Token agreement is the share of token positions, over all prompts, that lie in the common
    prefix of the two answers (greedy answers that part at one token rarely meet again): of
    their token ids where both carry them, else of their token strings. Log-probability
    divergence is the largest absolute difference of the log-probability of a token both
    answers agree on. ``baseline_versions`` and ``candidate_versions`` are the package versions
    each side ran (``sglang_installation.versions``); when they name different SGLang or
    transformers releases, ``release_change`` says which. Returns ``ok``, ``agreement``,
    ``max_logprob_divergence`` (None without log-probabilities), ``release_change``, per-prompt
    ``prompts`` (each with what was ``compared``: ``token_ids`` or ``tokens``) and, when not ok, a
    ``message`` that says where the answers parted: prompt, first differing token and the text
    around it, and whether the releases differ while token strings were compared.
    """
    if not 0 <= float(min_agreement) <= 1:
        raise CorrectnessError('serving_lock_min_agreement is a fraction in [0, 1], got %r' % (min_agreement,))
    if float(max_logprob_divergence) < 0:
        raise CorrectnessError('serving_lock_max_logprob_divergence is 0 or more (nats), got %r'
                               % (max_logprob_divergence,))
    if len(baseline) != len(prompts) or len(candidate) != len(prompts):
        raise CorrectnessError('%d prompts, but %d baseline and %d experiment answers'
                               % (len(prompts), len(baseline), len(candidate)))
    agreed = 0
    total = 0
    worst_lp = None
    rows = []
    for index, (prompt, base, cand) in enumerate(zip(prompts, baseline, candidate)):
        base_tokens, cand_tokens = base['tokens'], cand['tokens']
        compared = 'tokens'
        base_seq, cand_seq = base_tokens, cand_tokens
        if base.get('token_ids') and cand.get('token_ids'):
            compared = 'token_ids'
            base_seq, cand_seq = base['token_ids'], cand['token_ids']
        prefix = 0
        while prefix < min(len(base_seq), len(cand_seq)) and base_seq[prefix] == cand_seq[prefix]:
            prefix += 1
        length = max(len(base_seq), len(cand_seq))
        agreed += prefix
        total += length
        divergence = None
        if base.get('logprobs') is not None and cand.get('logprobs') is not None and prefix:
            divergence = max(abs(a - b) for a, b in zip(base['logprobs'][:prefix], cand['logprobs'][:prefix]))
            worst_lp = divergence if worst_lp is None else max(worst_lp, divergence)
        row = {'index': index, 'prompt': prompt, 'compared': compared, 'tokens': length, 'agreed': prefix,
               'max_logprob_divergence': None if divergence is None else round(divergence, 4),
               'first_difference': None}
        if prefix < length:
            row['first_difference'] = {
                'position': prefix,
                'baseline': _context(base_tokens, prefix),
                'experiment': _context(cand_tokens, prefix),
            }
        rows.append(row)
    agreement = 1.0 if total == 0 else agreed / float(total)
    failures = []
    if agreement < float(min_agreement):
        failures.append('token agreement %.1f%% is below serving_lock_min_agreement %.1f%%'
                        % (agreement * 100.0, float(min_agreement) * 100.0))
    if worst_lp is not None and worst_lp > float(max_logprob_divergence):
        failures.append('log-probabilities of agreed tokens differ by up to %.3f, more than '
                        'serving_lock_max_logprob_divergence %.3f' % (worst_lp, float(max_logprob_divergence)))
    release_change = _release_change(baseline_versions, candidate_versions)
    result = {
        'ok': not failures,
        'agreement': round(agreement, 4),
        'max_logprob_divergence': None if worst_lp is None else round(worst_lp, 4),
        'release_change': release_change,
        'prompts': rows,
        'message': '',
    }
    if failures:
        result['message'] = 'answers changed: %s%s%s' % ('; '.join(failures), _where(rows),
                                                         _across_releases(release_change, rows))
    return result


# The packages whose versions decide how token ids read as strings.
_DECODING_PACKAGES = (('sglang', 'SGLang'), ('transformers', 'transformers'), ('tokenizers', 'tokenizers'))


def _release_change(baseline_versions, candidate_versions):
    """'SGLang 0.5.9 -> 0.5.23, ...' for the decoding packages whose versions both sides name and
    that differ; None when none does (or the versions are unknown)."""
    baseline_versions, candidate_versions = baseline_versions or {}, candidate_versions or {}
    changes = ['%s %s -> %s' % (label, baseline_versions[name], candidate_versions[name])
               for name, label in _DECODING_PACKAGES
               if baseline_versions.get(name) and candidate_versions.get(name)
               and str(baseline_versions[name]) != str(candidate_versions[name])]
    return ', '.join(changes) or None


def _across_releases(release_change, rows):
    as_strings = [row for row in rows if row['first_difference'] is not None and row['compared'] != 'token_ids']
    if not release_change or not as_strings:
        return ''
    return ('. The baseline and the experiment ran different releases (%s), and %d of the differing prompts were '
            'compared as token strings: each release decodes token ids with its own tokenizer library, so the '
            'strings can differ where the ids agree. Token ids are compared only where both answers carry them '
            '(SGLang 0.5.23 and later)' % (release_change, len(as_strings)))


def _where(rows):
    parted = [row for row in rows if row['first_difference'] is not None]
    if not parted:
        return ''
    row = parted[0]
    diff = row['first_difference']
    return ('. First difference: prompt %d (%r) at token %d of %d: baseline ...%s[%s]..., experiment ...%s[%s]...'
            ' (%d of %d prompts differ)'
            % (row['index'] + 1, row['prompt'][:60], diff['position'], row['tokens'],
               diff['baseline']['before'], diff['baseline']['from'],
               diff['experiment']['before'], diff['experiment']['from'], len(parted), len(rows)))


def line(lock, min_agreement):
    """What a run shows of a comparison: both figures, the bound on agreement, and why it failed."""
    divergence = lock.get('max_logprob_divergence')
    return 'Correctness lock: token agreement %s%% (at least %s%%), log-probability divergence %s%s' % (
        round(lock['agreement'] * 100, 1), round(float(min_agreement) * 100, 1),
        'n/a (the server returned none)' if divergence is None else divergence,
        '' if lock.get('ok') else ' - %s' % lock.get('message'))


def summary(lock):
    """What the history keeps of a comparison: the figures and where answers first parted."""
    if not lock:
        return None
    parted = [row for row in lock.get('prompts') or [] if row.get('first_difference')]
    return {'ok': lock.get('ok'), 'agreement': lock.get('agreement'),
            'max_logprob_divergence': lock.get('max_logprob_divergence'),
            'release_change': lock.get('release_change'),
            'prompts_differing': len(parted),
            'first_difference': None if not parted else dict(parted[0]['first_difference'], prompt=parted[0]['prompt']),
            'message': lock.get('message') or ''}
