"""Lexical relevance: the analyzer, query expansion and normalised BM25 (all pure).

Theory of operation
-------------------
Relevance recall (the default mode) finds memories by their words, weighted by rarity, the way
search engines do; Mnemon's own keyword signal (:mod:`.tokens`) stays for its smart mode.

- **Analyzer.** A term is a maximal run of letters and digits, lowercased, with the English
  stop words of :data:`tokens.STOP_WORDS` dropped and every Latin-script word reduced to its
  stem by the Snowball English stemmer (Porter's second algorithm), so "Researching" and
  "research", "keys" and "key" are one term. Han text becomes character bigrams as in
  :mod:`.tokens`. The same function analyzes what is stored and what is asked, so a term found
  at write time is the term looked up at read time. The side index feeds the analyzed terms to
  SQLite FTS5 (tokenizer ``unicode61``, which leaves them as they are).
- **Query.** The question's terms, minus question words ("what", "tell", "remember"...). Each
  term is expanded through the store's vocabulary: the term itself (weight 1), stored terms
  that extend it or that it extends, the shorter four letters at least and 60% of the longer
  ("postgres" finds "postgresql", "data" not "database"; weight :data:`PREFIX_WEIGHT`), and,
  only for a term the store does not hold, stored terms one edit away (two for eight letters
  or more) that share its first three letters (weight :data:`TYPO_WEIGHT`). Expansion is
  bounded (:data:`VARIANTS_MAX` per term).
- **Candidates.** Each term's matches, newest first and :data:`TERM_MATCHES` at most, and the
  memories matching every term, ordered by what their score can reach
  (:func:`candidate_pool`); the best hundred or so are scored exactly. So a common word costs
  no more than a rare one, and the cost of a recall does not grow with the store.
- **Score.** Per query term, the best of its variants present in the memory:
  ``weight x idf x saturation``, with ``idf = ln(1 + (N - df + .5) / (df + .5))`` and
  ``saturation = min(1, tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)))`` (k1 = 1.2, b = .75;
  1 for one occurrence in a memory of average length). The relevance is the sum over query
  terms divided by the sum of each term's best attainable ``weight x idf``: a share of the
  question's information, in [0, 1], comparable across spaces. Terms the store does not hold
  at all take no part.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs
import numpy
import numpy.typing
import snowballstemmer

from mnemon_sm.adapters.sqlite.tokens import STOP_WORDS

Rowids = numpy.typing.NDArray[numpy.int64]  # rowids of the side index, as a term's matches

__all__ = [
    "PREFIX_WEIGHT",
    "QUERY_STOP",
    "TYPO_WEIGHT",
    "VARIANTS_MAX",
    "QueryTerm",
    "Stats",
    "all_terms_expression",
    "analyze",
    "candidate_pool",
    "edit_distance",
    "expand",
    "lexical_score",
    "match_expression",
    "query_terms",
    "stem",
    "term_expression",
]

K1, B = 1.2, 0.75
PREFIX_MIN = 4  # letters a term needs before its extensions count
PREFIX_WEIGHT = 0.7
TYPO_MIN = 5  # letters a term needs before spelling neighbours count
TYPO_WEIGHT = 0.6
VARIANTS_MAX = 8  # variants per query term, itself included
TERMS_MAX = 32  # query terms looked at
TERM_MATCHES = 2000  # matches of one term looked at, newest first (see candidate_pool)

# Words of a question that say nothing about what is asked for.
_QUESTION_TEXT = """
whom whose tell know remember recall mention mentioned say said ever anything something
please could would should kind thing things much many again still exactly actually really
"""

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_WORDS = re.compile(r"[^\W_]+")
_HAS_HAN = re.compile(f"[{_HAN}]")
_HAN_RUNS = re.compile(f"[{_HAN}]+|[^{_HAN}]+")
_LATIN = re.compile(r"[a-z\u00c0-\u024f]+")
_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Snowball English stem of a lowercased word; words with digits or other scripts are
    kept as they are."""
    if not _LATIN.fullmatch(word):
        return word
    return str(_STEMMER.stemWord(word))


