"""Shared test configuration: Hypothesis profiles and the spec-transition recorder.

Profiles (``HYPOTHESIS_PROFILE`` picks one; the default is ``ci``, so the README's test command
gives the same result on every machine and every run):
- ``ci``: derandomized (reproducible), no example database, no deadline;
- ``dev``: randomized, moderate example counts, to explore new inputs by hand;
- ``deep``: many more examples and longer stateful runs, for soak runs by hand.

The recorder sees every transition any machine takes during the session; the test
``tests/test_transition_coverage.py`` (moved to the end of the run) fails unless every
transition of every spec was exercised.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from mnemon_sm.testing.coverage import TransitionRecorder

# No deadline anywhere: many tests fsync, and this 2-core machine is noisy.
_QUIET = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", _QUIET, max_examples=60, stateful_step_count=30)
settings.register_profile(
    "ci", _QUIET, max_examples=60, stateful_step_count=30,
    derandomize=True, database=None, print_blob=True,
)  # fmt: skip
settings.register_profile("deep", _QUIET, max_examples=2000, stateful_step_count=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
_IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

RECORDER = TransitionRecorder()
RECORDER.install()

COVERAGE_TEST = "test_every_spec_transition_is_exercised"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the transition-coverage test after everything else."""
    last = [i for i in items if i.name == COVERAGE_TEST]
    items[:] = [i for i in items if i.name != COVERAGE_TEST] + last


@pytest.fixture(scope="session")
def transition_recorder() -> TransitionRecorder:
    return RECORDER


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI a skipped test fails the run: nothing may hide behind a skip there."""
    if not _IN_CI or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        names = ", ".join(report.nodeid for report in skipped)
        print(f"\nCI allows no skipped tests; skipped: {names}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
