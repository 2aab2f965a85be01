#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_router_args
short_description: Validate SGLang router arguments against the installed router and render its command line
version_added: 0.2.0
description:
  - Reads C(router_args.py) of the router O(package) installed in O(venv_path) (C(sglang_router/router_args.py) of
    C(sglang-router), C(smg/router_args.py) of C(smg)) with C(ast) (nothing is imported) and checks every flag, value
    type and choice of O(args) against it, the way C(python -m sglang_router.launch_router) or
    C(python -m smg.launch_router) parses them.
  - "Refuses secrets on the command line (C(--api-key), C(--control-plane-api-keys), C(--tenant-api-key), database
    passwords and URLs) and every other way of giving the router workers (C(--worker-urls), service and file
    discovery, prefill/decode/encode, a mesh of routers, the RL control plane): the collection registers workers
    through the router's C(/workers) API, each with the workers' own API key."

  - Changes nothing; the result is the same in check mode.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  venv_path:
    description:
      - Virtual environment that holds the router; its C(lib/python3*/site-packages/<package>/router_args.py) is read.
    type: path
  package:
    description: The router package installed in O(venv_path).
    type: str
    choices: [sglang-router, smg]
    default: sglang-router
  router_args_path:
    description: Read this C(router_args.py) instead of the one in O(venv_path).
    type: path
  args:
    description:
      - Router arguments, C(flag -> value). V(true) writes a bare flag, V(false) or V(null) leaves it out, a list gives
        several values. Flag names with or without the leading dashes.
    type: dict
    default: {}
  allow_missing:
    description: When the router is not installed yet (check mode before the first install), return unchecked instead of failing.
    type: bool
    default: false
attributes:
  check_mode:
    description: Reads only; the same result in check mode.
    support: full
'''

EXAMPLES = r'''
- name: Validate the router's arguments
  inferops.serving.sglang_router_args:
    venv_path: /opt/sglang-router/venv
    args:
      policy: cache_aware
      host: 0.0.0.0
      port: 30000
      prometheus-port: 29000
  register: router_command

- name: Validate them against smg, sglang-router's successor, in its own venv
  inferops.serving.sglang_router_args:
    venv_path: /opt/smg/venv
    package: smg
    args:
      policy: cache_aware
      log-json: true
  register: router_command
'''

RETURN = r'''
launch_module:
  description: The module that starts the router of O(package) (C(python -m <launch_module> <argv>)).
  returned: always
  type: str
  sample: smg.launch_router
process_title:
  description: The router's process title (C(/proc/PID/comm)), which it sets itself.
  returned: always
  type: str
  sample: smg::router
documentation:
  description: Where O(package) is documented.
  returned: always
  type: str
argv:
  description: The validated command line after C(python -m <launch_module>).
  returned: success
  type: list
  elements: str
  sample: [--policy, cache_aware, --port, "30000"]
exec_args:
  description:
    - O(args) rendered as words of a systemd C(ExecStart=) line.
    - With O(allow_missing) and no router yet, rendered unchecked (secrets are still refused).
  returned: success
  type: str
args:
  description: The arguments as written (flag without dashes -> value).
  returned: success
  type: dict
host:
  description: Address the router listens on (given, or the router's default).
  returned: success
  type: str
port:
  description: Port of the router's API (given, or the router's default).
  returned: success
  type: int
prometheus_host:
  description: Address of the router's Prometheus listener.
  returned: success
  type: str
prometheus_port:
  description: Port of the router's Prometheus listener (the router's default is 29000).
  returned: success
  type: int
policy:
  description: Load-balancing policy in effect.
  returned: success
  type: str
notes:
  description: Abbreviations that were expanded.
  returned: success
  type: list
  elements: str
router_args_path:
  description: The C(router_args.py) that was read.
  returned: when the router is installed
  type: str
checked:
  description: False when O(allow_missing) let an absent router through unchecked.
  returned: always
  type: bool
'''

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_args import (
    SglangServerArgsError,
    argparse_defaults,
    build_router_command,
    parse_router_args_source,
    unchecked_router_command,
)
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_packages import (
    DEFAULT_PACKAGE,
    ROUTER_PACKAGES,
    package_facts,
)


def _router_args(package):
    return os.path.join(package_facts(package)['python_package'], 'router_args.py')


def _find(venv_path, package):
    candidates = sorted(glob.glob(os.path.join(venv_path, 'lib', 'python3*', 'site-packages', _router_args(package))))
    return candidates[-1] if candidates else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv_path=dict(type='path'),
            router_args_path=dict(type='path'),
            package=dict(type='str', choices=sorted(ROUTER_PACKAGES), default=DEFAULT_PACKAGE),
            args=dict(type='dict', default={}),
            allow_missing=dict(type='bool', default=False),
        ),
        required_one_of=[('venv_path', 'router_args_path')],
        supports_check_mode=True,
    )
    params = module.params
    facts = package_facts(params['package'])
    launch = dict(launch_module=facts['launch_module'], process_title=facts['process_title'],
                  documentation=facts['documentation'])
    path = params['router_args_path'] or _find(params['venv_path'], params['package'])
    if path is None or not os.path.isfile(path):
        where = params['router_args_path'] or os.path.join(params['venv_path'], 'lib/python3*/site-packages',
                                                           _router_args(params['package']))
        if params['allow_missing']:
            try:
                unchecked = unchecked_router_command(params['args'])
            except (SglangServerArgsError, ValueError) as exc:
                module.fail_json(msg='sglang_router_args: %s' % exc)
            if unchecked['errors']:
                module.fail_json(msg='The router arguments cannot be used: %s' % '; '.join(unchecked['errors']),
                                 errors=unchecked['errors'])
            module.exit_json(changed=False, checked=False, argv=unchecked['argv'], exec_args=unchecked['exec_args'],
                             args=params['args'], notes=[
                                 'The router is not installed yet (%s): its arguments are checked once it is.'
                                 % where], **launch)
        module.fail_json(msg='%s does not exist: install %s into the venv first.' % (where, params['package']))
    try:
        with open(path) as handle:
            source = handle.read()
        spec = parse_router_args_source(source)
        result = build_router_command(spec, params['args'], argparse_defaults(source))
    except (OSError, SglangServerArgsError) as exc:
        module.fail_json(msg='cannot check the router arguments against %s: %s' % (path, exc))
    except ValueError as exc:
        module.fail_json(msg='sglang_router_args: %s' % exc)
    if result['errors']:
        module.fail_json(msg='The router arguments do not fit the installed router (%s): %s'
                         % (path, '; '.join(result['errors'])), errors=result['errors'])
    result.pop('errors')
    result.update(launch)
    module.exit_json(changed=False, checked=True, router_args_path=path, **result)


if __name__ == '__main__':
    main()