def _han_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def analyze(text: str) -> list[str]:
    """The terms of ``text`` in order, repeats kept."""
    out: list[str] = []
    for word in _WORDS.findall(text.lower()):
        if not _HAS_HAN.search(word):
            if word not in STOP_WORDS:
                out.append(stem(word))
            continue
        for run in _HAN_RUNS.findall(word):
            if _HAS_HAN.match(run):
                out.extend(_han_bigrams(run))
            elif run not in STOP_WORDS:
                out.append(stem(run))
    return out


QUERY_STOP = frozenset(stem(word) for word in _QUESTION_TEXT.split())


def query_terms(query: str) -> list[str]:
    """The distinct terms of a question, in order, question words dropped."""
    terms = [term for term in analyze(query) if term not in QUERY_STOP]
    return list(dict.fromkeys(terms))[:TERMS_MAX]


@attrs.frozen
class QueryTerm:
    """One term of the question and the stored terms that stand for it, with their weights."""

    term: str
    variants: tuple[tuple[str, float], ...]


def edit_distance(a: str, b: str, bound: int) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap neighbours), or
    ``bound + 1`` when it is larger than ``bound``."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, previous2[j - 2] + 1)
            current[j] = value
        if min(current) > bound:
            return bound + 1
        previous2, previous = previous, current
    return previous[-1] if previous[-1] <= bound else bound + 1


def _close_lengths(short: str, long: str) -> bool:
    """A stored term stands for a query term it extends, or that extends it, only when the
    shorter is at least :data:`PREFIX_MIN` letters and 60% of the longer ("postgr" and
    "postgresql", not "data" and "databas")."""
    return len(short) >= PREFIX_MIN and 5 * len(short) >= 3 * len(long)


def _typo_bound(term: str) -> int:
    return 2 if len(term) >= 8 else 1


def expand(
    terms: Sequence[str],
    frequency: Callable[[Sequence[str]], Mapping[str, int]],
    extensions: Callable[[str, int], Sequence[str]],
    neighbours: Callable[[str, int], Iterable[str]],
) -> list[QueryTerm]:
    """Each query term with the stored terms that stand for it.

    ``frequency(terms)`` gives the stored document frequency of those terms that exist;
    ``extensions(term, k)`` up to ``k`` stored terms that start with ``term`` (longer ones);
    ``neighbours(term, bound)`` stored terms whose length is within ``bound`` of the term's,
    sharing its first three letters (candidates for a spelling match).
    """
    shorter = {
        term: [term[:n] for n in range(PREFIX_MIN, len(term))]
        for term in terms
        if len(term) > PREFIX_MIN and not _HAS_HAN.search(term)
    }
    asked = list(terms) + [p for prefixes in shorter.values() for p in prefixes]
    known = frequency(list(dict.fromkeys(asked)))
    out: list[QueryTerm] = []
    for term in terms:
        variants: dict[str, float] = {}
        if term in known:
            variants[term] = 1.0
        for prefix in reversed(shorter.get(term, [])):
            if prefix in known and _close_lengths(prefix, term):
                variants.setdefault(prefix, PREFIX_WEIGHT)
        if len(term) >= PREFIX_MIN and not _HAS_HAN.search(term):
            for longer in extensions(term, 4 * VARIANTS_MAX):
                if longer != term and _close_lengths(term, longer):
                    variants.setdefault(longer, PREFIX_WEIGHT)
        if not variants and len(term) >= TYPO_MIN and not _HAS_HAN.search(term):
            bound = _typo_bound(term)
            close = sorted(
                (edit_distance(term, other, bound), other) for other in neighbours(term, bound)
            )
            for distance, other in close:
                if distance <= bound:
                    variants.setdefault(other, TYPO_WEIGHT)
        if variants:
            best = sorted(variants.items(), key=lambda item: (-item[1], item[0]))
            out.append(QueryTerm(term, tuple(best[:VARIANTS_MAX])))
    return out


