# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role variables against their declared types, in words a user can act on."""

import os

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._argument_types import type_errors

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def options(role):
    with open(os.path.join(REPO_ROOT, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]["main"]["options"]


def defaults(role):
    with open(os.path.join(REPO_ROOT, "roles", role, "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("role", ["gpu_vm", "sglang", "sglang_server"])
def test_every_default_is_of_its_declared_type(role):
    # A templated default is checked as it resolves, in the role (the lab scenarios).
    literal = dict((name, value) for name, value in defaults(role).items() if "{{" not in "%s" % value)
    assert len(literal) > 5
    assert type_errors(options(role), literal) == []


ROWS = [
    # (role, variable, value, message)
    ("sglang_server", "sglang_server_extra_env", ["A=1"],
     "sglang_server_extra_env must be a mapping (key: value), got a list."),
    ("sglang_server", "sglang_server_args", "--tp 8", "sglang_server_args must be a mapping (key: value), got the text."),
    ("sglang", "sglang_packages", "sglang", "sglang_packages must be a list, got the text 'sglang'."),
    ("sglang_server", "sglang_server_health_timeout", "soon",
     "sglang_server_health_timeout must be a whole number, got the text 'soon'."),
    ("sglang_server", "sglang_server_health_timeout", 1.5,
     "sglang_server_health_timeout must be a whole number, got a number."),
    ("sglang_server", "sglang_server_allow_root", "maybe",
     "sglang_server_allow_root must be true or false, got the text 'maybe'."),
    ("sglang_server", "sglang_server_health_timeout", True,
     "sglang_server_health_timeout must be a whole number, got a boolean."),
    ("sglang_server", "sglang_server_read_write_paths", [{"path": "/x"}],
     "sglang_server_read_write_paths must be a list of string; item 1 is a mapping."),
    ("gpu_vm", "gpu_vm_cuda_home", {"path": "/usr/local/cuda"},
     "gpu_vm_cuda_home must be a path (a string), got a mapping."),
]


@pytest.mark.parametrize("role, name, value, message", ROWS, ids=["%s=%r" % (row[1], row[2]) for row in ROWS])
def test_a_value_of_another_type_is_named_with_the_type_expected(role, name, value, message):
    assert type_errors(options(role), {name: value}) == [message]


@pytest.mark.parametrize("name, value", [
    ("sglang_server_health_timeout", "60"),     # -e name=60 gives text
    ("sglang_server_health_timeout", 60),
    ("sglang_server_allow_root", "false"),
    ("sglang_server_allow_root", "yes"),
    ("sglang_server_api_key", ""),
])
def test_what_ansible_itself_takes_is_taken(name, value):
    assert type_errors(options("sglang_server"), {name: value}) == []


def test_a_secret_given_as_a_list_is_not_repeated():
    secret = "hf_verySecretToken0123"
    problems = type_errors(options("sglang_server"), {"sglang_server_hf_token": [secret]})
    assert problems == ["sglang_server_hf_token must be a string, got a list."]
    problems = type_errors(options("sglang_server"), {"sglang_server_health_timeout": "hf_abc def ghi"})
    assert "hf_abc" not in problems[0]
