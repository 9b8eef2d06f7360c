"""What the example hosts share: the demo they run, and the scripted model they use offline.

:func:`demo` opens a root whose ``write`` and ``recall`` workers are the given adapter (the
built-in workers do every other kind), remembers one fact and recalls it, printing each step.

:func:`scripted_model` stands in for a model when no API key is set. It plays the two
worker kinds the examples run through the adapter, with the tools the host grants: a *write*
lists the spaces, remembers the request's content in the first one and returns the receipt;
a *recall* lists the spaces, recalls in all of them and returns what the recall found (in a
Markdown code fence, as models often do). Everything else about the wire protocol is the real
SDK's and the loopback server's.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from mnemon_sm import Config, FallbackWorkers, MemoryRoot, Workers
from mnemon_sm.testing.loopback import LoopbackRequest, Reply, ToolCall

__all__ = ["FACT", "demo", "scripted_model"]

FACT = "Deploys are blue-green."


def demo(workers: Workers) -> None:
    """Remember :data:`FACT` and recall it through ``workers`` (in ``MNEMON_EXAMPLE_ROOT``
    when set, else in a temporary directory)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = os.environ.get("MNEMON_EXAMPLE_ROOT") or scratch
        config = Config(long_term_store="embedded")
        hosted = FallbackWorkers(workers, kinds=("write", "recall"))
        with MemoryRoot.open(path, config, workers=hosted) as root:
            if not root.long_term.spaces():
                root.long_term.create_space("General memory", "Facts about the team", active=True)
            receipt = root.long_term.remember(FACT)
            print(f"remembered: {receipt.action} in {', '.join(receipt.memory_body_ids)}")
            print(f"  the worker said: {receipt.summary}")
            answer = root.long_term.recall("How do deploys work?")
            print(f"recalled: {answer.summary}")
            for row in answer.results:
                print(f"  - {row['content']}")


_DATA = re.compile(r"^Request \(untrusted data[^\n]*\n(?P<body>(?:    .*\n?)+)", re.M)


def _request_data(prompt: str) -> dict[str, Any]:
    """The request data the prompt shows as indented JSON."""
    found = _DATA.search(prompt)
    if found is None:
        return {}
    body = "\n".join(line[4:] for line in found["body"].split("\n"))
    data: dict[str, Any] = json.loads(body)
    return data


def scripted_model(request: LoopbackRequest) -> Reply:
    data = _request_data(request.prompt)
    writing = "mnemon_remember" in request.tool_names
    if request.rounds == 0:
        return Reply(text="Looking at the spaces.", tool_calls=(ToolCall("mnemon_memory_bodies"),))
    results = request.tool_results()
    if request.rounds == 1:
        spaces = [s["id"] for s in results[0].json() if s["active"]]
        if writing:
            arguments = {"content": data["content"], "memoryBodyId": spaces[0]}
            return Reply(tool_calls=(ToolCall("mnemon_remember", arguments),))
        arguments = {"query": "deploys", "memoryBodyIds": spaces}
        return Reply(tool_calls=(ToolCall("mnemon_recall", arguments),))
    found = results[0].json()
    if writing:
        space = next(s["id"] for s in request.tool_results(0)[0].json() if s["active"])
        result = {"summary": "Stored it.", "action": "stored", "memoryBodyIds": [space]}
    else:
        rows = [{"id": r["id"], "memoryBodyId": r["memoryBodyId"]} for r in found["results"]]
        result = {
            "summary": f"{len(rows)} result(s).",
            "selectedMemoryBodyIds": sorted({r["memoryBodyId"] for r in rows}),
            "results": rows,
        }
    return Reply(text="```json\n" + json.dumps(result) + "\n```")
