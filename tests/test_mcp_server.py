"""``mnemon-sm mcp``: the MCP server, driven by the official SDK's own client.

The server runs as ``python -m mnemon_sm.cli mcp`` in a subprocess, over stdio (the SDK's
``stdio_client`` spawns it) and over streamable HTTP (started on a free loopback port, which
it announces on standard error; the test waits for the announcement and for the port to
answer, each against a deadline). Each test checks the effects on disk through a root opened
in this process afterwards. Everything is bounded: every session runs under ``fail_after``,
every request under a read timeout, every process wait under a timeout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, MCPError, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mnemon_sm import MemoryRoot
from mnemon_sm.config import Config
from mnemon_sm.errors import InvalidInput
from mnemon_sm.mcp_server import CONTEXT_PROMPT, CONTEXT_URI, HOT_URIS, check_host, context_text

REPO = Path(__file__).resolve().parents[1]
FACT = "User prefers concise replies"
LIMIT_S = 90  # one whole session, start to close
READ_TIMEOUT_S = 60  # one request
MCP_COMMAND = (sys.executable, "-m", "mnemon_sm.cli", "mcp")
MUTATING = {
    "mnemon_runtime_memory",
    "mnemon_remember",
    "mnemon_document_create",
    "mnemon_document_update",
}


def _env(tmp_path: Path) -> dict[str, str]:
    """This checkout's code, a home of its own, no inherited data directory."""
    env = {k: v for k, v in os.environ.items() if k != "MNEMON_DATA_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def _run(body: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(LIMIT_S):
            await body()

    anyio.run(bounded)


@asynccontextmanager
async def stdio_session(tmp_path: Path, root: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemon_sm.cli", "mcp", "--root", str(root), *extra],
        env=_env(tmp_path),
        cwd=str(tmp_path),
    )
    with (tmp_path / "stdio-server.err").open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT_S) as session,
        ):
            await session.initialize()
            yield session


@contextmanager
def http_server(tmp_path: Path, root: Path, *extra: str) -> Iterator[str]:
    """``mnemon-sm mcp --transport http`` on a free loopback port; yields its URL once the
    port answers; stops it with SIGTERM (a graceful exit, status 0) at the end."""
    errors = tmp_path / "http-server.err"
    with errors.open("w", encoding="utf-8") as errlog:
        proc = subprocess.Popen(
            [*MCP_COMMAND, "--root", str(root), "--transport", "http", "--port", "0", *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            env=_env(tmp_path),
            cwd=tmp_path,
        )
    try:
        url = _wait_for_url(proc, errors, deadline=time.monotonic() + 60)
        _wait_for_port(url, deadline=time.monotonic() + 30)
        yield url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, errors.read_text("utf-8")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _wait_for_url(proc: subprocess.Popen[bytes], errors: Path, *, deadline: float) -> str:
    pattern = re.compile(r"serving MCP on (http://\S+)")
    while time.monotonic() < deadline:
        found = pattern.search(errors.read_text("utf-8"))
        if found:
            return found.group(1)
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {errors.read_text('utf-8')}")
        time.sleep(0.05)
    raise AssertionError(f"no URL announced in time: {errors.read_text('utf-8')}")


def _wait_for_port(url: str, *, deadline: float) -> None:
    found = re.match(r"http://([^/:]+):(\d+)/", url)
    assert found, url
    host, port = found.groups()
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT_S) as session,
    ):
        await session.initialize()
        yield session


def _listed(result: types.ListToolsResult) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
        for t in result.tools
    ]


