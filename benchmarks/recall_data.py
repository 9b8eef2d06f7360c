"""Generate ``benchmarks/data/recall_quality.json``: a synthetic long conversation and labelled
questions for the long-term recall benchmark (``benchmarks/recall_quality.py``).

The conversation is between a user (Maya) and her assistant over 20 sessions from January to
June 2026. Maya talks about ten colleagues and friends, her sister and her partner, six
projects with overlapping vocabulary (Falcon, Heron, Kestrel, Orchid, Juniper, Atlas), her own
life, two company offsites, restaurants and a book club. Every memory is one turn, prefixed with
its session's date the way chat logs are (``[14 March 2026] Maya: ...``).

A world is drawn first (who lives where, who leads what, which database each project uses,
who starts what in which month...), then each fact is said once, by Maya, in a session chosen
for it; facts that change (people moving once or twice, a lead handing over, a database
switch, a deadline slip, a dentist appointment moved) are said again later. Every other turn
is distractor material written from templates that never state a fact a question asks about:
small talk, project chatter sharing the projects' words, assistant replies naming the subject
but not the answer, teasers ("Lena keeps saying she might move to Vienna one day"). The last
sessions are mostly chatter, so recency alone is a bad strategy.

Questions come from the same world, so their evidence (the keys of the turns that state the
answer) is correct by construction; the current value of a changed fact is labelled with the
latest turn only. Kinds: ``direct`` (the statement's own words), ``paraphrase`` (other
inflections and synonyms, asked the way a user asks), ``misspelled`` (one or two realistic
typos in content words), ``multi_hop`` (two turns: e.g. who leads a project, and where that
person lives now), ``time_anchored`` (the month is only in the date prefix, the date is in the
content, or, for a few, a season: "What did Jun start in the spring?"). Each question also
carries its expected ``answer`` (not used for scoring).

Generating also checks the construction: no two memories are identical; for single-fact
questions the subject and the answer stand together in the evidence turn and in no other turn
but chatter; each question is of its kind (a ``direct`` question's content words are in the
evidence up to inflection, at most half of a ``paraphrase``'s are there verbatim, names aside,
a ``misspelled`` one has a word no memory has, ``time_anchored`` evidence is dated in the
month asked about).

Deterministic: one seeded ``random.Random``, no network, no model, no import of mnemon_sm.

Usage: python benchmarks/recall_data.py [--out benchmarks/data/recall_quality.json]
       [--seed 20260314] [--check]   (--check: regenerate and compare with the file)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SEED = 20260314
OUT = Path(__file__).resolve().parent / "data" / "recall_quality.json"
USER, ASSISTANT = "Maya", "Assistant"
SESSIONS = 20
FIRST_DAY = dt.date(2026, 1, 6)
MONTHS = ("January", "February", "March", "April", "May", "June")
LATER_MONTHS = ("July", "August", "September", "October", "November", "December")
KINDS = ("direct", "paraphrase", "misspelled", "multi_hop", "time_anchored")
PARAPHRASE_SHARE = 0.5  # at most this share of a paraphrase's content words is verbatim

# -- the world's vocabulary ---------------------------------------------------------------------

# name -> pronoun (subject, possessive)
PEOPLE = {
    "Priya": ("she", "her"),
    "Tomas": ("he", "his"),
    "Lena": ("she", "her"),
    "Omar": ("he", "his"),
    "Jun": ("he", "his"),
    "Sofia": ("she", "her"),
    "Dev": ("he", "his"),
    "Aisha": ("she", "her"),
    "Marco": ("he", "his"),
    "Noor": ("she", "her"),
    "Hannah": ("she", "her"),
    "Ben": ("he", "his"),
}
COLLEAGUES = ("Priya", "Tomas", "Lena", "Omar", "Jun", "Sofia", "Dev", "Aisha")
FRIENDS = ("Marco", "Noor")
SISTER, PARTNER = "Hannah", "Ben"
CITY_PEOPLE = (*COLLEAGUES, *FRIENDS, SISTER)
CITIES = (
    "Lisbon",
    "Porto",
    "Berlin",
    "Munich",
    "Hamburg",
    "Amsterdam",
    "Rotterdam",
    "Dublin",
    "Edinburgh",
    "Vienna",
    "Prague",
    "Copenhagen",
    "Barcelona",
    "Valencia",
    "Toronto",
    "Montreal",
    "Zurich",
    "Lyon",
    "Milan",
    "Krakow",
    "Ghent",
    "Gothenburg",
)
PROJECTS = ("Falcon", "Heron", "Kestrel", "Orchid", "Juniper", "Atlas")
# database, the name people use in a hurry (or None)
DATABASES = (
    ("PostgreSQL", "postgres"),
    ("MySQL", None),
    ("MongoDB", "mongo"),
    ("SQLite", None),
    ("DynamoDB", "dynamo"),
    ("ClickHouse", None),
)
SWITCH_DB = ("CockroachDB", "cockroach")
CLIENTS = (
    ("Nordwind Logistics", "Nordwind"),
    ("Bluebay Insurance", "Bluebay"),
    ("Arden Health", "Arden"),
    ("Copperleaf Foods", "Copperleaf"),
    ("Tidewater Energy", "Tidewater"),
    ("Vela Mobility", "Vela"),
)
VAULTS = (  # where, and a word of it that names it
    ("the hardware security module in the server room", "security module"),
    ("an offline YubiKey in the office safe", "YubiKey"),
)
RESEARCH = (
    ("differential privacy for usage analytics", "privacy"),
    ("anomaly detection on sensor data", "anomaly detection"),
    ("vector quantization for search indexes", "vector quantization"),
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday")
ACTIVITIES = (
    "pottery classes",
    "training for a half marathon",
    "a Japanese course",
    "a podcast about urban cycling",
    "volunteering at the animal shelter",
    "cello lessons",
    "a vegetable garden on the balcony",
    "salsa lessons",
    "open-water swimming",
    "a part-time MBA",
    "a sourdough baking habit",
    "a chess club",
    "life drawing classes",
    "learning to sail",
)
DECISIONS = (
    "drop the mobile app and go web-only",
    "move to weekly releases",
    "rewrite the importer in Rust",
    "add single sign-on before the next release",
    "cut the reporting module",
    "open-source the SDK",
    "hire a contractor for the frontend",
    "postpone the public beta to the autumn",
    "require two reviewers on every pull request",
    "retire the legacy admin panel",
)
RESTAURANTS = (
    ("Little Saigon Kitchen", "the pho"),
    ("Osteria Bellini", "the cacio e pepe"),
    ("Sakura Ramen Bar", "the tonkotsu ramen"),
    ("Casa Oaxaca", "the mole"),
    ("The Green Fork", "the mushroom risotto"),
    ("Bistro Margaux", "the duck confit"),
    ("Dosa Corner", "the masala dosa"),
)
FAVOURITE_RESTAURANT = "Tasca do Chico"
BOOKS = (
    ("The Salt Orchard", "Ines Varga"),
    ("Nine Lanterns", "Colm Reddy"),
    ("A Map of Quiet Rivers", "Hanne Lund"),
    ("The Glass Beekeeper", "Tobias Ferreira"),
    ("Northern Static", "Amara Okafor"),
    ("Small Hours in Ostend", "Pieter Claes"),
)
CONFERENCES = ("DataEngConf", "PyCon Portugal")
TALK_TOPICS = ("zero-downtime schema migrations", "on-call without burnout")
SHOWS = ("Severance", "The Bear", "Slow Horses", "Shogun", "Only Murders in the Building")
TRIP_CITIES = ("Seville", "Bruges", "Bologna", "Tallinn", "Ljubljana", "Salzburg", "Bergen")
FOODS = ("shakshuka", "a lentil curry", "homemade pizza", "bibimbap", "a big Greek salad")

# Realistic typos of words the questions use; other words get a mechanical typo.
TYPOS = {
    "restaurant": ("resturant", "restaraunt"),
    "favourite": ("favourtie", "favorit"),
    "database": ("databse", "datbase"),
    "deadline": ("dealine", "deadine"),
    "client": ("cleint", "clinet"),
    "customer": ("custmer", "costumer"),
    "research": ("reserch", "reseach"),
    "researching": ("reserching", "researchign"),
    "signing": ("signign", "singing"),
    "stored": ("stroed", "sotred"),
    "kept": ("kpet",),
    "appointment": ("appointmnet", "apointment"),
    "dentist": ("dentsit", "denist"),
    "language": ("langauge", "languag"),
    "learning": ("lerning", "learnign"),
    "sister": ("sistr", "siter"),
    "partner": ("parnter", "partener"),
    "allergic": ("alergic", "allergik"),
    "allergy": ("alergy", "allegry"),
    "budget": ("budjet", "buget"),
    "deployed": ("deployd", "delpoyed"),
    "deploys": ("deplos", "depolys"),
    "leading": ("leadng", "laeding"),
    "leads": ("leds", "laeds"),
    "live": ("liev", "lve"),
    "lives": ("livs", "lievs"),
    "living": ("livng", "liveing"),
    "city": ("citty", "ctiy"),
    "project": ("projet", "porject"),
    "birthday": ("birthady", "bday"),
    "wedding": ("weding", "wediing"),
    "climbing": ("climing", "clmbing"),
    "called": ("caled", "calld"),
    "named": ("nmaed", "namd"),
    "ship": ("shp",),
    "shipped": ("shiped",),
    "based": ("basde",),
    "works": ("wroks", "workz"),
    "Lisbon": ("Lisbn", "Lisbonn"),
    "Berlin": ("Berln", "Berlinn"),
    "Amsterdam": ("Amsterdm", "Amsterdamm"),
    "Copenhagen": ("Copenhagn", "Copenhaguen"),
    "Edinburgh": ("Edinborough", "Edinburg"),
    "Priya": ("Prya", "Priyah"),
    "Tomas": ("Thomas", "Tomass"),
    "Aisha": ("Aysha", "Aishah"),
    "Hannah": ("Hanna", "Hanah"),
    "Sofia": ("Sophia", "Sofai"),
    "Marco": ("Marko",),
    "Omar": ("Omer", "Omaar"),
    "Noor": ("Nour", "Nor"),
    "Lena": ("Lenna", "Lina"),
    "Falcon": ("Falcom", "Falcn"),
    "Heron": ("Herron", "Heorn"),
    "Kestrel": ("Kestral", "Kestrell"),
    "Orchid": ("Orchd", "Orkid"),
    "Juniper": ("Junpier", "Juniperr"),
    "Atlas": ("Altas", "Atlass"),
    "offsite": ("ofsite", "offiste"),
    "workshop": ("workshp", "wokshop"),
    "conference": ("conferance", "confrence"),
}
# Function words long enough to be picked for a typo (the typo goes to content words).
STOPWORDS = ("about", "again", "there", "their", "these", "those", "where", "which", "whose")
# Words that carry no content, for checking the kinds (see ``check_kind``).
FUNCTION_WORDS = frozenset(
    " ".join(
        (
            "a an the is are was were be been being do does did of in on at to for from by",
            "with and or what which who whom whose where when why how my our we i me you your",
            "it its this that these those now again still there their his her he she they",
            "them any has have had about into as most am m s ll re ve d not no",
        )
    ).split()
)


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in FUNCTION_WORDS]


def crude_stem(word: str) -> str:
    """Enough stemming to tell an inflection from another word (lives/live, keys/key)."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # shipp -> ship
    return word.removesuffix("e")


