# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ask a lab Prometheus, through testinfra's host, what the shipped dashboard and alert rules see.

The monitoring scenarios (molecule `default` with an SGLang 0.5.9 server, `upgrade` with 0.5.23
behind smg) run the same checks on their own Prometheus: every dashboard query answers with data,
every alert rule evaluates without error. Imported as
``ansible_collections.inferops.serving.tests.utils.prometheus`` (molecule/conftest.py puts
``.collections`` on the import path).
"""

import json
import os
import re

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(REPO_ROOT, 'roles', 'monitoring', 'files', 'grafana', 'inferops-serving.json')
API = 'http://127.0.0.1:9090/api/v1'


def api(host, path, query=None):
    """The JSON Prometheus's HTTP API answers on HOST for PATH (with QUERY as its PromQL)."""
    # A bound on each answer: a Prometheus that is starting (after a crash, a reboot) may accept
    # the connection before it answers.
    if query is None:
        result = host.run('curl -fsS -m 10 %s', API + path)
    else:
        result = host.run('curl -fsS -m 10 -G %s --data-urlencode %s', API + path, 'query=' + query)
    assert result.rc == 0, result.stderr
    return json.loads(result.stdout)


def active_targets_up(host):
    """Whether Prometheus on HOST has targets and every one of them is up."""
    targets = api(host, '/targets?state=active')['data']['activeTargets']
    return bool(targets) and all(target['health'] == 'up' for target in targets)


# What a rule's expression selects, each a query of its own: an SGLang metric by the regex that
# matches both releases' spellings, one of this collection's or the router's metrics, a job's `up`, a node
# exporter metric with its labels (the GPU collector's file by name).
RULE_SELECTOR = re.compile(r'__name__=~"sglang\[:_\][a-z0-9_]+"|\b(?:inferops|smg)_[a-z0-9_]+|\bup\{job="[^"]+"\}'
                           r'|\bnode_[a-z0-9_]+\{[^}]*\}')


def dashboard_queries():
    """(panel title, PromQL as written) of every query of the shipped Grafana dashboard."""
    with open(DASHBOARD) as handle:
        dashboard = json.load(handle)
    for panel in dashboard['panels']:
        for target in panel.get('targets', []):
            yield panel['title'], target['expr']


def empty_dashboard_queries(host, may_be_empty=()):
    """The dashboard queries that Prometheus on HOST answers with no series, as (title, query);
    a query that fails to evaluate fails the test. A query that names one of MAY_BE_EMPTY (a
    metric the lab cannot produce there) is not reported."""
    empty = []
    for title, expr in dashboard_queries():
        # Grafana's variables as it sets them for all nodes and a one-minute rate window.
        query = expr.replace('$__rate_interval', '1m').replace('$node', '.*')
        answer = api(host, '/query', query)
        assert answer['status'] == 'success', (title, query, answer)
        if not answer['data']['result'] and not any(name in query for name in may_be_empty):
            empty.append((title, query))
    return empty


def loaded_rules(host):
    """The rules Prometheus on HOST evaluates, by name, as its API describes them."""
    return dict((rule['name'], rule) for group in api(host, '/rules')['data']['groups'] for rule in group['rules'])


def unhealthy_rules(host):
    """The rules that Prometheus on HOST failed to evaluate, as (name, its last error)."""
    return [(name, rule.get('lastError', '')) for name, rule in sorted(loaded_rules(host).items())
            if rule.get('health') != 'ok']


def rule_selectors_without_series(host, may_be_empty=()):
    """Each selector of an alert rule that matches no series on Prometheus on HOST, as (rule, selector):
    an alert reading a name no target exports evaluates fine and never fires. A selector that names
    one of MAY_BE_EMPTY is not reported. Each selector is asked once, however many rules read it."""
    read_by = sorted((name, selector) for name, rule in loaded_rules(host).items()
                     for selector in set(RULE_SELECTOR.findall(rule['query']))
                     if not any(empty in selector for empty in may_be_empty))
    without_series = set(selector for selector in set(selector for _name, selector in read_by)
                         if not api(host, '/query', 'count(%s)' % _vector_selector(selector))['data']['result'])
    return [(name, selector) for name, selector in read_by if selector in without_series]


def _vector_selector(found):
    """A RULE_SELECTOR match as a query of its own: a bare ``__name__`` matcher gets its braces."""
    return '{%s}' % found if found.startswith('__name__') else found
