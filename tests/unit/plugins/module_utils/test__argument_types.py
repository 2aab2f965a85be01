# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role variables against their declared types, in words a user can act on."""

import os

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._argument_types import converted_values, type_errors

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
    ("sglang_server", "sglang_server_args", "--tp 8",
     "sglang_server_args must be a mapping (key: value), got the text '--tp 8'. On the command line give it as"
     " JSON: -e '{\"sglang_server_args\": {\"key\": \"value\"}}'."),
    ("sglang_server", "sglang_server_args", '{"tp-size": 8}',
     "sglang_server_args must be a mapping (key: value), got the text '{\"tp-size\": 8}'. On the command line"
     " give it as JSON: -e '{\"sglang_server_args\": {\"tp-size\": 8}}'."),
    ("sglang", "sglang_packages", "sglang,sgl-kernel",
     "sglang_packages must be a list, got the text 'sglang,sgl-kernel'. On the command line give it as JSON:"
     " -e '{\"sglang_packages\": [\"sglang\", \"sgl-kernel\"]}'."),
    ("sglang_server", "sglang_server_health_timeout", "soon",
     "sglang_server_health_timeout must be a whole number, got the text 'soon'."),
    ("sglang_server", "sglang_server_health_timeout", "",
     "sglang_server_health_timeout must be a whole number, got an empty text ('')."),
    ("sglang_server", "sglang_server_health_timeout", 1.5,
     "sglang_server_health_timeout must be a whole number, got the number 1.5."),
    ("sglang_server", "sglang_server_allow_root", "maybe",
     "sglang_server_allow_root must be true or false, got the text 'maybe' (true, false, yes, no, on, off, 1 or 0)."),
    ("sglang_server", "sglang_server_health_timeout", True,
     "sglang_server_health_timeout must be a whole number, got a boolean (true)."),
    ("sglang_server", "sglang_server_read_write_paths", [{"path": "/x"}],
     "sglang_server_read_write_paths must be a list of strings; item 1 is a mapping."),
    ("gpu_vm", "gpu_vm_cuda_home", {"path": "/usr/local/cuda"},
     "gpu_vm_cuda_home must be a path (a string), got a mapping."),
    ("gpu_vm", "gpu_vm_reboot", "maybe",
     "gpu_vm_reboot must be true or false, got the text 'maybe' (true, false, yes, no, on, off, 1 or 0)."),
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


def test_a_secret_is_shown_by_its_length_only():
    secret = "hf_verySecretToken0123"
    problems = type_errors(options("sglang_server"), {"sglang_server_hf_token": [secret]})
    assert problems == ["sglang_server_hf_token must be a string, got a list."]
    problems = type_errors(options("sglang_server"), {"sglang_server_hf_token": True})
    assert problems == ["sglang_server_hf_token must be a string, got a boolean (true)."]
    problems = type_errors(options("sglang_router"), {"sglang_router_api_key": 12345678})
    assert problems == []  # YAML's number is the key's digits, as Ansible converts it


@pytest.mark.parametrize("value, converted", [
    ("60", 60), (" 60 ", 60), ("+5", 5), (60, 60), (60.0, 60)])
def test_a_whole_number_as_text_becomes_the_number(value, converted):
    assert converted_values(options("sglang_server"), {"sglang_server_health_timeout": value}) == (
        {"sglang_server_health_timeout": converted}, [])


@pytest.mark.parametrize("value, converted", [
    ("true", True), ("YES", True), ("on", True), ("1", True), ("t", True), (1, True),
    ("false", False), ("No", False), ("off", False), ("0", False), ("f", False), (0, False)])
def test_a_boolean_word_becomes_the_boolean(value, converted):
    assert converted_values(options("sglang_server"), {"sglang_server_allow_root": value}) == (
        {"sglang_server_allow_root": converted}, [])
