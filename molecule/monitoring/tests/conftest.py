"""Keep each test's outcome on its item, so fixtures can print the journal when it failed."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
