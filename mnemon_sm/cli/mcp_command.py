"""``mnemon-sm mcp``: serve the storage root to MCP clients (:mod:`mnemon_sm.mcp_server`).

The server needs the ``[mcp]`` extra (the official ``mcp`` SDK); it is imported only when the
command runs, and without it the command fails with an ``InvalidConfig`` JSON error naming the
extra, before the root is opened. ``--root`` may come after the command too
(``mnemon-sm mcp --root ~/.mnemon``, as MCP client configurations write it); clients start
the command without a shell, and ``~`` is expanded by ``MemoryRoot.open``. ``--read-only``
opens the root with ``writeEnabled = false`` whatever the config says: the mutating tools are
not listed and nothing under the root is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from mnemon_sm.cli.support import ProgressBar, missing_extra, root_option
from mnemon_sm.config import Config
from mnemon_sm.root import MemoryRoot

__all__ = ["EXTRA_HINT", "register"]

EXTRA_HINT = "pip install 'mnemon-sm[mcp]'"


def register(
    commands: Any, default_root: Callable[[], Path | str], version: Callable[[], str]
) -> None:
    """Add ``mcp`` to ``commands`` (an argparse subparsers object)."""
    parser = commands.add_parser("mcp", help="serve the memory to MCP clients (stdio or HTTP)")
    root_option(parser, "mcp_root")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="http: address (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8765, help="http: port (default 8765; 0 picks a free one)"
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="http: allow a non-loopback --host (there is no authentication)",
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="open the root with writeEnabled = false (no mutating tool, nothing written)",
    )

    def run(args: argparse.Namespace) -> None:
        try:
            # optional: the server imports the SDK of the [mcp] extra
            from mnemon_sm import mcp_server as server
        except ImportError as exc:
            raise missing_extra(exc, "the MCP server", EXTRA_HINT) from exc
        if args.transport == "http":
            server.check_host(args.host, allow_remote=args.allow_remote)
        config = Config.from_toml(args.config) if args.config else Config()
        if args.read_only:
            config = attrs.evolve(config, write_enabled=False)
        path = args.mcp_root or args.root or default_root()
        with MemoryRoot.open(path, config, progress=ProgressBar()) as root:
            if args.transport == "stdio":
                server.run_stdio(root, version=version())
                return
            server.serve_http(
                root,
                host=args.host,
                port=args.port,
                allow_remote=args.allow_remote,
                announce=lambda url: print(f"serving MCP on {url}", file=sys.stderr, flush=True),
                version=version(),
            )

    parser.set_defaults(run=run)
