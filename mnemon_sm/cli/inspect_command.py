"""``mnemon-sm inspect``: the read-only web inspector of the storage root
(:mod:`mnemon_sm.inspector`, the ``[inspect]`` extra, imported only when the command runs).

It serves 127.0.0.1 by default; another address is refused without a token, which every
request must then carry (``--token``, or ``$MNEMON_INSPECT_TOKEN`` so that it stays out of
the process list). The root is opened with ``writeEnabled = false``: nothing under it is
written, and a recall counts no access.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemon_sm.cli.support import missing_extra, root_option
from mnemon_sm.config import Config

__all__ = ["EXTRA_HINT", "register"]

EXTRA_HINT = "pip install 'mnemon-sm[inspect]'"


def register(commands: Any, default_root: Callable[[], Path | str]) -> None:
    """Add ``inspect`` to ``commands`` (an argparse subparsers object)."""
    parser = commands.add_parser("inspect", help="browse the root in a read-only web app")
    root_option(parser, "inspect_root")
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8377, help="port (default 8377)")
    parser.add_argument(
        "--token",
        default=os.environ.get("MNEMON_INSPECT_TOKEN") or None,
        help="a secret every request must carry (needed for a non-loopback --host; default "
        "$MNEMON_INSPECT_TOKEN)",
    )

    def run(args: argparse.Namespace) -> None:
        try:
            # optional: the inspector imports Starlette and uvicorn, of the [inspect] extra
            from mnemon_sm import inspector
        except ImportError as exc:
            raise missing_extra(exc, "the inspector", EXTRA_HINT) from exc
        inspector.check_bind(args.host, args.token)  # before opening the root
        config = Config.from_toml(args.config) if args.config else Config()
        path = args.inspect_root or args.root or default_root()
        with inspector.open_read_only(path, config) as root:

            def announce(url: str) -> None:
                said = f"inspecting {root.location} on {url} (read-only; Ctrl-C stops)"
                print(said, file=sys.stderr, flush=True)

            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops: a normal end
                inspector.serve(
                    root, host=args.host, port=args.port, token=args.token, announce=announce
                )

    parser.set_defaults(run=run)
