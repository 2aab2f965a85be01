# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang server's arguments, from the role's layers to the checked command line, one job per file.

``layers`` merges the layers of arguments, once for every reader (the module, the filters,
monitoring, a replica's node arguments); ``address`` says where the server listens and how the
node reaches it. The installed SGLang's options are read from its source without importing it:
``argparse_reader`` (``parser.add_argument`` calls, up to 0.5.9, and the router's options),
``arg_groups_reader`` (the declarative fields of 0.5.23 and later) and ``installed_options``
(which of the two an installed SGLang needs). ``option_checks`` applies one option and its value
as SGLang's parser would, ``command`` checks the merged arguments against those options and
renders the argv, and ``endpoint`` reads the model, the parallelism and the address from them.

Nothing is imported here, so that each file can be imported on its own.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type