def verbatim_share(question: str, evidence: str) -> float:
    """The share of the question's content words that the evidence has, as they are
    (names and other capitalised words of the evidence left out: a paraphrase keeps them)."""
    names = {w.lower() for w in re.findall(r"\b[A-Z][a-zA-Z]+", evidence.split("] ", 1)[-1])}
    words = [w for w in content_words(question) if w not in names]
    if not words:
        return 0.0
    have = set(content_words(evidence))
    return sum(w in have for w in words) / len(words)


# -- the conversation being built --------------------------------------------------------------


@dataclass
class Turn:
    speaker: str
    text: str
    fact: str | None = None  # the fact id this turn states (for labels)
    chatter: bool = False  # a filler pair's turn


@dataclass
class Session:
    number: int
    date: dt.date
    facts: list[tuple[Turn, Turn]] = field(default_factory=list)  # (user, assistant) pairs


@dataclass
class Question:
    kind: str
    text: str
    evidence: list[str]  # fact ids, resolved to memory keys at the end
    answer: str
    check: tuple[str, str] | None = None  # (subject, answer) that only evidence may pair


def natural(day: dt.date) -> str:
    return f"{day.day} {day.strftime('%B')} {day.year}"


class Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        self.sessions: list[Session] = []
        day = FIRST_DAY
        for number in range(1, SESSIONS + 1):
            self.sessions.append(Session(number, day))
            day += dt.timedelta(days=rng.randint(7, 10))
        self.facts: dict[str, int] = {}  # fact id -> session number
        self.questions: list[Question] = []

    # -- placement ---------------------------------------------------------------------------

    def in_month(self, month: str) -> list[int]:
        return [s.number for s in self.sessions if s.date.strftime("%B") == month]

    def say(self, fid: str, session: int, text: str, reply: str) -> str:
        """Maya states fact ``fid`` in ``session``; the assistant answers without restating it."""
        assert fid not in self.facts, fid
        self.facts[fid] = session
        self.sessions[session - 1].facts.append((Turn(USER, text, fid), Turn(ASSISTANT, reply)))
        return fid

    def noise(self, session: int, text: str, reply: str) -> None:
        """A scheduled distractor pair (part of a session's story, states no asked fact)."""
        self.sessions[session - 1].facts.append((Turn(USER, text), Turn(ASSISTANT, reply)))

    def ask(
        self,
        kind: str,
        text: str,
        evidence: list[str],
        answer: str,
        check: tuple[str, str] | None = None,
    ) -> None:
        assert kind in KINDS and evidence
        self.questions.append(Question(kind, text, list(evidence), answer, check))

    def ack(self, subject: str) -> str:
        return self.rng.choice(
            (
                "Noted.",
                "Got it, I'll keep that in mind.",
                f"Thanks for the update on {subject}.",
                f"Good to know about {subject}. Want me to add a reminder?",
                f"Understood, I've updated my notes on {subject}.",
                f"Okay! Anything else I should know about {subject}?",
                "Saved. I'll bring it up if it becomes relevant.",
                f"Makes sense. I'll remember that for {subject}.",
            )
        )

    def paraphrase(self, statement: str, *options: str) -> str:
        """One of ``options`` that says it in other words than ``statement``."""
        fit = [o for o in options if verbatim_share(o, statement) <= PARAPHRASE_SHARE]
        assert fit, (statement, options)
        return self.rng.choice(fit)

    def misspell(self, question: str, keys: list[str]) -> str:
        """One typo in a key word of ``question`` (a name, a place, the asked-about thing) and,
        sometimes, a second one in another content word; sometimes typed in lower case."""
        rng = self.rng
        words = question.split(" ")
        stripped = [re.sub(r"[^\w'-]", "", w) for w in words]
        typeable = [
            i
            for i, w in enumerate(stripped)
            if w in TYPOS or w.removesuffix("'s") in TYPOS or len(w) >= 5
        ]
        targets = [i for i in typeable if stripped[i].removesuffix("'s") in keys]
        if not targets:
            targets = [i for i in typeable if stripped[i].lower() not in STOPWORDS]
        assert targets, question
        first = rng.choice(targets)
        chosen = [first]
        others = [
            i
            for i, w in enumerate(stripped)
            if i != first and len(w) >= 5 and w.lower() not in STOPWORDS and "'" not in w
        ]
        if others and rng.random() < 0.45:
            chosen.append(rng.choice(others))
        for i in chosen:
            words[i] = words[i].replace(stripped[i], self.typo(stripped[i]), 1)
        out = " ".join(words)
        if rng.random() < 0.35:
            out = out.lower()
        if rng.random() < 0.25:
            out = out.rstrip("?")
        assert out.lower() != question.lower()
        return out

    def typo(self, word: str) -> str:
        rng = self.rng
        if word in TYPOS:
            return rng.choice(TYPOS[word])
        if word.endswith("'s") and word[:-2] in TYPOS:
            return rng.choice(TYPOS[word[:-2]]) + "'s"
        letters = list(word)
        op = rng.choice(("swap", "drop", "double"))
        i = rng.randint(1, len(letters) - 3)
        if op == "swap" and letters[i] != letters[i + 1]:
            letters[i], letters[i + 1] = letters[i + 1], letters[i]
        elif op == "drop":
            del letters[i]
        else:
            letters.insert(i, letters[i])
        return "".join(letters)


