# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One check per kind of input (a port, a path, a service user, a secret, a duration, a share).

Every check takes the variable's name and value and returns a list of messages: each names the
variable, shows the value (masked when it is secret) and says what to change. Nothing here raises
on user input. Which variable gets which check is each role's rule, in _inputs.py.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import ipaddress
import re

from ansible_collections.inferops.serving.plugins.module_utils._model_weights import (
    ModelWeightsError,
    is_commit,
    margin_bytes,
)
from ansible_collections.inferops.serving.plugins.module_utils._secrets import (
    SECRET_ENV_NAMES,
    flag_looks_secret,
)
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import flag_name
from ansible_collections.inferops.serving.plugins.module_utils._sglang_release_sets import release_problems

ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
# PEP 440, the forms a pin uses (release, pre/post/dev, local).
VERSION = re.compile(r'^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?$')
# systemd unit names: letters, digits and ":-_.\@"; the template adds ".service".
UNIT_NAME = re.compile(r'^[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?$')
USER_NAME = re.compile(r'^[a-z_][a-z0-9_-]*[$]?$')
_CONTROL = re.compile(r'[\x00-\x08\x0a-\x1f\x7f]')


# Prometheus' durations: 30s, 2m, 1h30m, 15d.
_PROMETHEUS_DURATION = re.compile(r'^([0-9]+(ms|s|m|h|d|w|y))+$')
# host:port as Prometheus and Alertmanager take it: a name or IPv4 address, or [IPv6].
_LISTEN_ADDRESS = re.compile(r'^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]*):[0-9]{1,5}$')


def show(value):
    """A value as a message shows it: short, one line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def masked(value):
    """What a message may say about a secret: its length only."""
    try:
        return '<hidden, %d characters>' % len(value)
    except TypeError:
        return '<hidden>'


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(value):
    """An int from an int or a string of digits (inventory values are often strings); None otherwise."""
    if is_int(value):
        return value
    if isinstance(value, str) and re.match(r'^\s*-?\d+\s*$', value):
        return int(value)
    return None


def int_range(name, value, low=None, high=None, what='a whole number', allow_none=False):
    if value is None and allow_none:
        return []
    number = as_int(value)
    bounds = ''
    if low is not None and high is not None:
        bounds = ' from %d to %d' % (low, high)
    elif low is not None:
        bounds = ' of at least %d' % low
    if number is None:
        return ['%s must be %s%s, got %s.' % (name, what, bounds, show(value))]
    if (low is not None and number < low) or (high is not None and number > high):
        return ['%s must be %s%s, got %s.' % (name, what, bounds, show(value))]
    return []


def port(name, value):
    return int_range(name, value, 1, 65535, what='a TCP port')


def non_empty(name, value, what='a non-empty string'):
    if not isinstance(value, str) or not value.strip():
        return ['%s must be %s, got %s.' % (name, what, show(value))]
    if _CONTROL.search(value):
        return ['%s must be one line without control characters, got %s.' % (name, show(value))]
    return []


def absolute_path(name, value):
    problems = non_empty(name, value, 'an absolute path')
    if not problems and not value.startswith('/'):
        problems = ['%s must be an absolute path (starting with /), got %s.' % (name, show(value))]
    return problems


def version(name, value):
    if not isinstance(value, str) or not VERSION.match(value.strip()):
        return ['%s must be an exact version such as 0.5.9 (PEP 440), got %s.' % (name, show(value))]
    return []


def service_user(name, value, allow_root=False, allow_name='allow_root'):
    problems = non_empty(name, value, 'a user name')
    if problems:
        return problems
    if not USER_NAME.match(value) or len(value) > 32:
        return ['%s must be a user name (lower case letters, digits, _ and -), got %s.' % (name, show(value))]
    if value == 'root' and not allow_root:
        return ['%s is root: the service would run with every privilege of the host (and its account would be'
                ' rewritten). Use an unprivileged user such as sglang, or set %s: true if you really mean it.'
                % (name, allow_name)]
    return []


def unit_name(name, value):
    problems = non_empty(name, value, 'a systemd unit name')
    if not problems and (not UNIT_NAME.match(value) or value.endswith('.service')):
        problems = ['%s must be a systemd unit name without ".service" (letters, digits, ":_.-@"), got %s.'
                    % (name, show(value))]
    return problems


def secret(name, value):
    """A secret goes into a systemd environment file and an HTTP header: both must carry it unchanged."""
    if value is None or value == '':
        return []
    if not isinstance(value, str):
        return ['%s must be a string, got a %s (value %s).' % (name, type(value).__name__, masked(str(value)))]
    reasons = []
    if '\n' in value or '\r' in value:
        reasons.append('a line break')
    if _CONTROL.search(value.replace('\n', '').replace('\r', '')):
        reasons.append('a control character')
    if any(c in value for c in '"\'`'):
        reasons.append('a quote')
    if '\\' in value:
        reasons.append('a backslash')
    if value != value.strip():
        reasons.append('leading or trailing white space')
    elif any(c.isspace() for c in value):
        reasons.append('white space')
    if any(ord(c) > 126 for c in value):
        reasons.append('a non-ASCII character')
    if reasons:
        return ['%s contains %s (value %s): an HTTP Authorization header and a systemd environment file cannot'
                ' carry it unchanged. Use printable ASCII without quotes, backslashes or spaces (for example'
                ' `openssl rand -hex 32`).' % (name, ' and '.join(reasons), masked(value))]
    return []


def environment(name, mapping):
    """Names and values that systemd's EnvironmentFile= carries unchanged (the template quotes the rest)."""
    if mapping is None:
        return []
    if not isinstance(mapping, dict):
        return ['%s must be a mapping of NAME: value, got %s.' % (name, show(mapping))]
    problems = []
    for key in sorted(mapping, key=str):
        value = mapping[key]
        if not isinstance(key, str) or not ENV_NAME.match(key):
            problems.append('%s: %s is not a valid environment variable name (letters, digits and _, not starting'
                            ' with a digit).' % (name, show(key)))
            continue
        if key in SECRET_ENV_NAMES:
            problems.append('%s: %s is a secret; set it through sglang_server_hf_token / sglang_server_api_key'
                            ' (vault them), not in %s (value %s).' % (name, key, name, masked(str(value))))
            continue
        if value is None:
            continue
        if isinstance(value, (dict, list)):
            problems.append('%s: %s must be a string or number, got a %s.' % (name, key, type(value).__name__))
            continue
        text = value if isinstance(value, str) else str(value)
        if '\n' in text or '\r' in text:
            problems.append('%s: %s contains a line break, which a systemd environment file cannot carry;'
                            ' put it on one line.' % (name, key))
        elif _CONTROL.search(text):
            problems.append('%s: %s contains a control character, which a systemd environment file cannot'
                            ' carry.' % (name, key))
    return problems


