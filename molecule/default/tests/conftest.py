"""A failed test prints the journal of the units its module names in JOURNAL_UNITS."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)


@pytest.fixture()
def journal(host, request):
    yield
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        units = " ".join("-u %s" % unit for unit in request.module.JOURNAL_UNITS)
        print(host.run("journalctl %s -n 60 --no-pager" % units).stdout)