# -- the world and its facts -------------------------------------------------------------------


def build(seed: int) -> dict[str, object]:
    b = Builder(seed)
    rng = b.rng
    months = {m: b.in_month(m) for m in MONTHS}
    assert all(len(v) >= 2 for v in months.values()), months

    def early(lo: int, hi: int) -> int:
        return rng.randint(lo, hi)

    def pronoun(p: str) -> str:
        return PEOPLE[p][0]

    # People and cities. Four people move once, two move twice, the rest stay put.
    movers = rng.sample(CITY_PEOPLE, 6)
    twice, once = movers[:2], movers[2:]
    city_of: dict[str, list[tuple[str, str]]] = {}  # person -> [(city, fact id)], in order
    for p in CITY_PEOPLE:
        moves = 2 if p in twice else 1 if p in once else 0
        cities = rng.sample(CITIES, moves + 2)
        home, grew_up, later = cities[0], cities[-1], cities[1 : 1 + moves]
        fid = f"city:{p}:0"
        he = pronoun(p)
        text, direct = rng.choice(
            (
                (
                    f"{p} lives in {home}, so our calls always end up at odd hours.",
                    f"Where does {p} live?",
                ),
                (
                    f"{p} has been living in {home} for a few years now; {he} loves it.",
                    f"Where has {p} been living?",
                ),
                (
                    f"{p} is based in {home}, which is why {he} is never in the office.",
                    f"Where is {p} based?",
                ),
                (
                    f"Fun fact: {p} grew up in {grew_up} but has lived in {home} since "
                    "university.",
                    f"Where has {p} lived since university?",
                ),
                (
                    f"Turns out {p} lives in {home}, right next to the old harbour.",
                    f"Which city does {p} live in?",
                ),
            )
        )
        b.say(
            fid, early(1, 6), text, rng.choice(("Oh nice, I hear it's a lovely city.", b.ack(p)))
        )
        city_of[p] = [(home, fid)]
        windows = [(7, 11), (13, 16)] if moves == 2 else [(7, 15)]
        for n, (city, (lo, hi)) in enumerate(zip(later, windows, strict=False), start=1):
            fid = f"city:{p}:{n}"
            again = " again" if n == 2 else ""
            text, direct = rng.choice(
                (
                    (
                        f"{p} moved{again} to {city} last weekend; the new flat is tiny but "
                        f"{he} loves it.",
                        f"Where did {p} move to{again}?",
                    ),
                    (
                        f"{p} has moved{again}, to {city} this time! {he.capitalize()} sent "
                        "photos of the view from the balcony.",
                        f"Where has {p} moved to{again}?",
                    ),
                    (
                        f"{p} relocated{again}, to {city}, to be closer to family.",
                        f"Where did {p} relocate to{again}?",
                    ),
                    (
                        f"{p} finally relocated to {city}; the paperwork took months.",
                        f"Where did {p} finally relocate to?",
                    ),
                    (
                        f"Big change: {p} packed up everything and now lives in {city}.",
                        f"Where does {p} live now?",
                    ),
                )
            )
            b.say(
                fid,
                rng.randint(lo, hi),
                text,
                rng.choice((f"That's a big change for {p}.", b.ack(p), "Exciting news!")),
            )
            city_of[p].append((city, fid))
        if rng.random() < 0.5:
            dream = rng.choice([c for c in CITIES if c not in cities])
            b.noise(
                rng.randint(2, 18),
                f"{p} keeps saying {pronoun(p)} might move to {dream} one day, but I doubt it.",
                "Ha, maybe one day.",
            )
        current, cur_fid = city_of[p][-1]
        who = "my sister" if p == SISTER else p
        now = " now" if moves else ""
        b.ask("direct", direct, [cur_fid], current, (p, current))
        b.ask(
            "paraphrase",
            b.paraphrase(
                text,
                f"Which city is {p} living in these days?",
                f"What city is {p} based in at the moment?",
                f"Where is {p}'s home{now}?",
                f"Which city did {p} end up relocating to?" if moves else f"Where's {p}'s home?",
                f"Where did {p} move to most recently?"
                if moves
                else f"Which city is {p} settled in?",
            ),
            [cur_fid],
            current,
            (p, current),
        )
        if rng.random() < 0.7:
            base = rng.choice((f"Where does {p} live{now}?", f"Which city does {p} live in{now}?"))
            b.ask("misspelled", b.misspell(base, [p, "live", "city"]), [cur_fid], current)
        if moves:
            before, before_fid = city_of[p][-2]
            b.ask(
                "paraphrase",
                f"Where was {p} living before {pronoun(p)} went to {current}?",
                [before_fid],
                before,
                (p, before),
            )
        if p == SISTER:
            b.ask(
                "multi_hop",
                f"Which city does {who} live in now?",
                ["sister", cur_fid],
                current,
            )

    # Sister and partner: who they are, then (in another session) what they do.
    b.say(
        "sister",
        early(1, 3),
        f"My sister {SISTER} is coming to stay with us next weekend, I need to clean the "
        "guest room.",
        f"Sounds lovely. Want a checklist for getting the guest room ready for {SISTER}?",
    )
    b.say(
        "sister-job",
        early(5, 9),
        f"{SISTER} finally finished her residency, she's a paediatrician now!",
        "Congratulations to her, that's years of work.",
    )
    b.ask(
        "multi_hop",
        "What does my sister do for a living?",
        ["sister", "sister-job"],
        "paediatrician",
    )
    b.ask("paraphrase", f"What is {SISTER}'s job now?", ["sister-job"], "paediatrician")
    b.say(
        "partner",
        early(1, 2),
        f"{PARTNER} and I have been together six years; he's my partner and the better cook.",
        f"Ha! Noted: {PARTNER} is in charge of dinners.",
    )
    b.say(
        "partner-hobby",
        early(4, 10),
        f"{PARTNER} is obsessed with bouldering lately; he goes three evenings a week.",
        "That's quite the commitment.",
    )
    b.ask(
        "multi_hop", "What hobby is my partner into?", ["partner", "partner-hobby"], "bouldering"
    )
    b.ask(
        "paraphrase",
        f"What sport does {PARTNER} spend his evenings on?",
        ["partner-hobby"],
        "bouldering",
    )
    birthday = early(3, 8)
    b.say(
        "ben-birthday",
        birthday,
        f"{PARTNER}'s birthday is on 22 August; remind me to book something in July.",
        "I'll remind you in July.",
    )
    b.ask("time_anchored", "Whose birthday is on 22 August?", ["ben-birthday"], PARTNER)
    b.ask("direct", f"When is {PARTNER}'s birthday?", ["ben-birthday"], "22 August")
    b.say(
        "hannah-wedding",
        early(9, 14),
        f"{SISTER}'s wedding is on 14 July, at a vineyard a couple of hours away.",
        "How exciting! Do you need help with a speech?",
    )
    b.ask("time_anchored", "What's happening on 14 July?", ["hannah-wedding"], "Hannah's wedding")
    b.ask(
        "misspelled",
        b.misspell(f"When is {SISTER}'s wedding?", [SISTER, "wedding"]),
        ["hannah-wedding"],
        "14 July",
    )

    # Projects: leads (two hand over), databases (one switches), clients, deadlines.
    leads = rng.sample(COLLEAGUES, len(PROJECTS))
    spare = [c for c in COLLEAGUES if c not in leads]
    handover = rng.sample(PROJECTS, 2)
    lead_fact: dict[str, tuple[str, str]] = {}
    ever_led: dict[str, set[str]] = {}
    lead_said: dict[str, tuple[str, str]] = {}  # project -> (latest statement, direct question)
    for project, lead in zip(PROJECTS, leads, strict=True):
        text, direct = rng.choice(
            (
                (
                    f"{lead} is leading Project {project} from now on.",
                    f"Who is leading Project {project}?",
                ),
                (
                    f"Org update: {lead} is the new lead for {project}.",
                    f"Who is the new lead for {project}?",
                ),
                (
                    f"{project} finally has an owner: {lead} will lead it.",
                    f"Who will lead {project}?",
                ),
                (
                    f"{lead} will be running the {project} project; I'm just advising.",
                    f"Who will be running the {project} project?",
                ),
            )
        )
        fid = b.say(f"lead:{project}:0", early(1, 5), text, b.ack(project))
        lead_fact[project] = (lead, fid)
        lead_said[project] = (text, direct)
        ever_led[project] = {lead}
    for project in handover:
        old = lead_fact[project][0]
        new = spare.pop()
        text, direct = rng.choice(
            (
                (
                    f"{new} is taking over {project} from {old}, who wants to get back to "
                    "hands-on work.",
                    f"Who is taking over {project}?",
                ),
                (
                    f"Reshuffle: {old} stepped down from {project} and {new} leads it now.",
                    f"Who leads {project} now?",
                ),
            )
        )
        fid = b.say(
            f"lead:{project}:1",
            early(9, 14),
            text,
            f"Hope the handover on {project} goes smoothly.",
        )
        lead_fact[project] = (new, fid)
        lead_said[project] = (text, direct)
        ever_led[project].add(new)

    def outsiders(project: str) -> list[str]:
        """Colleagues who never lead ``project`` (they may still be named next to it)."""
        return [c for c in COLLEAGUES if c not in ever_led[project]]

    dbs = rng.sample(DATABASES, len(PROJECTS))
    switched = rng.choice(PROJECTS)
    db_fact: dict[str, tuple[str, str | None, str]] = {}
    db_said: dict[str, tuple[str, str]] = {}  # project -> (latest statement, direct question)
    for project, (db, nick) in zip(PROJECTS, dbs, strict=True):
        text, direct = rng.choice(
            (
                (
                    f"For {project} we settled on {db} as the main database.",
                    f"Which main database did we settle on for {project}?",
                ),
                (
                    f"{rng.choice(outsiders(project))} benchmarked a few options and "
                    f"{project} will run on {db}.",
                    f"What will {project} run on?",
                ),
                (
                    f"Decision: {project} stores everything in {db}, no second datastore.",
                    f"Where does {project} store everything?",
                ),
            )
        )
        fid = b.say(f"db:{project}:0", early(2, 8), text, b.ack(project))
        db_fact[project] = (db, nick, fid)
        db_said[project] = (text, direct)
    old_db = db_fact[switched][0]
    text = f"After the outage we're moving {switched} off {old_db} and onto {SWITCH_DB[0]}."
    fid = b.say(
        f"db:{switched}:1", early(11, 15), text, "Migrations like that are painful, good luck."
    )
    db_fact[switched] = (SWITCH_DB[0], SWITCH_DB[1], fid)
    db_said[switched] = (text, f"What are we moving {switched} onto?")
    clients = rng.sample(CLIENTS, len(PROJECTS))
    client_fact = {}
    for project, (client, short) in zip(PROJECTS, clients, strict=True):
        verb = rng.choice(("customer", "built"))
        text = (
            f"The customer for {project} is {client}, which explains the strict SLAs."
            if verb == "customer"
            else f"{project} is being built for {client}; they signed the contract today."
        )
        fid = b.say(f"client:{project}", early(1, 8), text, b.ack(project))
        client_fact[project] = (client, short, fid, verb)
    deadline_fact = {}
    slipped = rng.choice(PROJECTS)
    for project in PROJECTS:
        month = rng.choice(LATER_MONTHS[:4])
        fid = b.say(
            f"deadline:{project}:0",
            early(2, 9),
            f"{project} has to ship by the end of {month}.",
            rng.choice(("That's tight.", b.ack(project))),
        )
        deadline_fact[project] = (month, fid)
        if project == slipped:
            later = LATER_MONTHS[LATER_MONTHS.index(month) + 2]
            fid = b.say(
                f"deadline:{project}:1",
                early(12, 16),
                f"{project}'s deadline slipped; now it ships at the end of {later}.",
                "At least there's more breathing room.",
            )
            deadline_fact[project] = (later, fid)

    for project in PROJECTS:
        lead, lead_fid = lead_fact[project]
        db, nick, db_fid = db_fact[project]
        client, short, client_fid, verb = client_fact[project]
        month, deadline_fid = deadline_fact[project]
        changed = project in handover
        said, direct = lead_said[project]
        b.ask("direct", direct, [lead_fid], lead, (project, lead))
        b.ask(
            "paraphrase",
            b.paraphrase(
                said,
                f"who's in charge of {project} these days?",
                f"Who is the {project} project lead{' now' if changed else ''}?",
                f"Who runs the {project} team?",
                f"Who owns {project}{' after the reshuffle' if changed else ''}?",
                f"Who heads up {project}?",
            ),
            [lead_fid],
            lead,
            (project, lead),
        )
        if rng.random() < 0.6:
            b.ask(
                "misspelled",
                b.misspell(f"Who is leading the {project} project?", [project, "leading"]),
                [lead_fid],
                lead,
            )
        now = " now" if project == switched else ""
        said, direct = db_said[project]
        b.ask("direct", direct, [db_fid], db, (project, db))
        b.ask(
            "paraphrase",
            b.paraphrase(
                said,
                f"What DB is {project} built on{now}?",
                f"what's the datastore behind {project}{now}?",
                *([] if now else [f"Which database engine did we pick for {project}?"]),
                f"Which database does {project} use{now}?",
            ),
            [db_fid],
            db,
            (project, db),
        )
        if nick is not None:
            b.ask("paraphrase", f"Which project runs on {nick}?", [db_fid], project)
        if project == switched:
            b.ask(
                "paraphrase",
                f"Which database was {project} using before the outage?",
                [f"db:{project}:0"],
                old_db,
            )
        if rng.random() < 0.5:
            b.ask(
                "misspelled",
                b.misspell(f"What database does {project} use{now}?", [project, "database"]),
                [db_fid],
                db,
            )
        direct = (
            f"Who is the customer for {project}?"
            if verb == "customer"
            else f"Who is {project} being built for?"
        )
        b.ask("direct", direct, [client_fid], client, (project, short))
        b.ask(
            "paraphrase",
            rng.choice(
                (
                    f"Which company commissioned {project}?",
                    f"Who's paying for {project}?",
                    f"Which client is {project} for?",
                )
            ),
            [client_fid],
            client,
            (project, short),
        )
        if rng.random() < 0.5:
            b.ask(
                "paraphrase", f"Which of our projects is the {short} one?", [client_fid], project
            )
        if rng.random() < 0.5:
            b.ask(
                "misspelled",
                b.misspell(f"Who is the client for {project}?", [project, "client"]),
                [client_fid],
                client,
            )
        slip = project == slipped
        b.ask(
            "direct" if not slip else "paraphrase",
            f"When does {project} have to ship?"
            if not slip
            else f"What is the current deadline for {project}?",
            [deadline_fid],
            month,
            (project, month),
        )
        if rng.random() < 0.6:
            b.ask(
                "paraphrase",
                rng.choice(
                    (
                        f"By when must {project} be shipped?",
                        f"What's the {project} deadline{' now' if slip else ''}?",
                    )
                ),
                [deadline_fid],
                month,
                (project, month),
            )
        if rng.random() < 0.4:
            b.ask(
                "misspelled",
                b.misspell(f"What is the deadline for {project}?", [project, "deadline"]),
                [deadline_fid],
                month,
            )
        # Multi-hop through the current lead.
        lead_city, lead_city_fid = city_of[lead][-1]
        b.ask(
            "multi_hop",
            rng.choice(
                (
                    f"Which city does the lead of Project {project} live in?",
                    f"Where is the person who leads {project} based now?",
                )
            ),
            [lead_fid, lead_city_fid],
            lead_city,
        )
        b.ask(
            "multi_hop",
            rng.choice(
                (
                    f"What database does the project {lead} leads use?",
                    f"Which DB is behind the project {lead} is in charge of?",
                )
            ),
            [lead_fid, db_fid],
            db,
        )
        b.ask(
            "multi_hop",
            rng.choice(
                (
                    f"Who is the client of the project led by {lead}?",
                    f"Which company is {lead}'s project for?",
                )
            ),
            [lead_fid, client_fid],
            client,
        )
        if rng.random() < 0.5:
            b.ask(
                "multi_hop",
                f"When is the deadline of the project {lead} is leading?",
                [lead_fid, deadline_fid],
                month,
            )

    # Release signing keys, research, deploy days, budgets.
    for project, (vault, marker) in zip(rng.sample(PROJECTS, 2), VAULTS, strict=True):
        fid = b.say(
            f"keys:{project}",
            early(3, 10),
            f"The release signing keys for {project} are kept in {vault}.",
            "Good, that's much safer than a laptop.",
        )
        b.ask(
            "direct",
            f"Where are the release signing keys for {project} kept?",
            [fid],
            vault,
            (project, marker),
        )
        b.ask("paraphrase", f"Where is the {project} signing key stored?", [fid], vault)
        b.ask(
            "misspelled",
            b.misspell(f"Where is the signing key for {project} stored?", [project, "signing"]),
            [fid],
            vault,
        )
    for person, (topic, short) in zip(rng.sample(COLLEAGUES, 3), RESEARCH, strict=True):
        project = rng.choice([p for p in PROJECTS if person in outsiders(p)])
        fid = b.say(
            f"research:{person}",
            early(2, 12),
            f"{person} is researching {topic} for {project}.",
            f"Interesting, I'd love to hear what {person} finds.",
        )
        b.ask("direct", f"What is {person} researching?", [fid], topic, (person, topic))
        b.ask(
            "paraphrase",
            rng.choice(
                (
                    f"What is {person}'s research about?",
                    f"What's the topic of {person}'s research?",
                )
            ),
            [fid],
            topic,
        )
        b.ask("paraphrase", f"Who is doing research on {short}?", [fid], person)
        b.ask(
            "misspelled",
            b.misspell(f"What research is {person} doing?", [person, "research"]),
            [fid],
            topic,
        )
        city, city_fid = city_of[person][-1]
        b.ask(
            "multi_hop",
            f"Where does the person researching {short} live now?",
            [fid, city_fid],
            city,
        )
    for project, day in zip(rng.sample(PROJECTS, 3), rng.sample(WEEKDAYS, 3), strict=True):
        fid = b.say(
            f"deploy:{project}",
            early(2, 12),
            f"{project} deploys go out every {day} morning, never on Fridays.",
            b.ack(project),
        )
        b.ask("direct", f"When do {project} deploys go out?", [fid], day, (project, day))
        b.ask("paraphrase", f"Which day of the week does {project} get deployed?", [fid], day)
    for project in rng.sample(PROJECTS, 3):
        amount = f"{rng.randrange(40, 400, 20)},000 euros"
        fid = b.say(
            f"budget:{project}",
            early(1, 9),
            f"{project}'s budget for this year is {amount}.",
            rng.choice(("Generous.", b.ack(project))),
        )
        b.ask("direct", f"What is the budget for {project}?", [fid], amount, (project, amount))
        b.ask(
            "paraphrase", f"How much money does {project} get to spend this year?", [fid], amount
        )

    # Friends' jobs (one changes).
    jobs = {
        "Marco": ("works at a bike repair shop near the station", "bike repair"),
        "Noor": ("is a sound engineer at the national radio", "sound engineer"),
    }
    for person, (text, answer) in jobs.items():
        fid = b.say(f"job:{person}:0", early(2, 7), f"{person} {text}.", b.ack(person))
        jobs[person] = (fid, answer)
    fid = b.say(
        "job:Marco:1",
        early(11, 15),
        "Marco quit the bike shop and joined a startup that makes electric cargo bikes.",
        "Brave move! Hope it works out for him.",
    )
    b.ask(
        "paraphrase",
        "What does Marco do for work these days?",
        [fid],
        "a startup making electric cargo bikes",
    )
    b.ask("paraphrase", "Where does Noor work?", [jobs["Noor"][0]], "the national radio")
    b.ask(
        "misspelled",
        b.misspell("What is Noor's job?", ["Noor", "job"]),
        [jobs["Noor"][0]],
        "sound engineer",
    )

    # Maya herself.
    personal = [
        (
            "cat",
            "My cat is named Miso, she's a grumpy tabby who sleeps on my keyboard.",
            [("direct", "What is my cat named?"), ("paraphrase", "what is my cat called")],
            ("misspelled", "What is my cat called?", ["called", "cat"]),
            "Miso",
            ("cat", "Miso"),
        ),
        (
            "allergy",
            "I'm allergic to peanuts, so no satay for me at the team dinner.",
            [("paraphrase", "What food allergy do I have?")],
            ("misspelled", "What am I allergic to?", ["allergic"]),
            "peanuts",
            ("allergic", "peanuts"),
        ),
        (
            "car",
            "We finally bought a car: a used green Skoda Octavia estate.",
            [("direct", "What car have we bought?"), ("paraphrase", "What vehicle do we own?")],
            None,
            "a green Skoda Octavia",
            ("car", "Skoda"),
        ),
        (
            "climbing",
            "I go to the climbing gym on Tuesdays and Fridays after work.",
            [("paraphrase", "Which days am I climbing?")],
            ("misspelled", "Which days do I go to the climbing gym?", ["climbing"]),
            "Tuesdays and Fridays",
            ("climbing", "Tuesdays"),
        ),
        (
            "language",
            "I'm learning a new language: Portuguese, twenty minutes every morning.",
            [
                ("direct", "Which language am I learning?"),
                ("paraphrase", "What language have I been studying?"),
            ],
            ("misspelled", "Which language am I learning?", ["language", "learning"]),
            "Portuguese",
            ("learning", "Portuguese"),
        ),
        (
            "favourite",
            f"My favourite restaurant is still {FAVOURITE_RESTAURANT}, the little place by "
            "the river.",
            [
                ("direct", "What is my favourite restaurant?"),
                ("paraphrase", "Where do I like eating out the most?"),
            ],
            ("misspelled", "What's my favourite restaurant?", ["restaurant", "favourite"]),
            FAVOURITE_RESTAURANT,
            ("favourite", "Tasca"),
        ),
    ]
    for fid, text, asks, typo, answer, check in personal:
        b.say(fid, early(1, 10), text, b.ack("that"))
        for kind, question in asks:
            b.ask(kind, question, [fid], answer, check)
        if typo is not None:
            kind, base, keys = typo
            b.ask(kind, b.misspell(base, keys), [fid], answer)
    april, may = months["April"], months["May"]
    b.say(
        "dentist:0",
        rng.choice(april[:-1]),
        "Dentist appointment is on 20 May at 9:30, at the clinic on Rua Augusta.",
        "I'll remind you the day before.",
    )
    fid = b.say(
        "dentist:1",
        rng.choice(may),
        "The dentist called and moved my appointment to 3 June at 11:00.",
        "Updated, thanks.",
    )
    b.ask("direct", "When is my dentist appointment?", [fid], "3 June at 11:00")
    b.ask(
        "misspelled",
        b.misspell("When is my dentist appointment now?", ["dentist", "appointment"]),
        [fid],
        "3 June",
    )

    # Time-anchored: who started what in which month.
    starters = rng.sample([*COLLEAGUES, *FRIENDS, SISTER], 6)
    pool = list(ACTIVITIES)
    rng.shuffle(pool)
    spring = ("March", "April", "May")
    for person in starters:
        started = sorted(rng.sample(MONTHS, rng.choice((2, 2, 3))), key=MONTHS.index)
        for month in started:
            activity = pool.pop()
            fid = b.say(
                f"start:{person}:{month}",
                rng.choice(months[month]),
                rng.choice(
                    (
                        f"{person} started {activity} this week.",
                        f"{person} has just started {activity}; {pronoun(person)} is really "
                        "excited about it.",
                        f"Apparently {person} began {activity} on Saturday.",
                    )
                ),
                rng.choice((f"Good for {person}!", "Nice, sounds fun.", b.ack(person))),
            )
            b.ask(
                "time_anchored",
                rng.choice(
                    (
                        f"What did {person} start in {month}?",
                        f"What did {person} take up in {month}?",
                        f"In {month}, what new thing did {person} begin?",
                    )
                ),
                [fid],
                activity,
            )
            # The same, asked with a season or "the start of the year": only a reader who
            # relates dates to seasons finds it (asked when the answer is unique).
            in_spring = [m for m in started if m in spring]
            if in_spring == [month]:
                b.ask("time_anchored", f"What did {person} start in the spring?", [fid], activity)
            if month == "January" and "February" not in started:
                b.ask(
                    "time_anchored",
                    f"What did {person} start at the beginning of the year?",
                    [fid],
                    activity,
                )

    # Time-anchored: restaurants tried, book club picks, project decisions.
    tried = list(RESTAURANTS)
    rng.shuffle(tried)
    for month in MONTHS:
        name, dish = tried.pop()
        fid = b.say(
            f"tried:{month}",
            rng.choice(months[month]),
            f"Tried {name} for dinner tonight; {dish} was excellent but the service was slow.",
            rng.choice(("Sounds like a good find.", "Worth going back?")),
        )
        b.ask(
            "time_anchored",
            rng.choice(
                (
                    f"Which new restaurant did I try in {month}?",
                    f"Where did I go for dinner in {month} that I hadn't been before?",
                )
            ),
            [fid],
            name,
        )
    books = list(BOOKS)
    for month in MONTHS:
        title, author = books.pop(0)
        fid = b.say(
            f"book:{month}",
            months[month][0],
            f"Book club pick this month: {title} by {author}.",
            rng.choice(("Ooh, I've heard good things.", "Enjoy the reading!")),
        )
        b.ask(
            "time_anchored",
            rng.choice(
                (
                    f"What was the book club reading in {month}?",
                    f"Which book did book club pick in {month}?",
                )
            ),
            [fid],
            title,
        )
    decisions = list(DECISIONS)
    rng.shuffle(decisions)
    for project in rng.sample(PROJECTS, 4):
        for month in sorted(rng.sample(MONTHS[:5], 2), key=MONTHS.index):
            decision = decisions.pop()
            fid = b.say(
                f"decision:{project}:{month}",
                rng.choice(months[month]),
                rng.choice(
                    (
                        f"Decision for {project}: we'll {decision}.",
                        f"We agreed today that {project} will {decision}.",
                    )
                ),
                b.ack(project),
            )
            b.ask(
                "time_anchored",
                f"What did we decide about {project} in {month}?",
                [fid],
                decision,
            )

    # Two offsites, their planning chatter, and two talks.
    march, june = months["March"], months["June"]
    planning = rng.choice([s for s in months["February"] + march[:1]])
    b.noise(planning, "Offsite planning: the agenda is due Friday.", "I'll nudge you Thursday.")
    recap = march[-1]
    frozen = rng.choice(PROJECTS)
    offsite_a = b.say(
        "offsite:march:a",
        recap,
        f"Back from the offsite at a farmhouse near Sintra. Main outcome: {frozen} is frozen "
        "until the security audit is done.",
        "Sounds like a productive few days.",
    )
    offsite_b = b.say(
        "offsite:march:b",
        recap,
        "The other offsite decision: everyone gets a training budget of 1,500 euros a year.",
        "That's generous, nice.",
    )
    b.ask(
        "time_anchored",
        "What was decided at the March offsite?",
        [offsite_a, offsite_b],
        f"{frozen} frozen until the audit; a training budget",
    )
    b.ask("time_anchored", "Where was the offsite in March held?", [offsite_a], "near Sintra")
    b.ask(
        "misspelled",
        b.misspell("What did we decide at the offsite in March?", ["offsite"]),
        [offsite_a, offsite_b],
        f"{frozen} frozen until the audit; a training budget",
    )
    flagship = rng.choice([p for p in PROJECTS if p != frozen])
    host = rng.choice(COLLEAGUES)
    june_a = b.say(
        "offsite:june:a",
        june[0],
        f"Offsite recap: {flagship} is the flagship for the autumn and we're hiring two more "
        "engineers for it.",
        "Big news for the team.",
    )
    june_b = b.say(
        "offsite:june:b",
        june[0],
        f"Also at the offsite, {host} ran a great workshop on incident reviews.",
        f"Nice, tell {host} I said well done.",
    )
    b.ask(
        "time_anchored",
        "What came out of the June offsite?",
        [june_a, june_b],
        f"{flagship} is the autumn flagship",
    )
    b.ask("time_anchored", "Who ran a workshop at the offsite in June?", [june_b], host)
    speakers = rng.sample(COLLEAGUES, 2)
    for person, conf, topic, month in zip(
        speakers, CONFERENCES, TALK_TOPICS, ("April", "May"), strict=True
    ):
        fid = b.say(
            f"talk:{person}",
            rng.choice(months[month]),
            f"{person} gave a talk about {topic} at {conf}; the room was packed.",
            f"That's great exposure for {person}.",
        )
        b.ask("time_anchored", f"Who gave a conference talk in {month}?", [fid], person)
        b.ask("direct", f"What did {person} talk about at {conf}?", [fid], topic)

    return finish(b, seed)


