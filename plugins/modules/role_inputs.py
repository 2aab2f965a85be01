#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: role_inputs
short_description: Check the calling role's inputs as its argument specs declare them, before anything changes
version_added: 0.3.0
description:
  - Used as a task of one of this collection's roles. Reads the role's C(meta/argument_specs.yml) and resolves
    every option of entry point O(entry_point) as the role sees it (extra vars, inventory, the role's defaults).
  - Each value is converted to its declared type first, as Ansible converts it; C(-e name=value) gives text, so
    C(-e sglang_server_start_timeout=60) is the whole number 60 and C(-e sglang_server_allow_root=false) the
    boolean false. Text that is not of the type (V(soon) for a whole number, V(maybe) for a boolean, an empty
    value), a value of another type, and a value outside the option's choices are refused.
  - >-
    A list or mapping given as text is refused with the form that works on the command line,
    C(-e '{"name": ["a", "b"]}'); the role would otherwise read the text itself, since a command line's
    variables outrank anything a role sets.
  - Then, when every value has its type, the role's own rules (ports, paths, service users, secrets, durations,
    fractions, version pins, the Proxmox VM's id and GPUs).
  - Fails with one message per problem, each naming the option, the value given (a secret by its length only)
    and the form expected, followed by C(Nothing was changed on this host.)
  - Runs on the controller only, so a misplaced secret is refused before any module could log it on the node.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  entry_point:
    description: The entry point of the role's argument specs whose options are checked.
    type: str
    default: main
attributes:
  check_mode:
    description: Reads variables only; runs the same in check mode.
    support: full
  action:
    description: Runs on the controller.
    support: full
'''

EXAMPLES = r'''
# roles/<role>/tasks/main.yml, the role's first task
- name: Check the role's inputs before anything changes
  inferops.serving.role_inputs:

# roles/proxmox_gpu_vm/tasks/restart.yml
- name: Check the role's inputs before anything changes
  inferops.serving.role_inputs:
    entry_point: restart
'''

RETURN = r'''
problems:
  description: One message per refused input.
  returned: failed
  type: list
  elements: str
  sample: ["sglang_server_allow_root must be true or false, got the text 'maybe' (true, false, yes, no, on, off, 1 or 0)."]
'''
