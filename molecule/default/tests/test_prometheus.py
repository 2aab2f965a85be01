# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring node: Debian's Prometheus and Alertmanager, loopback only, with the inventory's targets."""

import os

from ansible_collections.inferops.serving.tests.utils.lab import LAB_API_KEY
from ansible_collections.inferops.serving.tests.utils.playbook import run_scenario_playbook
from ansible_collections.inferops.serving.tests.utils.prometheus import api, empty_dashboard_queries, rule_selectors_without_series, unhealthy_rules

# A failed test prints their journal (conftest.py).
JOURNAL_UNITS = ["prometheus", "prometheus-alertmanager"]
testinfra_hosts = ["lab-default-prom"]


def test_debian_packages_run(host, journal):
    for package in ("prometheus", "prometheus-alertmanager"):
        assert host.package(package).is_installed
    for service in ("prometheus", "prometheus-alertmanager"):
        assert host.service(service).is_running and host.service(service).is_enabled


def test_nothing_listens_beyond_loopback(host):
    listening = host.socket.get_listening_sockets()
    assert "tcp://127.0.0.1:9090" in listening and "tcp://127.0.0.1:9093" in listening
    # The Alertmanager cluster port (0.0.0.0:9094 by default) is off.
    assert not [s for s in listening if s.endswith(":9094")]
    assert not [s for s in listening if s.endswith(":9090") or s.endswith(":9093")
                if not s.startswith("tcp://127.0.0.1:")]


def test_promtool_accepts_the_configuration_it_runs(host):
    result = host.run("promtool check config /etc/prometheus/prometheus.yml")
    assert result.rc == 0, result.stdout + result.stderr
    assert host.run("amtool check-config /etc/prometheus/alertmanager.yml").rc == 0


def test_promtool_rule_tests_pass_on_the_shipped_rules(host):
    rendered = run_scenario_playbook(os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "promtool_rules.yml"))
    assert rendered.returncode == 0, rendered.summary
    result = host.run("cd /root/promtool && promtool test rules inferops-serving.rules.test.yml")
    assert result.rc == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_targets_come_from_the_inventory_and_are_up(host):
    targets = api(host, "/targets?state=active")["data"]["activeTargets"]
    found = sorted((t["labels"]["job"], t["labels"]["node"], t["scrapeUrl"], t["health"]) for t in targets)
    assert found == [
        ("node", "lab-default", "http://lab-default:9100/metrics", "up"),
        ("node", "lab-default-prom", "http://lab-default-prom:9100/metrics", "up"),
        ("prometheus", "lab-default-prom", "http://127.0.0.1:9090/metrics", "up"),
        ("sglang", "lab-default", "http://lab-default:8000/metrics", "up"),
    ]


def test_the_rules_are_loaded_with_the_lab_durations(host):
    groups = api(host, "/rules")["data"]["groups"]
    rules = dict((r["name"], r) for g in groups for r in g["rules"])
    assert rules["SGLangServerDown"]["duration"] == 4
    assert rules["GPUPowerLowUnderLoad"]["duration"] == 900
    assert {"SGLangServerUnhealthy", "GPUXidError", "SGLangThroughputBelowBaseline",
            "SGLangRouterNoHealthyWorker"} <= set(rules)


def test_sglang_and_gpu_series_arrive_under_their_real_names(host):
    for query in ('count({__name__=~"sglang:.+", node="lab-default"})',
                  'count(inferops_gpu_power_draw_watts{node="lab-default"})',
                  'sum(inferops_gpu_power_limit_watts{node="lab-default"})',
                  'inferops_sglang_health_up{node="lab-default"}',
                  'node_textfile_scrape_error{node="lab-default"}'):
        result = api(host, "/query", query)["data"]["result"]
        assert len(result) == 1, query
        value = float(result[0]["value"][1])
        if query.startswith("count({"):
            assert value >= 10, query
        elif query.startswith("count(inferops"):
            assert value == 8, query
        elif query.startswith("sum("):
            assert value == 8 * 600, query
        elif query.startswith("inferops_sglang_health_up"):
            assert value == 1, query
        else:
            assert value == 0, query


def test_no_secret_in_the_monitoring_configuration(host):
    assert host.run("grep -r %s /etc/prometheus /etc/default/prometheus*" % LAB_API_KEY).rc == 1


def test_every_dashboard_query_has_data_and_every_alert_reads_series_that_exist(host):
    # No router and no Xid in this lab: those stay empty; every other panel and alert has data.
    assert not empty_dashboard_queries(host, may_be_empty=("smg_", "xid"))
    assert not unhealthy_rules(host)
    assert not rule_selectors_without_series(host, may_be_empty=("smg_", "sglang-router", "xid"))
