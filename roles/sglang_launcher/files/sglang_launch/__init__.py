# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The jobs of sglang-launch, one module each.

``run_with_secrets_hidden`` starts the server or router (``secret_handover`` moves the secrets
from the environment into a pipe, ``secret_masking`` keeps the API key out of what SGLang
writes, ``secret_names`` names them); ``wait_healthy`` waits until the server answers;
``restore_workers`` adds the recorded workers to a router that restarted.
"""
