# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hand the secrets from the environment systemd loaded over to a re-executed launcher, through a pipe.

systemd loads the secrets from the 0600 EnvironmentFile into the environment, and
/proc/PID/environ shows the initial environment block of the current process image, which
removing a variable inside Python would not change: the launcher replaces its image with one
whose environment lacks them, and reads them from a pipe there.
"""

import atexit
import json
import os
import sys
import tempfile

from sglang_launch.secret_names import ROUTER_SECRET_ENV_FLAGS, SECRET_ENV_FILES, SECRET_ENV_FLAGS

SECRETS_FD_FLAG = "--secrets-fd"


def reexec_without_secrets(command, args):
    """Exec this launcher's ``command`` again with the secrets in a pipe instead of the environment."""
    secrets = {}
    for env_name, key in SECRET_ENV_FLAGS + ROUTER_SECRET_ENV_FLAGS + SECRET_ENV_FILES:
        if env_name in os.environ:
            value = os.environ.pop(env_name)
            if value:
                secrets[key] = value
    payload = json.dumps(secrets).encode("utf-8")
    read_end, write_end = os.pipe()
    # A few hundred bytes fit the pipe's buffer: written whole before the exec, read after it.
    os.write(write_end, payload)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    # The launcher as systemd started it: python runs it by its path.
    argv = [sys.executable, os.path.abspath(sys.argv[0]), command, SECRETS_FD_FLAG, str(read_end)] + list(args)
    os.execve(sys.executable, argv, dict(os.environ))


def read_secrets(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks).decode("utf-8") or "{}")


def write_secret_files(secrets):
    """Put each file-read secret into a new 0600 file and point its path variable at it."""
    for _env_name, path_env in SECRET_ENV_FILES:
        if secrets.get(path_env):
            # mkstemp: a new name, created 0600 by this (the service) user, in the private /tmp.
            handle, path = tempfile.mkstemp(prefix="sglang-launch-", suffix=".secret")
            with os.fdopen(handle, "w") as secret_file:
                secret_file.write(secrets[path_env])
            atexit.register(_remove, path)
            os.environ[path_env] = path


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
