"""What the ``mnemon-sm`` command modules share: a subcommand that opens the root, runs one
call and prints its JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from mnemon_sm.errors import InvalidInput
from mnemon_sm.root import MemoryRoot

__all__ = ["Opener", "Printer", "ProgressBar", "Run", "command"]

Opener = Callable[[argparse.Namespace], MemoryRoot]
Printer = Callable[[Any], None]
Run = Callable[[MemoryRoot, argparse.Namespace], Any]


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
