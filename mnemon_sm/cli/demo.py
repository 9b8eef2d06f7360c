"""``mnemon-sm demo``: a short scripted agent conversation through every flow that exists.

It runs on an embedded storage root (a fresh temporary directory unless ``--root`` is given),
needs no LLM and no network, and prints each step's receipt (or typed error) and, at the end,
the context a host would inject into the next model call.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemon_sm.config import Config
from mnemon_sm.errors import CapacityExceeded, InvalidInput, MnemonError
from mnemon_sm.root import MemoryRoot

__all__ = ["run_demo"]

Step = tuple[str, str, Callable[[MemoryRoot], Any]]

_LONG_NOTE = "Verbatim meeting transcript: " + "blah " * 900  # ~4.5 KB, more than USER.md holds
_MODULES = ("parser", "scheduler", "billing", "search", "auth", "exporter", "ingest", "cache")


_STAGING = (
    "The staging database is rebuilt every Sunday at 02:00 UTC; staging is read-only from "
    "01:30 until the rebuild job reports success in the deploys channel, so never schedule "
    "staging migrations on Sunday nights."
)  # longer than the room the last build note leaves


_FAX = "The legacy fax gateway is tested by hand with the Zephyr checklist in docs/fax.md."


_RUNBOOK = (
    "# Rollout\n\nRoll out in three waves and watch the error budget between them.\n\n"
    + "Check dashboards, then widen the wave. " * 50
)


def _runbooks(root: MemoryRoot) -> list[Any]:
    return [
        root.documents.create(
            f"{env} rollout runbook", _RUNBOOK, description=f"How {env.lower()} is rolled out."
        )
        for env in ("Staging", "Canary", "Production")
    ]


class _Shown:
    """A plain JSON value printed like a receipt."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def to_json(self) -> Any:
        return self.value


_SAID = (
    "Please remember that release builds need the signing key from the vault; we lost an "
    "afternoon to that last week."
)


def _first_turn(root: MemoryRoot) -> _Shown:
    agent = root.lifecycle("demo-agent")
    agent.session_start("startup")
    said: dict[str, Any] = {
        "id": "u1",
        "role": "user",
        "content": [{"type": "text", "text": _SAID}],
        "source": {"kind": "user"},
    }
    entered = agent.pre_step(1, 1, [said])
    status = agent.status()
    return _Shown(
        {
            "primes": status["counters"]["primes"],
            "messagesEntered": len(entered),
            "cue": entered[-1]["content"],
        }
    )


def _turn_stops(root: MemoryRoot) -> _Shown:
    agent = root.lifecycle("demo-agent")
    calls: list[dict[str, Any]] = [
        {"type": "tool/call", "name": n, "turn": 1} for n in ("read", "grep", "edit", "run")
    ]
    results: list[dict[str, Any]] = [{"type": "tool/result", "turn": 1}] * 5
    agent.turn_stopping(1, calls + results)
    return _Shown({"state": agent.state, "activity": agent.score.to_json()})


def _idle_review(root: MemoryRoot) -> _Shown:
    agent = root.lifecycle("demo-agent")
    agent.turn_ended(1)
    agent.agent_idle()
    due = agent.deadline_ms
    agent.tick(due)  # time is an input: the host's clock reached the deadline
    agent.join()  # the review runs on a thread of its own; the demo waits for it
    return _Shown({"state": agent.state, "lastReview": agent.status()["lastReview"]})


class _Filled:
    """What filling MEMORY.md did (printed like a receipt)."""

    def __init__(self, added: int, used: int, limit: int) -> None:
        self.added, self.used, self.limit = added, used, limit

    def to_json(self) -> dict[str, Any]:
        return {"entriesAdded": self.added, "usage": {"used": self.used, "limit": self.limit}}


def _fill_memory(root: MemoryRoot) -> _Filled:
    """Add project notes (without maintenance) until the next one would not fit."""
    added = 0
    while True:
        module = _MODULES[added % len(_MODULES)]
        note = (
            f"Build note {added + 1}: the {module} module is tested with "
            f"`make test-{module}-{added + 1}` and its fixtures live in "
            f"tests/fixtures/{module}/set-{added + 1}; flaky cases are tagged slow."
        )
        importance = ("critical", "normal", "normal", "low")[added % 4]
        if added == 0:
            note, importance = _FAX, "low"
        try:
            root.hot.add("memory", note, importance, maintenance=False)
        except CapacityExceeded:
            used, limit = root.hot.snapshot().usage["memory"]
            return _Filled(added, used, limit)
        added += 1


