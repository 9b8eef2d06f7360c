"""``mnemon-sm`` commands of the long-term tier: spaces, recall, search, remember, related,
link, forget, and the bulk paths (import, embed, reindex). Every command prints JSON on
stdout; errors go through ``cli.main``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemon_sm.cli import support as cli_support
from mnemon_sm.cli.support import Opener, Printer, ProgressBar, Run, read_text
from mnemon_sm.errors import InvalidInput
from mnemon_sm.ports.long_term.values import CATEGORIES, EDGE_TYPES, MODES
from mnemon_sm.root import MemoryRoot

__all__ = ["register"]


def register(commands: Any, open_root: Opener, emit: Printer) -> None:
    """Add the long-term subcommands to ``commands`` (an argparse subparsers object)."""

    def command(name: str, help_: str, run: Run, under: Any = commands) -> Any:
        return cli_support.command(under, name, help_, run, open_root, emit)

    spaces = commands.add_parser("spaces", help="Memory Spaces").add_subparsers(
        dest="spaces_command", required=True
    )

    def space_command(name: str, help_: str, run: Run) -> Any:
        return command(name, help_, run, spaces)

    space_command(
        "list", "list every space", lambda r, a: [s.to_json() for s in r.long_term.spaces()]
    )
    create = space_command(
        "create",
        "create a space (its id is chosen for you)",
        lambda r, a: r.long_term.create_space(a.name, a.description, active=a.active).to_json(),
    )
    create.add_argument("name")
    create.add_argument("description")
    create.add_argument("--active", action="store_true", help="make it active at once")
    for name, active in (("activate", True), ("deactivate", False)):
        space_command(name, f"{name} a space", _set_active(active)).add_argument("id")
    merge = space_command(
        "merge",
        "merge source spaces into a target (sources are only read)",
        lambda r, a: r.long_term.merge(
            a.target, a.sources, deactivate_sources=not a.keep_sources
        ).to_json(),
    )
    merge.add_argument("target")
    merge.add_argument("sources", nargs="+")
    merge.add_argument("--keep-sources-active", dest="keep_sources", action="store_true")

    recall = command(
        "recall",
        "recall evidence through the recall worker",
        lambda r, a: r.long_term.recall(a.query, spaces=a.space, **_options(a)).to_json(),
    )
    recall.add_argument("query")
    _search_options(recall)
    search = command(
        "search",
        "deterministic search (--agent: answer from the evidence)",
        lambda r, a: (r.long_term.ask if a.agent else r.long_term.search)(
            a.query, spaces=a.space, **_options(a)
        ).to_json(),
    )
    search.add_argument("query")
    search.add_argument("--agent", action="store_true", help="answer with the answer worker")
    _search_options(search)

    remember = command(
        "remember",
        "store a memory through the write worker",
        lambda r, a: r.long_term.remember(
            a.text,
            space=a.space,
            category=a.category,
            importance=a.importance,
            tags=a.tag or None,
            entities=a.entity or None,
        ).to_json(),
    )
    remember.add_argument("text")
    remember.add_argument("--space", help="space id (default: the worker chooses)")
    remember.add_argument("--category", choices=CATEGORIES)
    remember.add_argument("--importance", type=int, choices=range(1, 6), metavar="1-5")
    remember.add_argument("--tag", action="append", help="a tag (repeatable)")
    remember.add_argument("--entity", action="append", help="an entity (repeatable)")

    related = command(
        "related",
        "insights linked to an insight (breadth-first)",
        lambda r, a: [
            item.to_json()
            for item in r.long_term.related(
                a.id, space=a.space or _only_space(r), depth=a.depth, edge=a.edge
            )
        ],
    )
    related.add_argument("id")
    related.add_argument("--space", help="space id (default: the only active space)")
    related.add_argument("--depth", type=int, default=2, choices=range(1, 6), metavar="1-5")
    related.add_argument("--edge", choices=EDGE_TYPES)

    link = command(
        "link",
        "link two insights both ways",
        lambda r, a: r.long_term.link(
            a.source, a.target, space=a.space, type=a.type, weight=a.weight, reason=a.reason
        ).to_json(),
    )
    link.add_argument("source")
    link.add_argument("target")
    link.add_argument("--type", default="semantic", choices=EDGE_TYPES)
    link.add_argument("--weight", type=float, default=0.5)
    link.add_argument("--reason")
    link.add_argument("--space")

    forget = command(
        "forget",
        "forget an insight (soft delete; its links are dropped)",
        lambda r, a: r.long_term.forget(a.id, space=a.space).to_json(),
    )
    forget.add_argument("id")
    forget.add_argument("--space")

    imported = command(
        "import",
        "bulk-import memories (JSON lines or a JSON array: strings or objects with content,"
        " category, importance, tags, entities, source, createdAt); progress on stderr",
        lambda r, a: r.long_term.remember_many(
            _import_items(a.file),
            space=a.space,
            batch=a.batch,
            progress=lambda done, total: ProgressBar()("import", done, total),
        ).to_json(),
    )
    imported.add_argument("file", type=Path, help="the file to import ('-': stdin)")
    imported.add_argument("--space", help="space id (default: the only active space)")
    imported.add_argument("--batch", type=int, default=500, help="memories per transaction")
    command(
        "embed",
        "compute the vectors dense recall lacks (embeddingModel must be set); progress on stderr",
        lambda r, a: {"embedded": r.long_term.embed_missing(progress=ProgressBar())},
    )
    reindex = command(
        "reindex",
        "rebuild the side index of one space or of every space; progress on stderr",
        lambda r, a: {"rebuilt": r.long_term.rebuild_index(a.space)},
    )
    reindex.add_argument("--space", help="space id (default: every space)")


def _import_items(path: Path) -> list[object]:
    """The items of an import file: a JSON array, or one JSON value per line."""
    text = read_text(path)
    try:
        if text.lstrip().startswith("["):
            items = json.loads(text)
        else:
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise InvalidInput(f"{path} is not JSON lines or a JSON array: {exc}") from None
    if not isinstance(items, list):
        raise InvalidInput(f"{path} holds no list of memories")
    return items


def _set_active(active: bool) -> Callable[[MemoryRoot, argparse.Namespace], Any]:
    def run(root: MemoryRoot, args: argparse.Namespace) -> Any:
        return root.long_term.update_space(args.id, active=active).to_json()

    return run


def _search_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--space", action="append", help="space id (repeatable; default: active)")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--mode", choices=MODES)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k in ("limit", "mode") if (v := getattr(args, k)) is not None}


def _only_space(root: MemoryRoot) -> str:
    return root.long_term.service.write_target(None).id
