# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus on the router's host against today's stack, the SGLang 0.5.23 server behind smg 1.13.0:
what the monitoring role's dashboard and alerts read is what these releases export."""

import pytest

from ansible_collections.inferops.serving.tests.utils.lab import inventory_vars
from ansible_collections.inferops.serving.tests.utils.prometheus import (
    active_targets_up, api, empty_dashboard_queries, rule_selectors_without_series, unhealthy_rules)
from ansible_collections.inferops.serving.tests.utils.wait import until

testinfra_hosts = ["lab-upgrade-router"]
ROUTER_KEY = inventory_vars("molecule/upgrade/inventory/group_vars/sglang_routers/upgrade.yml")["sglang_router_api_key"]
NODE = "lab-upgrade"


def _chat(host, stream):
    host.check_output(
        "curl -fsS -o /dev/null -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
        "-d '{\"model\": \"glm-5\", \"max_tokens\": 16, \"stream\": %s, "
        "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}' http://127.0.0.1:30000/v1/chat/completions",
        ROUTER_KEY, stream)


@pytest.fixture(scope="module")
def traffic(host):
    """Requests of both kinds through smg once every target is up, until Prometheus has their rate.

    The server restarted last without a request since: as SGLang's, its labelled counters and
    histograms have no series until a request ends. The first requests make the series, and
    those after Prometheus has scraped them make the increase that a rate reads."""
    until("every target up", lambda: active_targets_up(host))
    for stream in ("false", "true"):
        _chat(host, stream)
    tokens = 'count({__name__=~"sglang[:_]generation_tokens_total", is_streaming="true", node="%s"})' % NODE
    until("the node's token counter", lambda: api(host, "/query", tokens)["data"]["result"])
    for stream in ("false", "true"):
        _chat(host, stream)
    rate = 'sum(rate({__name__=~"sglang[:_]generation_tokens_total", node="%s"}[1m])) > 0' % NODE
    until("a token rate of the node", lambda: api(host, "/query", rate)["data"]["result"])


def test_prometheus_scrapes_the_server_the_router_and_both_node_exporters(host, traffic):
    targets = api(host, "/targets?state=active")["data"]["activeTargets"]
    jobs = sorted((target["labels"]["job"], target["labels"].get("node", "")) for target in targets)
    assert ("sglang", NODE) in jobs and ("sglang-router", "lab-upgrade-router") in jobs, jobs
    assert ("node", NODE) in jobs and ("node", "lab-upgrade-router") in jobs, jobs
    assert all(target["health"] == "up" for target in targets), targets


def test_every_dashboard_panel_has_data_from_the_0_5_23_server_and_smg(host, traffic):
    # No Xid in this lab; every other panel, the router's included, has data.
    assert not empty_dashboard_queries(host, may_be_empty=("xid",))


def test_every_alert_evaluates_and_reads_series_these_releases_export(host, traffic):
    assert not unhealthy_rules(host)
    assert not rule_selectors_without_series(host, may_be_empty=("xid",))
    firing = [alert["labels"] for alert in api(host, "/alerts")["data"]["alerts"] if alert["state"] == "firing"]
    assert not firing, "a healthy stack raises: %s" % firing


def test_the_series_only_0_5_23_exports_arrive(host, traffic):
    # The per-request time per output token beside the inter-token latency, and the tokenizer's
    # series split by is_streaming.
    tpot = 'count({__name__="sglang:request_time_per_output_token_seconds_bucket", node="%s"})' % NODE
    assert api(host, "/query", tpot)["data"]["result"]
    split = 'count by (is_streaming) ({__name__=~"sglang:.+", is_streaming!="", node="%s"})' % NODE
    streaming = sorted(series["metric"]["is_streaming"] for series in api(host, "/query", split)["data"]["result"])
    assert streaming == ["false", "true"], streaming