# -- chatter ----------------------------------------------------------------------------------


def chatter(rng: random.Random, month: str) -> tuple[str, str]:
    """One distractor pair: shares names, projects and common words (moved, started, lead,
    database, restaurant, offsite...), states no asked fact."""
    p = rng.choice(COLLEAGUES + FRIENDS)
    q = rng.choice([x for x in COLLEAGUES if x != p])
    project = rng.choice(PROJECTS)
    other = rng.choice([x for x in PROJECTS if x != project])
    trip = rng.choice(TRIP_CITIES)
    show, food = rng.choice(SHOWS), rng.choice(FOODS)
    day = rng.choice(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"))
    topic = rng.choice(("history", "design", "economics", "sleep", "architecture"))
    he, his = PEOPLE[p]
    pairs: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("Rainy again. Third day in a row.", ("Sounds gloomy.", "Good day for focus work?")),
        (f"Made {food} for dinner, turned out great.", ("Yum. Want me to save the recipe?",)),
        (
            f"Watched two episodes of {show} last night.",
            (f"No spoilers, but {show} gets better.",),
        ),
        (
            f"Lunch with {p} today, we mostly complained about flaky tests in {project}.",
            ("Flaky tests are the worst.", "Want to list the worst offenders?"),
        ),
        (
            f"{p} is out sick today so the {project} review moved to next week.",
            (f"Hope {p} feels better soon.",),
        ),
        (
            f"Had a 1:1 with {p}; {he} seems a bit tired lately.",
            ("Maybe worth checking in again next week.", "Burnout creeps up quietly."),
        ),
        (f"{p} recommended a podcast about {topic}.", ("I can add it to your listening list.",)),
        (
            f"The {project} staging database ran out of disk again.",
            ("Might be worth an alert on disk usage.", "Again? That's the third time."),
        ),
        (
            f"Spent the whole afternoon on the {project} dashboard migration.",
            ("Long day. Did it at least go through?",),
        ),
        (
            f"Release notes for {project} are due tomorrow and I haven't started.",
            ("Want me to draft an outline from the merged pull requests?",),
        ),
        (
            f"Someone pushed a test signing key to the {project} repo again; we rotated it.",
            ("Good catch. A pre-commit hook could block that.", "Rotating was the right call."),
        ),
        (
            f"The {project} client demo went fine, mostly. The API was slow for a minute.",
            ("Fine is a win for a demo.", "Did anyone notice the slow bit?"),
        ),
        (
            f"{p} and {q} argued about tabs versus spaces in the {project} channel, again.",
            ("Some debates never end.",),
        ),
        (
            f"Can you draft a message to {p} asking to move our {project} sync to {day}?",
            (f"Sure: 'Hi {p}, could we move our {project} sync to {day}? Thanks, Maya.'",),
        ),
        (
            f"Still waiting on {q} to review my {project} pull request.",
            (f"Want me to draft a gentle nudge to {q}?",),
        ),
        (
            f"Thinking about a weekend trip to {trip} in the autumn, any tips?",
            (f"{trip} is lovely; the old town is very walkable.",),
        ),
        (f"The {other} migration finally finished overnight.", ("Great, that's a relief!",)),
        (
            "Coffee machine on our floor is broken, morale is low.",
            ("A crisis. The café downstairs it is.",),
        ),
        ("Miso knocked a glass off the table this morning.", ("Classic. Hope nothing broke.",)),
        (
            "Miso has claimed the new cardboard box and refuses to leave it.",
            ("Priorities.",),
        ),
        (f"{PARTNER} made pancakes this morning, best start to a {day}.", ("Lovely!",)),
        (f"{PARTNER} wants to repaint the living room green.", ("Bold. Which green?",)),
        (
            "Need to remember to water the plants before the weekend.",
            ("I'll remind you Friday afternoon.",),
        ),
        (
            f"Long standup today; {p} presented the {project} roadmap slides.",
            ("How did people react?",),
        ),
        (
            f"Does {p} prefer email or chat for quick questions? I always forget.",
            (f"You haven't told me. Maybe ask {p} directly?",),
        ),
        (
            f"The {project} budget review got pushed to next month.",
            ("One less thing this week, then.",),
        ),
        (
            f"Our {project} retro is on {day}; I should collect topics.",
            ("Want a template for the retro board?", "I can start a list of topics."),
        ),
        (
            f"{q} shared a great article about database indexing.",
            ("Happy to summarize it if you paste it in.",),
        ),
        ("I may skip the gym today, my back is sore.", ("Rest is part of training too.",)),
        (
            "Traffic was awful, took an hour to get to the office.",
            ("Ugh. Podcast time at least?",),
        ),
        (f"{p} sent me photos of {his} new bike.", ("Fancy! What kind?",)),
        (
            f"Deploy of {project} to staging failed because of a missing environment variable.",
            ("Easy fix at least. Want a checklist for new variables?",),
        ),
        (
            "Remind me to renew my passport, it expires next year.",
            ("Noted, I'll bring it up next month.",),
        ),
        ("Is it weird that I like Mondays? Fewer meetings.", ("Not weird at all.",)),
        ("Groceries: oat milk, lemons, rice, coffee.", ("Added to your list.",)),
        (
            f"The {project} on-call rotation is up for review; {q} wants fewer night pages.",
            ("Reasonable. Maybe look at alert thresholds first?",),
        ),
        (
            f"{p} asked whether the {project} API docs are up to date. They are not.",
            ("Want me to list the endpoints that changed?",),
        ),
        ("Sunny for once! Walked to work.", ("Lovely, enjoy it.",)),
        (
            f"Booked train tickets to visit friends in {trip} next month.",
            (f"Nice, {trip} should be pleasant then.",),
        ),
        (f"Our {other} sprint planning ran two hours over.", ("Oof. Shorter agenda next time?",)),
        (f"Can't believe it's {month} already.", ("Time flies.", "Where did the year go?")),
        (
            f"{p} is flying to {trip} for a conference next week.",
            ("Hope the talks are good.",),
        ),
        (f"{q} is moving desks to the quiet corner by the window.", ("Smart choice.",)),
        (
            f"{p} moved the {project} standup to 10am, finally.",
            ("Much more humane.", "Mornings just got easier."),
        ),
        (
            f"The {project} database migration script needs a second review from {q}.",
            (f"Want me to ping {q}?",),
        ),
        (
            f"Everyone on {project} is nervous about the deadline.",
            ("Anything I can help break down?",),
        ),
        (f"The {project} leads meeting got cancelled again.", ("More time for real work.",)),
        (
            f"{p} asked what I think about starting a running group at work.",
            ("Could be fun. Would you join?",),
        ),
        (
            "Walked past a new restaurant on our street, it looks promising.",
            ("Worth a try some evening.",),
        ),
        (
            f"We should plan a team dinner soon; {p} suggested a tapas place.",
            ("Want me to draft a poll for dates?",),
        ),
        ("Book club tonight and I haven't finished the book.", ("Skim the last chapters?",)),
        ("Called my sister for an hour, we talked about nothing in particular.", ("Nice.",)),
        (
            "Thinking of getting a new laptop; mine is five years old.",
            ("Want a shortlist of options?",),
        ),
        (
            f"The offsite feedback survey for {project} folks is still open.",
            ("I'll remind you to fill it in.",),
        ),
        (
            f"{q} keeps forgetting to update the {project} ticket board.",
            ("A gentle reminder in standup might help.",),
        ),
        (
            f"Tried to fix the chain on {PARTNER}'s bike myself and made it worse.",
            ("Maybe a bike shop this time.",),
        ),
        (
            f"{p} shared the {project} planning doc but nobody has commented yet.",
            ("Want me to nudge people?",),
        ),
        ("Who decided that 8am meetings are a good idea?", ("Not me!",)),
    )
    said, replies = rng.choice(pairs)
    return said, rng.choice(replies)