def secrets_in_args(name, args, secret_values=(), secret_variables=('sglang_server_api_key', 'sglang_server_hf_token')):
    """A secret in the server (or router) arguments would reach argv and the node's module log; refuse it
    first. ``secret_variables`` name the vault-able variables that carry the secrets instead."""
    if not isinstance(args, dict):
        return []
    problems = []
    secret_values = [s for s in secret_values if isinstance(s, str) and len(s) >= 4]
    for key in sorted(args, key=str):
        value = args[key]
        if flag_looks_secret(key) and value not in (None, False, True, ''):
            problems.append('%s: %s looks like a secret (value %s); it would end up in the command line. Set'
                            ' %s (vault it) instead and remove %s from %s.'
                            % (name, key, masked(str(value)), secret_variables[0], key, name))
            continue
        items = value if isinstance(value, list) else [value]
        if any(isinstance(item, str) and any(s in item for s in secret_values) for item in items):
            problems.append('%s: the value of %s contains %s (value hidden); secrets must not go into the command'
                            ' line.' % (name, key, ' or '.join(secret_variables)))
    return problems


def serial(name, value):
    """Ansible's serial: a count of at least 1, a percentage from 1% to 100%, or a list of them."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return ['%s must not be an empty list.' % name]
    for item in items:
        if isinstance(item, str) and item.strip().endswith('%'):
            number = as_int(item.strip()[:-1])
            if number is None or not 1 <= number <= 100:
                return ['%s must be a number of nodes of at least 1 or a percentage from 1%% to 100%%, got %s.'
                        % (name, show(value))]
            continue
        number = as_int(item)
        if number is None or number < 1:
            return ['%s must be a number of nodes of at least 1 (or a percentage such as 25%%), got %s; 0 or less'
                    ' would deploy nothing or everything at once.' % (name, show(value))]
    return []


# A DNS name (RFC 1123 labels; underscores as some inventories have them).
_HOST_NAME = re.compile(r'^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$')


def host_address(name, value):
    """A host name, an IPv4 address or an IPv6 address (bare or in brackets), without scheme, port or path."""
    problems = non_empty(name, value, 'a host name or an IP address')
    if problems:
        return problems
    try:
        ipaddress.ip_address(value[1:-1] if value.startswith('[') and value.endswith(']') else value)
        return []
    except ValueError:
        pass
    if _HOST_NAME.match(value) and not re.match(r'^[0-9.]+$', value):
        return []
    return ['%s must be a host name or an IP address, without scheme, port or path (e.g. 10.0.0.11), got %s.'
            % (name, show(value))]


def url(name, value):
    problems = non_empty(name, value, 'a URL')
    if not problems and not re.match(r'^(https?|file)://\S+$', value):
        problems = ['%s must be an http(s):// or file:// URL without spaces, got %s.' % (name, show(value))]
    return problems


def optional_http_url(name, value, empty_means='off'):
    if value in (None, '') or (isinstance(value, str) and re.match(r'^https?://\S+$', value)):
        return []
    return ["%s must be an http(s):// URL or '' (%s), got %s." % (name, empty_means, show(value))]


def one_line(name, value):
    if value is None or value == '':
        return []
    if not isinstance(value, str) or _CONTROL.search(value):
        return ['%s must be one line of text, got %s.' % (name, show(value))]
    return []


def string_list(name, value, item_check=None):
    if not isinstance(value, list):
        return ['%s must be a list, got %s.' % (name, show(value))]
    problems = []
    for index, item in enumerate(value):
        item_name = '%s[%d]' % (name, index)
        problems += (item_check or non_empty)(item_name, item)
    return problems


def model_revision(name, value, arg_layers):
    """A pinned commit, given once: the server's --revision comes from it."""
    if value in (None, ''):
        return []
    if not isinstance(value, str) or not is_commit(value):
        return ['%s must be a commit of the model repository (40 hexadecimal characters, the Hub\'s "sha"), got %s;'
                ' a branch or tag would let the weights change under the server. Leave it empty to follow the'
                ' repository\'s main branch.' % (name, show(value))]
    for layer in arg_layers:
        if isinstance(layer, dict) and any(flag_name(key) == 'revision' for key in layer):
            return ['%s and a revision flag in the server arguments both set the revision: remove the flag, %s '
                    'passes it to the server.' % (name, name)]
    return []


