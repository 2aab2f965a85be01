#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_server_args
short_description: Check SGLang server arguments against the installed SGLang and render the command line
version_added: 0.1.0
description:
  - Reads the source of the SGLang installed in a virtual environment with Python's C(ast) (SGLang is
    not imported, so torch is not loaded) and collects every server option, its aliases and its allowed
    values.
  - Both ways SGLang declares its options are read. Up to 0.5.9 every option is a C(parser.add_argument)
    call in C(sglang/srt/server_args.py). From 0.5.23 on options are fields declared under
    C(sglang/srt/arg_groups/fields/) (turned into flags by C(arg_utils.py)), plus the few that
    C(server_args.py) still adds by hand. The second way is used whenever that folder exists.
  - When an installed SGLang declares its options in neither way the module can read, the task fails
    with C(cannot read the options of SGLang <version>) and names what it looked for, rather than
    refusing every flag.
  - Validates structured server arguments (flag -> value) against it and returns the command line.
    Unknown flags, ambiguous abbreviations, values outside the allowed choices, numbers that do not parse
    and a tensor-parallel size that does not divide into the node's GPUs fail the task with every error
    listed, before anything on the host changes.
  - Five layers are merged per option, each later one winning over the earlier ones
    (O(recommended_args) from the topology, then O(enable_metrics) and O(model_revision), then O(args),
    then O(extra_args), then O(node_args)).
  - Never changes the host.
author:
  - inferops.serving maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check mode and return the same result.
    support: full
    details: Only reads files.
  diff_mode:
    description: Returns details on what has changed.
    support: none
options:
  venv_path:
    description:
      - Virtual environment that holds SGLang; its C(lib/python3*/site-packages/sglang) is read.
      - Required unless O(server_args_path) is given.
    type: path
  server_args_path:
    description:
      - Read this C(server_args.py) instead of the one in O(venv_path). The other SGLang files (the
        C(arg_groups) declarations, modules that choices refer to) are looked up relative to its
        package root, the folder three levels above it.
    type: path
  args:
    description:
      - Server arguments, flag name (with or without leading dashes) -> value.
      - V(true) writes a bare flag, V(false) or V(null) leaves the flag out, a list gives several values.
    type: dict
    default: {}
  extra_args:
    description:
      - Arguments laid over O(args) (for example by an experiment).
    type: dict
    default: {}
  node_args:
    description:
      - Arguments that place this node in a server across nodes (C(--nnodes), C(--node-rank),
        C(--dist-init-addr)), laid over O(extra_args).
    type: dict
    default: {}
  enable_metrics:
    description:
      - Add C(--enable-metrics) under O(args) (which may still remove it with V(false)).
    type: bool
    default: false
  model_revision:
    description:
      - Add C(--revision) with this value under O(args); nothing when empty.
    type: str
    default: ''
  recommended_args:
    description:
      - Arguments recommended by the topology facts (a mapping or an argv list); they only fill options
        that O(args) and O(extra_args) leave unset.
    type: raw
  gpu_count:
    description:
      - GPUs on the node. When given, the tensor-parallel size must divide into it.
    type: int
  allow_missing:
    description:
      - When SGLang is not installed yet, return the unvalidated command line with a warning instead of
        failing. Meant for check mode before the first installation.
    type: bool
    default: false
notes:
  - Choices that SGLang computes at run time and that cannot be read from source are reported in
    RV(unchecked); everything else is checked.
'''

EXAMPLES = r'''
- name: Validate the server arguments and render the command line
  inferops.serving.sglang_server_args:
    venv_path: /opt/sglang/venv
    args:
      model-path: lukealonso/GLM-5-NVFP4
      served-model-name: glm-5
      tp-size: 8
      attention-backend: flashinfer
      disable-cuda-graph: true
    recommended_args: "{{ ansible_facts['nccl_topology']['recommended_sglang_args'] | default({}) }}"
    gpu_count: "{{ ansible_facts['nccl_topology']['gpu_count'] | default(omit) }}"
  register: __sglang_server_command
'''

RETURN = r'''
argv:
  description: Command line arguments after the module name, in order.
  returned: success
  type: list
  elements: str
  sample: ["--model-path", "lukealonso/GLM-5-NVFP4", "--tp-size", "8", "--disable-cuda-graph"]
