# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validator against SGLang's own parser, on launch commands, for 0.5.9 and 0.5.23.

fixtures/sglang/real_parser/verdicts-*.json hold what each release's ``ServerArgs.add_cli_args``
parser said of the commands in commands.json (record.py there made them with the real wheels, and
makes them again in a test below).
A command goes through the validator as a user writes it in ``sglang_server_args``, flag by flag;
it must accept exactly what SGLang accepts and give every option the value SGLang parses.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import subprocess

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.command import argv_from_topology, build_server_command
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.option_checks import _convert
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.installed_options import (
    SourceTree,
    read_server_options,
)

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang')
RELEASES = ('0.5.9', '0.5.23')


def _load(version):
    with open(os.path.join(FIXTURES, 'real_parser', 'verdicts-%s.json' % version)) as handle:
        recorded = json.load(handle)
    assert recorded['sglang'] == version
    return recorded


@pytest.fixture(scope='module', params=RELEASES)
def release(request):
    spec = read_server_options(SourceTree(os.path.join(FIXTURES, request.param), suffix='.txt'), request.param)['spec']
    return spec, _load(request.param)


def _parsed(option, value):
    """What the validator takes a structured value to mean, in the parser's terms."""
    if value is True and not option['takes_value']:
        return option['action'] != 'store_false'
    if isinstance(value, list) or option['nargs'] in ('+', '*'):
        return [_convert(option['type'], str(item)) for item in (value if isinstance(value, list) else [value])]
    return _convert(option['type'], str(value))


@pytest.mark.parametrize('version', RELEASES)
def test_the_recordings_are_what_the_release_parser_says_now(sglang_release, version):
    """record.py, run again on the release's wheel (its GPU-only imports the stand-ins of
    cpu_stubs/), writes the recorded file unchanged: the validator is held to the real parser."""
    python, path = sglang_release(version)
    env = dict(os.environ, PYTHONPATH=path, HF_HUB_OFFLINE='1')
    proc = subprocess.run([python, os.path.join(FIXTURES, 'real_parser', 'record.py'), version], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(FIXTURES, 'real_parser', 'verdicts-%s.json' % version)) as handle:
        assert proc.stdout == handle.read()


def test_the_recordings_cover_both_verdicts_on_both_releases():
    for version in RELEASES:
        verdicts = _load(version)['verdicts']
        accepted = [v for v in verdicts if v['accepted']]
        assert len(accepted) >= 20 and len(verdicts) - len(accepted) >= 8, version


with open(os.path.join(FIXTURES, 'real_parser', 'commands.json')) as _handle:
    COMMANDS = [command['name'] for command in json.load(_handle)]


@pytest.mark.parametrize('name', COMMANDS)
def test_the_validator_agrees_with_the_release_parser(release, name):
    spec, recorded = release
    verdict = [v for v in recorded['verdicts'] if v['name'] == name][0]
    result = build_server_command(spec, argv_from_topology(verdict['argv']))
    assert (not result['errors']) == verdict['accepted'], (verdict['name'], verdict.get('message'),
                                                           result['errors'])
    if not verdict['accepted']:
        return
    ours = {}
    for canonical, value in result['canonical_args'].items():
        option = spec['options'][canonical]
        ours[option['dest']] = _parsed(option, value)
    expected = dict((dest, recorded['defaults'].get(dest)) for dest in ours)
    expected.update(verdict['changed'])
    assert ours == expected, verdict['name']
