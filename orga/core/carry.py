"""What a loop may carry into its next run: bounded by count and by bytes (pure).

Continue-as-new carries the loop's state; the conversation is the loop's (and the store keeps it
out of history), but the rest must not grow without end over days: the journal keeps its newest
entries within ``JOURNAL_BYTES``, the cache of results for ``CachedResult`` its newest within
``CACHE_BYTES`` and ``CACHE_ENTRIES``, the dead letters their newest ``DEAD_LETTERS`` (each
capped), and the decided approval ids their newest ``DECIDED_IDS`` (a loop's call ids are unique
per iteration, so an old one cannot come back). Whatever is dropped is counted or logged, never
silently changed. (``config.max_state_bytes`` bounds the whole next-run input.)
"""

from __future__ import annotations

from typing import Final

from orga.contracts.carry import CachedEntry, LoopCarry
from orga.contracts.journal import Journal

__all__ = [
    "CACHE_BYTES",
    "CACHE_ENTRIES",
    "DEAD_LETTERS",
    "DECIDED_IDS",
    "JOURNAL_BYTES",
    "bounded",
]

JOURNAL_BYTES: Final = 512 * 1024
CACHE_BYTES: Final = 1024 * 1024
CACHE_ENTRIES: Final = 200
DEAD_LETTERS: Final = 100
DECIDED_IDS: Final = 1_000

_DEAD_LETTER_TEXT = 2_000


def _journal(journal: Journal) -> Journal:
    sizes = [len(entry.model_dump_json()) + 1 for entry in journal.entries]  # with its comma
    kept, total = len(sizes), 0
    for index in range(len(sizes) - 1, -1, -1):
        total += sizes[index]
        if total > JOURNAL_BYTES:
            kept = len(sizes) - index - 1
            break
    dropped = len(sizes) - kept
    if not dropped:
        return journal
    return journal.model_copy(
        update={"entries": journal.entries[dropped:], "dropped": journal.dropped + dropped}
    )


def _cache(cache: dict[str, CachedEntry]) -> dict[str, CachedEntry]:
    kept: dict[str, CachedEntry] = {}
    total = 0
    for key in reversed(list(cache)):  # newest last in the dict: keep the newest
        size = len(key) + len(cache[key].content)
        if len(kept) >= CACHE_ENTRIES or total + size > CACHE_BYTES:
            break
        kept[key] = cache[key]
        total += size
    return dict(reversed(list(kept.items())))


def bounded(carry: LoopCarry) -> LoopCarry:
    """``carry`` within the bounds of the module docstring."""
    tools = carry.tools
    letters = [
        letter.model_copy(
            update={
                "arguments": letter.arguments[:_DEAD_LETTER_TEXT],
                "error": letter.error[:_DEAD_LETTER_TEXT],
            }
        )
        for letter in tools.dead_letters[-DEAD_LETTERS:]
    ]
    trimmed = tools.model_copy(
        update={
            "cache": _cache(tools.cache),
            "dead_letters": letters,
            "decided_ids": tools.decided_ids[-DECIDED_IDS:],
        }
    )
    return carry.model_copy(update={"journal": _journal(carry.journal), "tools": trimmed})