exec_args:
  description: RV(argv) quoted for a systemd C(ExecStart=) line (quotes, C(%) specifiers and C($) escaped).
  returned: success
  type: str
  sample: --model-path lukealonso/GLM-5-NVFP4 --served-model-name "a b"
args:
  description: The merged arguments, flag as written -> value (false/null entries kept).
  returned: success
  type: dict
  sample: {"model-path": "lukealonso/GLM-5-NVFP4", "tp-size": 8}
validated:
  description: Whether the arguments were checked against an installed SGLang.
  returned: always
  type: bool
server_args_path:
  description: The C(server_args.py) of the installed SGLang.
  returned: when found
  type: str
  sample: /opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/server_args.py
options_layout:
  description:
    - How the installed SGLang declares its options, C(argparse) (C(add_argument) calls in
      C(server_args.py), up to 0.5.9) or C(arg_groups) (fields under C(sglang/srt/arg_groups/fields/),
      0.5.23 and later).
  returned: when validated
  type: str
  sample: arg_groups
options_source:
  description: The file or folder the options were read from.
  returned: when validated
  type: str
  sample: /opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/arg_groups/fields
sglang_version:
  description: Version of the installed SGLang distribution, from its dist-info folder.
  returned: when found
  type: str
  sample: 0.5.9
option_count:
  description: Number of options the installed SGLang accepts.
  returned: when validated
  type: int
  sample: 531