def _answer(result: types.CallToolResult) -> dict[str, Any]:
    """The tool's JSON answer; the text and the structured content say the same."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    answer: dict[str, Any] = json.loads(block.text)
    assert result.structured_content == answer
    return answer


async def _text(session: ClientSession, uri: str) -> str:
    (contents,) = (await session.read_resource(uri)).contents
    assert isinstance(contents, types.TextResourceContents)
    assert (contents.uri, contents.mime_type) == (uri, "text/markdown")
    return contents.text


def _tools_of_a_writable_root(tmp_path: Path) -> list[dict[str, Any]]:
    with MemoryRoot.open(tmp_path / "scratch", Config(durability="off")) as scratch:
        return scratch.tools.to_mcp()


async def _add_and_read(session: ClientSession, expected: list[dict[str, Any]]) -> None:
    """The round trip both transports must carry: list, add, read USER.md."""
    assert _listed(await session.list_tools()) == expected
    added = await session.call_tool(
        "mnemon_runtime_memory",
        {"action": "add", "target": "user", "content": FACT, "importance": "critical"},
    )
    assert not added.is_error
    assert _answer(added)["success"] is True
    assert await _text(session, HOT_URIS["user"]) == FACT + "\n"
    assert await _text(session, HOT_URIS["memory"]) == ""


def _user_md(root: Path) -> str:
    return (root / "runtime" / "USER.md").read_text("utf-8")


# -- stdio -----------------------------------------------------------------------------------


def test_stdio_serves_the_tools_resources_and_prompt(tmp_path: Path) -> None:
    root = tmp_path / "root"
    expected = _tools_of_a_writable_root(tmp_path)
    doc_ids: list[str] = []
    seen: dict[str, str] = {}

    async def body() -> None:
        async with stdio_session(tmp_path, root) as session:
            await _add_and_read(session, expected)
            assert _user_md(root) == FACT + "\n"  # committed and projected on disk

            stored = await session.call_tool(
                "mnemon_remember", {"content": "Release checks run with make verify"}
            )
            assert not stored.is_error, stored
            for tool in ("mnemon_search", "mnemon_recall"):
                found = _answer(await session.call_tool(tool, {"query": "release checks"}))
                contents = [r["content"] for r in found["results"]]
                assert contents == ["Release checks run with make verify"], tool

            listed = await session.list_resources()
            assert [r.uri for r in listed.resources] == [
                CONTEXT_URI,
                HOT_URIS["user"],
                HOT_URIS["memory"],
            ]
            created = _answer(
                await session.call_tool(
                    "mnemon_document_create",
                    {"title": "Deploy", "content": "# Deploy\n\nRun make deploy."},
                )
            )
            doc_id = created["document"]["id"]
            doc_ids.append(doc_id)
            listed = await session.list_resources()
            documents = [r for r in listed.resources if r.uri.startswith("mnemon://documents/")]
            assert [(r.uri, r.name) for r in documents] == [
                (f"mnemon://documents/{doc_id}", "Deploy")
            ]
            assert await _text(session, documents[0].uri) == "# Deploy\n\nRun make deploy."
            templates = await session.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == [
                "mnemon://documents/{id}"
            ]

            context = seen["context"] = await _text(session, CONTEXT_URI)
            assert FACT in context and "USER.md" in context
            (prompt,) = (await session.list_prompts()).prompts
            assert prompt.name == CONTEXT_PROMPT
            got = await session.get_prompt(CONTEXT_PROMPT)
            (message,) = got.messages
            assert message.role == "user"
            assert isinstance(message.content, types.TextContent)
            assert message.content.text == context

            with pytest.raises(MCPError) as unknown:
                await session.read_resource("mnemon://documents/no-such-id")
            assert unknown.value.code == types.INVALID_PARAMS
            assert unknown.value.data["error"]["type"] == "DocumentNotFound"
            with pytest.raises(MCPError) as bad_prompt:
                await session.get_prompt("no_such_prompt")
            assert bad_prompt.value.code == types.INVALID_PARAMS

    _run(body)
    with MemoryRoot.open(root) as opened:
        # as `mnemon-sm context` prints it: the guidance, a blank line, the memory
        guidance, memory = opened.context.routing_guidance(), opened.context.runtime_memory()
        assert guidance and seen["context"] == f"{guidance}\n\n{memory}" == context_text(opened)
        (record,) = opened.documents.records()
        assert record.id == doc_ids[0] and record.title == "Deploy"
        assert [e.content for e in opened.hot.snapshot().of("user")] == [FACT]
    assert (tmp_path / "stdio-server.err").read_text("utf-8") == ""  # nothing went wrong


def test_a_rejected_call_is_a_tool_error_with_the_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "root"

    async def body() -> None:
        async with stdio_session(tmp_path, root) as session:
            missing = await session.call_tool(
                "mnemon_runtime_memory",
                {"action": "remove", "target": "user", "old_text": "nothing like this"},
            )
            assert missing.is_error
            assert _answer(missing)["error"]["type"] == "NoMatch"
            wrong = await session.call_tool("mnemon_search", {"query": "x", "bogus": 1})
            assert wrong.is_error
            error = _answer(wrong)["error"]
            assert error["type"] == "InvalidInput" and "bogus" in error["message"]
            unknown = await session.call_tool("no_such_tool", {})
            assert unknown.is_error and _answer(unknown)["error"]["type"] == "InvalidInput"
            fine = await session.call_tool("mnemon_status")  # no arguments at all
            assert not fine.is_error and _answer(fine)["writeEnabled"] is True

    _run(body)
    with MemoryRoot.open(root) as opened:
        assert opened.hot.snapshot().entries == ()


def test_a_read_only_server_lists_no_mutating_tool_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with MemoryRoot.open(root) as seeded:
        seeded.hot.add("user", FACT)
        expected = [t for t in seeded.tools.to_mcp() if t["name"] not in MUTATING]
    before = _tree(root)

    async def body() -> None:
        async with stdio_session(tmp_path, root, "--read-only") as session:
            assert _listed(await session.list_tools()) == expected
            refused = await session.call_tool(
                "mnemon_runtime_memory", {"action": "add", "target": "user", "content": "x"}
            )
            assert refused.is_error and _answer(refused)["error"]["type"] == "ReadOnly"
            assert await _text(session, HOT_URIS["user"]) == FACT + "\n"
            status = _answer(await session.call_tool("mnemon_status", {}))
            assert status["writeEnabled"] is False

    _run(body)
    assert _tree(root) == before


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_the_example_desktop_config_serves_the_root_under_home(tmp_path: Path) -> None:
    """The README's client configuration as a desktop client runs it: no shell, so ``~`` in
    ``--root`` reaches the command as it is and the command expands it."""
    config = json.loads((REPO / "examples" / "mcp" / "desktop_config.json").read_text("utf-8"))
    server = config["mcpServers"]["mnemon"]
    assert server["command"] == "mnemon-sm" and server["args"][-1].startswith("~/")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemon_sm.cli", *server["args"]],
        env=_env(tmp_path),
        cwd=str(tmp_path),
    )

    async def body() -> None:
        with (tmp_path / "stdio-server.err").open("w", encoding="utf-8") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT_S) as session,
            ):
                await session.initialize()
                arguments = {"action": "add", "target": "user", "content": FACT}
                added = await session.call_tool("mnemon_runtime_memory", arguments)
                assert not added.is_error

    _run(body)
    home = tmp_path / "home"
    assert _user_md(home / server["args"][-1].removeprefix("~/")) == FACT + "\n"
    assert not (tmp_path / "~").exists()


# -- streamable HTTP -------------------------------------------------------------------------


def test_http_serves_on_loopback(tmp_path: Path) -> None:
    root = tmp_path / "root"
    expected = _tools_of_a_writable_root(tmp_path)
    with http_server(tmp_path, root) as url:
        assert url.startswith("http://127.0.0.1:")

        async def body() -> None:
            async with http_session(url) as session:
                await _add_and_read(session, expected)
                wrong = await session.call_tool("mnemon_status", {"bogus": True})
                assert wrong.is_error and _answer(wrong)["error"]["type"] == "InvalidInput"

        _run(body)
        assert _user_md(root) == FACT + "\n"
        # DNS-rebinding protection: a page elsewhere cannot reach the loopback server
        assert _post_status(url, {"Host": "evil.example"}) == 421
        assert _post_status(url, {"Origin": "http://evil.example"}) == 403


def _post_status(url: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url,
        data=b"{}",
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _refused(tmp_path: Path, argv: list[str]) -> dict[str, Any]:
    """Run ``argv`` in ``tmp_path``; it must exit 1 with the CLI's JSON error, returned."""
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(tmp_path),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    error: dict[str, Any] = json.loads(proc.stderr)["error"]
    return error


@pytest.mark.parametrize("host", ["0.0.0.0", "example.com"])
def test_http_refuses_a_non_loopback_host_without_allow_remote(tmp_path: Path, host: str) -> None:
    root = tmp_path / "root"
    argv = [*MCP_COMMAND, "--root", str(root), "--transport", "http", "--host", host]
    error = _refused(tmp_path, [*argv, "--port", "0"])
    assert error["type"] == "InvalidInput" and "--allow-remote" in error["message"]
    assert not root.exists()  # refused before the root was opened


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_hosts_need_no_permission(host: str) -> None:
    check_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.evil"])
def test_other_hosts_need_allow_remote(host: str) -> None:
    with pytest.raises(InvalidInput, match="--allow-remote"):
        check_host(host)
    check_host(host, allow_remote=True)


# -- without the extra -----------------------------------------------------------------------


def test_without_the_mcp_extra_the_command_names_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None  # the SDK is not installed\n"
        "from mnemon_sm.cli import main\n"
        f"main(['mcp', '--root', {str(root)!r}])\n"
    )
    error = _refused(tmp_path, [sys.executable, "-c", code])
    assert error["type"] == "InvalidConfig"
    assert "pip install 'mnemon-sm[mcp]'" in error["message"]
    assert not root.exists()