ACKS = (
    "Noted.",
    "Okay.",
    "Got it.",
    "Thanks for telling me.",
    "Understood.",
    "Good to know.",
    "I'll keep it in mind.",
    "Makes sense.",
    "Alright, noted.",
    "Thanks, saved.",
    "Okay, I've got that.",
    "Sure thing.",
)


def conversation(b: Builder) -> tuple[list[dict[str, object]], dict[str, str], set[str]]:
    """Lay out every session: its scheduled pairs among chatter pairs. Returns the memories,
    the key of each fact's turn and the keys of chatter turns."""
    rng = b.rng
    memories: list[dict[str, object]] = []
    keys: dict[str, str] = {}
    chatter_keys: set[str] = set()
    said_count: Counter[str] = Counter()
    for session in b.sessions:
        # Recent sessions are long and mostly chatter; the others get a realistic mix.
        recent = session.number > SESSIONS - 4
        pairs = len(session.facts)
        target = rng.randint(14, 17) if recent else rng.randint(10, 14)
        extra = max(target - pairs, 3)
        chat: list[tuple[Turn, Turn]] = []
        month = session.date.strftime("%B")
        while len(chat) < extra:
            said, reply = chatter(rng, month)
            if said_count[said] >= 2 or any(said == c[0].text for c in chat):
                continue  # the same words at most twice in the whole conversation
            said_count[said] += 1
            chat.append((Turn(USER, said, chatter=True), Turn(ASSISTANT, reply, chatter=True)))
        # Scheduled pairs keep their relative order (a recap's parts), chatter goes around.
        total = pairs + len(chat)
        slots = set(rng.sample(range(total), pairs))
        scheduled, chat_left = iter(session.facts), iter(chat)
        order = [next(scheduled) if i in slots else next(chat_left) for i in range(total)]
        date = natural(session.date)
        seen: set[str] = set()
        for pair in order:  # a reply said twice in one session is reworded
            reply = pair[1]
            while reply.text in seen:
                reply.text = rng.choice(ACKS)
            seen.update(t.text for t in pair)
        for n, turn in enumerate((t for pair in order for t in pair), start=1):
            key = f"s{session.number:02d}t{n:02d}"
            memories.append(
                {
                    "key": key,
                    "session": session.number,
                    "date": session.date.isoformat(),
                    "speaker": turn.speaker,
                    "content": f"[{date}] {turn.speaker}: {turn.text}",
                }
            )
            if turn.fact is not None:
                keys[turn.fact] = key
            if turn.chatter:
                chatter_keys.add(key)
    return memories, keys, chatter_keys


