"""Shared test configuration: Hypothesis profiles and the spec-transition recorder.

Profiles (``HYPOTHESIS_PROFILE`` picks one; the default is ``ci``, so the README's test command
gives the same result on every machine and every run):
- ``ci``: derandomized (reproducible), no example database, no deadline;
- ``dev``: randomized, moderate example counts, to explore new inputs by hand;
- ``deep``: many more examples and longer stateful runs, for soak runs by hand.

The recorder sees every transition any machine takes during the session; the test
``tests/test_transition_coverage.py`` (moved to the end of the run) fails unless every
transition of every spec was exercised. Run in parallel (``pytest -n 2``, pytest-xdist), each
worker sees only its share: the workers hand what they saw to the controller, which fails the
run at its end when the whole suite ran and a transition was never taken.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from mnemon_sm.testing.coverage import TransitionRecorder, whole_suite

# Replicas of Memory Spaces on PostgreSQL go to the cache directory (XDG_CACHE_HOME): one of
# the test session's own (each xdist worker's, inherited by the processes tests start), removed
# at the end, so no test writes to the home directory.
_CACHE = tempfile.mkdtemp(prefix="mnemon-sm-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE

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


_PARALLEL = {"full_run": False}  # set by the controller of a parallel run


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller of a parallel run takes in what a worker saw."""
    output = getattr(node, "workeroutput", {})
    RECORDER.seen.update(tuple(key) for key in output.get("transitions", ()))
    _PARALLEL["full_run"] = _PARALLEL["full_run"] or bool(output.get("full_run"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A parallel worker hands its transitions to the controller. The controller (or a run
    without workers) fails the run on a transition nobody took (parallel runs only: otherwise
    the coverage test did it), and under CI on a skipped test: nothing may hide behind a skip
    there."""
    shutil.rmtree(_CACHE, ignore_errors=True)
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["transitions"] = sorted(RECORDER.seen)
        config = session.config
        paths = [str(item.path) for item in session.items]
        output["full_run"] = whole_suite(paths, config.rootpath, config.getini("testpaths"))
        return
    if _PARALLEL["full_run"] and exitstatus == 0:
        missing, total = RECORDER.missing(), len(RECORDER.all())
        print(f"\nspec transition coverage: {total - len(missing)}/{total}")
        if missing:
            print("transitions never exercised:")
            for flow, t in missing:
                print(
                    f"  {flow}: {t.source} #{t.index} --{t.event or '(eventless)'}--> {t.target}"
                )
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
    if not _IN_CI or session.exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    if skipped:
        names = ", ".join(report.nodeid for report in skipped)
        print(f"\nCI allows no skipped tests; skipped: {names}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL server for this test session (each pytest-xdist worker starts
    its own): see :mod:`mnemon_sm.testing.pg_cluster`. Tests give every root a new name."""
    from mnemon_sm.testing.pg_cluster import Cluster

    cluster = Cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()
