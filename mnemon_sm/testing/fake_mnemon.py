"""A fake ``mnemon`` executable for tests: Mnemon's CLI contract over the embedded store.

The real Mnemon binary cannot be installed everywhere the tests run, so :func:`main`
implements the part of its command line that ``longterm.mnemon.MnemonCliStore`` uses, on top of
:class:`~mnemon_sm.adapters.sqlite.EmbeddedStore` (only its constructor and the
``LongTermStore`` methods). :func:`install` writes a launcher script (a ``#!`` line naming
this Python, no shell) so a test can run it as a real child process.

The contract kept (global flags anywhere before ``--``; ``--`` ends flags; cobra-like
errors ``Error: ...`` on stderr with exit code 1, output on stdout):

- global: ``--data-dir <dir>`` (else ``$MNEMON_DATA_DIR``), ``--store <id>`` (else
  ``$MNEMON_STORE``, else the ``<dir>/active`` file, else ``default``), ``--readonly``;
  ``--version`` prints ``mnemon version X.Y.Z``;
- ``status``; ``store create|remove <id>`` (plain text; remove refuses the effective
  store); ``remember <content> --cat --imp --source [--tags a,b] [--entities x,y]`` (a skipped
  duplicate is reported as Mnemon does: a fresh unsaved ``id`` plus ``replaced_id``);
  ``recall <query> --limit [--cat] [--source] [--intent] [--basic]`` (the 0.2.x compact
  ``{results, hint?}``, or with ``FAKE_MNEMON_VERBOSE=1`` the verbose ``{results: [{insight,
  score, intent, via, signals}], meta}``; ``--basic`` prints a bare array of full rows);
  ``search <query> --limit``; ``related <id> --depth [--edge]``; ``link <src> <tgt> --type
  --weight [--meta JSON]``; ``forget <id>``; ``viz --format html --output -`` (vis.js arrays);
  ``import <draft.json>``. ``--readonly`` makes recall and search count no access.

Test hooks, all environment variables: ``FAKE_MNEMON_ARGV_LOG`` (a file that gets one JSON
line per call: ``argv``, ``start`` and ``end`` wall times, ``pid``, and for ``import`` the
draft file's ``draft_mode``), ``FAKE_MNEMON_NOW_MS`` (a fixed clock instead of the system
clock), ``FAKE_MNEMON_SLEEP_MS`` (sleep before running the command) and
``FAKE_MNEMON_VERBOSE``.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mnemon_sm.adapters.real import SystemClock
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.errors import InvalidInput, MnemonError, UnknownInsight, UnknownSpace
from mnemon_sm.ports import Clock
from mnemon_sm.ports.long_term.values import DraftEdge, DraftInsight, ImportDraft

__all__ = ["VERSION", "install", "main"]

VERSION = "0.2.3"
_GLOBAL_VALUES = ("--data-dir", "--store")
# command -> (its flags: name -> takes a value, number of positional arguments)
_COMMANDS: dict[str, tuple[dict[str, bool], int]] = {
    "status": ({}, 0),
    "store create": ({}, 1),
    "store remove": ({}, 1),
    "remember": (dict.fromkeys(("--cat", "--imp", "--source", "--tags", "--entities"), True), 1),
    "recall": (
        dict.fromkeys(("--limit", "--cat", "--source", "--intent"), True) | {"--basic": False},
        1,
    ),
    "search": ({"--limit": True}, 1),
    "related": (dict.fromkeys(("--depth", "--edge"), True), 1),
    "link": (dict.fromkeys(("--type", "--weight", "--meta"), True), 2),
    "forget": ({}, 1),
    "viz": (dict.fromkeys(("--format", "--output"), True), 0),
    "import": ({}, 1),
}
_CATEGORY_COLOURS = {
    "decision": "#e74c3c",
    "fact": "#3498db",
    "insight": "#9b59b6",
    "preference": "#2ecc71",
    "context": "#f39c12",
}
_EDGE_COLOURS = {
    "temporal": "#aaaaaa",
    "semantic": "#3498db",
    "causal": "#e74c3c",
    "entity": "#2ecc71",
    "supersedes": "#8e44ad",
}


class _Usage(Exception):
    """A command line Mnemon would refuse before touching a store."""


@attrs.frozen
class _FixedClock:
    ms: int

    def now_ms(self) -> int:
        return self.ms

    def wait(self, event: threading.Event, timeout_ms: int) -> bool:
        return event.wait(timeout_ms / 1000)


@attrs.define
class _Call:
    command: str = ""
    data_dir: str | None = None
    store: str | None = None
    readonly: bool = False
    version: bool = False
    flags: dict[str, str] = attrs.Factory(dict)
    args: list[str] = attrs.Factory(list)


def _parse(argv: Sequence[str]) -> _Call:
    call = _Call()
    words: list[str] = []
    ended = False
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if ended or token == "-" or not token.startswith("-"):
            if not ended and not call.command:
                words.append(token)
                if " ".join(words) in _COMMANDS:
                    call.command = " ".join(words)
                elif words != ["store"]:
                    raise _Usage(f'unknown command "{" ".join(words)}" for "mnemon"')
            else:
                call.args.append(token)
            continue
        if token == "--":
            ended = True
            continue
        name, has_value, value = token.partition("=")
        known = _COMMANDS[call.command][0] if call.command else {}
        if name == "--readonly":
            call.readonly = True
        elif name == "--version" and not call.command:
            call.version = True
        elif name in _GLOBAL_VALUES or known.get(name):
            if not has_value:
                if i >= len(argv):
                    raise _Usage(f"flag needs an argument: {name}")
                value = argv[i]
                i += 1
            if name == "--data-dir":
                call.data_dir = value
            elif name == "--store":
                call.store = value
            else:
                call.flags[name] = value
        elif name in known:
            call.flags[name] = "true"
        else:
            raise _Usage(f"unknown flag: {name}")
    if call.version:
        return call
    if not call.command:
        raise _Usage("a command is required" if not words else f"unknown command {words[0]!r}")
    wanted = _COMMANDS[call.command][1]
    if len(call.args) != wanted:
        raise _Usage(f"accepts {wanted} arg(s), received {len(call.args)}")
    return call


def _number(call: _Call, flag: str, default: int) -> int:
    text = call.flags.get(flag)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise _Usage(f'invalid argument "{text}" for "{flag}" flag') from None


def _float(call: _Call, flag: str, default: float) -> float:
    text = call.flags.get(flag)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise _Usage(f'invalid argument "{text}" for "{flag}" flag') from None


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def _effective_store(call: _Call, root: Path) -> str:
    if call.store:
        return call.store
    if os.environ.get("MNEMON_STORE"):
        return os.environ["MNEMON_STORE"]
    try:
        pointer = (root / "active").read_text("utf-8").strip()
    except OSError:
        pointer = ""
    return pointer or "default"


def _out(value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    sys.stdout.buffer.write(text.encode("utf-8") + b"\n")


def _js(value: str) -> str:
    """A JavaScript string literal safe inside a <script> element."""
    return json.dumps(value, ensure_ascii=False).replace("</", "<\\/")


def _viz(store: EmbeddedStore, space: str) -> str:
    graph = store.graph(space)
    nodes = ",\n".join(
        f"  {{id: {_js(n.id)}, label: {_js(f'{n.id[:8]}: [{n.category}] {n.content[:60]}')},"
        f" title: {_js(n.content)}, color: {_js(_CATEGORY_COLOURS.get(n.category, '#95a5a6'))}}}"
        for n in graph.nodes
    )
    edges = ",\n".join(
        f"  {{from: {_js(e.source_id)}, to: {_js(e.target_id)}, label: {_js(e.label)},"
        f" color: {{color: {_js(_EDGE_COLOURS.get(e.edge_type, '#000000'))}}}, arrows: 'to'}}"
        for e in graph.edges
    )
    return (
        "<!DOCTYPE html>\n<html><head><title>mnemon graph</title>\n"
        '<script src="https://unpkg.com/vis-network/standalone/umd/vis-network.min.js">'
        '</script></head>\n<body><div id="graph"></div>\n<script>\n'
        f"var nodes = new vis.DataSet([\n{nodes}\n]);\n"
        f"var edges = new vis.DataSet([\n{edges}\n]);\n"
        'new vis.Network(document.getElementById("graph"), {nodes: nodes, edges: edges}, {});\n'
        "</script></body></html>"
    )


def _recall(store: EmbeddedStore, space: str, call: _Call) -> Any:
    query = call.args[0]
    if "--basic" in call.flags:
        limit = _number(call, "--limit", 20)
        result = store.recall(
            space,
            query,
            mode="basic",
            limit=limit if limit > 0 else 20,
            category=call.flags.get("--cat"),
            source=call.flags.get("--source"),
            readonly=call.readonly,
        )
        return [hit.insight.to_json() for hit in result.hits]
    result = store.recall(
        space,
        query,
        mode="smart",  # Mnemon's own recall
        limit=_number(call, "--limit", 10),
        category=call.flags.get("--cat"),
        source=call.flags.get("--source"),
        intent=call.flags.get("--intent"),
        readonly=call.readonly,
    )
    if os.environ.get("FAKE_MNEMON_VERBOSE") == "1":
        intent = result.hits[0].intent if result.hits else call.flags.get("--intent", "GENERAL")
        meta: dict[str, Any] = {
            "intent": intent,
            "intent_source": "explicit" if "--intent" in call.flags else "detected",
            "anchor_count": len(result.hits),
            "traversed": len(result.hits),
        }
        if result.hint:
            meta["hint"] = result.hint
        rows: list[dict[str, Any]] = [
            {
                "insight": h.insight.to_json(),
                "score": h.score,
                "intent": h.intent,
                "via": h.matched_via,
                "signals": {},
            }
            for h in result.hits
        ]
        return {"results": rows, "meta": meta}
    out: dict[str, Any] = {
        "results": [
            {
                "id": h.insight.id,
                "content": h.insight.content,
                "category": h.insight.category,
                "importance": h.insight.importance,
                "intent": h.intent,
                "matched_via": h.matched_via,
                "confidence": h.confidence,
                "score": h.score,
            }
            for h in result.hits
        ]
    }
    if result.hint:
        out["hint"] = result.hint
    return out


def _import(store: EmbeddedStore, space: str, path: str, log: dict[str, Any]) -> Any:
    try:
        log["draft_mode"] = stat.S_IMODE(os.stat(path).st_mode)
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
        if not isinstance(doc, dict) or doc.get("schema_version") != "1":
            raise _Usage('invalid draft: schema_version must be "1"')
        insights = tuple(
            DraftInsight(
                content=i["content"],
                category=i.get("category", "general"),
                importance=i.get("importance", 3),
                tags=tuple(i.get("tags") or ()),
                entities=tuple(i.get("entities") or ()),
                source=i.get("source"),
                created_at=i.get("created_at"),
            )
            for i in doc["insights"]
        )
        edges = tuple(
            DraftEdge(
                e["source_index"],
                e["target_index"],
                e["edge_type"],
                e.get("weight", 0.5),
                e.get("reason"),
            )
            for e in doc.get("edges") or ()
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _Usage(f"invalid draft: {exc}") from None
    before = {item.id for item in store.list(space)}
    report = store.import_draft(space, ImportDraft(insights, edges, doc.get("source")))
    seen: set[str] = set()
    results = []
    for index, (node, item) in enumerate(zip(report.ids, insights, strict=True)):
        action = "skipped" if node in before or node in seen else "added"
        seen.add(node)
        results.append({"index": index, "id": node, "content": item.content, "action": action})
    return {
        "imported": report.imported,
        "updated": 0,
        "skipped": report.skipped,
        "errors": report.errors,
        "edges_inserted": report.edges_inserted,
        "auto_pruned": report.auto_pruned,
        "results": results,
    }


def _store_command(store: EmbeddedStore, root: Path, call: _Call) -> str:
    target = call.args[0]
    if call.command == "store create":
        store.create_space(target)
        return f'Created store "{target}"'
    if target not in store.spaces():
        raise UnknownSpace(f"store {target!r} does not exist")
    if target == _effective_store(call, root):
        raise _Usage(f'cannot remove the active store "{target}"; switch to another first')
    store.delete_space(target)
    return f'Removed store "{target}"'


def _run(call: _Call, log: dict[str, Any]) -> Any:
    root = Path(call.data_dir or os.environ.get("MNEMON_DATA_DIR") or "~/.mnemon").expanduser()
    fixed = os.environ.get("FAKE_MNEMON_NOW_MS")
    clock: Clock = _FixedClock(int(fixed)) if fixed else SystemClock()
    with EmbeddedStore(root, clock) as store:
        if call.command.startswith("store "):
            return _store_command(store, root, call)
        space = _effective_store(call, root)
        if space not in store.spaces():
            raise UnknownSpace(f"store {space!r} does not exist")
        flags = call.flags
        if call.command == "status":
            return store.status(space).to_json()
        if call.command == "remember":
            receipt = store.remember(
                space,
                call.args[0],
                category=flags.get("--cat", "general"),
                importance=_number(call, "--imp", 3) or 3,
                tags=_names(flags.get("--tags")),
                entities=_names(flags.get("--entities")),
                source=flags.get("--source") or "user",
            )
            out = receipt.to_json()
            out["diff_suggestion"] = "DUPLICATE" if receipt.action == "skipped" else "ADD"
            if receipt.action == "skipped":  # Mnemon's quirk: a fresh id it never saves
                out["id"], out["replaced_id"] = str(uuid.uuid4()), receipt.id
            return out
        if call.command == "recall":
            return _recall(store, space, call)
        if call.command == "search":
            result = store.recall(
                space,
                call.args[0],
                mode="keyword",
                limit=_number(call, "--limit", 10),
                readonly=call.readonly,
            )
            return [
                {
                    "id": h.insight.id,
                    "content": h.insight.content,
                    "category": h.insight.category,
                    "importance": h.insight.importance,
                    "tags": list(h.insight.tags),
                    "score": h.score,
                }
                for h in result.hits
            ]
        if call.command == "related":
            hits = store.related(
                space,
                call.args[0],
                depth=_number(call, "--depth", 2),
                edge_type=flags.get("--edge"),
            )
            return [
                {
                    "id": h.insight.id,
                    "content": h.insight.content,
                    "category": h.insight.category,
                    "importance": h.insight.importance,
                    "depth": h.depth,
                    "via_edge_type": h.via_edge_type,
                }
                for h in hits
            ]
        if call.command == "link":
            try:
                meta = json.loads(flags.get("--meta", "{}"))
            except ValueError:
                raise _Usage("invalid --meta: not JSON") from None
            if not isinstance(meta, dict):
                raise _Usage("invalid --meta: not a JSON object")
            return store.link(
                space,
                call.args[0],
                call.args[1],
                edge_type=flags.get("--type", "semantic"),
                weight=_float(call, "--weight", 0.5),
                reason=meta.get("reason"),
            ).to_json()
        if call.command == "forget":
            gone = store.forget(space, call.args[0]).to_json()
            return {**gone, "message": f"Insight {gone['id']} deleted"}
        if call.command == "viz":
            if flags.get("--format", "html") != "html" or flags.get("--output") != "-":
                raise _Usage("this fake supports only --format html --output -")
            return _viz(store, space)
        return _import(store, space, call.args[0], log)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, _Usage):
        return str(exc)
    if isinstance(exc, UnknownSpace):
        return exc.message
    if isinstance(exc, UnknownInsight):
        return f"insight not found ({exc.message})"
    if isinstance(exc, InvalidInput):
        return f"invalid input: {exc.message}"
    if isinstance(exc, MnemonError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    log: dict[str, Any] = {"argv": args, "start": time.time(), "pid": os.getpid()}
    code = 0
    try:
        call = _parse(args)
        delay = os.environ.get("FAKE_MNEMON_SLEEP_MS")
        if delay:
            time.sleep(int(delay) / 1000)
        if call.version:
            _out(f"mnemon version {VERSION}")
        else:
            _out(_run(call, log))
    except (_Usage, MnemonError) as exc:
        sys.stderr.write(f"Error: {_error_text(exc)}\n")
        code = 1
    finally:
        sys.stdout.flush()
        log["end"] = time.time()
        target = os.environ.get("FAKE_MNEMON_ARGV_LOG")
        if target:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(log) + "\n")
    return code


def install(
    directory: str | Path, *, name: str = "mnemon", env: Mapping[str, str] | None = None
) -> Path:
    """Write an executable launcher ``<directory>/<name>`` running :func:`main` with this
    Python (a ``#!`` line, no shell); ``env`` is set in the child's environment first.

    To start fast (tests spawn it for every call), the launcher registers the package without
    running its ``__init__`` (which loads the whole library), so only the modules the fake
    needs are imported.
    """
    package = Path(__file__).resolve().parent.parent
    path = Path(directory) / name
    path.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, types\n"
        f"os.environ.update({dict(env or {})!r})\n"
        "package = types.ModuleType('mnemon_sm')\n"
        f"package.__path__ = [{str(package)!r}]\n"
        "sys.modules['mnemon_sm'] = package\n"
        "from mnemon_sm.testing.fake_mnemon import main\n"
        "sys.exit(main(sys.argv[1:]))\n",
        "utf-8",
    )
    path.chmod(0o755)
    return path


if __name__ == "__main__":
    sys.exit(main())
