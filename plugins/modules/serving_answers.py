#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: serving_answers
short_description: Ask a running SGLang server a fixed prompt set with greedy decoding
version_added: 0.1.0
description:
  - Sends each prompt as an OpenAI-compatible chat completion with temperature 0, a fixed seed and
    O(max_tokens), asking for per-token log-probabilities (SGLang's C(logprobs)/C(top_logprobs)) and the
    tokens' ids (C(return_token_ids), which SGLang 0.5.23 answers and 0.5.9 ignores), and returns the answers
    token by token.
  - Given O(reference), the result of an earlier call (the correctness lock's baseline), it also compares
    the answers with those - token agreement and log-probability divergence against O(min_agreement) and
    O(max_logprob_divergence), and whether the two answers came from different SGLang or transformers
    releases (O(versions)). The comparison is RV(lock); a lock that does not hold does not fail the module.
  - The API key travels in the C(Authorization) header only; it is never part of the arguments of a
    process or of the result.
  - The module only reads and runs in check mode as well.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  base_url:
    description: Where the server listens, normally the node's own loopback.
    type: str
    default: http://127.0.0.1:8000
  model:
    description: Served model name.
    type: str
    required: true
  api_key:
    description: API key of the server, sent as a bearer token.
    type: str
  prompts:
    description:
      - The prompts, each sent as one user message. Required without O(reference); with it, left out to ask
        the prompts the reference was asked (RV(request)), and refused when it differs from them.
      - O(max_tokens), O(seed) and O(top_logprobs) are taken from the reference in the same way.
    type: list
    elements: str
  max_tokens:
    description:
      - Tokens per answer. A few dozen show a change in the arithmetic without a long wait.
      - Without O(reference) (or one that records no request), C(32).
    type: int
  seed:
    description:
      - Sampling seed sent with each request (greedy decoding does not need it; it pins what might sample).
      - Without O(reference) (or one that records no request), C(1234).
    type: int
  top_logprobs:
    description:
      - Alternatives per position whose log-probabilities the server returns; 0 asks for no log-probabilities
        (then tokens are the answer's whitespace-separated words).
      - Without O(reference) (or one that records no request), C(1).
    type: int
  request_timeout:
    description: Seconds one answer may take.
    type: float
    default: 120
  versions:
    description:
      - The Python distributions and versions of the server that answers (its deploy record's C(versions)),
        returned as they are so that a later call with this result as O(reference) names a release change.
    type: dict
    default: {}
  reference:
    description:
      - The registered result of an earlier call (its C(answers), C(request) and C(versions)). When given, the
        prompts it was asked are asked again with its decoding settings and the answers are compared with its
        answers (RV(lock)).
    type: dict
  min_agreement:
    description: Token agreement with O(reference) the lock needs, a fraction in [0, 1].
    type: float
    default: 0.9
  max_logprob_divergence:
    description: Largest log-probability difference (nats) of an agreed token the lock allows.
    type: float
    default: 1.0
seealso:
  - module: inferops.serving.serving_benchmark
'''

EXAMPLES = r'''
- name: Record the baseline's answers
  inferops.serving.serving_answers:
    model: glm-5
    api_key: "{{ sglang_server_api_key }}"
    prompts: ["What is 17 times 23?", "Name the capital of Australia."]
    versions: "{{ sglang_installation.versions }}"
  register: __reference

# ... the change ...

- name: Ask the baseline's prompts again and compare the answers with the baseline's
  inferops.serving.serving_answers:
    model: glm-5
    api_key: "{{ sglang_server_api_key }}"
    versions: "{{ sglang_installation.versions }}"
    reference: "{{ __reference }}"
  register: __check
'''

RETURN = r'''
answers:
  description: One entry per prompt, in order.
  returned: always
  type: list
  elements: dict
  contains:
    text:
      description: The answer (reasoning content first, when the server separates it).
      type: str
      sample: "17 times 23 is 391."
    tokens:
      description: The answer's tokens as the server returned them, or its words without log-probabilities.
      type: list
      elements: str
    token_ids:
      description:
        - The ids of the answer's tokens, which SGLang returns from 0.5.23 on (C(return_token_ids), always asked
          for; 0.5.9 ignores it); null when the server returned none.
      type: list
      elements: int
    logprobs:
      description: Log-probability of each token; null when the server returned none.
      type: list
      elements: float
    finish_reason:
      description: Why generation stopped (C(length) at O(max_tokens)).
      type: str
      sample: length
request:
  description:
    - What was asked - C(prompts), C(max_tokens), C(seed) and C(top_logprobs) - so that a later call with this
      result as O(reference) asks the same.
  returned: always
  type: dict
  sample: {prompts: ["What is 17 times 23?"], max_tokens: 32, seed: 1234, top_logprobs: 1}
logprobs:
  description: Whether the server returned log-probabilities for every answer.
  returned: always
  type: bool
  sample: true
versions:
  description: O(versions) as given.
  returned: always
  type: dict
lock:
  description:
    - The comparison with O(reference) - C(ok), C(agreement), C(max_logprob_divergence) (null without
      log-probabilities), C(release_change), C(prompts) (per prompt, with what was C(compared)) and, when it does
      not hold, a C(message) that says where the answers parted.
  returned: when O(reference) is given
  type: dict
'''

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.urls import open_url
from ansible_collections.inferops.serving.plugins.module_utils._correctness import (
    CorrectnessError,
    asked,
    compare,
    parse_answer,
    request_body,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base_url=dict(type='str', default='http://127.0.0.1:8000'),
            model=dict(type='str', required=True),
            api_key=dict(type='str', no_log=True),
            prompts=dict(type='list', elements='str'),
            max_tokens=dict(type='int', no_log=False),
            seed=dict(type='int'),
            top_logprobs=dict(type='int'),
            request_timeout=dict(type='float', default=120),
            versions=dict(type='dict', default={}),
            reference=dict(type='dict'),
            min_agreement=dict(type='float', default=0.9),
            max_logprob_divergence=dict(type='float', default=1.0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    reference = params['reference']
    try:
        request = asked(params, reference)
    except CorrectnessError as exc:
        module.fail_json(msg=to_native(exc))
    url = params['base_url'].rstrip('/') + '/v1/chat/completions'
    headers = {'Content-Type': 'application/json'}
    if params['api_key']:
        headers['Authorization'] = 'Bearer %s' % params['api_key']
    answers = []
    for index, prompt in enumerate(request['prompts']):
        body = request_body(params['model'], prompt, request['max_tokens'], request['seed'], request['top_logprobs'])
        try:
            response = open_url(url, data=json.dumps(body), headers=headers, method='POST',
                                timeout=params['request_timeout'])
            answers.append(parse_answer(json.loads(response.read())))
        except CorrectnessError as exc:
            module.fail_json(msg='prompt %d: %s' % (index + 1, exc))
        except Exception as exc:  # pylint: disable=broad-except  # urllib raises several types; all mean "no answer"
            module.fail_json(msg='prompt %d: no answer from %s: %s' % (index + 1, url, to_native(exc)))
    result = dict(changed=False, answers=answers, request=request, versions=params['versions'],
                  logprobs=all(answer['logprobs'] is not None for answer in answers))
    if reference is not None:
        try:
            result['lock'] = compare(request['prompts'], reference.get('answers') or [], answers, params['min_agreement'],
                                     params['max_logprob_divergence'], reference.get('versions') or {},
                                     params['versions'])
        except CorrectnessError as exc:
            module.fail_json(msg='the correctness lock cannot compare: %s' % exc, **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
