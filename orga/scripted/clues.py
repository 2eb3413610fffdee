"""What a task's text offers the offline scripted model as argument values, in order.

URLs and file paths as pre-hydration finds them (``orga.core.prehydration.extract``), email
addresses, directories, times (``HH:MM``), dates, identifiers (``CH-12ab``), numbers (not those
inside the other kinds: ``docs/v2.md`` offers no 2) and IANA time zones — written as such
(``Europe/Paris``, ``UTC``) or by a city, country or common name (``Tokyo`` → ``Asia/Tokyo``,
``New York``, ``PST``), recognised from ``zoneinfo.available_timezones()`` and a small alias
table. And what a task asks to remember, as a fact (``fact_to_remember``: "Remember that ann
prefers tea" → ``ann`` / ``prefers`` / ``tea``). Pure: no I/O beyond reading the system's
time zone names once.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import zoneinfo
from dataclasses import dataclass, field
from typing import Final

from orga.contracts.prehydration import PreHydrationConfig, compile_pattern
from orga.core.prehydration import extract

__all__ = ["Clues", "fact_to_remember", "time_zones"]

_EMAIL: Final = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_DIRECTORY: Final = re.compile(r"(?<![\w/.:@-])(?:[\w.-]+/)+[\w.-]*[\w-](?![\w/])")
_TIME: Final = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_DATE: Final = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")
_IDENTIFIER: Final = re.compile(r"(?<![\w@/.-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]*\w")
NUMBER: Final = re.compile(r"(?<![A-Za-z_.\d])-?\d+(?:\.\d+)?(?![A-Za-z_\d])")
"""A number standing on its own (``2+3`` holds two; ``v2`` and ``gpt4`` hold none)."""
_REMEMBER: Final = re.compile(
    r"^\s*+(?:please\s+)?(?:remember|memori[sz]e|keep\s+in\s+mind|don'?t\s+forget|"
    r"do\s+not\s+forget|(?:note|store|save|record)(?=\s*:|\s+(?:down|that|the\s+fact)\b))"
    r"(?:\s+down)?(?:\s+the\s+fact)?(?:\s+that)?\s*+[:,-]?\s*+(?P<fact>\S.*)",
    re.IGNORECASE | re.DOTALL,
)
"""Linear in the task: the spaces are taken possessively (``\\s*+``) and the fact's trailing
spaces and stops are cut in code (``_trimmed``); a lazy ``(.*?)[\\s.!]*$`` took quadratic time
on a task ending in a long run of them."""
_NOT_A_FACT: Final = frozenset(
    ["to", "what", "who", "whom", "whether", "if", "when", "where", "how", "which", "why"]
)
_VERBS: Final = frozenset(
    """is are was were am has have had prefers prefer likes like loves love hates hate uses use
    runs run lives live works work owns own needs need wants want drinks drink eats eat speaks
    speak belongs belong depends depend contains contain means mean costs cost equals equal
    knows know becomes become became can cannot will should must does did wears wear plays
    play reads read writes write drives drive""".split()  # noqa: SIM905 (a list would take a screen)
)
_AUXILIARIES: Final = frozenset(
    ["am", "are", "can", "cannot", "had", "must", "should", "were", "will"]
)
_PRONOUNS: Final = frozenset(["i", "you", "we", "they"])
_PARTICLES: Final = frozenset(
    """on in at by to of for with from not as into owned called named located
    based been""".split()  # noqa: SIM905 (as the others)
)
_SLASHED: Final = compile_pattern(
    r"(?:^|[^\p{L}\p{N}_/])([A-Za-z][\p{L}\p{N}_+-]*(?:/[\p{L}\p{N}_+-]+)+)"
)
"""Words joined by slashes (``Europe/Berlin``), group 1, not inside a longer word or path. In
RE2, matching the character before instead of looking behind (Python's ``re`` took quadratic
time on a long ``a-a-a-…``, a start after each ``-``); ``[\\p{L}\\p{N}_]`` is Python's ``\\w``."""
_WORD: Final = re.compile(r"[^\W\d_][^\W\d_'-]*(?:['-][^\W\d_]+)*")
_AREAS: Final = frozenset(
    """Africa America Antarctica Asia Atlantic Australia Europe Indian
    Pacific""".split()  # noqa: SIM905 (as the others)
)
_NOT_PLACES: Final = frozenset(
    """center christmas easter north south west wake virgin oral resolute troll reunion midway
    victoria regina casey davis dawson knox stanley palmer currie johnston act nsw lhi chatham
    creston marengo norfolk jersey canary cocos vostok mahe comoro thule yap wallis petersburg
    chagos macquarie rothera syowa""".split()  # noqa: SIM905 (a list would take a screen)
)
"""Zone city names that are more often an English word or a person's name than a place."""
_ALIASES: Final = {
    "utc": "UTC",
    "gmt": "GMT",
    "zulu": "UTC",
    "new york": "America/New_York",
    "nyc": "America/New_York",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "miami": "America/New_York",
    "est": "America/New_York",
    "edt": "America/New_York",
    "eastern time": "America/New_York",
    "chicago": "America/Chicago",
    "dallas": "America/Chicago",
    "houston": "America/Chicago",
    "cst": "America/Chicago",
    "cdt": "America/Chicago",
    "central time": "America/Chicago",
    "mst": "America/Denver",
    "mountain time": "America/Denver",
    "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "california": "America/Los_Angeles",
    "pst": "America/Los_Angeles",
    "pdt": "America/Los_Angeles",
    "pacific time": "America/Los_Angeles",
    "beijing": "Asia/Shanghai",
    "china": "Asia/Shanghai",
    "india": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "bangalore": "Asia/Kolkata",
    "ist": "Asia/Kolkata",
    "japan": "Asia/Tokyo",
    "jst": "Asia/Tokyo",
    "uk": "Europe/London",
    "england": "Europe/London",
    "britain": "Europe/London",
    "bst": "Europe/London",
    "france": "Europe/Paris",
    "germany": "Europe/Berlin",
    "munich": "Europe/Berlin",
    "frankfurt": "Europe/Berlin",
    "hamburg": "Europe/Berlin",
    "cet": "Europe/Berlin",
    "cest": "Europe/Berlin",
    "spain": "Europe/Madrid",
    "barcelona": "Europe/Madrid",
    "italy": "Europe/Rome",
    "milan": "Europe/Rome",
    "geneva": "Europe/Zurich",
    "switzerland": "Europe/Zurich",
    "australia": "Australia/Sydney",
}
"""Common names of zones that are not a zone's own city (or would be ambiguous)."""


