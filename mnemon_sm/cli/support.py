"""What the ``mnemon-sm`` command modules share: a subcommand that opens the root, runs one
call and prints its JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from mnemon_sm.adapters.postgres import is_postgres_url, redacted
from mnemon_sm.errors import InvalidConfig, InvalidInput
from mnemon_sm.root import MemoryRoot

__all__ = [
    "Opener",
    "Parser",
    "Printer",
    "ProgressBar",
    "Run",
    "UsageError",
    "command",
    "missing_extra",
    "read_text",
    "root_option",
]

Opener = Callable[[argparse.Namespace], MemoryRoot]
Printer = Callable[[Any], None]
Run = Callable[[MemoryRoot, argparse.Namespace], Any]


class Parser(argparse.ArgumentParser):
    """An argument parser whose commands take options and positionals in any order.

    A parser without subcommands parses as ``parse_intermixed_args`` does: the options
    wherever they are, then the positionals left, so ``docs update ID --title T TEXT`` works.
    ``parse_intermixed_args`` refuses a positional in a mutually exclusive group; such a pair
    is declared with :meth:`exclusive` and checked after parsing, with argparse's message.
    Subparsers are made of the parent's class, so every command parser is one of these.
    """

    _intermixing = False
    _exclusive: tuple[tuple[str, str], ...] = ()

    def exclusive(self, option: str, positional: str) -> None:
        """``--option`` and ``positional`` (dests) may not both be given."""
        self._exclusive = (*self._exclusive, (option, positional))

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._subparsers is not None or self._intermixing:
            return super().parse_known_args(args, namespace)
        # parse_known_intermixed_args calls parse_known_args twice (options, then positionals)
        self._intermixing = True
        try:
            parsed, rest = self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False
        for option, positional in self._exclusive:
            if getattr(parsed, option) is not None and getattr(parsed, positional) is not None:
                flag = "--" + option.replace("_", "-")
                self.error(f"argument {positional}: not allowed with argument {flag}")
        return parsed, rest


class UsageError(Exception):
    """A command line the parser accepted but the command cannot run as given: ``main``
    reports it as argparse reports a usage error (exit 2)."""


def command(under: Any, name: str, help_: str, run: Run, open_root: Opener, emit: Printer) -> Any:
    """Add subcommand ``name`` to ``under``: open the root, ``run`` it, print the result."""
    parser = under.add_parser(name, help=help_)

    def handler(args: argparse.Namespace) -> None:
        with open_root(args) as root:
            emit(run(root, args))

    parser.set_defaults(run=handler)
    return parser


def read_text(path: Path) -> str:
    """A file named on the command line (``-``: standard input) as UTF-8 text, or
    ``InvalidInput`` saying why not (never a traceback)."""
    try:
        raw = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not valid UTF-8 (byte {exc.start})") from None


class ProgressBar:
    """``(what, done, total)`` drawn as one line on stderr, redrawn in place, ended with a
    newline when ``done`` reaches ``total``."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr

    def __call__(self, what: str, done: int, total: int) -> None:
        total = max(total, 1)
        filled = min(self.WIDTH, self.WIDTH * done // total)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        end = "\n" if done >= total else ""
        self._stream.write(f"\r{what}: [{bar}] {done}/{total}{end}")
        self._stream.flush()


def root_arg(text: str) -> Path | str:
    """A ``--root`` value: a PostgreSQL root URL stays text, anything else is a directory."""
    return text if is_postgres_url(text) else Path(text).expanduser()


def directory_root(root: Path | str, command: str) -> Path:
    """``root`` for a command that works on a directory only; a URL is refused."""
    if isinstance(root, str):
        raise InvalidInput(f"{command} works on a root in a directory, not on {redacted(root)}")
    return root


def root_option(parser: argparse.ArgumentParser, dest: str) -> None:
    """``--root`` given after a command (``mnemon-sm mcp --root R``, as clients write it),
    into ``dest``, the global ``--root`` being the fallback."""
    parser.add_argument(
        "--root",
        dest=dest,
        type=root_arg,
        help="storage root (default: the global --root, $MNEMON_DATA_DIR or ~/.mnemon)",
    )


def missing_extra(exc: ImportError, what: str, hint: str) -> InvalidConfig:
    """The error for an optional dependency of ``what`` not being installed (``hint``: the
    install command of its extra); ``exc`` itself when the module that failed is ours (a
    bug, not a missing extra)."""
    if (exc.name or "").split(".")[0] == "mnemon_sm":
        raise exc
    extra = hint.partition("[")[2].partition("]")[0]
    missing = exc.name or str(exc)
    return InvalidConfig(f"{what} needs the [{extra}] extra: {hint} (cannot import {missing})")
