"""``mnemon-sm docs`` commands: create, update, search, archive and show project Documents.
Every command prints JSON on stdout; errors go through ``cli.main``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from mnemon_sm.cli import support as cli_support
from mnemon_sm.cli.support import Opener, Parser, Printer, Run, read_text
from mnemon_sm.root import MemoryRoot

__all__ = ["register"]


def register(commands: Any, open_root: Opener, emit: Printer) -> None:
    """Add ``docs`` and its subcommands to ``commands`` (an argparse subparsers object)."""
    docs = commands.add_parser("docs", help="project Documents").add_subparsers(
        dest="docs_command", required=True
    )

    def command(name: str, help_: str, run: Run) -> Any:
        return cli_support.command(docs, name, help_, run, open_root, emit)

    create = command("create", "create a document (archives the LRU one if full)", _create)
    create.add_argument("--title", required=True)
    _fields(create)
    update = command("update", "update an active document", _update)
    update.add_argument("id")
    update.add_argument("--title")
    _fields(update)
    search = command(
        "search",
        "search documents (records their access time)",
        lambda r, a: [
            h.to_json()
            for h in r.documents.search(a.query, limit=a.limit, include_archived=a.archived)
        ],
    )
    search.add_argument("query")
    search.add_argument("--limit", type=int)
    search.add_argument("--archived", action="store_true", help="include archived documents")
    archive = command(
        "archive",
        "archive a document (cold reference first)",
        lambda r, a: r.documents.archive(a.id).to_json(),
    )
    archive.add_argument("id")
    show = command("show", "print a document's record and content", _show)
    show.add_argument("id")


def _fields(parser: Parser) -> None:
    parser.add_argument("--description")
    parser.add_argument("--source", action="append", help="a source path (repeatable)")
    parser.add_argument("--session", action="append", help="a session id (repeatable)")
    parser.add_argument("--workspace", help="where source paths are resolved (default: cwd)")
    parser.add_argument("--file", type=Path, help="read the content from a file ('-': stdin)")
    parser.add_argument("text", nargs="?", help="the content (or --file)")
    parser.exclusive("file", "text")  # see support.Parser


def _content(args: argparse.Namespace) -> str | None:
    if args.file is not None:
        return read_text(args.file)
    text: str | None = args.text
    return text


def _create(root: MemoryRoot, args: argparse.Namespace) -> Any:
    return root.documents.create(
        args.title,
        _content(args) or "",
        description=args.description,
        source_paths=args.source or (),
        session_ids=args.session or (),
        workspace=args.workspace or os.getcwd(),
    ).to_json()


def _update(root: MemoryRoot, args: argparse.Namespace) -> Any:
    return root.documents.update(
        args.id,
        content=_content(args),
        title=args.title,
        description=args.description,
        source_paths=args.source,
        session_ids=args.session or (),
        workspace=args.workspace or os.getcwd(),
    ).to_json()


def _show(root: MemoryRoot, args: argparse.Namespace) -> Any:
    record, body = root.documents.get(args.id)
    return {**record.to_json(), "content": body}
