"""Per-call cost of the lifecycle hooks against one python-statemachine event (prints JSON).

In one run, on a real storage root: a bare event on a three-state machine (the unit), then
``pre_step`` on the first step of a turn (prime, cue, activity, persisted), ``pre_step`` on a
later step of the same turn (messages already counted: nothing to persist) and
``turn_stopping`` (tool events set, score computed, deadline armed, persisted). Medians over
blocks. Target: each hook <= 3x the unit.

Then a long session (``--turns``, default 3,000) in which the review never runs (no tick):
the hooks of each turn (four steps, the stopping turn, its end) timed around turn 100 and
around the last turn, the state file's size at the end and the bytes a hook persists (the
state's line) at turn 100 and at the end. Targets: state file < 64 KiB, the line as long at the
end as at turn 100 (but for the turn numbers' digits), cost at the last turn <= 1.5x the cost
at turn 100.

Then steps with long message lists, as a host that sends the whole conversation at every step
does: ``pre_step`` with 4,000 messages against one with 100, on the first step of a turn (one
new message appended to what was seen) and on a repeated step (nothing new); medians over
interleaved blocks. Target: the 4,000-message step <= 2x the 100-message one, both kinds
(``turn_stopping`` takes no messages, only the turn's tool events).

Usage: python benchmarks/lifecycle.py [--blocks N] [--calls N] [--turns N] [--durability D]
       [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemon_sm import Config, MemoryRoot


def per_call_us(fn: Callable[[int], object], n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - start) / n * 1e6


def unit_event() -> Callable[[int], object]:
    from statemachine.io import create_machine_class_from_definition

    states = {
        "a": {"initial": True, "on": {"go": [{"target": "b"}]}},
        "b": {"on": {"go": [{"target": "c"}]}},
        "c": {"on": {"go": [{"target": "a"}]}},
    }
    machine = create_machine_class_from_definition("Three", states=states)()
    return lambda _: machine.send("go")


def message(turn: int) -> list[dict[str, Any]]:
    text = "Please keep answers short and cite the file you changed. " * 3
    return [
        {
            "id": f"u{turn}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        {"id": f"a{turn}", "role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    ]


def session(root_dir: Path, turns: int, durability: str) -> dict[str, Any]:
    """A ``turns``-turn session without a review: per-turn hook cost near turn 100 and near
    the end (medians of 21 turns each), and the state file's size."""
    config = Config(idle_review_ms=600_000, durability=durability)  # type: ignore[arg-type]
    root = MemoryRoot.open(root_dir, config)
    agent = root.lifecycle("long")
    windows = {"turn_100": range(90, 111), "last": range(turns - 20, turns + 1)}
    spent: dict[str, list[float]] = {k: [] for k in windows}
    state_file = root_dir / "state" / "lifecycle" / "long.json"
    line_at_100 = 0
    for turn in range(1, turns + 1):
        msgs = message(turn)
        events = [{"type": "tool/call", "name": f"tool{turn % 5}", "turn": turn}]
        events += [{"type": "tool/result", "turn": turn}] * 2
        t0 = time.perf_counter()
        for step in (1, 2, 3, 4):
            agent.pre_step(turn, step, msgs)
        agent.turn_stopping(turn, events)
        agent.turn_ended(turn)
        elapsed = time.perf_counter() - t0
        for key, window in windows.items():
            if turn in window:
                spent[key].append(elapsed * 1e6)
        if turn == 100:
            line_at_100 = len(state_file.read_bytes().splitlines()[-1])
    size = state_file.stat().st_size
    line_at_last = len(state_file.read_bytes().splitlines()[-1])
    first, last = (statistics.median(spent[k]) for k in ("turn_100", "last"))
    return {
        "turns": turns,
        "durability": durability,
        "state_file_bytes": size,
        "state_line_bytes_at_100": line_at_100,
        "state_line_bytes_at_last": line_at_last,
        "turn_hooks_us_at_100": round(first, 1),
        "turn_hooks_us_at_last": round(last, 1),
        "last_vs_100": round(last / first, 2),
        "score_turns": agent.score.turns,
    }


def history(size: int) -> list[dict[str, Any]]:
    """A conversation of ``size`` messages in the OpenAI shape: a user asks, the assistant
    calls a tool, the tool answers, the assistant replies."""
    out: list[dict[str, Any]] = []
    for i in range(size):
        kind = i % 4
        if kind == 0:
            out.append({"role": "user", "content": f"Question {i}: what does the file say? " * 2})
        elif kind == 1:
            call = {"id": f"c{i}", "type": "function", "function": {"name": "read"}}
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == 2:
            out.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": "text " * 40})
        else:
            out.append({"role": "assistant", "content": f"It says {i}."})
    return out