host:
  description: Address the server will bind to (SGLang's default when not set).
  returned: when validated, or SGLang is missing and O(allow_missing) is set
  type: str
  sample: 0.0.0.0
port:
  description: Port the server will listen on (SGLang's default when not set).
  returned: when validated, or SGLang is missing and O(allow_missing) is set
  type: int
  sample: 8000
url:
  description: Where the server answers from the node itself (a wildcard address probed on loopback).
  returned: when validated, or SGLang is missing and O(allow_missing) is set
  type: str
  sample: http://127.0.0.1:8000
loopback:
  description: Whether only the node itself can reach the server (it binds to a loopback address).
  returned: when validated, or SGLang is missing and O(allow_missing) is set
  type: bool
  sample: false
model_path:
  description: Model the server will load.
  returned: when validated
  type: str
  sample: lukealonso/GLM-5-NVFP4
served_model_name:
  description: Model name that C(/v1/models) will report.
  returned: when validated
  type: str
  sample: glm-5
tp_size:
  description: Tensor-parallel size.
  returned: when validated
  type: int
  sample: 8
gpus_per_node:
  description:
    - GPUs the server occupies on each node, C(--tp-size) x C(--pp-size) / C(--nnodes); null when they do not
      split evenly.
  returned: when validated
  type: int
  sample: 8
from_topology:
  description: Options that the topology recommendations filled in.
  returned: when validated
  type: list
  elements: str
  sample: ["--disable-custom-all-reduce"]
unchecked:
  description: Options that are set but whose allowed values SGLang computes at run time.
  returned: when validated
  type: list
  elements: str
  sample: ["--lora-target-modules"]
notes:
  description: Remarks such as abbreviations that argparse expands and deprecated flags with their replacement.
  returned: always
  type: list
  elements: str
errors:
  description: Every problem found; the task fails when it is not empty.
  returned: failure
  type: list
  elements: str
'''

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.inferops.serving.plugins.module_utils._secrets import flag_looks_secret
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.address import server_address
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.argparse_reader import SglangSourceError
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.command import (
    argv_from_topology,
    build_server_command,
    render_argv,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.endpoint import server_endpoint
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import (
    ServerArgumentsError,
    effective_arguments,
    role_arguments,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import SglangServerArgsError
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import (
    SourceTree,
    find_site_packages,
    read_server_options,
    sglang_version,
)
from ansible_collections.inferops.serving.plugins.module_utils._systemd_quote import (
    SystemdQuoteError,
    systemd_command_line,
)

try:
    # ansible-core 2.22 and later: the controller masks, wherever it shows or logs them, the values a module
    # registers here. no_log_values alone no longer takes a value out of the module's result there.
    from ansible.module_utils.secrets import register_secret
except ImportError:  # ansible-core 2.21 and earlier take no_log_values out of the result in the module
    register_secret = None

_PACKAGE = 'sglang'
_SERVER_ARGS = os.path.join(_PACKAGE, 'srt', 'server_args.py')
_SERVER_ARGS_MODULE = 'sglang.srt.server_args'


def _hide_secret_looking_values(module, *layers):
    """A key put into the arguments by mistake must not be echoed back (invocation, errors)."""
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        for key, value in layer.items():
            if flag_looks_secret(key) and value not in (None, True, False):
                for secret in (str(item) for item in (value if isinstance(value, list) else [value])):
                    module.no_log_values.add(secret)
                    if register_secret is not None:
                        register_secret(secret)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv_path=dict(type='path'),
            server_args_path=dict(type='path'),
            args=dict(type='dict', default={}),
            extra_args=dict(type='dict', default={}),
            node_args=dict(type='dict', default={}),
            enable_metrics=dict(type='bool', default=False),
            model_revision=dict(type='str', default=''),
            recommended_args=dict(type='raw'),
            gpu_count=dict(type='int'),
            allow_missing=dict(type='bool', default=False),
        ),
        required_one_of=[('venv_path', 'server_args_path')],
        supports_check_mode=True,
    )
    params = module.params
    _hide_secret_looking_values(module, params['args'], params['extra_args'], params['recommended_args'],
                                params['node_args'])
    role_args = role_arguments(params['enable_metrics'], params['model_revision'])
    result = dict(changed=False, validated=False, notes=[])
    if params['server_args_path']:
        path = params['server_args_path']
        site_packages = os.path.dirname(os.path.dirname(os.path.dirname(path)))
        installed = os.path.isfile(path)
        sources = SourceTree(site_packages, overrides={_SERVER_ARGS_MODULE: path})
    else:
        site_packages = find_site_packages(params['venv_path'])
        installed = site_packages is not None
        path = os.path.join(site_packages, _SERVER_ARGS) if installed else None
        sources = SourceTree(site_packages) if installed else None

    if not installed:
        where = params['server_args_path'] or os.path.join(params['venv_path'], 'lib/python3*/site-packages', _PACKAGE)
        message = 'SGLang is not installed: %s does not exist; install it (role inferops.serving.sglang) first' % where
        if not params['allow_missing']:
            module.fail_json(msg=message, **result)
        try:
            merged = effective_arguments(argv_from_topology(params['recommended_args']), role_args, params['args'],
                                         params['extra_args'], params['node_args'])
            result['argv'] = render_argv(merged)
            result['exec_args'] = systemd_command_line(result['argv'])
            result.update(server_address(merged.get('host'), merged.get('port')))
        except (SglangServerArgsError, SystemdQuoteError, ServerArgumentsError) as exc:
            module.fail_json(msg=str(exc), **result)
        result['args'] = merged
        module.warn(message + '; the arguments were not validated')
        module.exit_json(**result)

    result['server_args_path'] = path
    result['sglang_version'] = sglang_version(site_packages)
    try:
        options = read_server_options(sources, result['sglang_version'])
    except SglangSourceError as exc:
        module.fail_json(msg=str(exc), **result)
    spec = options['spec']
    try:
        command = build_server_command(
            spec, params['args'], params['extra_args'], params['recommended_args'], params['gpu_count'],
            role_args=role_args, node_args=params['node_args'])
        endpoint = server_endpoint(spec, command['canonical_args'], options['defaults'])
        exec_args = systemd_command_line(command['argv'])
    except (SglangServerArgsError, SystemdQuoteError) as exc:
        module.fail_json(msg='cannot check the SGLang server arguments: %s' % exc, **result)

    result['notes'] = command['notes']
    if command['errors']:
        module.fail_json(
            msg='The SGLang %s installed here does not accept these server arguments:\n- %s'
                % (result['sglang_version'] or '', '\n- '.join(command['errors'])),
            errors=command['errors'], **result)
    result.update(
        validated=True,
        argv=command['argv'],
        exec_args=exec_args,
        args=command['args'],
        option_count=len(spec['options']),
        options_layout=options['layout'],
        options_source=options['source'],
        from_topology=command['from_topology'],
        unchecked=command['unchecked'],
        **endpoint
    )
    module.exit_json(**result)


if __name__ == '__main__':
    main()