def _plain(text: str) -> str:
    """``text`` without accents: São Paulo is Sao_Paulo."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@functools.cache
def _zones() -> tuple[dict[str, str], dict[str, str]]:
    """IANA names by their lower-case spelling, and zones by their city (``new york``)."""
    names = zoneinfo.available_timezones() - {"Factory", "localtime", "posixrules"}
    by_name = {name.lower(): name for name in names}
    by_city: dict[str, str] = {}
    for name in sorted(names, key=lambda n: (len(n), n)):  # the shorter spelling wins a tie
        area, _, city = name.rpartition("/")
        key = city.replace("_", " ").lower()
        if area.split("/")[0] in _AREAS and key not in _NOT_PLACES:
            by_city.setdefault(key, name)
    return by_name, by_city


def time_zones(text: str) -> list[str]:
    """The IANA time zones ``text`` names, in order of appearance (each place once)."""
    by_name, by_city = _zones()
    found: list[tuple[int, str]] = []
    spans: list[tuple[int, int]] = []
    for match in _SLASHED.finditer(text):
        if (name := by_name.get((match.group(1) or "").lower())) is not None:  # group 1 always
            found.append((match.start(1), name))
        spans.append(match.span(1))  # Europe/Berlin is one zone; a/b/c holds no city
    words = [
        (m.start(), m.group(0).removesuffix("'s"))
        for m in _WORD.finditer(text)
        if not any(start <= m.start() < end for start, end in spans)
    ]
    i = 0
    while i < len(words):
        for n in (3, 2, 1):
            phrase = " ".join(w for _, w in words[i : i + n])
            key = _plain(phrase.lower())
            zone = _ALIASES.get(key)
            if zone is None and phrase[:1].isupper():  # a city is a proper noun
                zone = by_city.get(key)
            if zone is None and phrase.isupper() and len(phrase) >= 3:
                zone = by_name.get(key)  # UTC, CET, EST as written
            if zone is not None and len(words[i : i + n]) == n:
                found.append((words[i][0], zone))
                i += n - 1
                break
        i += 1
    return [zone for _, zone in sorted(found)]


def _trimmed(fact: str) -> str:
    """``fact`` without its trailing spaces, full stops and exclamation marks (its first
    character stays)."""
    end = len(fact)
    while end > 1 and (fact[end - 1].isspace() or fact[end - 1] in ".!"):
        end -= 1
    return fact[:end]


def fact_to_remember(task: str) -> tuple[str, str, str] | str | None:
    """What ``task`` asks to remember: a ``(subject, predicate, object)`` triple, the
    statement itself when it cannot be split into one, or ``None`` when it asks nothing of
    the kind (a question never does: "Do you remember …?")."""
    asked = _REMEMBER.match(task)
    if asked is None or task.rstrip().endswith("?"):
        return None
    statement = _trimmed(asked.group("fact")).strip()
    words = statement.split()
    if not words or words[0].lower() in _NOT_A_FACT:
        return None
    lowered = [w.lower().strip(",;:") for w in words]
    verb = next((i for i in range(1, len(words) - 1) if _is_verb(lowered, i)), None)
    if verb is None:  # a third-person verb not in the list: "ann collects stamps"
        verb = next(
            (
                i
                for i in range(1, len(words) - 1)
                if lowered[i].isalpha()
                and lowered[i].endswith("s")
                and not lowered[i].endswith(("ss", "us", "is"))
            ),
            None,
        )
    if verb is None:
        return statement
    end = verb + 1
    while end < len(words) - 1 and lowered[end] in _PARTICLES:
        end += 1
    subject = " ".join(words[:verb]).strip(" ,;:")
    if subject.lower().startswith("that "):
        subject = subject[5:]
    return subject, " ".join(words[verb:end]), " ".join(words[end:]).strip(" ,;:.!")


def _is_verb(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` is the statement's verb: a listed one, in its base form only after
    a plural or a pronoun ("the tests use", "I prefer"; not "ann's favourite drink is")."""
    word, before = words[i], words[i - 1]
    if word not in _VERBS:
        return False
    if word.endswith("s") or word in _AUXILIARIES:
        return True
    return before in _PRONOUNS or (before.endswith("s") and not before.endswith("'s"))