def finish(b: Builder, seed: int) -> dict[str, object]:
    memories, keys, chatter_keys = conversation(b)
    by_key = {m["key"]: m for m in memories}
    vocabulary = {w for m in memories for w in re.findall(r"[a-z0-9]+", str(m["content"]).lower())}
    contents = Counter(m["content"] for m in memories)
    assert max(contents.values()) == 1, contents.most_common(3)  # a store may skip duplicates
    questions = []
    seen: set[str] = set()
    problems: list[str] = []
    for n, q in enumerate(b.questions, start=1):
        assert q.text.lower() not in seen, q.text
        seen.add(q.text.lower())
        evidence = [keys[f] for f in q.evidence]
        assert len(set(evidence)) == len(evidence) and all(k in by_key for k in evidence)
        if q.check is not None:
            check_unique(q, evidence, memories, chatter_keys)
        problem = kind_problem(q, [str(by_key[k]["content"]) for k in evidence], vocabulary)
        if problem:
            problems.append(f"{q.text}: {problem}")
        if q.kind == "time_anchored" and q.evidence[0].split(":")[-1] in MONTHS:
            month = q.evidence[0].split(":")[-1]
            assert f" {month} 2026]" in str(by_key[evidence[0]]["content"]), q.text
        questions.append(
            {
                "id": f"q{n:03d}",
                "kind": q.kind,
                "question": q.text,
                "evidence": evidence,
                "answer": q.answer,
            }
        )
    assert not problems, "\n".join(problems)
    return {"version": 1, "seed": seed, "memories": memories, "questions": questions}


