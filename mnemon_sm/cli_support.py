"""What the ``mnemon-sm`` command modules share: a subcommand that opens the root, runs one
call and prints its JSON."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .root import MemoryRoot

__all__ = ["Opener", "Printer", "Run", "command"]

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
