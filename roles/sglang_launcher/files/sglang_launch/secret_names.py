# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The secrets the launcher keeps off command lines and out of environments, by the names they go by.

The launcher runs on the node without the collection, so it keeps its own copy of the names;
a unit test checks them against plugins/module_utils/_secrets.py.
"""

SECRET_ENV_FLAGS = (("SGLANG_API_KEY", "--api-key"), ("SGLANG_ADMIN_API_KEY", "--admin-api-key"))
# smg's /workers API takes keys of its own, each given as `id:name:role:key` (the key may hold ':').
ROUTER_SECRET_ENV_FLAGS = (("SGLANG_ROUTER_ADMIN_API_KEY", "--control-plane-api-keys"),)
ROUTER_ADMIN_KEY_ENTRY = "inferops-serving:inferops.serving:admin:%s"
# Secrets that huggingface_hub reads from a file when the named variable gives its path.
SECRET_ENV_FILES = (("HF_TOKEN", "HF_TOKEN_PATH"),)
SECRET_FIELDS = ("api_key", "admin_api_key")
