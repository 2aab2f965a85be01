# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Lets a fixture see whether the test failed, to print the node's journal then.
    outcome = yield
    report = outcome.get_result()
    setattr(item, 'rep_' + report.when, report)