@dataclass
class Clues:
    """The values ``task`` offers, by kind and in order; each is used at most once."""

    task: str
    urls: list[str] = field(default_factory=list[str])
    paths: list[str] = field(default_factory=list[str])
    emails: list[str] = field(default_factory=list[str])
    directories: list[str] = field(default_factory=list[str])
    zones: list[str] = field(default_factory=list[str])
    times: list[str] = field(default_factory=list[str])
    dates: list[str] = field(default_factory=list[str])
    identifiers: list[str] = field(default_factory=list[str])
    numbers: list[tuple[int, str]] = field(default_factory=list[tuple[int, str]])
    """``(position in rest, text)`` of each number."""
    rest: str = ""
    """The task with the URLs, paths, addresses, times and dates blanked out."""
    used: set[tuple[str, str | int]] = field(default_factory=set[tuple[str, str | int]])

    @classmethod
    def of(cls, task: str) -> Clues:
        references = extract(task, PreHydrationConfig(max_references=100))
        clues = cls(task=task)
        clues.urls = [r.value for r in references if r.ref_type == "url"]
        clues.paths = [r.value for r in references if r.ref_type == "file"]
        rest = task
        for value in [*clues.urls, *clues.paths]:
            rest = rest.replace(value, " " * len(value))
        clues.emails = _EMAIL.findall(rest)
        rest = _EMAIL.sub(lambda m: " " * len(m.group(0)), rest)
        clues.zones = time_zones(rest)
        zone_names = _zones()[0]  # Europe/Paris is no directory
        clues.directories = [d for d in _DIRECTORY.findall(rest) if d.lower() not in zone_names]
        clues.times = [f"{int(h):02d}:{m}" for h, m in _TIME.findall(rest)]
        clues.dates = _DATE.findall(rest)
        for pattern in (_TIME, _DATE, _DIRECTORY):
            rest = pattern.sub(lambda m: " " * len(m.group(0)), rest)
        clues.identifiers = _IDENTIFIER.findall(rest)
        clues.numbers = [(m.start(), m.group(0)) for m in NUMBER.finditer(rest)]
        clues.rest = rest
        return clues

    def take(self, kind: str, values: list[str]) -> str | None:
        """The first value of ``kind`` not used yet (then marked used)."""
        for value in values:
            if (kind, value) not in self.used:
                self.used.add((kind, value))
                return value
        return None
