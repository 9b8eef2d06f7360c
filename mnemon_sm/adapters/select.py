"""Choosing the long-term adapter of a root: the embedded store or the Mnemon CLI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from mnemon_sm.adapters.mnemon import MnemonCliStore
from mnemon_sm.adapters.sqlite import EmbeddedStore
from mnemon_sm.config import Config
from mnemon_sm.errors import InvalidConfig
from mnemon_sm.ports import Clock
from mnemon_sm.ports.embedder import Embedder
from mnemon_sm.ports.long_term.port import LongTermStore

__all__ = ["COMMON_DIRS", "DEFAULT_MODEL", "configured_embedder", "find_mnemon", "open_long_term"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # the model the [embeddings] extra ships


# Where Mnemon's own installers put the binary, after PATH (reference, section 2.1).
COMMON_DIRS = ("~/.local/bin", "/opt/homebrew/bin", "/usr/local/bin", "/usr/bin")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_mnemon(config: Config) -> str | None:
    """The Mnemon executable: ``mnemonPath``, ``$MNEMON_CLI_PATH``, PATH, then the common
    install directories.

    Raises:
        InvalidConfig: ``mnemonPath`` is set but is not an executable file.
    """
    if config.mnemon_path is not None:
        path = os.path.expanduser(config.mnemon_path)
        if not _executable(path):
            raise InvalidConfig(f"mnemonPath is not an executable file: {config.mnemon_path}")
        return path
    env = os.path.expanduser(os.environ.get("MNEMON_CLI_PATH", "").strip())
    if env and _executable(env):
        return env
    found = shutil.which("mnemon")
    if found is not None:
        return found
    candidates = (os.path.join(os.path.expanduser(d), "mnemon") for d in COMMON_DIRS)
    return next((c for c in candidates if _executable(c)), None)


def configured_embedder(config: Config) -> Embedder | None:
    """The embedder ``config.embedding_model`` names (None when it names none).

    Raises:
        InvalidConfig: the ``[embeddings]`` extra is missing or the model cannot be loaded.
    """
    name = config.embedding_model
    if name is None:
        return None
    # optional: sentence-transformers (the [embeddings] extra) is imported only when asked for
    from mnemon_sm.adapters.sentence import SentenceTransformerEmbedder

    if name == DEFAULT_MODEL:
        return SentenceTransformerEmbedder()
    return SentenceTransformerEmbedder(os.path.expanduser(name))


def open_long_term(
    root: Path,
    clock: Clock,
    config: Config,
    embedder: Embedder | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> LongTermStore:
    """The store ``config.long_term_store`` asks for.

    ``auto`` uses the Mnemon CLI when :func:`find_mnemon` finds one, and the embedded store
    otherwise; ``mnemon`` without an executable is a configuration error. The embedded store
    gets ``embedder``, else the one the configuration names (Mnemon ranks with its own).
    """
    if config.long_term_store != "embedded":
        executable = find_mnemon(config)
        if executable is not None:
            return MnemonCliStore(root, executable, timeout_ms=config.mnemon_timeout_ms)
        if config.long_term_store == "mnemon":
            raise InvalidConfig("longTermStore = mnemon, but no mnemon executable was found")
    return EmbeddedStore(
        root,
        clock,
        embedder=embedder or configured_embedder(config),
        durability=config.durability,
        progress=progress,
        readonly=not config.write_enabled,
    )
