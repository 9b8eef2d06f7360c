"""The ``mnemon-sm`` command line.

Receipts and snapshots are JSON on stdout. A rejected request prints
``{"error": {"type": ..., "message": ...}}`` on stderr and exits 1 (a file named on the command
line that cannot be read is ``InvalidInput`` too); a storage or lock failure exits 3; a usage
error exits 2 (argparse).

Options and positionals may come in any order inside a command (``docs update ID --title T
TEXT``): every parser is a :class:`~mnemon_sm.cli.support.Parser`, which parses a command
without subcommands the way ``parse_intermixed_args`` does (options first, then the
positionals left). A parser with subcommands parses as usual and hands the rest on.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemon_sm import __version__
from mnemon_sm.cli import documents as cli_documents
from mnemon_sm.cli import inspect_command as cli_inspect
from mnemon_sm.cli import long_term as cli_long_term
from mnemon_sm.cli import mcp_command as cli_mcp
from mnemon_sm.cli.demo import run_demo
from mnemon_sm.cli.replay import replay
from mnemon_sm.cli.specs import check_specs, render_specs
from mnemon_sm.cli.support import Parser, ProgressBar, UsageError, directory_root, root_arg
from mnemon_sm.config import Config
from mnemon_sm.errors import MnemonError, StorageError
from mnemon_sm.flows.hot.model import IMPORTANCES, TARGETS
from mnemon_sm.migrate import migrate
from mnemon_sm.root import MemoryRoot

__all__ = ["main"]

EXIT_REJECTED, EXIT_STORAGE = 1, 3  # a usage error exits 2: argparse does it


def version() -> str:
    """The installed distribution's version (the package's own when not installed)."""
    try:
        return importlib.metadata.version("mnemon-sm")
    except importlib.metadata.PackageNotFoundError:
        return __version__


def default_root() -> Path | str:
    """``$MNEMON_DATA_DIR`` when set and not blank (a directory or a PostgreSQL root URL),
    else ``~/.mnemon``."""
    env = os.environ.get("MNEMON_DATA_DIR", "").strip()
    if not env:
        return Path.home() / ".mnemon"
    return root_arg(env)


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _open(args: argparse.Namespace) -> MemoryRoot:
    config = Config.from_toml(args.config) if args.config else Config()
    return MemoryRoot.open(args.root or default_root(), config, progress=ProgressBar())


def _migrate(args: argparse.Namespace) -> None:
    def progress(what: str, done: int, total: int) -> None:
        print(f"{what}: {done}/{total}", file=sys.stderr, flush=True)

    report = migrate(
        root_arg(args.source), root_arg(args.target), progress=progress, batch=args.batch
    )
    _print_json(report.to_json())


def _replay(args: argparse.Namespace) -> None:
    config = Config.from_toml(args.config) if args.config else Config()
    root = directory_root(args.root or default_root(), "lifecycle replay")
    statuses = replay(args.events, root, config, apply=args.apply)
    _print_json(statuses)


def _hot_add(args: argparse.Namespace) -> None:
    with _open(args) as root:
        receipt = root.hot.add(
            args.target, args.text, args.importance, maintenance=args.maintenance
        )
        _print_json(receipt.to_json())


def _hot_replace(args: argparse.Namespace) -> None:
    with _open(args) as root:
        receipt = root.hot.replace(args.target, args.old_text, args.text, args.importance)
        _print_json(receipt.to_json())


def _hot_remove(args: argparse.Namespace) -> None:
    with _open(args) as root:
        _print_json(root.hot.remove(args.target, args.old_text).to_json())


def _audit_tail(args: argparse.Namespace) -> None:
    with _open(args) as root:
        for record in root.audit_tail(args.n, flow=args.flow):
            print(json.dumps(record.to_json(), ensure_ascii=False))


def _hot_show(args: argparse.Namespace) -> None:
    with _open(args) as root:
        _print_json(root.hot.snapshot().to_json(args.target))


def _hot_history(args: argparse.Namespace) -> None:
    with _open(args) as root:
        _print_json([item.to_json() for item in root.hot.history(args.target)])


def _hot_restore(args: argparse.Namespace) -> None:
    with _open(args) as root:
        receipt = root.hot.restore(args.id, maintenance=args.maintenance)
        _print_json(receipt.to_json())


def _context(args: argparse.Namespace) -> None:
    with _open(args) as root:
        guidance, memory = root.context.routing_guidance(), root.context.runtime_memory()
    if args.json:
        _print_json({"routingGuidance": guidance, "runtimeMemory": memory})
        return
    if guidance:
        print(guidance, end="\n\n")
    print(memory)


def _specs(args: argparse.Namespace) -> None:
    if args.action == "render":
        for line in render_specs(args.dir, args.out):
            print(line)
        return
    problems = check_specs(args.dir, args.tests)
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        raise SystemExit(EXIT_REJECTED)
    print("specs: every flow loads, lints clean and matches its committed diagram")


def _demo(args: argparse.Namespace) -> None:
    root = args.demo_root or args.root
    run_demo(None if root is None else directory_root(root, "demo"), force=args.force)


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mnemon-sm", description="Tiered, crash-safe memory for LLM agents.")
    parser.add_argument("--version", action="version", version=f"mnemon-sm {version()}")
    parser.add_argument(
        "--root",
        type=root_arg,
        help="storage root: a directory or postgresql://...?root=NAME (default "
        "$MNEMON_DATA_DIR or ~/.mnemon)",
    )
    parser.add_argument("--config", type=Path, help="TOML config file (camelCase keys)")
    commands = parser.add_subparsers(dest="command", required=True)

    hot = commands.add_parser("hot", help="USER.md / MEMORY.md").add_subparsers(
        dest="hot_command", required=True
    )
    add = hot.add_parser("add", help="add an entry")
    add.add_argument("--target", required=True, choices=TARGETS)
    add.add_argument("--importance", choices=IMPORTANCES)
    add.add_argument(
        "--no-maintenance",
        dest="maintenance",
        action="store_false",
        help="on overflow, fail with CapacityExceeded instead of compacting or archiving",
    )
    add.add_argument("text")
    add.set_defaults(run=_hot_add)
    replace = hot.add_parser("replace", help="replace the one entry containing --old-text")
    replace.add_argument("--target", required=True, choices=TARGETS)
    replace.add_argument("--old-text", required=True)
    replace.add_argument("--importance", choices=IMPORTANCES)
    replace.add_argument("text")
    replace.set_defaults(run=_hot_replace)
    remove = hot.add_parser("remove", help="remove the one entry containing --old-text")
    remove.add_argument("--target", required=True, choices=TARGETS)
    remove.add_argument("--old-text", required=True)
    remove.set_defaults(run=_hot_remove)
    show = hot.add_parser("show", help="print the committed entries as JSON")
    show.add_argument("--target", choices=TARGETS)
    show.set_defaults(run=_hot_show)
    history = hot.add_parser(
        "history", help="entries maintenance took out of hot memory, newest first"
    )
    history.add_argument("--target", choices=TARGETS)
    history.set_defaults(run=_hot_history)
    restore = hot.add_parser("restore", help="add a history entry back through the add path")
    restore.add_argument(
        "--maintenance",
        action="store_true",
        help="on overflow, compact or archive as an add does (default: CapacityExceeded)",
    )
    restore.add_argument("id", help="an entry id from `hot history`")
    restore.set_defaults(run=_hot_restore)

    context = commands.add_parser("context", help="print the per-turn context texts")
    context.add_argument("--json", action="store_true", help="print both texts as JSON")
    context.set_defaults(run=_context)

    specs = commands.add_parser("specs", help="render or check the flow specs")
    specs.add_argument("action", choices=("render", "check"))
    specs.add_argument("--dir", type=Path, help="spec directory (default ./specs if present)")
    specs.add_argument("--tests", type=Path, help="property tests (default ./property_tests)")
    specs.add_argument(
        "--out",
        type=Path,
        help="render: where to write the diagrams (default: diagrams/ beside the specs of a"
        " source checkout; required when the specs are an installed package's)",
    )
    specs.set_defaults(run=_specs)

    cli_long_term.register(commands, _open, _print_json)
    cli_documents.register(commands, _open, _print_json)
    cli_mcp.register(commands, default_root, version)
    cli_inspect.register(commands, default_root)

    lifecycle = commands.add_parser("lifecycle", help="agent lifecycle").add_subparsers(
        dest="lifecycle_command", required=True
    )
    replay = lifecycle.add_parser(
        "replay", help="feed a recorded host event log and print every transition"
    )
    replay.add_argument("events", type=Path, help="JSON lines: {at, event, ...}")
    replay.add_argument(
        "--apply",
        action="store_true",
        help="replay on the root itself (default: on a scratch copy, the root unchanged)",
    )
    replay.set_defaults(run=_replay)
    reset = lifecycle.add_parser(
        "reset", help="move an agent's state file aside (even an unreadable one); it starts anew"
    )
    reset.add_argument("agent", help="the agent id")
    reset.add_argument("--root", type=root_arg, default=argparse.SUPPRESS, help="storage root")
    reset.set_defaults(run=lambda a: _print_json(_open(a).reset_lifecycle(a.agent).to_json()))

    audit = commands.add_parser("audit", help="the audit log of every flow").add_subparsers(
        dest="audit_command", required=True
    )
    tail = audit.add_parser("tail", help="print the newest records, oldest first, as JSON lines")
    tail.add_argument("-n", type=int, default=20, help="how many records (default 20)")
    tail.add_argument("--flow", help="records of this flow only")
    tail.set_defaults(run=_audit_tail)

    migrate_ = commands.add_parser(
        "migrate",
        help="copy a whole root to an empty one (a directory or a PostgreSQL URL) and verify",
    )
    migrate_.add_argument("--from", dest="source", required=True, help="the root to copy")
    migrate_.add_argument("--to", dest="target", required=True, help="an empty root")
    migrate_.add_argument(
        "--batch", type=int, default=64, help="files copied per step (default 64)"
    )
    migrate_.set_defaults(run=_migrate)

    demo = commands.add_parser("demo", help="run a scripted agent conversation")
    demo.add_argument(
        "--root", dest="demo_root", type=root_arg, help="storage root (default: temp)"
    )
    demo.add_argument(
        "--force", action="store_true", help="run even in a --root that is not empty"
    )
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``mnemon-sm`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], None] = args.run
    try:
        run(args)
    except UsageError as exc:
        parser.error(str(exc))
    except BrokenPipeError:  # stdout closed early (`mnemon-sm demo | head`): not our error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(EXIT_REJECTED) from None
    except MnemonError as exc:
        print(json.dumps({"error": exc.to_json()}, ensure_ascii=False), file=sys.stderr)
        raise SystemExit(
            EXIT_STORAGE if isinstance(exc, StorageError) else EXIT_REJECTED
        ) from None