def long_lists(root_dir: Path, blocks: int, turns: int, durability: str) -> dict[str, Any]:
    """``pre_step`` with 100 and with 4,000 messages, the whole conversation sent at every
    step: per block and size, an agent that has seen the conversation, then ``turns`` turns
    each appending one user message (its first step), then its second step (nothing new).
    The sizes alternate block by block; medians of the blocks' means."""
    config = Config(idle_review_ms=600_000, durability=durability)  # type: ignore[arg-type]
    root = MemoryRoot.open(root_dir, config)
    sizes = (100, 4000)
    spent: dict[tuple[int, str], list[float]] = {(n, k): [] for n in sizes for k in ("new", "rep")}
    for block in range(blocks):
        for size in sizes if block % 2 == 0 else sizes[::-1]:
            agent = root.lifecycle(f"steps-{size}-{block}")
            msgs = history(size - turns)
            agent.pre_step(0, 1, msgs)
            new = rep = 0.0
            for turn in range(1, turns + 1):
                msgs = [*msgs, {"role": "user", "content": f"And now step {turn}?"}]
                t0 = time.perf_counter()
                agent.pre_step(turn, 1, msgs)
                t1 = time.perf_counter()
                agent.pre_step(turn, 2, msgs)
                t2 = time.perf_counter()
                new, rep = new + t1 - t0, rep + t2 - t1
            spent[size, "new"].append(new / turns * 1e6)
            spent[size, "rep"].append(rep / turns * 1e6)
    med = {key: statistics.median(v) for key, v in spent.items()}
    return {
        "step_100_messages_us": round(med[100, "new"], 1),
        "step_4000_messages_us": round(med[4000, "new"], 1),
        "step_4000_vs_100": round(med[4000, "new"] / med[100, "new"], 2),
        "repeated_step_100_messages_us": round(med[100, "rep"], 1),
        "repeated_step_4000_messages_us": round(med[4000, "rep"], 1),
        "repeated_step_4000_vs_100": round(med[4000, "rep"] / med[100, "rep"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--durability", default="full", choices=("full", "normal", "off"))
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        config = Config(idle_review_ms=600_000, durability=args.durability)
        root = MemoryRoot.open(Path(tmp) / "root", config)
        agent = root.lifecycle("bench")
        event = unit_event()
        series: dict[str, list[float]] = {"unit": [], "first": [], "later": [], "stop": []}
        turn = 0
        for _ in range(args.blocks):
            series["unit"].append(per_call_us(event, args.calls))
            spent = {"first": 0.0, "later": 0.0, "stop": 0.0}
            for _ in range(args.calls // 4):  # a turn: four steps, then its stopping
                turn += 1
                if turn % 10 == 0:
                    agent.session_start("clear")  # a review or a new session, now and then
                msgs = message(turn)
                events = [{"type": "tool/call", "name": "read", "turn": turn}]
                events += [{"type": "tool/result", "turn": turn}] * 3
                t0 = time.perf_counter()
                agent.pre_step(turn, 1, msgs)
                t1 = time.perf_counter()
                for step in (2, 3, 4):
                    agent.pre_step(turn, step, msgs)
                t2 = time.perf_counter()
                agent.turn_stopping(turn, events)
                t3 = time.perf_counter()
                spent["first"] += t1 - t0
                spent["later"] += (t2 - t1) / 3
                spent["stop"] += t3 - t2
            for key, total in spent.items():
                series[key].append(total / (args.calls // 4) * 1e6)
        med = {k: statistics.median(v) for k, v in series.items()}
        result = {
            "python": platform.python_version(),
            "durability": args.durability,
            "unit_event_us": round(med["unit"], 1),
            "pre_step_first_us": round(med["first"], 1),
            "pre_step_later_us": round(med["later"], 1),
            "turn_stopping_us": round(med["stop"], 1),
            "pre_step_first_vs_unit": round(med["first"] / med["unit"], 2),
            "pre_step_later_vs_unit": round(med["later"] / med["unit"], 2),
            "turn_stopping_vs_unit": round(med["stop"] / med["unit"], 2),
            **long_lists(Path(tmp) / "steps", args.blocks, 20, args.durability),
            "long_session": session(Path(tmp) / "long", args.turns, args.durability),
        }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