def _quoted(variants: Iterable[str]) -> str:
    return " OR ".join('"' + v.replace('"', '""') + '"' for v in dict.fromkeys(variants))


def match_expression(terms: Sequence[QueryTerm]) -> str:
    """An FTS5 query matching any variant of any term (every term quoted)."""
    return _quoted(variant for term in terms for variant, _ in term.variants)


def term_expression(term: QueryTerm) -> str:
    """An FTS5 query matching any variant of one term."""
    return _quoted(variant for variant, _ in term.variants)


def all_terms_expression(terms: Sequence[QueryTerm]) -> str:
    """An FTS5 query matching the memories that hold a variant of every term."""
    return " AND ".join(f"({term_expression(term)})" for term in terms)


def candidate_pool(
    terms: Sequence[QueryTerm],
    matches: Sequence[Sequence[int] | Rowids],
    everything: Sequence[int] | Rowids,
    stats: Stats,
    k: int,
) -> list[int]:
    """The ``k`` memories worth scoring, from each term's matches (``matches[i]``: the newest
    :data:`TERM_MATCHES` at most, so a common word costs no more than a rare one) and the
    memories holding every term (``everything``): by the sum of the best ``weight x idf`` of
    the terms each one matches (what its score can reach; a memory holding every term reaches
    the sum over all terms), then newest (highest rowid) first. Vectorised: at 100k memories
    a query's term lists hold thousands of rowids."""
    best = [max((w * stats.idf(v) for v, w in term.variants), default=0.0) for term in terms]
    lists = [numpy.asarray(docs, dtype=numpy.int64) for docs in matches]
    full = numpy.asarray(everything, dtype=numpy.int64)
    docs = numpy.concatenate([*lists, full, numpy.zeros(0, dtype=numpy.int64)])
    if not len(docs):
        return []
    weights = numpy.concatenate(
        [
            *(numpy.full(len(part), value) for part, value in zip(lists, best, strict=True)),
            numpy.zeros(len(full)),
        ]
    )
    unique, where = numpy.unique(docs, return_inverse=True)
    reach = numpy.bincount(where, weights=weights, minlength=len(unique))  # in term order
    reach[numpy.searchsorted(unique, full)] = sum(best)
    order = numpy.lexsort((-unique, -reach))[:k]
    return [int(doc) for doc in unique[order]]


@attrs.frozen
class Stats:
    """What BM25 needs of the collection: its size, mean length and the document frequency of
    every variant."""

    docs: int
    mean_length: float
    frequency: Mapping[str, int]

    def idf(self, term: str) -> float:
        df = self.frequency.get(term, 0)
        return math.log(1.0 + (self.docs - df + 0.5) / (df + 0.5))


def _saturation(tf: int, length: int, mean_length: float) -> float:
    norm = 1.0 - B + B * (length / mean_length if mean_length > 0 else 1.0)
    return min(1.0, tf * (K1 + 1.0) / (tf + K1 * norm))


def lexical_score(terms: Sequence[QueryTerm], stored: Sequence[str], stats: Stats) -> float:
    """The relevance of a memory whose analyzed terms are ``stored`` (see the module), 0..1."""
    if not terms:
        return 0.0
    counts = Counter(stored)
    length = len(stored)
    total = attained = 0.0
    for term in terms:
        best_possible = best = 0.0
        for variant, weight in term.variants:
            value = weight * stats.idf(variant)
            best_possible = max(best_possible, value)
            tf = counts.get(variant, 0)
            if tf:
                best = max(best, value * _saturation(tf, length, stats.mean_length))
        total += best_possible
        attained += best
    return 0.0 if total <= 0 else min(1.0, attained / total)