STEPS: list[Step] = [
    (
        "User: Please keep your replies short. I really dislike long answers.",
        "hot.add(user, importance=critical)",
        lambda r: r.hot.add("user", "User prefers concise replies", importance="critical"),
    ),
    (
        "User: We use pnpm workspaces and Python 3.11 tooling; releases run `pnpm verify`.",
        "hot.add(memory) three times",
        lambda r: (
            r.hot.add("memory", "Project uses pnpm workspaces"),
            r.hot.add("memory", "Project uses Python 3.11 for tooling"),
            r.hot.add("memory", "Release checks run with pnpm verify"),
        )[2],
    ),
    (
        "User: Correction: release checks moved to `make verify`.",
        "hot.replace(memory, old_text='pnpm verify')",
        lambda r: r.hot.replace("memory", "pnpm verify", "Release checks run with make verify"),
    ),
    (
        "Agent (later): saves the pnpm fact again, not noticing it is known.",
        "hot.add(memory) of an existing entry",
        lambda r: r.hot.add("memory", "Project uses   pnpm workspaces"),
    ),
    (
        "Agent: tries to update the pnpm entry with an old_text that is not unique.",
        "hot.replace(memory, old_text='Project uses')",
        lambda r: r.hot.replace("memory", "Project uses", "Project uses pnpm 9 workspaces"),
    ),
    (
        "Agent: tries to store a whole transcript in the user profile.",
        "hot.add(user) of ~4.5 KB",
        lambda r: r.hot.add("user", _LONG_NOTE),
    ),
    (
        "User: You can forget the pnpm workspaces note.",
        "hot.remove(memory, old_text='workspaces')",
        lambda r: r.hot.remove("memory", "workspaces"),
    ),
    (
        "User: Remember for the long run: the deploy script lives in tools/deploy.sh.",
        "long_term.remember (write worker; the first space of a root is 'default')",
        lambda r: r.long_term.remember(
            "The deploy script lives in tools/deploy.sh", category="fact", importance=4
        ),
    ),
    (
        "User: Also: staging deploys need the VPN, because the bastion is private.",
        "long_term.remember",
        lambda r: r.long_term.remember(
            "Staging deploys need the VPN because the bastion host is private",
            category="fact",
        ),
    ),
    (
        "Agent: over a long project it notes build facts in MEMORY.md until it is full.",
        "hot.add(memory, maintenance=False) until the next note would not fit",
        _fill_memory,
    ),
    (
        "User: Remember: staging is rebuilt every Sunday night and is read-only meanwhile.",
        "hot.add(memory): overflows, so MEMORY.md is archived into a Memory Space, "
        "compacted, and the add retried",
        lambda r: r.hot.add("memory", _STAGING, "critical"),
    ),
    (
        "User: What did that compaction take out of MEMORY.md?",
        "hot.history(memory): every entry a compaction removed or rewrote, kept verbatim "
        "(hot.restore(id) adds one back)",
        lambda r: _Shown(
            {
                "preserved": len(r.hot.history("memory")),
                "first": r.hot.history("memory")[0].to_json(),
            }
        ),
    ),
    (
        "User: How do we test the old fax gateway?",
        "long_term.recall: that low-importance note left MEMORY.md but is in long-term memory",
        lambda r: r.long_term.recall("How do we test the old fax gateway?"),
    ),
    (
        "Agent: writes three runbooks as project Documents (the active set holds 6 KiB here).",
        "documents.create three times: the third does not fit, so the least recently used "
        "is archived after its cold reference is stored",
        lambda r: _runbooks(r)[-1],
    ),
    (
        "User: Where did the staging rollout runbook go?",
        "long_term.recall: the cold reference names the archived file and its hash",
        lambda r: r.long_term.recall("Where did the staging rollout runbook go?"),
    ),
    (
        "Host: a session starts and the user's first turn begins.",
        "lifecycle.session_start, then pre_step: the agent is primed and one cue is appended",
        _first_turn,
    ),
    (
        "Host: the turn stops after four different tools returned five results.",
        "lifecycle.turn_stopping: the activity reaches the threshold and a review is armed",
        _turn_stops,
    ),
    (
        "Host: the turn ends, the agent is idle, and idleReviewMs pass.",
        "lifecycle.tick at the deadline: the review saves the one explicit statement",
        _idle_review,
    ),
    (
        "User (a week later): Where is the deploy script again?",
        "long_term.recall (recall worker; evidence checked by the host)",
        lambda r: r.long_term.recall("Where is the deploy script again?"),
    ),
    (
        "User: What do staging deploys need again?",
        "long_term.ask (answer worker; citations checked by the host)",
        lambda r: r.long_term.ask("What do staging deploys need again?"),
    ),
]


def run_demo(
    root_dir: Path | None = None,
    *,
    force: bool = False,
    out: Callable[[str], object] = print,
) -> None:
    """Run the scripted conversation and print what happens: on a temporary root, or on
    ``root_dir``, which must be empty or absent unless ``force`` (the demo writes into it).

    Raises:
        InvalidInput: ``root_dir`` holds anything and ``force`` is false.
    """
    if root_dir is not None and not force and _has_anything(root_dir):
        raise InvalidInput(
            f"{root_dir} is not empty: the demo writes into its root; pass --force to run it"
            " there anyway, or name an empty or new directory"
        )
    if root_dir is None:
        with tempfile.TemporaryDirectory(prefix="mnemon-demo-") as tmp:
            _run(Path(tmp), out)
    else:
        _run(root_dir, out)


def _has_anything(root_dir: Path) -> bool:
    path = root_dir.expanduser()
    if not path.is_dir():
        return path.exists() or path.is_symlink()  # a file there is not a root either
    return any(path.iterdir())


def _run(root_dir: Path, out: Callable[[str], object]) -> None:
    out(f"mnemon-sm demo: storage root {root_dir} (embedded: no LLM, no network)")
    with MemoryRoot.open(root_dir, Config(documents_active_limit=6144)) as root:
        for number, (said, call, step) in enumerate(STEPS, start=1):
            out("")
            out(f"[{number}] {said}")
            out(f"    -> {call}")
            try:
                result = json.dumps(step(root).to_json(), ensure_ascii=False)
                out(f"    receipt: {result}")
            except MnemonError as exc:
                out(f"    rejected: {json.dumps(exc.to_json(), ensure_ascii=False)}")
        out("")
        out("=== Context for the next model call ===")
        out("")
        out(root.context.routing_guidance())
        out("")
        out(root.context.runtime_memory())
