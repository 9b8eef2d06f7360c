"""The ready-made LLM workers against a loopback server, through the real SDKs.

:class:`~mnemon_sm.testing.loopback.LoopbackModel` speaks the OpenAI and Anthropic wire
protocols on 127.0.0.1; every test here runs once per protocol, with the official SDK making
the HTTP calls, and goes through a real root (``MemoryRoot.open`` with the adapter as its
workers, ``long_term.recall`` as the operation) wherever the public path can reach the rule.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from mnemon_sm import (
    AnthropicWorkers,
    AsyncAnthropicWorkers,
    AsyncMemoryRoot,
    AsyncOpenAIWorkers,
    BuiltinWorkers,
    Config,
    FallbackWorkers,
    InvalidConfig,
    MemoryRoot,
    OpenAIWorkers,
    ToolBox,
    ToolDefinition,
    WorkerCancelled,
    WorkerFailed,
    WorkerRequest,
    WorkerTimeout,
)
from mnemon_sm.flows.workers.runner import RunScope
from mnemon_sm.testing.loopback import (
    Fault,
    Hang,
    LoopbackModel,
    LoopbackRequest,
    Reply,
    SeenToolResult,
    ToolCall,
)
from tests._fresh_python import python_lines

BASE = Path(__file__).resolve().parent.parent
CONFIG = Config(long_term_store="embedded", durability="off")
FACT = "Deploys are blue-green and frozen on Fridays."
PROTOCOLS = ("openai", "anthropic")
FAST_RETRY = {"retry-after-ms": "10"}

Workers = OpenAIWorkers | AnthropicWorkers


def workers_for(
    protocol: str, server: LoopbackModel, *, timeout: float = 10.0, max_retries: int = 2, **kw: Any
) -> Workers:
    if protocol == "openai":
        return OpenAIWorkers(
            model="gpt-test",
            base_url=server.openai_url,
            api_key="sk-loopback",
            timeout=timeout,
            max_retries=max_retries,
            **kw,
        )
    return AnthropicWorkers(
        model="claude-test",
        base_url=server.anthropic_url,
        api_key="sk-ant-loopback",
        timeout=timeout,
        max_retries=max_retries,
        **kw,
    )


def async_workers_for(
    protocol: str, server: LoopbackModel, *, max_retries: int = 2
) -> AsyncOpenAIWorkers | AsyncAnthropicWorkers:
    if protocol == "openai":
        return AsyncOpenAIWorkers(
            model="gpt-test",
            base_url=server.openai_url,
            api_key="sk-loopback",
            max_retries=max_retries,
        )
    return AsyncAnthropicWorkers(
        model="claude-test",
        base_url=server.anthropic_url,
        api_key="sk-ant-loopback",
        max_retries=max_retries,
    )


class Recording:
    """The adapter, recording each request and the definitions of the box it was handed."""

    def __init__(self, inner: Workers) -> None:
        self.inner = inner
        self.seen: list[tuple[WorkerRequest, tuple[ToolDefinition, ...]]] = []

    def run(self, request: WorkerRequest, tools: ToolBox) -> object:
        self.seen.append((request, tools.definitions))
        return self.inner.run(request, tools)


def open_root(path: Path, workers: Any, config: Config = CONFIG) -> MemoryRoot:
    """A root whose recall runs ``workers`` (every other kind: the built-in workers), with
    one space holding :data:`FACT`."""
    root = MemoryRoot.open(path, config, workers=FallbackWorkers(workers, kinds=("recall",)))
    if not root.long_term.spaces():
        root.long_term.create_space("General memory", "Facts", active=True)
        root.long_term.remember(FACT, space="default")
    return root


def recall_result(rows: Sequence[dict[str, Any]], *, summary: str = "Found it.") -> str:
    picked = [{"id": r["id"], "memoryBodyId": r["memoryBodyId"]} for r in rows]
    spaces = sorted({r["memoryBodyId"] for r in picked}) or ["default"]
    return json.dumps({"summary": summary, "selectedMemoryBodyIds": spaces, "results": picked})


def recalling(final: Callable[[str], str] = lambda text: text) -> Callable[..., Any]:
    """A scripted model: list the spaces, recall "deploys", then return what the recall
    found (``final`` may dress the JSON text, e.g. in a fence)."""

    def model(request: LoopbackRequest) -> Reply:
        if request.rounds == 0:
            return Reply(tool_calls=(ToolCall("mnemon_memory_bodies", {}),))
        if request.rounds == 1:
            call = ToolCall("mnemon_recall", {"query": "deploys", "memoryBodyIds": ["default"]})
            return Reply(text="Searching.", tool_calls=(call,))
        (found,) = request.tool_results()
        return Reply(text=final(recall_result(found.json()["results"])))

    return model


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server_factory() -> Iterator[Callable[..., LoopbackModel]]:
    servers: list[LoopbackModel] = []

    def make(model: Any) -> LoopbackModel:
        servers.append(LoopbackModel(model))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


# -- the happy path -------------------------------------------------------------------------


def test_a_recall_runs_tool_calls_then_returns_the_checked_json_result(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(recalling())
    recording = Recording(workers_for(protocol, server))
    root = open_root(tmp_path, recording)
    answer = root.long_term.recall("deploys")
    assert [r["content"] for r in answer.results] == [FACT]
    assert answer.summary == "Found it."
    assert len(server.requests) == 3
    assert {r.protocol for r in server.requests} == {protocol}
    ((request, definitions),) = recording.seen
    first = server.requests[0]
    assert request.persona.strip() in first.system
    assert json.dumps(request.result_schema, sort_keys=True) in first.system
    assert first.prompt == request.prompt
    # every granted tool offered, in order, with its definition's schema
    assert first.tool_names == request.tools == tuple(d.name for d in definitions)
    assert first.tool_schemas == {d.name: dict(d.input_schema) for d in definitions}
    # the output cap is the request's, on every call
    assert {r.max_tokens for r in server.requests} == {request.max_tokens}
    # each round sends the tool results back under the call's id
    (spaces,) = server.requests[1].tool_results()
    assert not spaces.is_error and spaces.json()[0]["id"] == "default"


def test_the_openai_token_field_follows_the_server(
    server_factory: Callable[..., LoopbackModel],
) -> None:
    server = server_factory([])
    assert workers_for("openai", server).token_field == "max_tokens"
    chosen = workers_for("openai", server, token_field="max_completion_tokens")
    assert chosen.token_field == "max_completion_tokens"
    official = OpenAIWorkers(model="gpt-test", api_key="sk-test")
    assert official.token_field == "max_completion_tokens"
    with pytest.raises(InvalidConfig):
        workers_for("openai", server, token_field="max")


def test_the_chosen_token_field_carries_the_cap(
    tmp_path: Path, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(recalling())
    workers = workers_for("openai", server, token_field="max_completion_tokens")
    open_root(tmp_path, workers).long_term.recall("deploys")
    body = server.requests[0].body
    assert "max_tokens" not in body and body["max_completion_tokens"] == 8192


def test_a_fenced_final_json_is_accepted(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(recalling(lambda text: f"```json\n{text}\n```\n"))
    answer = open_root(tmp_path, workers_for(protocol, server)).long_term.recall("deploys")
    assert [r["content"] for r in answer.results] == [FACT]


def test_an_injected_client_is_used(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(recalling())
    client = workers_for(protocol, server).client
    workers: Workers
    if protocol == "openai":
        workers = OpenAIWorkers(model="gpt-test", client=client)  # type: ignore[arg-type]
    else:
        workers = AnthropicWorkers(model="claude-test", client=client)  # type: ignore[arg-type]
    assert open_root(tmp_path, workers).long_term.recall("deploys").results
    with pytest.raises(InvalidConfig):
        OpenAIWorkers(model="m", client=client, base_url="http://x")  # type: ignore[arg-type]


# -- the model's mistakes are answered, not fatal ---------------------------------------------


def test_malformed_and_refused_arguments_are_answered_as_tool_errors_and_the_model_recovers(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    seen: list[SeenToolResult] = []

    def model(request: LoopbackRequest) -> Reply:
        if request.rounds == 0:
            return Reply(
                tool_calls=(
                    ToolCall("mnemon_recall", '{"query": "deploys"'),  # cut short: not JSON
                    ToolCall("mnemon_recall", "[1, 2]"),  # JSON, not an object
                    ToolCall("mnemon_recall", {"query": 7}),  # the tool refuses it
                )
            )
        if request.rounds == 1:
            seen.extend(request.tool_results())
            return Reply(tool_calls=(ToolCall("mnemon_recall", {"query": "deploys"}),))
        (found,) = request.tool_results()
        return Reply(text=recall_result(found.json()["results"]))

    server = server_factory(model)
    answer = open_root(tmp_path, workers_for(protocol, server)).long_term.recall("deploys")
    assert [r["content"] for r in answer.results] == [FACT]
    assert len(seen) == 3
    errors = [result.json()["error"] for result in seen]
    assert [e["type"] for e in errors] == ["InvalidArguments", "InvalidArguments", "InvalidInput"]
    assert "not valid JSON" in errors[0]["message"] or "not a string" in errors[0]["message"]
    assert "one JSON object" in errors[1]["message"]
    assert all(e["message"] for e in errors)
    if protocol == "anthropic":
        assert all(result.is_error for result in seen)
    # each result answers its own call
    calls = server.requests[1].body["messages"]
    assert len({r.call_id for r in seen}) == 3 and calls


def test_a_tool_not_granted_fails_the_run(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    script = [Reply(tool_calls=(ToolCall("mnemon_forget", {"id": "x"}),)), Reply(text="{}")]
    server = server_factory(script)
    root = open_root(tmp_path, workers_for(protocol, server))
    with pytest.raises(WorkerFailed, match="ToolRefused"):
        root.long_term.recall("deploys")
    assert len(server.requests) == 1  # the refusal ended the run: no further model call


def test_a_model_that_never_stops_calling_tools_fails_at_the_rounds_cap(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(lambda request: Reply(tool_calls=(ToolCall("mnemon_memory_bodies"),)))
    root = open_root(tmp_path, workers_for(protocol, server, max_rounds=3))
    with pytest.raises(WorkerFailed, match="after 3 rounds"):
        root.long_term.recall("deploys")
    assert len(server.requests) == 3


# -- transport faults ---------------------------------------------------------------------------


def test_a_429_is_retried_by_the_sdk(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    final = Reply(text=recall_result([]))
    server = server_factory([Fault(429, "slow down", headers=FAST_RETRY), final])
    answer = open_root(tmp_path, workers_for(protocol, server)).long_term.recall("deploys")
    assert answer.results == () and len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


def test_5xx_until_the_retries_run_out_fails_the_run(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    fault = Fault(503, "overloaded", headers=FAST_RETRY)
    server = server_factory([fault, fault, fault, Reply(text=recall_result([]))])
    root = open_root(tmp_path, workers_for(protocol, server, max_retries=2))
    with pytest.raises(WorkerFailed, match="recall worker failed") as failed:
        root.long_term.recall("deploys")
    assert "503" in str(failed.value) or "overloaded" in str(failed.value)
    assert len(server.requests) == 3  # the first try and two retries
    assert root.long_term.recall("deploys").results == ()  # the next reply is served


def test_a_hang_past_the_client_timeout_fails_the_run_and_the_root_stays_usable(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory([Hang(), Reply(text=recall_result([], summary="Back."))])
    root = open_root(tmp_path, workers_for(protocol, server, timeout=0.3, max_retries=0))
    with pytest.raises(WorkerFailed, match="Timeout"):
        root.long_term.recall("deploys")
    server.release()
    assert root.long_term.recall("deploys").summary == "Back."
    assert len(server.requests) == 2


def test_a_hang_past_the_host_timeout_is_a_worker_timeout(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory([Hang(), Reply(text=recall_result([], summary="Back."))])
    # 1 s: the recall after the hang must finish within the same timeout on a loaded machine
    # (300 ms timed out once in a full parallel run)
    config = Config(long_term_store="embedded", durability="off", worker_timeout_ms=1000)
    root = open_root(tmp_path, workers_for(protocol, server, max_retries=0), config)
    with pytest.raises(WorkerTimeout):
        root.long_term.recall("deploys")
    server.release()
    assert root.long_term.recall("deploys").summary == "Back."


# -- cancellation ---------------------------------------------------------------------------------


class CancellingBox:
    """A tool box whose one tool answers and then finds the run cancelled (the host gave up
    while the tool ran)."""

    def __init__(self) -> None:
        self.scope = RunScope()
        self.calls: list[str] = []

    @property
    def names(self) -> tuple[str, ...]:
        return ("probe",)

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return (ToolDefinition("probe", "Probe. Returns {}.", schema, "{}"),)

    @property
    def cancellation(self) -> Any:
        return self.scope.cancellation

    def call(self, name: str, arguments: Any) -> Any:
        self.calls.append(name)
        self.scope.cancel("the host stopped waiting")
        return {}


REQUEST = WorkerRequest(
    kind="recall",
    persona="You probe.",
    prompt="Probe once.",
    tools=("probe",),
    result_schema={"type": "object"},
    max_tokens=64,
)


def test_cancellation_stops_the_loop_before_another_model_call(
    protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(lambda request: Reply(tool_calls=(ToolCall("probe"),)))
    box = CancellingBox()
    with pytest.raises(WorkerCancelled, match="no further model call"):
        workers_for(protocol, server).run(REQUEST, box)
    assert box.calls == ["probe"]
    assert len(server.requests) == 1


def test_a_run_cancelled_before_it_starts_makes_no_model_call(
    protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory([Reply(text="{}")])
    box = CancellingBox()
    box.scope.cancel("a new turn")
    with pytest.raises(WorkerCancelled):
        workers_for(protocol, server).run(REQUEST, box)
    assert server.requests == []


# -- the async twins ---------------------------------------------------------------------------


def test_an_async_adapter_runs_a_recall_through_the_sync_root(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(recalling(lambda text: f"```\n{text}\n```"))
    answer = open_root(tmp_path, async_workers_for(protocol, server)).long_term.recall("deploys")
    assert [r["content"] for r in answer.results] == [FACT]
    assert len(server.requests) == 3


def test_an_async_adapter_runs_on_the_hosts_loop_through_the_async_root(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(recalling())
    open_root(tmp_path, BuiltinWorkers()).close()  # the fact, stored without a model

    async def main() -> tuple[str, ...]:
        workers = FallbackWorkers(async_workers_for(protocol, server), kinds=("recall",))
        root = await AsyncMemoryRoot.open(tmp_path, CONFIG, workers=workers)
        try:
            answer = await root.long_term.recall("deploys")
        finally:
            await root.close()
        return tuple(r["content"] for r in answer.results)

    assert asyncio.run(main()) == (FACT,)


def test_an_async_run_past_the_host_timeout_is_cancelled_and_the_root_stays_usable(
    tmp_path: Path, protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory([Hang(), Reply(text=recall_result([], summary="Back."))])
    # 1 s: the recall after the hang must finish within the same timeout on a loaded machine
    # (300 ms timed out once in a full parallel run)
    config = Config(long_term_store="embedded", durability="off", worker_timeout_ms=1000)
    root = open_root(tmp_path, async_workers_for(protocol, server, max_retries=0), config)
    with pytest.raises(WorkerTimeout):
        root.long_term.recall("deploys")
    server.release()
    assert root.long_term.recall("deploys").summary == "Back."


def test_an_async_adapter_stops_before_another_model_call_once_cancelled(
    protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    server = server_factory(lambda request: Reply(tool_calls=(ToolCall("probe"),)))
    box = CancellingBox()
    with pytest.raises(WorkerCancelled, match="no further model call"):
        asyncio.run(async_workers_for(protocol, server).run(REQUEST, box))
    assert box.calls == ["probe"] and len(server.requests) == 1


# -- installation ---------------------------------------------------------------------------------


def test_without_the_sdk_the_package_imports_and_building_an_adapter_names_the_extra() -> None:
    code = (
        "import sys\n"
        "import mnemon_sm\n"
        "for cls in (mnemon_sm.OpenAIWorkers, mnemon_sm.AnthropicWorkers,\n"
        "            mnemon_sm.AsyncOpenAIWorkers, mnemon_sm.AsyncAnthropicWorkers):\n"
        "    try:\n"
        "        cls(model='m', api_key='k')\n"
        "    except mnemon_sm.InvalidConfig as exc:\n"
        "        print(exc)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic')))\n"
    )
    assert python_lines(code, without=["openai", "anthropic"]) == [
        "OpenAIWorkers needs the openai package: pip install 'mnemon-sm[openai]'",
        "AnthropicWorkers needs the anthropic package: pip install 'mnemon-sm[anthropic]'",
        "AsyncOpenAIWorkers needs the openai package: pip install 'mnemon-sm[openai]'",
        "AsyncAnthropicWorkers needs the anthropic package: pip install 'mnemon-sm[anthropic]'",
        "[]",
    ]


@pytest.mark.parametrize("name", ["openai_host.py", "anthropic_host.py"])
def test_each_example_runs_offline(tmp_path: Path, name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    proc = subprocess.run(
        [sys.executable, str(BASE / "examples" / name)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(BASE), "MNEMON_EXAMPLE_ROOT": str(tmp_path / "root")},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "offline: a scripted model on the loopback server" in proc.stdout
    assert "remembered:" in proc.stdout and "recalled:" in proc.stdout
    assert FACT_OF_EXAMPLE in proc.stdout


FACT_OF_EXAMPLE = "Deploys are blue-green."


async def _loop_client(workers: Any) -> object:
    return workers.loop_client()


def _loop_client_on_a_thread(workers: Any) -> object:
    """What a run without a host loop sees: a loop of its own, on a thread of its own."""
    import threading

    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(asyncio.run(_loop_client(workers))))
    thread.start()
    thread.join(10)
    return got[0]


def test_each_event_loop_gets_its_own_client_unless_the_host_gave_one(
    protocol: str, server_factory: Callable[..., LoopbackModel]
) -> None:
    """Regression: runs without a host loop each run on a loop of their own, in a thread of
    their own; one async client shared by two such runs at once (a cancelled run still
    unwinding while the next one starts) failed the next with a connection error. A client
    the adapter built now serves one loop; a client the host passed in serves every loop."""
    server = server_factory([])
    built = async_workers_for(protocol, server)

    async def twice() -> tuple[object, object]:
        return built.loop_client(), built.loop_client()

    first, again = asyncio.run(twice())
    assert first is again is built.client  # one loop: one client, the one built first
    assert _loop_client_on_a_thread(built) is not first  # another loop: one of its own
    given = type(built)(model="m", client=async_workers_for(protocol, server).client)
    assert asyncio.run(_loop_client(given)) is given.client
    assert _loop_client_on_a_thread(given) is given.client
