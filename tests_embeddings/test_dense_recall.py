"""Relevance recall with the real model, through a real root (the ``[embeddings]`` extra).

- ``Config(embedding_model="all-MiniLM-L6-v2")`` opens the shipped model; a question sharing
  no word with the fact ("gf" for "girlfriend") finds it by meaning, ranked first;
- the backfill embeds an existing store with progress, and relevance recall still ranks the
  lexical match of a question first.
"""

from __future__ import annotations

from pathlib import Path

from mnemon_sm import Config, MemoryRoot

FACTS = (
    "My girlfriend loves hiking in the Alps",
    "The deploy script lives in tools/deploy.sh",
    "Our database is PostgreSQL 16",
    "The cat is named Miso",
)


def test_the_configured_model_finds_what_shares_no_word(tmp_path: Path) -> None:
    config = Config(
        durability="off", long_term_store="embedded", embedding_model="all-MiniLM-L6-v2"
    )
    with MemoryRoot.open(tmp_path / "root", config) as root:
        root.long_term.create_space("Notes", "personal notes", active=True)
        root.long_term.remember_many(list(FACTS))
        hits = root.long_term.search("what does my gf enjoy doing outdoors").hits
        assert hits and hits[0].insight.content == FACTS[0]
        assert hits[0].hit.matched_via == "semantic"
        top = root.long_term.search("which postgres version do we run").hits[0]
        assert top.insight.content == FACTS[2] and top.hit.matched_via == "hybrid"


def test_a_backfill_embeds_an_existing_store(tmp_path: Path) -> None:
    plain = Config(durability="off", long_term_store="embedded")
    with MemoryRoot.open(tmp_path / "root", plain) as root:
        root.long_term.create_space("Notes", "personal notes", active=True)
        root.long_term.remember_many(list(FACTS))
    config = Config(
        durability="off", long_term_store="embedded", embedding_model="all-MiniLM-L6-v2"
    )
    seen: list[tuple[str, int, int]] = []
    with MemoryRoot.open(tmp_path / "root", config) as root:
        assert root.long_term.embed_missing(progress=lambda *a: seen.append(a)) == len(FACTS)
        assert seen[-1][1:] == (len(FACTS), len(FACTS))
        assert root.long_term.embed_missing() == 0
        hits = root.long_term.search("where is the cat's name written down? Miso?").hits
        assert hits[0].insight.content == FACTS[3]
