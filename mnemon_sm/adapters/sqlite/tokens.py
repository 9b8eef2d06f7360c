"""Text analysis for the embedded store: tokens, query intent, query entities, causal cues.

Theory of operation
-------------------
Everything here is pure and deterministic; the keyword signal of recall, the side index's
postings and the automatic causal edges all use these functions, so a token found at write time
is the token looked up at read time.

Rules kept:

- A token is a maximal run of letters and digits (underscore and punctuation split), lowercased.
  About 80 English stop words are dropped. Han text becomes overlapping character bigrams (a
  lone Han character stays a token), so Chinese matches without a word segmenter.
- Intent is read from lexical cues, English by whole word and Chinese by substring, checked in
  the order WHY, WHEN, ENTITY; anything else is GENERAL.
- Query entities are the stored entities named in the query (case-insensitive, on word
  boundaries; Han entities by substring) plus the query's other capitalised words that are not
  stop words, all lowercased.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "STOP_WORDS",
    "EntityMatcher",
    "causal_cue",
    "detect_intent",
    "entity_key",
    "query_entities",
    "token_set",
    "tokenize",
]

# About 80 English function words (Mnemon's tokeniser drops a list of this size).
_STOP_TEXT = """
a about after all also am an and any are as at be because been before but by can could did do
does for from had has have he her his how i if in into is it its just me my no not of on or our
out over s she so some such t than that the their them then there these they this those to too
up very was we were what when where which while who why will with would you your
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

# Han ideographs: URO, extension A, compatibility ideographs, extensions B and later.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_WORDS = re.compile(r"[^\W_]+")
_HAS_HAN = re.compile(f"[{_HAN}]")
_HAN_RUNS = re.compile(f"[{_HAN}]+|[^{_HAN}]+")
_NGRAM_MAX = 6  # longest multi-word entity matched through the word index


def _han_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order, repeats kept (see the module rules)."""
    out: list[str] = []
    for word in _WORDS.findall(text.lower()):
        if not _HAS_HAN.search(word):
            if word not in STOP_WORDS:
                out.append(word)
            continue
        for run in _HAN_RUNS.findall(word):
            if _HAS_HAN.match(run):
                out.extend(_han_bigrams(run))
            elif run not in STOP_WORDS:
                out.append(run)
    return out


def token_set(*texts: str) -> frozenset[str]:
    """The distinct tokens of several texts (content, each tag, each entity)."""
    out: set[str] = set()
    for text in texts:
        out.update(tokenize(text))
    return frozenset(out)


_WHY_EN = re.compile(
    r"\b(why|reasons?|because|caus(?:e|es|ed|ing)|rationale|motivations?|motivated|purpose)\b"
)
_WHEN_EN = re.compile(
    r"\b(when|dates?|dated|before|after|timeline|since|until|yesterday|today|ago"
    r"|last (?:week|month|year)|earlier|later)\b"
)
_ENTITY_EN = re.compile(r"\b((?:what|who) (?:is|are|was|were)|tell me about|about)\b")
_WHY_ZH = ("为什么", "为何", "原因", "因为", "理由")
_WHEN_ZH = ("什么时候", "何时", "哪天", "日期", "时间", "之前", "之后")
_ENTITY_ZH = ("是什么", "是谁", "关于", "介绍")


def detect_intent(query: str) -> str:
    """WHY, WHEN, ENTITY or GENERAL, from the query's cue words."""
    lower = query.lower()
    for intent, english, chinese in (
        ("WHY", _WHY_EN, _WHY_ZH),
        ("WHEN", _WHEN_EN, _WHEN_ZH),
        ("ENTITY", _ENTITY_EN, _ENTITY_ZH),
    ):
        if english.search(lower) or any(cue in lower for cue in chinese):
            return intent
    return "GENERAL"


_CAUSAL_CUES: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    (
        "prevents",
        re.compile(r"\b(prevents?|prevented|avoid(?:s|ed)?|to avoid|stops?)\b"),
        ("防止", "避免"),
    ),
    (
        "enables",
        re.compile(r"\b(so that|in order to|enables?|enabled|allows?|allowed)\b"),
        ("使得", "以便"),
    ),
    (
        "causes",
        re.compile(
            r"\b(because|due to|caused|causes|as a result|therefore|thus|led to|leads to"
            r"|results? in)\b"
        ),
        ("因为", "所以", "导致", "由于"),
    ),
)


def causal_cue(text: str) -> str | None:
    """The causal relation a text announces (``prevents``, ``enables``, ``causes``) or None."""
    lower = text.lower()
    for sub_type, english, chinese in _CAUSAL_CUES:
        if english.search(lower) or any(cue in lower for cue in chinese):
            return sub_type
    return None


def entity_key(entity: str) -> str:
    """The case-insensitive identity of an entity."""
    return entity.lower()


def _normal_words(text: str) -> str:
    return " ".join(_WORDS.findall(text))


class EntityMatcher:
    """Finds stored entity keys named in a query; keys can be added and removed in place."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._by_words: dict[str, set[str]] = {}
        self._han: set[str] = set()
        for key in keys:
            self.add(key)

    def add(self, key: str) -> None:
        if _HAS_HAN.search(key):
            self._han.add(key)
            return
        words = _normal_words(key)
        if words:
            self._by_words.setdefault(words, set()).add(key)

    def discard(self, key: str) -> None:
        self._han.discard(key)
        keys = self._by_words.get(_normal_words(key))
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_words[_normal_words(key)]

    def match(self, query: str) -> frozenset[str]:
        lower = query.lower()
        found = {key for key in self._han if key in lower}
        words = _WORDS.findall(lower)
        for start in range(len(words)):
            for end in range(start + 1, min(start + _NGRAM_MAX, len(words)) + 1):
                for key in self._by_words.get(" ".join(words[start:end]), ()):
                    if _bounded(lower, key):
                        found.add(key)
        return frozenset(found)


def _bounded(text: str, key: str) -> bool:
    """True when ``key`` occurs in ``text`` without a letter or digit glued to either end."""
    start = text.find(key)
    while start >= 0:
        end = start + len(key)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not _glued(before, key[0]) and not _glued(after, key[-1]):
            return True
        start = text.find(key, start + 1)
    return False


def _glued(neighbour: str, edge: str) -> bool:
    return neighbour.isalnum() and edge.isalnum()


def query_entities(query: str, matcher: EntityMatcher) -> frozenset[str]:
    """Stored entities named in the query plus its other capitalised non-stop words, all
    lowercased (a word inside a matched entity does not count again on its own)."""
    matched = matcher.match(query)
    covered = {word for key in matched for word in _WORDS.findall(key)}
    capitalised = {
        word.lower()
        for word in _WORDS.findall(query)
        if word[0].isupper() and word.lower() not in STOP_WORDS and word.lower() not in covered
    }
    return matched | capitalised
