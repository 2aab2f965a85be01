# -*- coding: utf-8 -*-
# Copyright (c) inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Write argv tokens as the words of a systemd ``ExecStart=`` line.

systemd splits ``ExecStart=`` itself (no shell): double quotes group a word, a backslash
escapes, ``%`` starts a specifier and ``$`` a variable, so each of them is escaped; a line break
or NUL cannot be passed on one line at all.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type


class SystemdQuoteError(ValueError):
    """A token cannot be written on one ExecStart= line."""


_SYSTEMD_SAFE = frozenset('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@+=:,./-')


def systemd_quote(token):
    """One argv token as a word of a systemd ExecStart= line (quotes, specifiers, variables)."""
    if '\n' in token or '\r' in token or '\0' in token:
        raise SystemdQuoteError('argument %r contains a line break or NUL; systemd cannot pass it on one'
                                ' ExecStart= line' % (token,))
    if token and all(c in _SYSTEMD_SAFE for c in token):
        return token
    escaped = token.replace('\\', '\\\\').replace('"', '\\"').replace('%', '%%').replace('$', '$$')
    return '"%s"' % escaped


def systemd_command_line(argv):
    return ' '.join(systemd_quote(token) for token in argv)
