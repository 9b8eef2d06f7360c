"""Every transition of every spec is exercised by the test suite.

The recorder (installed by the root ``conftest.py``) sees every machine the tests start. This
test runs last (the conftest moves it there); a transition nobody took fails it with the list.
When only part of the suite was collected the measure would be meaningless, so it then checks
the recorder on a flow it drives itself instead. In a parallel run the controller checks the
union of what the workers saw, at the end of the run (``conftest.py``).
"""

from __future__ import annotations

import pytest

from mnemon_sm import Config, MemoryRoot
from mnemon_sm.testing.coverage import TransitionRecorder, whole_suite
from mnemon_sm.testing.memory import memory_ports


def _full_run(request: pytest.FixtureRequest) -> bool:
    config, paths = request.config, [str(item.path) for item in request.session.items]
    return whole_suite(paths, config.rootpath, config.getini("testpaths"))


def _parallel_worker(request: pytest.FixtureRequest) -> bool:
    """A worker of a parallel run sees only its share: the controller checks the union."""
    return hasattr(request.config, "workerinput")


def test_recorder_sees_transitions_of_new_machines() -> None:
    recorder = TransitionRecorder()
    recorder.install()
    try:
        ports, _ = memory_ports()
        root = MemoryRoot.open("/unused", Config(), ports=ports)
        root.hot.add("user", "x")
    finally:
        recorder.uninstall()
    assert ("hot_memory_mutation", "opening", 1) in recorder.seen  # opening -> ready
    assert ("hot_memory_mutation", "ready", 0) in recorder.seen  # ready --add--> deciding
    assert ("hot_memory_mutation", "deciding", 1) in recorder.seen  # --[can_commit]--> committed
    assert ("hot_memory_mutation", "committed", 0) not in recorder.seen
    assert len(recorder.missing()) == len(recorder.all()) - len(recorder.seen)


def test_every_spec_transition_is_exercised(
    request: pytest.FixtureRequest, transition_recorder: TransitionRecorder
) -> None:
    total = len(transition_recorder.all())
    missing = transition_recorder.missing()
    covered = total - len(missing)
    print(f"\nspec transition coverage: {covered}/{total}")
    if not _full_run(request):
        pytest.skip("partial run: transition coverage is measured on the whole suite")
    if _parallel_worker(request):
        return  # the controller fails the run at its end (see conftest.py)
    assert not missing, "transitions never exercised:\n" + "\n".join(
        f"  {flow}: {t.source} #{t.index} --{t.event or '(eventless)'}--> {t.target}"
        for flow, t in missing
    )
