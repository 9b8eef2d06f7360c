"""Agents: each root agent's lifecycle state, its activity score part by part against the
review threshold, its deadline and its last review."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemon_sm.errors import MnemonError
from mnemon_sm.inspector.html import Html, join, table, tag, when
from mnemon_sm.inspector.pages import Page
from mnemon_sm.root import MemoryRoot
from mnemon_sm.text import iso_ms

__all__ = ["view"]

PARTS = (
    ("textScore", "Text", "userChars", "user characters"),
    ("turnScore", "Turns", "turns", "turns"),
    ("toolScore", "Tool results", "toolResults", "tool results"),
    ("diversityScore", "Tool diversity", "uniqueTools", "distinct tools"),
)


def _agent(status: dict[str, Any]) -> Html:
    activity, counters = status["activity"], status["counters"]
    deadline, review = status["deadlineMs"], status["review"]
    facts = table(
        f"Lifecycle of {status['agentId']}",
        (
            "State",
            "Deadline",
            "Prime pending",
            "Review running",
            "Primes",
            "Recall cues",
            "Write-back cues",
            "Reviews",
            "Failures",
        ),
        [
            (
                tag("span", status["state"], class_="state"),
                "none" if deadline is None else when(iso_ms(deadline)),
                "yes" if status["primePending"] else "no",
                "no"
                if review is None
                else f"{review['runId']} until {iso_ms(review['timeoutAtMs'])}",
                counters["primes"],
                counters["recallCues"],
                counters["writebackCues"],
                counters["reviews"],
                counters["failures"],
            )
        ],
        empty="",
    )
    score = table(
        f"Activity score of {status['agentId']}: {activity['score']} of the "
        f"{activity['threshold']} a review needs"
        + (" (eligible)" if activity["eligible"] else ""),
        ("Part", "Points", "From"),
        [(name, activity[key], f"{activity[source]} {unit}") for key, name, source, unit in PARTS]
        + [("Total", activity["score"], f"threshold {activity['threshold']}")],
        empty="",
    )
    last = status["lastReview"]
    review = (
        tag("p", "No review has run.", class_="empty")
        if last is None
        else table(
            f"Last review of {status['agentId']}",
            ("At", "Action", "Score", "Documents", "Summary"),
            [
                (
                    last["at"],
                    last["action"],
                    last["score"],
                    ", ".join(last["documentIds"]),
                    last["summary"],
                )
            ],
            empty="",
        )
    )
    return join([tag("h2", status["agentId"]), facts, score, review])


def view(root: MemoryRoot, params: Mapping[str, str]) -> Page:
    agents = root.agents()
    if not agents:
        return Page(
            "Agents", tag("p", "No agent lifecycle is persisted in this root.", class_="empty")
        )
    parts: list[Html] = []
    for agent in agents:
        try:
            parts.append(_agent(root.agent_status(agent)))
        except MnemonError as exc:
            parts.append(join([tag("h2", agent), tag("p", f"Unreadable: {exc}", class_="error")]))
    return Page("Agents", join(parts))
