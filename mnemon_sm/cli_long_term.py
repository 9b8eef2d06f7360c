"""``mnemon-sm`` commands of the long-term tier: spaces, recall, search, remember, related,
link and forget. Every command prints JSON on stdout; errors go through ``cli.main``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from . import cli_support
from .cli_support import Opener, Printer, Run
from .longterm.values import CATEGORIES, EDGE_TYPES, MODES
from .root import MemoryRoot

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
        lambda r, a: r.long_term.merge(a.target, a.sources, deactivate_sources=not a.keep_sources),
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
        lambda r, a: r.long_term.related(
            a.id, space=a.space or _only_space(r), depth=a.depth, edge=a.edge
        ),
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
    return root.long_term.service.catalog.writable(None).id
