# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._systemd_quote import (
    SystemdQuoteError,
    systemd_command_line,
    systemd_quote,
)


@pytest.mark.parametrize('token, word', [
    ('--port', '--port'),
    ('lukealonso/GLM-5-NVFP4', 'lukealonso/GLM-5-NVFP4'),
    ('two words', '"two words"'),
    ('100%', '"100%%"'),
    ('$HOME', '"$$HOME"'),
    ('say "hi"\\', '"say \\"hi\\"\\\\"'),
    ('', '""'),
    ('{"a":1}', '"{\\"a\\":1}"'),
])
def test_systemd_quote(token, word):
    assert systemd_quote(token) == word


def test_systemd_quote_refuses_line_breaks():
    with pytest.raises(SystemdQuoteError, match='line break'):
        systemd_quote('a\nb')


def test_command_line_joins_quoted_words():
    assert systemd_command_line(['--served-model-name', 'a b', '--port', '8000']) == (
        '--served-model-name "a b" --port 8000')