def kind_problem(q: Question, evidence: list[str], vocabulary: set[str]) -> str | None:
    """Why ``q`` is not of the kind it says, or None. A direct question uses the evidence's
    words (up to inflection), a paraphrase mostly other words, a misspelled one a word no
    memory has, a time-anchored one a month or date, a multi-hop one two evidence turns."""
    said = " ".join(e.split("] ", 1)[-1] for e in evidence)
    if q.kind == "direct":
        have = {crude_stem(w) for w in content_words(said)}
        missing = [w for w in content_words(q.text) if crude_stem(w) not in have]
        return f"direct but {missing} not in {said!r}" if missing else None
    if q.kind == "paraphrase":
        share = verbatim_share(q.text, said)
        return (
            f"paraphrase with {share:.0%} verbatim: {said!r}" if share > PARAPHRASE_SHARE else None
        )
    if q.kind == "misspelled":
        typed = re.findall(r"[a-z0-9]+", q.text.lower())
        return None if any(w not in vocabulary for w in typed) else "no misspelled word"
    if q.kind == "time_anchored":
        when = "|".join((*MONTHS, *LATER_MONTHS, "spring", "year"))
        return None if re.search(when, q.text) else "no month or date"
    return None if len(q.evidence) >= 2 else "multi-hop with one evidence turn"


