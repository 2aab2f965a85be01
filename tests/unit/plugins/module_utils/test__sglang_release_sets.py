# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
import re

import pytest
import yaml

from ansible_collections.inferops.serving.plugins.module_utils._deployment import fingerprint
from ansible_collections.inferops.serving.plugins.module_utils._sglang_release_sets import (
    arguments_check_plan,
    ReleaseSetError,
    driver_branch,
    launch_entry,
    node_errors,
    pinned_versions,
    python_fits,
    release_errors,
    release_problems,
    release_set,
    set_names,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang_release_sets')


def _load(*parts):
    with open(os.path.join(ROOT, *parts)) as handle:
        return yaml.safe_load(handle)


SETS = _load('roles', 'sglang', 'vars', 'release_sets.yml')['_sglang_release_sets']
# The lowest driver branch of each CUDA toolkit release (NVIDIA's CUDA Toolkit release notes,
# "CUDA Toolkit and Corresponding Driver Versions": 12.8 GA >= 570.26, 13.0 GA >= 580.65.06).
CUDA_DRIVER_BRANCH = {'12.8': 570, '13.0': 580}
NVIDIA_SMI_580 = '580.95.05\n580.95.05\n'


def _canonical(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def metadata_pins(name):
    """Requirement name -> exact version, from the Requires-Dist lines of a wheel's METADATA
    (fixtures/sglang_release_sets/sglang-<version>-requires.txt); extras' requirements left out."""
    pins = {}
    with open(os.path.join(FIXTURES, 'sglang-%s-requires.txt' % name)) as handle:
        for line in handle:
            if not line.startswith('Requires-Dist:') or 'extra ==' in line:
                continue
            requirement = line.split(':', 1)[1].split(';')[0].strip()
            match = re.match(r'^([A-Za-z0-9_.-]+)(\[[^]]*\])?\s*==\s*([^,\s]+)$', requirement)
            if match:
                pins[_canonical(match.group(1))] = match.group(3)
    return pins


def metadata_requires_python(name):
    with open(os.path.join(FIXTURES, 'sglang-%s-requires.txt' % name)) as handle:
        return [line.split(':', 1)[1].strip() for line in handle if line.startswith('Requires-Python:')][0]


@pytest.mark.parametrize('name', sorted(SETS))
def test_every_shipped_set_is_complete(name):
    assert release_problems(name, SETS[name]) == []
    assert SETS[name]['description'].strip()


@pytest.mark.parametrize('name', sorted(SETS))
def test_every_set_asks_for_the_driver_branch_its_cuda_needs(name):
    release = SETS[name]
    assert release['cuda'] in CUDA_DRIVER_BRANCH, 'add the CUDA release to CUDA_DRIVER_BRANCH, with its source'
    assert int(release['driver_branch_min']) == CUDA_DRIVER_BRANCH[release['cuda']]


@pytest.mark.parametrize('name', sorted(SETS))
def test_every_pin_of_a_set_is_the_one_its_sglang_metadata_requires(name):
    pins = metadata_pins(name)
    for package, version in SETS[name]['packages'].items():
        if package != 'sglang':
            assert pins.get(_canonical(package)) == version, package


def test_the_current_set_pins_exactly_what_sglang_0_5_23_requires():
    release = release_set('0.5.23', SETS)
    assert release['packages'] == {
        'sglang': '0.5.23', 'flashinfer-python': '0.7.2', 'sglang-kernel': '0.4.10', 'torch': '2.14.1',
        'nvidia-cutlass-dsl': '4.8.0', 'transformers': '5.19.0'}
    assert release['kernel_package'] == 'sglang-kernel'
    assert (release['cuda'], release['driver_branch_min']) == ('13.0', '580')
    # Its wheels are cp311, cp312 and cp313 only; METADATA says >=3.11.
    assert metadata_requires_python('0.5.23') == '>=3.11'
    assert [v for v in ('3.10.12', '3.11.2', '3.12.3', '3.13.1', '3.14.0') if python_fits(release, v)] == [
        '3.11.2', '3.12.3', '3.13.1']


def test_the_default_set_is_the_seed_stack_unchanged():
    defaults = _load('roles', 'sglang', 'defaults', 'main.yml')
    assert defaults['sglang_release_set'] == '0.5.9'
    release = release_set(defaults['sglang_release_set'], SETS)
    assert pinned_versions(release, defaults) == {
        'sglang': '0.5.9', 'flashinfer-python': '0.6.3', 'flashinfer-cubin': '0.6.3', 'sgl-kernel': '0.3.21',
        'torch': '2.9.1'}
    assert release['cuda'] == '12.8'
    assert metadata_requires_python('0.5.9') == '>=3.10' == release['python']


def test_an_unknown_set_names_the_known_ones():
    with pytest.raises(ReleaseSetError) as caught:
        release_set('0.6.0', SETS)
    assert "sglang_release_set is '0.6.0'" in str(caught.value)
    assert 'known sets: 0.5.9, 0.5.23' in str(caught.value)
    assert release_errors('latest', SETS, '580', None, '3.11.2')[0].startswith("sglang_release_set is 'latest'")


def test_sets_sort_by_sglang_version():
    assert set_names({'0.5.23': {}, '0.5.9': {}, '0.10.0': {}}) == ['0.5.9', '0.5.23', '0.10.0']


@pytest.mark.parametrize('broken, words', [
    ({'cuda': '13'}, 'cuda must be a CUDA release'),
    ({'driver_branch_min': 58}, 'driver_branch_min must be'),
    ({'python': '3.11+'}, 'python must be a version specifier'),
    ({'packages': {'sglang': '0.5.23', 'flashinfer-python': '0.7.2', 'torch': '2.14.1'}}, 'exactly one of sgl-kernel'),
    ({'packages': {'sglang': '0.5.23', 'flashinfer-python': '0.7.2', 'torch': 2.14, 'sgl-kernel': '1'}}, 'torch is 2.14'),
    ({'packages': {'sglang': '0.5.22', 'flashinfer-python': '0.7.2', 'torch': '2.1', 'sgl-kernel': '1'}}, 'pins sglang 0.5.22'),
    ({'ready_path': 'ready'}, 'ready_path must be a path of the server'),
    ({'ready_path': None}, 'ready_path must be a path of the server'),
])
def test_an_incomplete_set_is_named_with_what_it_lacks(broken, words):
    release = dict(SETS['0.5.23'], **broken)
    problems = release_problems('0.5.23', release)
    assert any(words in problem for problem in problems), problems
    with pytest.raises(ReleaseSetError):
        release_set('0.5.23', {'0.5.23': release})


def test_single_versions_override_the_set_and_empty_ones_do_not():
    release = release_set('0.5.23', SETS)
    versions = pinned_versions(release, {'sglang_version': '', 'sglang_sgl_kernel_version': '0.4.9',
                                         'sglang_torch_version': ' 2.14.0 ', 'sglang_flashinfer_cubin_version': None})
    assert versions['sglang'] == '0.5.23'
    # The kernel variable pins the set's kernel package, whatever its name.
    assert versions['sglang-kernel'] == '0.4.9' and 'sgl-kernel' not in versions
    assert versions['torch'] == '2.14.0'
    assert 'flashinfer-cubin' not in versions
    seed = pinned_versions(release_set('0.5.9', SETS), {'sglang_sgl_kernel_version': '0.3.20'})
    assert seed['sgl-kernel'] == '0.3.20'


@pytest.mark.parametrize('output, branch', [
    (NVIDIA_SMI_580, '580'),
    ('570.86.15', '570'),
    ('', None),
    (None, None),
    ('NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.', None),
])
def test_driver_branch_from_nvidia_smi(output, branch):
    assert driver_branch(output) == branch


def test_a_driver_below_the_sets_branch_is_refused_naming_both():
    problems = release_errors('0.5.23', SETS, '', '570.86.15\n', '3.11.2')
    assert problems == [
        "sglang_release_set 0.5.23 needs NVIDIA driver branch 580 or later (CUDA 13.0), but the node's driver is"
        " branch 570 (nvidia-smi reports driver 570.86.15). Raise gpu_vm_driver_branch to 580 or later, or pick a"
        " release set that branch 570 runs (0.5.9). Nothing was changed on this host."]
    assert 'sglang_driver_branch is 575' in release_errors('0.5.23', SETS, '575', NVIDIA_SMI_580, '3.11.2')[0]
    assert release_errors('0.5.23', SETS, '580', None, '3.11.2') == []
    assert release_errors('0.5.9', SETS, '570', None, '3.11.2') == []


def test_a_python_the_sets_wheels_do_not_exist_for_is_refused_naming_both():
    problems = release_errors('0.5.23', SETS, '', NVIDIA_SMI_580, '3.10.12')
    assert problems == [
        "sglang_release_set 0.5.23 needs python3 >=3.11,<3.14 (the Python versions its wheels exist for), but the"
        " node's /usr/bin/python3 is 3.10.12. Pick a release set for Python 3.10.12 (0.5.9), or use an OS image"
        " whose python3 the set supports. Nothing was changed on this host."]
    assert len(release_errors('0.5.23', SETS, '550', None, '3.9.2')) == 2


def test_what_the_node_does_not_say_is_not_judged():
    assert release_errors('0.5.23', SETS, '', '', '') == []
    assert node_errors(release_set('0.5.23', SETS), None, None, None, SETS) == []


@pytest.mark.parametrize('specifier, version, fits', [
    ('==3.11.*', '3.11.9', True),
    ('==3.11.*', '3.12.0', False),
    ('!=3.12.*,>=3.10', '3.12.1', False),
    ('>3.10', '3.10.0', False),
    ('<=3.12', '3.12.0', True),
    ('==3.11', '3.11.0', True),
])
def test_python_specifiers(specifier, version, fits):
    assert python_fits({'python': specifier}, version) is fits


def test_switching_the_set_changes_the_deploy_fingerprint():
    server = {'unit_checksum': 'u', 'env_checksum': 'e', 'model_path': 'm'}

    def stack(name):
        release = release_set(name, SETS)
        return {'versions': pinned_versions(release), 'packages': ['sglang', 'flashinfer-python'], 'patches': {}}
    assert fingerprint(stack('0.5.9'), server) != fingerprint(stack('0.5.23'), server)


def test_the_upgrade_guide_lists_every_set_as_shipped():
    with open(os.path.join(ROOT, 'docs', 'upgrades.md')) as handle:
        section = handle.read().split('\n## ', 1)[0]
    rows = dict((cells[0], cells[1:]) for cells in (
        [cell.strip().strip('`') for cell in line.strip().strip('|').split('|')]
        for line in section.splitlines() if line.startswith('|')))
    names = set_names(SETS)
    assert rows['release set'] == names
    for package in sorted(set(p for name in names for p in SETS[name]['packages'])):
        assert rows[package] == [SETS[name]['packages'].get(package, '-') for name in names], package
    assert rows['CUDA toolkit'] == [SETS[name]['cuda'] for name in names]
    assert rows['lowest driver branch'] == [SETS[name]['driver_branch_min'] for name in names]
    assert rows['Python'] == [SETS[name]['python'] for name in names]
    assert rows['start command'] == [release_set(name, SETS)['launch'] for name in names]
    assert rows['ready endpoint'] == [release_set(name, SETS)['ready_path'] for name in names]


def test_each_release_says_which_endpoint_means_ready():
    # 0.5.23 serves /ready (up, not paused, not draining); 0.5.9 has none.
    assert release_set('0.5.23', SETS)['ready_path'] == '/ready'
    assert release_set('0.5.9', SETS)['ready_path'] == '/health'
    # A set of the inventory's own that names none is polled on /health, which every release has.
    own = dict((key, value) for key, value in SETS['0.5.23'].items() if key != 'ready_path')
    assert release_set('0.5.23', {'0.5.23': own})['ready_path'] == '/health'


def test_each_release_starts_its_server_the_way_the_release_recommends():
    # 0.5.23's launch_server.py warns "'sglang serve' is the recommended entrypoint"; 0.5.9's does not.
    assert release_set('0.5.23', SETS)['launch'] == 'sglang serve'
    assert release_set('0.5.9', SETS)['launch'] == 'python -m sglang.launch_server'
    own = dict((key, value) for key, value in SETS['0.5.23'].items() if key != 'launch')
    assert release_set('0.5.23', {'0.5.23': own})['launch'] == 'python -m sglang.launch_server'


@pytest.mark.parametrize('launch, package, entry', [
    ('python -m sglang.launch_server', 'sglang', {'target': 'sglang.launch_server', 'args': []}),
    ('python3  -m  sglang.launch_server', 'sglang', {'target': 'sglang.launch_server', 'args': []}),
    # The console script of the wheel's entry_points.txt: sglang = sglang.cli.main:main.
    ('sglang serve', 'sglang', {'target': 'sglang.cli.main:main', 'args': ['serve']}),
    ('sglang serve', 'inferops_lab_sglang_sim', {'target': 'inferops_lab_sglang_sim.cli.main:main', 'args': ['serve']}),
    ('python -m sglang.launch_server', 'inferops_lab_sglang_sim',
     {'target': 'inferops_lab_sglang_sim.launch_server', 'args': []}),
    # A module outside the sglang package runs as it is named.
    ('python -m my_server.main', 'inferops_lab_sglang_sim', {'target': 'my_server.main', 'args': []}),
])
def test_the_launch_names_what_the_launcher_runs(launch, package, entry):
    assert launch_entry(launch, package) == entry


@pytest.mark.parametrize('launch', ['sglang', 'vllm serve', 'python -m', 'python -m sglang;rm', '', None,
                                    'sglang serve --port 1'])
def test_a_launch_of_neither_form_is_refused_naming_the_value(launch):
    with pytest.raises(ReleaseSetError, match=r'launch must be "python -m <module>" or .*got %s'
                       % re.escape(repr(launch))):
        launch_entry(launch)
    assert any('launch must be' in problem for problem in release_problems('0.5.23', dict(SETS['0.5.23'], launch=launch)))


METRIC_FAMILIES = os.path.join(os.path.dirname(__file__), 'fixtures', 'sglang_metrics')


def wheel_metric_families(version):
    """The sglang: metric families the release's wheel declares (fixtures/sglang_metrics/, read from its source)."""
    with open(os.path.join(METRIC_FAMILIES, 'sglang-%s-metric-families.txt' % version)) as handle:
        return dict(line.split() for line in handle if line.strip())


@pytest.mark.parametrize('name', sorted(SETS))
def test_every_metric_a_set_records_is_one_its_wheel_declares(name):
    release = release_set(name, SETS)
    declared = wheel_metric_families(release['packages']['sglang'])
    assert len(declared) > 90 and release['metrics']
    assert [metric for metric in release['metrics'] if metric not in declared] == []


def test_the_metric_families_of_the_two_releases_differ_where_the_wheels_do():
    old, new = wheel_metric_families('0.5.9'), wheel_metric_families('0.5.23')
    # Both have inter_token_latency_seconds; only 0.5.23 times each request's output tokens.
    assert old['sglang:inter_token_latency_seconds'] == new['sglang:inter_token_latency_seconds'] == 'histogram'
    assert 'sglang:request_time_per_output_token_seconds' in new
    assert not [name for name in list(old) + list(new) if 'time_per_output_token' in name
                and name != 'sglang:request_time_per_output_token_seconds']


@pytest.mark.parametrize('metrics', ['sglang:num_running_reqs', ['num_running_reqs'], [1]])
def test_metrics_that_are_not_a_list_of_sglang_families_are_refused(metrics):
    problems = release_problems('0.5.23', dict(SETS['0.5.23'], metrics=metrics))
    assert any('metrics must list' in problem for problem in problems)


RELEASE_0523 = {'name': 'sglang-0.5.23', 'version': '0.5.23', 'venv_path': '/opt/sglang/venvs/sglang-0.5.23-abc'}
REFUSED_BY_059 = {'accepted': False, 'sglang_version': '0.5.9', 'errors': ['unknown option --new-flag'],
                  'message': 'SGLang 0.5.9 does not accept: unknown option --new-flag'}


def test_the_plan_checks_against_the_release_sets_venv_when_installed_else_the_running_one():
    assert arguments_check_plan(RELEASE_0523, True, '/opt/sglang/venv')['venv'] == RELEASE_0523['venv_path']
    assert arguments_check_plan(RELEASE_0523, False, '/opt/sglang/venv')['venv'] == '/opt/sglang/venv'
    # Never deployed: nothing to check against, and a check result from elsewhere is not read.
    assert arguments_check_plan(RELEASE_0523, False, '', REFUSED_BY_059) == {'venv': '', 'stop': '', 'note': ''}


def test_a_refusal_by_the_release_that_will_serve_stops_the_plan():
    same_release = dict(REFUSED_BY_059, sglang_version='0.5.23')
    assert arguments_check_plan(RELEASE_0523, False, '/v', same_release)['stop'] == same_release['message']
    assert arguments_check_plan(RELEASE_0523, True, '/v', REFUSED_BY_059)['stop'] == REFUSED_BY_059['message']
    # A version that could not be read is taken for the release that will serve.
    unread = dict(REFUSED_BY_059, sglang_version='')
    assert arguments_check_plan(RELEASE_0523, False, '/v', unread)['stop'] == unread['message']


def test_a_refusal_by_the_release_this_deploy_replaces_is_only_noted():
    verdict = arguments_check_plan(RELEASE_0523, False, '/opt/sglang/venv', REFUSED_BY_059)
    assert verdict['stop'] == ''
    assert verdict['note'] == (
        'Note: the SGLang 0.5.9 installed now does not accept the server arguments (unknown option --new-flag). '
        'Expected: this deploy installs SGLang 0.5.23 (release set sglang-0.5.23) into '
        '/opt/sglang/venvs/sglang-0.5.23-abc beside it and checks them against it after the install, before the '
        'server switches to it.')


def test_accepted_arguments_neither_stop_nor_note():
    accepted = {'accepted': True, 'sglang_version': '0.5.9', 'errors': [], 'message': ''}
    assert arguments_check_plan(RELEASE_0523, False, '/v', accepted) == {'venv': '/v', 'stop': '', 'note': ''}
