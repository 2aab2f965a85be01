# -*- coding: utf-8 -*-
# Copyright: (c) 2026, inferops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each role's inputs by type, range and meaning, checked before anything on the node changes.

``meta/argument_specs.yml`` declares every variable and its type (``role_errors`` checks those
first, in words); what a type cannot say (a port above 65535, an empty model path, root as a
service user, a secret that cannot travel in an HTTP header or a systemd environment file, a
Prometheus duration) is each role's rule here, made of the checks in _input_checks.py.
"""

from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

from ansible_collections.inferops.serving.plugins.module_utils._argument_types import converted_values
from ansible_collections.inferops.serving.plugins.module_utils._sglang_release_sets import ReleaseSetError, launch_entry
from ansible_collections.inferops.serving.plugins.module_utils._input_checks import (
    absolute_path,
    as_float,
    cuda_releases,
    as_int,
    disk_margin,
    driver_branch,
    environment,
    fraction,
    host_address,
    int_range,
    is_true,
    listen_address,
    model_revision,
    non_empty,
    one_line,
    optional_http_url,
    optional_version,
    port,
    prometheus_duration,
    release_sets,
    secret,
    secrets_in_args,
    serial,
    service_user,
    show,
    string_list,
    unit_name,
    url,
    version,
)
from ansible_collections.inferops.serving.plugins.module_utils._pip_pins import PIN_VARIABLES
from ansible_collections.inferops.serving.plugins.module_utils._proxmox_qm import validate_spec
from ansible_collections.inferops.serving.plugins.module_utils._server_arguments.layers import effective_arguments, flag_name
from ansible_collections.inferops.serving.plugins.module_utils._sglang_router_packages import (
    admin_key_errors,
    package_version_errors,
)


def _rw_path(name, value):
    return absolute_path(name, value[1:] if isinstance(value, str) and value.startswith('-') else value)


def gpu_vm_errors(v):
    """Inputs of role gpu_vm (``v``: variable name -> value)."""
    return (absolute_path('gpu_vm_sysfs_root', v.get('gpu_vm_sysfs_root'))
            + url('gpu_vm_cuda_repo_base_url', v.get('gpu_vm_cuda_repo_base_url'))
            + int_range('gpu_vm_expected_gpu_count', v.get('gpu_vm_expected_gpu_count'), 1,
                        what='a GPU count', allow_none=True)
            + absolute_path('gpu_vm_cuda_home', v.get('gpu_vm_cuda_home'))
            + cuda_releases('gpu_vm_cuda_extra_releases', v.get('gpu_vm_cuda_extra_releases', []))
            + int_range('gpu_vm_reboot_timeout', v.get('gpu_vm_reboot_timeout'), 1)
            + int_range('gpu_vm_nvidia_smi_timeout', v.get('gpu_vm_nvidia_smi_timeout'), 1))


def sglang_errors(v):
    """Inputs of role sglang."""
    problems = []
    for pin in sorted(set(PIN_VARIABLES.values())):
        problems += optional_version(pin, v.get(pin))
    return (problems
            + non_empty('sglang_release_set', v.get('sglang_release_set'), 'a release set name such as "0.5.9"')
            + driver_branch('sglang_driver_branch', v.get('sglang_driver_branch'), allow_empty=True)
            + service_user('sglang_service_user', v.get('sglang_service_user'),
                           bool(v.get('sglang_allow_root_service_user')), 'sglang_allow_root_service_user')
            + absolute_path('sglang_venvs_dir', v.get('sglang_venvs_dir'))
            + int_range('sglang_venvs_keep', v.get('sglang_venvs_keep'), 1, what='a number of venvs')
            + release_sets('sglang_release_sets', v.get('sglang_release_sets'))
            + service_user('sglang_service_group', v.get('sglang_service_group'), True)
            + absolute_path('sglang_state_dir', v.get('sglang_state_dir'))
            + version('sglang_venv_pip_version', v.get('sglang_venv_pip_version'))
            + version('sglang_venv_wheel_version', v.get('sglang_venv_wheel_version'))
            + one_line('sglang_pip_extra_args', v.get('sglang_pip_extra_args')))


def server_launch(launch, package):
    """sglang_server_launch and sglang_server_package as the launcher can run them."""
    try:
        launch_entry(launch, package)
    except ReleaseSetError as exc:
        name = 'sglang_server_package' if 'stands in for sglang' in str(exc) else 'sglang_server_launch'
        return ['%s: %s.' % (name, str(exc)[0].lower() + str(exc)[1:])]
    return []


def sglang_server_errors(v):
    """Inputs of role sglang_server (the server arguments themselves: module sglang_server_args)."""
    secrets = [v.get('sglang_server_api_key'), v.get('sglang_server_hf_token')]
    problems = (secret('sglang_server_api_key', v.get('sglang_server_api_key'))
                + secret('sglang_server_hf_token', v.get('sglang_server_hf_token'))
                + secrets_in_args('sglang_server_args', v.get('sglang_server_args'), secrets)
                + secrets_in_args('sglang_server_extra_args', v.get('sglang_server_extra_args'), secrets)
                + environment('sglang_server_env', v.get('sglang_server_env'))
                + environment('sglang_server_extra_env', v.get('sglang_server_extra_env'))
                + service_user('sglang_server_service_user', v.get('sglang_server_service_user'),
                               bool(v.get('sglang_server_allow_root')), 'sglang_server_allow_root')
                + service_user('sglang_server_service_group', v.get('sglang_server_service_group'), True)
                + absolute_path('sglang_server_venv_path', v.get('sglang_server_venv_path'))
                + absolute_path('sglang_server_state_dir', v.get('sglang_server_state_dir'))
                + absolute_path('sglang_server_config_dir', v.get('sglang_server_config_dir'))
                + absolute_path('sglang_server_hf_home', v.get('sglang_server_hf_home'))
                + server_launch(v.get('sglang_server_launch'), v.get('sglang_server_package'))
                + unit_name('sglang_server_unit_name', v.get('sglang_server_unit_name'))
                + int_range('sglang_server_start_timeout', v.get('sglang_server_start_timeout'), 1, what='seconds')
                + int_range('sglang_server_stop_timeout', v.get('sglang_server_stop_timeout'), 1, what='seconds')
                + int_range('sglang_server_restart_sec', v.get('sglang_server_restart_sec'), 0, what='seconds')
                + int_range('sglang_server_start_limit_burst', v.get('sglang_server_start_limit_burst'), 1)
                + int_range('sglang_server_limit_nofile', v.get('sglang_server_limit_nofile'), 1024)
                + int_range('sglang_server_health_timeout', v.get('sglang_server_health_timeout'), 1, what='seconds')
                + int_range('sglang_server_health_interval', v.get('sglang_server_health_interval'), 1,
                            what='seconds')
                + int_range('sglang_server_journal_lines', v.get('sglang_server_journal_lines'), 1)
                + model_revision('sglang_server_model_revision', v.get('sglang_server_model_revision'),
                                 [v.get('sglang_server_args'), v.get('sglang_server_extra_args')])
                + disk_margin('sglang_server_weights_disk_margin', v.get('sglang_server_weights_disk_margin'))
                + int_range('sglang_server_predownload_poll', v.get('sglang_server_predownload_poll'), 1,
                            what='seconds')
                + int_range('sglang_server_predownload_timeout', v.get('sglang_server_predownload_timeout'), 1,
                            what='seconds')
                + string_list('sglang_server_read_write_paths', v.get('sglang_server_read_write_paths') or [],
                              _rw_path)
                + string_list('sglang_server_device_allow', v.get('sglang_server_device_allow') or [])
                + string_list('sglang_server_system_call_filter', v.get('sglang_server_system_call_filter') or [])
                + int_range('sglang_server_gpu_health_expected_gpus', v.get('sglang_server_gpu_health_expected_gpus'),
                            1, what='a GPU count', allow_none=True)
                + int_range('sglang_server_gpu_health_timeout', v.get('sglang_server_gpu_health_timeout'), 1,
                            what='seconds')
                + (absolute_path('sglang_server_gpu_health_kernel_log_file',
                                 v.get('sglang_server_gpu_health_kernel_log_file'))
                   if v.get('sglang_server_gpu_health_kernel_log_file') else []))
    args = v.get('sglang_server_args')
    if isinstance(args, dict):
        problems += _model_path(args, v.get('sglang_server_extra_args'))
    return problems


def _model_path(args, extra):
    """An empty --model-path deploys a server that cannot load anything."""
    layers = [('sglang_server_args', args), ('sglang_server_extra_args', extra if isinstance(extra, dict) else {})]
    written = [(name, key, value) for name, layer in layers for key, value in layer.items()
               if flag_name(key) == 'model-path']
    if not written:
        return []
    value = effective_arguments(*[layer for _name, layer in layers]).get('model-path')
    if value is None or (isinstance(value, str) and not value.strip()):
        name, key, raw = written[-1]
        return ['%s: %s must name the model (a Hugging Face repo id or an absolute path), got %s.'
                % (name, key, show(raw))]
    return []


def monitoring_errors(v):
    """Inputs of role monitoring."""
    problems = []
    for name in ('monitoring_prometheus_listen_address', 'monitoring_alertmanager_listen_address'):
        problems += listen_address(name, v.get(name))
    for name in ('monitoring_prometheus_retention_time', 'monitoring_scrape_interval', 'monitoring_scrape_timeout',
                 'monitoring_evaluation_interval', 'monitoring_alert_server_down_for',
                 'monitoring_alert_server_unhealthy_for', 'monitoring_alert_gpu_power_for',
                 'monitoring_alert_throughput_for', 'monitoring_alert_router_for', 'monitoring_alert_xid_window',
                 'monitoring_alert_gpu_unhealthy_for'):
        problems += prometheus_duration(name, v.get(name))
    for name in ('monitoring_alert_gpu_power_share', 'monitoring_alert_throughput_share'):
        problems += fraction(name, v.get(name), low_open=True)
    for name in ('monitoring_sglang_port', 'monitoring_router_prometheus_port', 'monitoring_node_exporter_port'):
        problems += port(name, v.get(name))
    # Below a minute the alert would fire between two runs of a collector that waits on nvidia-smi.
    problems += int_range('monitoring_alert_gpu_metrics_stale_after', v.get('monitoring_alert_gpu_metrics_stale_after'),
                          60, what='seconds')
    return problems


def node_metrics_errors(v):
    """Inputs of role node_metrics."""
    problems = (port('node_metrics_port', v.get('node_metrics_port'))
                + non_empty('node_metrics_listen_host', v.get('node_metrics_listen_host'), 'an address or host name')
                + absolute_path('node_metrics_textfile_dir', v.get('node_metrics_textfile_dir'))
                + int_range('node_metrics_gpu_interval', v.get('node_metrics_gpu_interval'), 5, what='seconds')
                + int_range('node_metrics_timeout', v.get('node_metrics_timeout'), 1, what='seconds')
                + int_range('node_metrics_gpu_expected_count', v.get('node_metrics_gpu_expected_count'), 0,
                            what='a GPU count (0: not checked)'))
    interval, timeout = as_int(v.get('node_metrics_gpu_interval')), as_int(v.get('node_metrics_timeout'))
    if is_true(v.get('node_metrics_gpu_collector')) and interval is not None and timeout is not None and timeout >= interval:
        problems.append('node_metrics_timeout (%d s) must be shorter than node_metrics_gpu_interval (%d s): a'
                        ' collector run would still be running when the next one starts.' % (timeout, interval))
    return problems + optional_http_url('node_metrics_sglang_health_url', v.get('node_metrics_sglang_health_url'),
                                        'no health probe')


def serving_errors(v):
    """Inputs of role serving (types and choices: its argument specs)."""
    problems = serial('serving_deploy_serial', v.get('serving_deploy_serial'))
    problems += fraction('serving_max_regression', v.get('serving_max_regression'), high_open=True,
                         example=', e.g. 0.1 for 10%')
    problems += int_range('serving_max_baseline_age', v.get('serving_max_baseline_age'), 0, what='seconds')
    for name in ('serving_benchmark_num_prompts', 'serving_benchmark_concurrency', 'serving_lock_max_tokens'):
        problems += int_range(name, v.get(name), 1)
    repeats = as_int(v.get('serving_benchmark_repeats'))
    if repeats is None or repeats < 1:
        problems.append('serving_benchmark_repeats is 1 or more (got %s; 3 or more measure the noise).'
                        % show(v.get('serving_benchmark_repeats')))
    problems += fraction('serving_gate_min_effect', v.get('serving_gate_min_effect'), high_open=True)
    problems += fraction('serving_lock_min_agreement', v.get('serving_lock_min_agreement'))
    divergence = as_float(v.get('serving_lock_max_logprob_divergence'))
    if divergence is None or divergence < 0:
        problems.append('serving_lock_max_logprob_divergence is 0 or more nats (got %s).'
                        % show(v.get('serving_lock_max_logprob_divergence')))
    problems += (int_range('serving_host_experiment_timeout', v.get('serving_host_experiment_timeout'), 1,
                           what="the check's hard timeout in seconds")
                 + int_range('serving_vm_boot_delay', v.get('serving_vm_boot_delay'), 0, what='seconds')
                 + int_range('serving_vm_boot_timeout', v.get('serving_vm_boot_timeout'), 1, what='seconds')
                 + int_range('serving_drain_timeout', v.get('serving_drain_timeout'), 0, what='seconds')
                 + int_range('serving_drain_interval', v.get('serving_drain_interval'), 1, what='seconds')
                 + int_range('serving_router_join_timeout', v.get('serving_router_join_timeout'), 1, what='seconds')
                 + int_range('serving_rollback_health_timeout', v.get('serving_rollback_health_timeout'), 1,
                             what='seconds')
                 + host_address('serving_worker_address', v.get('serving_worker_address')))
    if is_true(v.get('serving_lock_enabled')) and not v.get('serving_lock_prompts'):
        problems.append('serving_lock_prompts needs at least one prompt while serving_lock_enabled is true.')
    return problems


def sglang_router_errors(v):
    """Inputs of role sglang_router (the router's own arguments: module sglang_router_args)."""
    version_problems = version('sglang_router_version', v.get('sglang_router_version'))
    key_problems = (secret('sglang_router_api_key', v.get('sglang_router_api_key'))
                    + secret('sglang_router_admin_api_key', v.get('sglang_router_admin_api_key')))
    package = v.get('sglang_router_package')
    keys = [v.get('sglang_router_api_key'), v.get('sglang_router_admin_api_key')]
    key_variables = ('sglang_router_api_key', 'sglang_router_admin_api_key')
    return (int_range('sglang_router_health_timeout', v.get('sglang_router_health_timeout'), 1, what='seconds')
            + int_range('sglang_router_health_interval', v.get('sglang_router_health_interval'), 1, what='seconds')
            + version_problems
            + (package_version_errors(package, v.get('sglang_router_version')) if not version_problems else [])
            + key_problems
            + (admin_key_errors(package, v.get('sglang_router_api_key'), v.get('sglang_router_admin_api_key'))
               if not key_problems else [])
            # Refused again on the node against the installed router (module sglang_router_args); here first,
            # on the controller, before a module's arguments could show them.
            + secrets_in_args('sglang_router_args', v.get('sglang_router_args'), keys, key_variables)
            + secrets_in_args('sglang_router_extra_args', v.get('sglang_router_extra_args'), keys, key_variables))


def proxmox_gpu_vm_errors(v):
    """Inputs of role proxmox_gpu_vm on the Proxmox host (entry point main): the host's own settings."""
    return (absolute_path('proxmox_gpu_vm_sysfs_root', v.get('proxmox_gpu_vm_sysfs_root'))
            + non_empty('proxmox_gpu_vm_qm', v.get('proxmox_gpu_vm_qm'), 'the qm command (a name or a path)')
            + non_empty('proxmox_gpu_vm_machine', v.get('proxmox_gpu_vm_machine'), 'a machine type such as q35')
            + non_empty('proxmox_gpu_vm_cpu', v.get('proxmox_gpu_vm_cpu'), 'a CPU type such as host')
            + int_range('proxmox_gpu_vm_shutdown_timeout', v.get('proxmox_gpu_vm_shutdown_timeout'), 1,
                        what='seconds'))


def _vmid(value):
    if as_int(value) is None or as_int(value) < 100:
        return ["proxmox_gpu_vm_vmid must be the VM's Proxmox id (100 or more), set as a host variable of the GPU VM"
                ' in the inventory, got %s.' % show(value)]
    return []


def proxmox_gpu_vm_vm_errors(v):
    """Inputs of one VM's passthrough (entry point vm): the host's settings, the VM's id and its GPUs."""
    keys = ('gpus', 'clique', 'machine', 'cpu', 'numa', 'hugepages')
    spec = dict((key, v.get('proxmox_gpu_vm_' + key)) for key in keys)
    return (proxmox_gpu_vm_errors(v) + _vmid(v.get('proxmox_gpu_vm_vmid'))
            + ['%s.' % problem for problem in validate_spec(spec)])


def proxmox_gpu_vm_restart_errors(v):
    """Inputs of one VM's restart (entry point restart)."""
    return (_vmid(v.get('proxmox_gpu_vm_vmid'))
            + non_empty('proxmox_gpu_vm_qm', v.get('proxmox_gpu_vm_qm'), 'the qm command (a name or a path)')
            + int_range('proxmox_gpu_vm_shutdown_timeout', v.get('proxmox_gpu_vm_shutdown_timeout'), 1,
                        what='seconds'))


ROLES = {
    'gpu_vm': gpu_vm_errors,
    'monitoring': monitoring_errors,
    'node_metrics': node_metrics_errors,
    'proxmox_gpu_vm': proxmox_gpu_vm_errors,
    'serving': serving_errors,
    'sglang': sglang_errors,
    'sglang_router': sglang_router_errors,
    'sglang_server': sglang_server_errors,
}
# Entry points whose inputs differ from the role's main ones: (role, entry point) -> rules.
ENTRY_POINTS = {
    ('proxmox_gpu_vm', 'vm'): proxmox_gpu_vm_vm_errors,
    ('proxmox_gpu_vm', 'restart'): proxmox_gpu_vm_restart_errors,
}


def role_input_errors(role, variables, entry_point='main'):
    """Every problem with ``variables`` (name -> value, each of its declared type) of one entry point of
    ``role``; an unknown role is one problem."""
    if role not in ROLES:
        return ['no input checks are defined for role %s' % show(role)]
    if not isinstance(variables, dict):
        return ['the inputs of role %s must be given as a mapping' % role]
    return ENTRY_POINTS.get((role, entry_point), ROLES[role])(variables)


def role_errors(role, options, variables, entry_point='main'):
    """A role's inputs as its input check takes them: every variable ``options`` (the entry point's,
    from its argument specs) declares, converted to its declared type first (``-e`` gives text);
    then, when every one converts, by range and meaning."""
    converted, problems = converted_values(options, variables)
    if problems:
        return problems
    return role_input_errors(role, dict((name, converted.get(name)) for name in options), entry_point)
