"""``mnemon-sm lifecycle replay EVENTS.jsonl``: feed a recorded host event log, for audits.

Each line is one JSON object: ``{"at": <epoch ms>, "event": <name>, ...}`` with the event's
arguments (``source``; ``turn``, ``step``, ``messages``; ``turn``, ``toolEvents``; ``now``) and
optionally ``"agent"`` (default ``main``). The clock reads ``at``, so a replay reproduces the
recorded timing exactly; every transition is printed with its time, then what the event did
(a cue appended, a review's receipt), then each agent's final status.

A replay is an audit: by default it runs on a scratch copy of the root (the whole root copied
into a temporary directory, symlinks kept as links, removed afterwards), so the live root is
left as it was; ``--apply`` replays on the root itself. A log that cannot be read is
``InvalidInput``, raised before anything is copied or opened.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from mnemon_sm.adapters.real import SystemClock, real_ports
from mnemon_sm.cli.support import read_text
from mnemon_sm.config import Config
from mnemon_sm.engine.flow import add_observer, remove_observer
from mnemon_sm.errors import InvalidInput
from mnemon_sm.root import MemoryRoot
from mnemon_sm.text import iso_ms

__all__ = ["replay"]

EVENTS = {
    "session_start": ("source",),
    "pre_step": ("turn", "step", "messages"),
    "turn_stopping": ("turn", "toolEvents"),
    "turn_ended": ("turn",),
    "agent_idle": (),
    "agent_busy": (),
    "tick": ("now",),
    "dispose": (),
}


class ReplayClock(SystemClock):
    """A clock set by the replay to each event's recorded time (waits are real)."""

    def __init__(self) -> None:
        self.ms = 0

    def now_ms(self) -> int:
        return self.ms


class _Printer:
    def __init__(self, clock: ReplayClock, out: Callable[[str], object]) -> None:
        self.clock, self.out = clock, out

    def after_transition(self, event: Any, source: Any, target: Any) -> None:
        name = getattr(event, "id", event)
        to = source.id if target is None else target.id  # an internal transition stays
        self.out(f"{iso_ms(self.clock.ms)}  {source.id} --{name}--> {to}")


def replay(
    path: Path,
    root_dir: Path,
    config: Config,
    out: Callable[[str], object] = print,
    *,
    apply: bool = False,
) -> dict[str, Any]:
    """Replay the log at ``path`` on a scratch copy of the root at ``root_dir`` (on the root
    itself when ``apply``); returns the final statuses."""
    records = list(_records(path))
    if apply:
        return _replay(records, root_dir, config, out)
    with tempfile.TemporaryDirectory(prefix="mnemon-replay-") as scratch:
        copy = Path(scratch) / "root"
        if root_dir.expanduser().is_dir():
            shutil.copytree(root_dir.expanduser(), copy, symlinks=True)
        print(f"replaying on a scratch copy of {root_dir} (--apply: on the root)", file=sys.stderr)
        return _replay(records, copy, config, out)


def _replay(
    records: list[dict[str, Any]], root_dir: Path, config: Config, out: Callable[[str], object]
) -> dict[str, Any]:
    clock = ReplayClock()
    printer = _Printer(clock, out)

    def factory(flow: str) -> object:
        return printer if flow == "agent_lifecycle" else object()

    add_observer(factory)
    try:
        ports = attrs.evolve(real_ports(root_dir), clock=clock)
        with MemoryRoot.open(root_dir, config, ports=ports) as root:
            agents: dict[str, Any] = {}
            for record in records:
                clock.ms = int(record.get("at", clock.ms))
                name = str(record.get("agent", "main"))
                agent = agents.get(name) or root.lifecycle(name)
                agents[name] = agent
                _apply(agent, record, out)
            return {name: agent.status() for name, agent in agents.items()}
    finally:
        remove_observer(factory)


def _records(path: Path) -> Iterable[dict[str, Any]]:
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(f"{path}:{number}: not JSON: {exc}") from None
        if not isinstance(record, dict) or record.get("event") not in EVENTS:
            raise InvalidInput(f"{path}:{number}: expected an object with a known event")
        yield record


def _apply(agent: Any, record: dict[str, Any], out: Callable[[str], object]) -> None:
    event = record["event"]
    if event == "pre_step":
        messages = record.get("messages") or []
        entered = agent.pre_step(int(record["turn"]), int(record["step"]), messages)
        if len(entered) > len(messages):
            out(f"    cue appended: {entered[-1]['content']}")
    elif event == "turn_stopping":
        agent.turn_stopping(int(record["turn"]), record.get("toolEvents") or [])
        out(f"    activity: {json.dumps(agent.score.to_json())}")
    elif event == "turn_ended":
        agent.turn_ended(int(record["turn"]))
    elif event == "session_start":
        agent.session_start(str(record.get("source", "startup")))
    elif event == "tick":
        before = agent.status()["lastReview"]
        agent.tick(record.get("now"))
        agent.join()  # a replay is an audit: the review ends before the next event
        after = agent.status()["lastReview"]
        if after != before:
            out(f"    review receipt: {json.dumps(after, ensure_ascii=False)}")
    else:
        getattr(agent, event)()
