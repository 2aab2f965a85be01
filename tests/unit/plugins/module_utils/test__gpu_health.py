# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import os
from xml.etree import ElementTree

import pytest

from ansible_collections.inferops.serving.plugins.module_utils._gpu_health import (
    DEFAULT_FATAL_XIDS,
    REBOOT,
    REPLACE,
    RESET,
    GpuHealthError,
    assess,
    parse_smi_xml,
)
from ansible_collections.inferops.serving.plugins.module_utils._gpu_textfile import xid_events

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, 'fixtures', 'gpu_health')


def fixture(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


REAL_XML = fixture('h200-2026-12-01', 'q.xml')
REAL_LOG = fixture('h200-2026-12-01', 'kernel.log')


def fault(name):
    return fixture('faults', name)


def with_xids(name):
    """The H200's real kernel log with the Xid lines of one fault after it."""
    return REAL_LOG + fixture('xid', name)


def gpu0(result):
    return result['gpus'][0]


# ---- the real H200 -------------------------------------------------------------------

@pytest.mark.parametrize('capture', ['q.xml', 'q-dtd.xml'])
def test_a_real_h200_is_healthy(capture):
    result = assess(fixture('h200-2026-12-01', capture), REAL_LOG, expected_gpu_count=1)
    assert result['healthy'] is True and result['action'] == 'none'
    assert result['problems'] == [] and result['gpu_warnings'] == [] and result['node_findings'] == []
    assert result['verdict'] == 'healthy: 1 GPU (NVIDIA H200) fit to serve'
    assert result['driver_version'] == '580.159.04' and result['xids_checked'] is True
    gpu = gpu0(result)
    assert (gpu['index'], gpu['bus_id'], gpu['name']) == (0, '0000:00:06.0', 'NVIDIA H200')
    assert gpu['xids'] == [] and gpu['findings'] == []
    readings = gpu['readings']
    assert readings['recovery_action'] == 'None' and readings['persistence_mode'] == 'Enabled'
    assert readings['ecc_mode'] == 'Enabled' and readings['ecc_uncorrectable_volatile'] == 0
    assert readings['ecc_uncorrectable_aggregate'] == 0
    assert readings['remapped_rows_pending'] is False and readings['remapping_failure'] is False
    # The H200 remaps rows instead of retiring pages: nvidia-smi says N/A there.
    assert readings['retired_pages'] is None and readings['retired_pages_pending'] is None
    # Drivers from R570 on no longer print the old reset flags.
    assert readings['reset_required'] is None


def test_the_real_kernel_log_holds_no_xid():
    assert xid_events(REAL_LOG) == []


# ---- the fault fixtures change only what their fault changes ---------------------------

def _leaves(text):
    """{tag path: [texts]} of the XML's leaf elements (a path repeats for lists such as the clocks)."""
    leaves = {}

    def walk(node, path):
        children = list(node)
        if not children:
            leaves.setdefault(path, []).append((node.text or '').strip())
        for child in children:
            walk(child, '%s/%s' % (path, child.tag))
    root = ElementTree.fromstring(text)
    walk(root, root.tag)
    return leaves


FAULT_EDITS = {
    'recovery-reset.xml': {'gpu/gpu_recovery_action': ('None', 'Reset')},
    'recovery-reboot.xml': {'gpu/gpu_recovery_action': ('None', 'Reboot')},
    'recovery-drain-p2p.xml': {'gpu/gpu_recovery_action': ('None', 'Drain P2P')},
    'recovery-drain-and-reset.xml': {'gpu/gpu_recovery_action': ('None', 'Drain and Reset')},
    'row-remap-pending.xml': {'remapped_rows/remapped_row_corr': ('0', '1'),
                              'remapped_rows/remapped_row_pending': ('No', 'Yes')},
    'row-remap-failure.xml': {'remapped_rows/remapped_row_failure': ('No', 'Yes')},
    'ecc-uncorrectable.xml': {'ecc_errors/volatile/dram_uncorrectable': ('0', '2'),
                              'ecc_errors/aggregate/dram_uncorrectable': ('0', '2')},
    'ecc-uncorrectable-lifetime.xml': {'ecc_errors/aggregate/dram_uncorrectable': ('0', '1')},
    'retired-pages-pending.xml': {'retired_pages/double_bit_retirement/retired_count': ('N/A', '1'),
                                  'retired_pages/pending_retirement': ('N/A', 'Yes')},
    'persistence-off.xml': {'gpu/persistence_mode': ('Enabled', 'Disabled')},
}


@pytest.mark.parametrize('name', sorted(FAULT_EDITS))
def test_each_fault_fixture_is_the_real_xml_with_only_its_fault_changed(name):
    real, derived = _leaves(REAL_XML), _leaves(fault(name))
    assert set(real) == set(derived)
    changed = dict((path, (real[path][0], derived[path][0])) for path in real if real[path] != derived[path])
    assert all(len(real[path]) == 1 for path in changed)
    assert sorted(changed) == sorted('nvidia_smi_log/gpu/' + suffix if not suffix.startswith('gpu/')
                                     else 'nvidia_smi_log/' + suffix for suffix in FAULT_EDITS[name])
    for suffix, values in FAULT_EDITS[name].items():
        assert changed[[path for path in changed if path.endswith('/' + suffix)][0]] == values


def test_the_two_gpu_fixture_is_the_h200_twice_at_the_two_buses_of_the_two_gpu_vm():
    parsed = parse_smi_xml(fault('two-gpus.xml'))
    assert parsed['attached_gpus'] == 2
    assert [(gpu['index'], gpu['bus_id']) for gpu in parsed['gpus']] == [(0, '0000:00:06.0'), (1, '0000:00:07.0')]


# ---- Xids ------------------------------------------------------------------------------

@pytest.mark.parametrize('log, xid, action, says', [
    ('xid-48.log', 48, 'reset', ['double-bit ECC', RESET, REPLACE]),
    ('xid-79.log', 79, 'reboot', ['fell off the bus', REBOOT]),
    ('xid-95.log', 95, 'reset', ['uncontained ECC', RESET]),
    ('xid-119.log', 119, 'reset', ['GSP firmware', RESET, REBOOT]),
    ('xid-154-reset.log', 154, 'reset', ["recovery action to 'GPU Reset Required'", RESET]),
])
def test_each_fatal_xid_makes_the_gpu_unhealthy_and_says_what_to_do(log, xid, action, says):
    result = assess(REAL_XML, with_xids(log), expected_gpu_count=1)
    assert result['healthy'] is False and result['action'] == action
    assert len(result['problems']) == 1
    problem = result['problems'][0]
    assert problem.startswith('GPU 0 (0000:00:06.0, NVIDIA H200): Xid %d (' % xid)
    for text in says:
        assert text in problem
    # A reboot empties the kernel log; after a reset the line needs ignore_xids_before.
    assert ('ignore_xids_before' in problem) == (action != 'reboot')
    assert result['verdict'] == 'unhealthy (%s): GPU 0 Xid %d' % (action, xid)
    assert gpu0(result)['xids'][0]['xid'] == xid and gpu0(result)['xids'][0]['fatal'] is True


def test_a_gpu_that_fell_off_the_bus_and_asks_for_a_reboot_needs_a_reboot():
    result = assess(REAL_XML, with_xids('xid-154-reboot.log'))
    assert result['action'] == 'reboot'
    assert [finding['summary'] for finding in gpu0(result)['findings']] == ['GPU 0 Xid 79', 'GPU 0 Xid 154']
    assert "recovery action to 'Node Reboot Required'" in result['problems'][1]
    assert REBOOT in result['problems'][1]


def test_an_xid_154_back_to_none_is_the_recovery_not_a_fault():
    result = assess(REAL_XML, with_xids('xid-154-recovered.log'))
    assert result['healthy'] is True
    assert gpu0(result)['xids'] == [{'xid': 154, 'count': 2, 'fatal': False,
                                     'last_detail': 'GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)'}]


def test_application_xids_13_and_31_leave_the_gpu_healthy_but_are_listed():
    result = assess(REAL_XML, with_xids('xid-13-31.log'), expected_gpu_count=1)
    assert result['healthy'] is True and result['problems'] == [] and result['gpu_warnings'] == []
    assert [(x['xid'], x['count'], x['fatal']) for x in gpu0(result)['xids']] == [(13, 2, False), (31, 1, False)]


def test_the_fatal_set_is_an_option():
    result = assess(REAL_XML, with_xids('xid-13-31.log'), fatal_xids=[13])
    assert result['healthy'] is False and result['action'] == 'investigate'
    assert 'Xid 13 (listed in fatal_xids) 2 times since boot' in result['problems'][0]
    assert assess(REAL_XML, with_xids('xid-79.log'), fatal_xids=[])['healthy'] is True
    assert DEFAULT_FATAL_XIDS == (48, 79, 95, 119, 154)


def test_xids_before_a_reset_can_be_left_out_by_uptime():
    assert assess(REAL_XML, with_xids('xid-95.log'), ignore_xids_before=5120.118331)['healthy'] is True
    assert assess(REAL_XML, with_xids('xid-95.log'), ignore_xids_before=5000)['healthy'] is False
    # A line without a timestamp cannot be placed before the reset, so it counts.
    unstamped = 'NVRM: Xid (PCI:0000:00:06): 95, pid=7062, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No\n'
    assert assess(REAL_XML, unstamped, ignore_xids_before=1e9)['healthy'] is False


def test_a_gpu_nvidia_smi_no_longer_lists_is_named_by_its_bus():
    result = assess(REAL_XML, with_xids('xid-79-unlisted.log'))
    assert result['healthy'] is False and result['action'] == 'reboot'
    assert gpu0(result)['findings'] == []
    assert result['problems'] == [result['node_findings'][0]['message']]
    assert result['problems'][0].startswith('GPU 0000:b3:00.0, which nvidia-smi does not list: Xid 79 (the GPU fell off')


def test_an_xid_is_charged_to_its_own_gpu_only():
    log = REAL_LOG + fixture('xid', 'xid-95.log').replace('PCI:0000:00:06', 'PCI:0000:00:07')
    result = assess(fault('two-gpus.xml'), log, expected_gpu_count=2)
    assert result['gpus'][0]['findings'] == [] and result['gpus'][0]['xids'] == []
    assert [finding['check'] for finding in result['gpus'][1]['findings']] == ['xid']
    assert result['problems'][0].startswith('GPU 1 (0000:00:07.0, NVIDIA H200): Xid 95')


@pytest.mark.parametrize('line, bus_id, xid, uptime', [
    # journalctl -k -o short-monotonic, as the module reads it
    ('[ 5120.118331] gpu-node kernel: NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.',
     '0000:00:06.0', 79, 5120.118331),
    # syslog: wall clock, host, then the kernel's own stamp
    ("Dec  2 10:43:35 worker4 kernel: [240314.528856] NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, "
     "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer",
     '0000:07:00.0', 48, 240314.528856),
    # an error inside a MIG instance names the instance after the bus
    ('NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No',
     '0000:01:00.0', 94, None),
])
def test_xid_lines_in_each_log_format_are_read(line, bus_id, xid, uptime):
    events = xid_events(line + '\n')
    assert [(e['bus_id'], e['xid'], e['uptime'], e['inferred']) for e in events] == [(bus_id, xid, uptime, False)]


def test_without_a_kernel_log_xids_are_not_checked_and_the_result_says_so():
    result = assess(REAL_XML, None)
    assert result['healthy'] is True and result['xids_checked'] is False
    assert result['gpu_warnings'] == ['the kernel log could not be read, so Xid errors were not checked.']


# ---- what nvidia-smi -q -x reports -----------------------------------------------------

@pytest.mark.parametrize('name, action, says', [
    ('recovery-reset.xml', 'reset', ["recovery action 'Reset'", RESET]),
    ('recovery-reboot.xml', 'reboot', ["recovery action 'Reboot'", REBOOT]),
    ('recovery-drain-and-reset.xml', 'reset', ["recovery action 'Drain and Reset'", RESET, 'once the processes']),
    ('recovery-drain-p2p.xml', 'drain', ["recovery action 'Drain P2P'", 'peer-to-peer']),
])
def test_the_recovery_action_the_driver_asks_for_is_a_problem_with_its_step(name, action, says):
    result = assess(fault(name), REAL_LOG)
    assert result['healthy'] is False and result['action'] == action
    assert [finding['check'] for finding in gpu0(result)['findings']] == ['recovery_action']
    for text in says:
        assert text in result['problems'][0]


def test_a_recovery_action_this_module_does_not_know_is_not_taken_for_none():
    result = assess(REAL_XML.replace('>None</gpu_recovery_action>', '>Recover IMEX Domain</gpu_recovery_action>'), '')
    assert result['healthy'] is False and result['action'] == 'investigate'


def test_a_recovery_action_nvidia_smi_could_not_read_is_a_warning():
    result = assess(REAL_XML.replace('>None</gpu_recovery_action>', '>Unknown Error</gpu_recovery_action>'), '')
    assert result['healthy'] is True and "could not read the recovery action ('Unknown Error')" in result['gpu_warnings'][0]


def test_the_reset_flag_of_drivers_before_r570_is_read():
    old = REAL_XML.replace('\t\t<gpu_recovery_action>None</gpu_recovery_action>\n',
                           '\t\t<gpu_reset_status>\n\t\t\t<reset_required>Yes</reset_required>\n'
                           '\t\t\t<drain_and_reset_recommended>No</drain_and_reset_recommended>\n\t\t</gpu_reset_status>\n')
    result = assess(old, '')
    assert result['action'] == 'reset' and 'flags the GPU for a reset' in result['problems'][0]


def test_pending_row_remapping_needs_a_reset():
    result = assess(fault('row-remap-pending.xml'), REAL_LOG)
    assert result['healthy'] is False and result['action'] == 'reset'
    assert 'a GPU reset applies the pending row remapping' in result['problems'][0] and RESET in result['problems'][0]
    assert gpu0(result)['readings']['remapped_rows_correctable'] == 1


def test_a_row_remapping_failure_means_replacing_the_gpu():
    result = assess(fault('row-remap-failure.xml'), REAL_LOG)
    assert result['healthy'] is False and result['action'] == 'replace'
    assert result['problems'] == ['GPU 0 (0000:00:06.0, NVIDIA H200): the GPU could not remap a failing memory row '
                                  "(NVIDIA's RMA criterion); replace or RMA the GPU."]


def test_uncorrectable_ecc_errors_since_the_driver_loaded_are_a_problem():
    result = assess(fault('ecc-uncorrectable.xml'), REAL_LOG)
    assert result['healthy'] is False and result['action'] == 'reset'
    assert '2 uncorrectable ECC error(s) since the driver loaded' in result['problems'][0]
    assert REPLACE in result['problems'][0]
    assert gpu0(result)['readings']['ecc_uncorrectable_aggregate'] == 2


def test_uncorrectable_ecc_errors_only_in_the_lifetime_count_are_a_warning():
    result = assess(fault('ecc-uncorrectable-lifetime.xml'), REAL_LOG)
    assert result['healthy'] is True
    assert "1 uncorrectable ECC error(s) over the GPU's life" in result['gpu_warnings'][0]


def test_pages_waiting_for_retirement_need_a_reset():
    result = assess(fault('retired-pages-pending.xml'), REAL_LOG)
    assert result['healthy'] is False and result['action'] == 'reset'
    assert 'memory pages wait to be retired' in result['problems'][0]
    assert gpu0(result)['readings']['retired_pages'] == 1


def test_persistence_mode_off_is_a_warning_unless_required():
    result = assess(fault('persistence-off.xml'), REAL_LOG)
    assert result['healthy'] is True and result['problems'] == []
    assert 'persistence mode is off' in result['gpu_warnings'][0]
    assert result['verdict'] == 'healthy: 1 GPU (NVIDIA H200) fit to serve; 1 warning: GPU 0 persistence mode off'
    required = assess(fault('persistence-off.xml'), REAL_LOG, require_persistence_mode=True)
    assert required['healthy'] is False and required['action'] == 'configure'


def test_ecc_off_is_a_warning():
    result = assess(REAL_XML.replace('<current_ecc>Enabled<', '<current_ecc>Disabled<'), '')
    assert result['healthy'] is True and 'ECC is off' in result['gpu_warnings'][0]


def test_fewer_gpus_than_expected_is_unhealthy():
    result = assess(REAL_XML, REAL_LOG, expected_gpu_count=2)
    assert result['healthy'] is False and result['action'] == 'reboot'
    assert result['problems'][0].startswith('nvidia-smi lists 1 of the 2 GPUs expected')
    assert result['verdict'] == 'unhealthy (reboot): 1 of 2 GPUs'


def test_more_gpus_than_expected_is_a_warning():
    result = assess(fault('two-gpus.xml'), REAL_LOG, expected_gpu_count=1)
    assert result['healthy'] is True and 'more than the 1 expected' in result['gpu_warnings'][0]


def test_a_gpu_the_driver_counts_but_does_not_describe_is_unhealthy():
    result = assess(REAL_XML.replace('<attached_gpus>1<', '<attached_gpus>2<'), REAL_LOG)
    assert result['healthy'] is False and 'counts 2 attached GPUs but describes only 1' in result['problems'][0]


def test_an_error_nvidia_smi_reported_beside_its_xml_is_a_problem():
    result = assess(REAL_XML, REAL_LOG, smi_failure='exit code 15: Unable to determine the device handle')
    assert result['healthy'] is False and 'Unable to determine the device handle' in result['problems'][0]


def test_the_strongest_step_wins():
    result = assess(fault('row-remap-failure.xml').replace('>None</gpu_recovery_action>', '>Reset</gpu_recovery_action>'),
                    with_xids('xid-79.log'))
    assert result['action'] == 'replace' and len(result['problems']) == 3


@pytest.mark.parametrize('text, message', [
    ('', 'printed nothing'),
    ('No devices were found\n', 'is not XML'),
    ('NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver.\n', 'is not XML'),
    (REAL_XML[:len(REAL_XML) // 2], 'is not XML'),
    ('<?xml version="1.0" ?>\n<something_else/>\n', 'not <nvidia_smi_log>'),
])
def test_output_that_is_not_the_xml_is_refused_rather_than_called_healthy(text, message):
    with pytest.raises(GpuHealthError, match=message):
        assess(text, REAL_LOG)