def disk_margin(name, value):
    try:
        margin_bytes(value, 0)
    except ModelWeightsError as exc:
        return ['%s: %s.' % (name, exc)]
    return []


def is_true(value):
    """A boolean as Ansible reads one from YAML or from ``-e`` (where every value is text)."""
    return value is True or (isinstance(value, (str, int)) and not isinstance(value, bool)
                             and str(value).strip().lower() in ('1', 'true', 'yes', 'on', 'y'))


def as_float(value):
    """A float from a number or a string of one; None otherwise (never a boolean)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def fraction(name, value, low_open=False, high_open=False, example=''):
    """A share: a number within [0, 1], either end left out when open."""
    number = as_float(value)
    if number is None or number < 0 or number > 1 or (low_open and number == 0) or (high_open and number == 1):
        return ['%s is a fraction in %s0, 1%s%s (got %s).' % (
            name, '(' if low_open else '[', ')' if high_open else ']', example, show(value))]
    return []


def listen_address(name, value):
    if not isinstance(value, str) or not _LISTEN_ADDRESS.match(value) \
            or not port(name, value.rsplit(':', 1)[1]) == []:
        return ['%s must look like 127.0.0.1:9090 or [::1]:9090 (a port from 1 to 65535), got %s.'
                % (name, show(value))]
    return []


def prometheus_duration(name, value):
    if not isinstance(value, str) or not _PROMETHEUS_DURATION.match(value):
        return ['%s must be a Prometheus duration such as 30s, 2m or 15d, got %s.' % (name, show(value))]
    return []


def optional_version(name, value):
    """Empty keeps the release set's version; anything else must be an exact version."""
    if isinstance(value, str) and not value.strip():
        return []
    return version(name, value)


def driver_branch(name, value, allow_empty=False):
    if allow_empty and isinstance(value, str) and not value.strip():
        return []
    # The spec says str, and YAML reads `gpu_vm_driver_branch: 580` as a number: the number's
    # digits are the branch, as Ansible would convert it.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not re.match(r'^[0-9]{3}$', value.strip()):
        return ['%s must be an NVIDIA driver branch of three digits such as "580"%s, got %s.'
                % (name, ' (or empty)' if allow_empty else '', show(value))]
    return []


def cuda_releases(name, value):
    if not isinstance(value, list):
        return ['%s must be a list of CUDA releases such as ["13.0"], got %s.' % (name, show(value))]
    wrong = [item for item in value if not isinstance(item, str) or not re.match(r'^[0-9]+\.[0-9]+$', item)]
    if wrong:
        return ['%s must list CUDA releases as "MAJOR.MINOR" strings such as "13.0", got %s.'
                % (name, ', '.join(show(item) for item in wrong))]
    return []


def release_sets(name, value):
    """The inventory's own SGLang release sets, each complete (as the shipped ones are)."""
    if not isinstance(value, dict):
        return ['%s must be a mapping of release set names to sets, got %s.' % (name, show(value))]
    problems = []
    for set_name in sorted(value, key=str):
        wrong = release_problems(str(set_name), value[set_name])
        if wrong:
            problems.append('%s: %s (see the role\'s vars/release_sets.yml for complete sets).' % (name, '; '.join(wrong)))
    return problems