def words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def check_unique(
    q: Question, evidence: list[str], memories: list[dict[str, object]], chatter_keys: set[str]
) -> None:
    """The answer stands next to its subject in the (last) evidence turn, and in no other
    turn but chatter (whose templates state no asked fact): the label is the only turn that
    says it. Labels are right by construction; this proves the construction."""
    subject, answer = (words(s) for s in q.check or ("", ""))
    holders = [
        str(m["key"])
        for m in memories
        if subject in words(str(m["content"])) and answer in words(str(m["content"]))
    ]
    facts = [k for k in holders if k not in chatter_keys]
    shown = [m["content"] for m in memories if m["key"] in facts]
    assert facts == [evidence[-1]], (q.text, shown, evidence)


def generate(seed: int = SEED) -> dict[str, object]:
    return build(seed)


def summary(data: dict[str, object]) -> dict[str, object]:
    memories, questions = data["memories"], data["questions"]
    assert isinstance(memories, list) and isinstance(questions, list)
    return {
        "memories": len(memories),
        "sessions": len({m["session"] for m in memories}),
        "questions": len(questions),
        "kinds": dict(sorted(Counter(q["kind"] for q in questions).items())),
        "first_date": memories[0]["date"],
        "last_date": memories[-1]["date"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--check", action="store_true", help="compare with the file, write nothing"
    )
    args = parser.parse_args()
    data = generate(args.seed)
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(json.dumps({"up_to_date": same, **summary(data)}, indent=2))
        sys.exit(0 if same else 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(json.dumps({"written": str(args.out), "bytes": len(text.encode()), **summary(data)}))


if __name__ == "__main__":
    main()
