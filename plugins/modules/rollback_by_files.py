#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

DOCUMENTATION = r'''
---
module: rollback_by_files
short_description: Roll an experiment back by the files it changed, restart the server on them and wait until it answers
version_added: 0.4.0
description:
  - Used by the serving role's rollback when all an experiment changed is files that the deploy record lists
    (M(inferops.serving.deploy_state) with O(inferops.serving.deploy_state#module:state=snapshot) kept them
    before the trial).
  - Puts the files back (O(inferops.serving.deploy_state#module:state=restore)), restarts O(service) when any
    changed, waits up to O(ready_timeout) seconds for O(ready_url) to answer 200, and records O(deploy) in the
    node's history again, so that the history's latest deploy is the configuration that runs.
  - Never fails on a step that does not succeed; it returns RV(restored=false) with RV(reasons) instead, and the
    caller rolls back by converging the stack.
author:
  - inferops.serving maintainers (!UNKNOWN)
options:
  path:
    description: The node's deploy record.
    type: path
    required: true
  service:
    description: The server's systemd unit, restarted when files were put back.
    type: str
    required: true
  ready_url:
    description: The URL that answers 200 once the server serves again (the release's ready path).
    type: str
    required: true
  ready_timeout:
    description: Seconds to wait for O(ready_url).
    type: int
    required: true
  history:
    description: The node's history file.
    type: path
    required: true
  node:
    description: The node's name in the history.
    type: str
    required: true
  deploy:
    description: The history's deploy record of the configuration before the experiment, recorded again.
    type: dict
    required: true
attributes:
  check_mode:
    description: A rollback changes the node; in check mode the role rolls nothing back.
    support: none
  action:
    description: Runs on the controller, and its modules on the node.
    support: full
'''

EXAMPLES = r'''
- name: Put back the files the experiment changed, restart the server on them and wait until it answers
  inferops.serving.rollback_by_files:
    path: /var/lib/inferops-serving/deploy.json
    service: sglang-server.service
    ready_url: http://127.0.0.1:30000/health
    ready_timeout: 600
    history: /var/lib/sglang/history.jsonl
    node: gpu-node
    deploy: "{{ deploy_record_before_the_trial }}"
  register: rollback
'''

RETURN = r'''
restored:
  description: Whether the node serves the configuration before the experiment again, by its files alone.
  returned: always
  type: bool
files:
  description: The files put back.
  returned: always
  type: list
  elements: str
reasons:
  description: Why the files alone do not bring the node back (empty when RV(restored)).
  returned: always
  type: list
  elements: str
'''
