# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the server listens and the address that reaches it from the node itself.

For the server role's checks (an unauthenticated server on a non-loopback address) and the
published ``sglang_server_deployment``.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import whole_number

# SGLang's own defaults for where it listens (ServerArgs: host 127.0.0.1, port 30000).
DEFAULT_HOST = '127.0.0.1'
DEFAULT_PORT = 30000
# Addresses that listen on every interface, and the loopback address that reaches each.
WILDCARD_HOSTS = {'0.0.0.0': '127.0.0.1', '': '127.0.0.1', '::': '::1'}
LOOPBACK_HOSTS = ('127.0.0.1', 'localhost', '::1')


def is_loopback(host):
    """Whether a server bound to ``host`` can only be reached from the node itself."""
    return host in LOOPBACK_HOSTS or ('%s' % host).startswith('127.')


def probe_url(host, port):
    """The URL that reaches a server bound to ``host``:``port`` from the node itself."""
    address = WILDCARD_HOSTS.get(host, host)
    return 'http://%s:%s' % (('[%s]' % address) if ':' in address else address, port)


def server_address(host=None, port=None):
    """Where the server listens (SGLang's defaults filling what is unset) and how the node reaches it."""
    host = DEFAULT_HOST if host is None else '%s' % host
    port = DEFAULT_PORT if port is None else whole_number('port', port)
    return {'host': host, 'port': port, 'url': probe_url(host, port), 'loopback': is_loopback(host)}
