# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's shipped files: the Grafana dashboard, the alert rules, the documented variables."""
from __future__ import (absolute_import, division, print_function)
__metaclass__ = type

import json
import os
import re
import shutil
import subprocess

import jinja2
import pytest
import yaml

from ansible_collections.inferops.serving.tests.utils.prometheus import DASHBOARD, dashboard_queries

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..', '..'))
ROLE = os.path.join(REPO, 'roles', 'monitoring')
RULES = os.path.join(ROLE, 'templates', 'inferops-serving.rules.yml.j2')
PROMTOOL_TESTS = os.path.join(REPO, 'tests', 'promtool', 'inferops-serving.rules.test.yml')

# An SGLang metric written with one spelling only (sglang:x or sglang_x), which breaks on the
# other release; `inferops_sglang_*` is the collection's own and not meant.
ONE_SPELLING = re.compile(r'(?<![\w\[])(?<!~")sglang[:_][a-z0-9_]+')
BOTH_SPELLINGS = re.compile(r'__name__=~"sglang\[:_\][a-z0-9_]+"')


def load_yaml(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return yaml.safe_load(handle)


def render_rules(overrides=None):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    env.filters['comment'] = lambda text: '# ' + text
    variables = dict(load_yaml('roles', 'monitoring', 'defaults', 'main.yml'), ansible_managed='Ansible managed')
    variables.update(overrides or {})
    with open(RULES) as handle:
        return env.from_string(handle.read()).render(**variables)


# Gauges SGLang 0.5.23 writes per priority beside their total under --enable-priority-scheduling.
QUEUE_COUNT = re.compile(r'\{__name__=~"sglang\[:_\](num_running_reqs|num_queue_reqs)"(?P<rest>[^}]*)\}')


@pytest.mark.parametrize('source', ['dashboard', 'rules'])
def test_request_counts_read_the_totals_only(source):
    texts = [expr for _title, expr in dashboard_queries()] if source == 'dashboard' else [render_rules()]
    selectors = [match for text in texts for match in QUEUE_COUNT.finditer(text)]
    assert len(selectors) >= (3 if source == 'dashboard' else 2)
    for match in selectors:
        assert 'priority=""' in match.group('rest'), match.group(0)


def test_every_dashboard_query_works_with_both_sglang_spellings():
    queries = list(dashboard_queries())
    assert len(queries) >= 20
    sglang = [(title, expr) for title, expr in queries if 'sglang' in expr.replace('inferops_sglang_', '')]
    assert len(sglang) >= 10
    for title, expr in sglang:
        if 'smg_' in expr or 'job="sglang"' in expr:
            continue
        assert BOTH_SPELLINGS.search(expr), '%s: %s names no SGLang metric through the regex' % (title, expr)
        assert not ONE_SPELLING.search(expr), '%s: %s spells an SGLang metric one way only' % (title, expr)


def test_the_dashboard_shows_what_the_operator_watches():
    with open(DASHBOARD) as handle:
        dashboard = json.load(handle)
    exprs = ' '.join(expr for _title, expr in dashboard_queries())
    for metric in ('generation_tokens_total', 'time_to_first_token_seconds_bucket', 'inter_token_latency_seconds_bucket',
                   'e2e_request_latency_seconds_bucket', 'num_queue_reqs', 'token_usage',
                   'inferops_gpu_power_draw_watts', 'inferops_gpu_power_limit_watts', 'inferops_gpu_utilization_ratio',
                   'inferops_sglang_baseline_output_throughput_tokens_per_second', 'smg_worker_health'):
        assert metric in exprs, metric
    ids = [panel['id'] for panel in dashboard['panels']]
    assert len(ids) == len(set(ids))
    assert dashboard['uid'] == 'inferops-serving'
    assert [v['name'] for v in dashboard['templating']['list']] == ['datasource', 'node']


def test_the_rules_render_and_match_both_sglang_spellings():
    rules = yaml.safe_load(render_rules())['groups'][0]['rules']
    names = [rule['alert'] for rule in rules]
    for alert in ('SGLangServerDown', 'SGLangServerUnhealthy', 'GPUXidError', 'GPUUnhealthy', 'GPUPowerLowUnderLoad',
                  'SGLangThroughputBelowBaseline', 'SGLangRouterNoHealthyWorker'):
        assert alert in names
    for rule in rules:
        assert rule['labels']['severity'] in ('critical', 'warning')
        assert rule['annotations']['summary']
        assert not ONE_SPELLING.search(rule['expr']), rule['expr']


def test_thresholds_and_durations_come_from_the_variables():
    rules = yaml.safe_load(render_rules({'monitoring_alert_gpu_power_share': 0.35, 'monitoring_alert_gpu_power_for': '7m'}))
    power = [rule for rule in yaml.safe_load(render_rules())['groups'][0]['rules'] if rule['alert'] == 'GPUPowerLowUnderLoad'][0]
    changed = [rule for rule in rules['groups'][0]['rules'] if rule['alert'] == 'GPUPowerLowUnderLoad'][0]
    assert ') < 0.5' in power['expr'] and power['for'] == '15m'
    assert ') < 0.35' in changed['expr'] and changed['for'] == '7m'


def test_the_gpu_health_alert_reads_the_collectors_verdict_after_its_duration():
    rule = [rule for rule in yaml.safe_load(render_rules({'monitoring_alert_gpu_unhealthy_for': '3m'}))['groups'][0]['rules']
            if rule['alert'] == 'GPUUnhealthy'][0]
    assert rule['expr'] == 'inferops_gpu_healthy == 0'
    assert rule['for'] == '3m' and rule['labels']['severity'] == 'critical'
    assert 'deploy.yml -l {{ $labels.node }}' in rule['annotations']['description']


@pytest.mark.parametrize('role', ['monitoring', 'node_metrics'])
def test_every_default_is_documented_with_its_default(role):
    defaults = load_yaml('roles', role, 'defaults', 'main.yml')
    options = load_yaml('roles', role, 'meta', 'argument_specs.yml')['argument_specs']['main']['options']
    assert sorted(defaults) == sorted(options)
    for name, spec in options.items():
        assert 'default' in spec, name
        assert name.startswith(role + '_'), name
        if not isinstance(defaults[name], str) or '{{' not in defaults[name]:
            assert spec['default'] == defaults[name], name


# promtool ships in Debian's prometheus package; the monitoring scenario always runs these tests
# on its Prometheus node. Here they run when this machine has promtool too.
@pytest.mark.skipif(shutil.which('promtool') is None, reason='promtool not installed here (molecule/default runs it)')
def test_promtool_passes_the_rule_tests(tmp_path):
    (tmp_path / 'inferops-serving.rules.yml').write_text(render_rules())
    shutil.copy(PROMTOOL_TESTS, str(tmp_path))
    result = subprocess.run(['promtool', 'test', 'rules', 'inferops-serving.rules.test.yml'], cwd=str(tmp_path),
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


# The router's metrics as each router package the sglang_router role installs exports them
# (fixtures/: trimmed real scrapes of its Prometheus listener).
ROUTER_SCRAPES = {'sglang-router': 'sglang-router-0.3.2-metrics.txt', 'smg': 'smg-1.13.0-metrics.txt'}
ROUTER_METRIC = re.compile(r'\bsmg_[a-z0-9_]+')


def scraped_series(package):
    with open(os.path.join(os.path.dirname(__file__), 'fixtures', ROUTER_SCRAPES[package])) as handle:
        return set(match.group(0) for line in handle if not line.startswith('#')
                   for match in [ROUTER_METRIC.match(line)] if match)


def router_metrics_used():
    used = set()
    for title, expr in dashboard_queries():
        used.update((name, 'dashboard panel %r' % title) for name in ROUTER_METRIC.findall(expr))
    for rule in yaml.safe_load(render_rules())['groups'][0]['rules']:
        used.update((name, 'alert %s' % rule['alert']) for name in ROUTER_METRIC.findall(rule['expr']))
    return used


@pytest.mark.parametrize('package', sorted(ROUTER_SCRAPES))
def test_every_router_metric_the_dashboard_and_alerts_read_is_one_the_router_exports(package):
    series = scraped_series(package)
    assert 'smg_worker_health' in series and len(series) > 15
    used = router_metrics_used()
    assert ('smg_worker_health', 'alert SGLangRouterNoHealthyWorker') in used
    missing = sorted('%s (%s)' % (name, where) for name, where in used if name not in series)
    assert not missing, '%s does not export: %s' % (package, ', '.join(missing))


# SGLang's metric families as each shipped release's wheel declares them (read from its source by
# tests/unit/plugins/module_utils/fixtures/sglang_metrics/list_metric_families.py), and what each
# release set records of them.
SGLANG_FAMILIES = os.path.join(REPO, 'tests', 'unit', 'plugins', 'module_utils', 'fixtures', 'sglang_metrics')
RELEASE_SETS = load_yaml('roles', 'sglang', 'vars', 'release_sets.yml')['_sglang_release_sets']
SGLANG_METRIC = re.compile(r'__name__=~"sglang\[:_\]([a-z0-9_]+)"')
# The series a family of each type exports (prometheus_client: a counter's name ends in _total).
SERIES_SUFFIXES = {'gauge': ('',), 'counter': ('',), 'histogram': ('_bucket', '_sum', '_count'),
                   'summary': ('', '_sum', '_count')}


def release_series(version):
    with open(os.path.join(SGLANG_FAMILIES, 'sglang-%s-metric-families.txt' % version)) as handle:
        families = dict(line.split() for line in handle if line.strip())
    return dict((family.split(':', 1)[1] + suffix, family) for family, kind in families.items()
                for suffix in SERIES_SUFFIXES[kind])


def sglang_metrics_used():
    used = set()
    for title, expr in dashboard_queries():
        used.update((name, 'dashboard panel %r' % title) for name in SGLANG_METRIC.findall(expr))
    for rule in yaml.safe_load(render_rules())['groups'][0]['rules']:
        used.update((name, 'alert %s' % rule['alert']) for name in SGLANG_METRIC.findall(rule['expr']))
    return used


def not_exported(version, used):
    series = release_series(version)
    return sorted('%s (%s)' % (name, where) for name, where in used if name not in series)


@pytest.mark.parametrize('release', sorted(RELEASE_SETS))
def test_every_sglang_metric_the_dashboard_and_alerts_read_is_one_the_release_exports(release):
    version = RELEASE_SETS[release]['packages']['sglang']
    used = sglang_metrics_used()
    assert ('num_running_reqs', 'alert GPUPowerLowUnderLoad') in used
    assert len(set(name for name, _where in used)) >= 10
    missing = not_exported(version, used)
    assert not missing, 'SGLang %s does not export: %s' % (release, ', '.join(missing))
    # The release set records each family they read, as this release names it.
    series = release_series(version)
    unrecorded = sorted(set(series[name] for name, _where in used) - set(RELEASE_SETS[release]['metrics']))
    assert not unrecorded, 'release set %s does not list in metrics: %s' % (release, ', '.join(unrecorded))


def test_a_query_of_a_name_one_release_lacks_is_found_naming_its_panel():
    # 0.5.23's per-request TPOT is not in 0.5.9; the name the issue expected is in neither release.
    used = {('request_time_per_output_token_seconds_bucket', "dashboard panel 'TPOT'"),
            ('time_per_output_token_seconds_bucket', 'alert SlowDecode')}
    assert not_exported('0.5.9', used) == ["request_time_per_output_token_seconds_bucket (dashboard panel 'TPOT')",
                                           'time_per_output_token_seconds_bucket (alert SlowDecode)']
    assert not_exported('0.5.23', used) == ['time_per_output_token_seconds_bucket (alert SlowDecode)']
