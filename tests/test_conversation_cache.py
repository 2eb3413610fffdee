"""The worker's conversation cache: deltas on hits, the workflow's query on misses, never a
wrong conversation."""

from __future__ import annotations

import pytest

from orga.contracts.conversation import Message, chain_digest
from orga.contracts.errors import ConversationUnavailable
from orga.contracts.inference import ConversationSlice
from orga.worker.conversation_cache import ConversationCache


def msgs(*texts: str) -> list[Message]:
    return [Message(role="user", content=t) for t in texts]


def window(full: list[Message], start: int, workflow_id: str = "w") -> ConversationSlice:
    return ConversationSlice(
        workflow_id=workflow_id,
        start=start,
        length=len(full),
        digest=chain_digest("", full),
        messages=full[start:],
    )


async def test_hits_extend_and_misses_fetch() -> None:
    full = msgs("a", "b", "c", "d")
    fetched: list[tuple[str, int]] = []

    async def fetch(workflow_id: str, length: int) -> list[Message]:
        fetched.append((workflow_id, length))
        return full[:length]

    cache = ConversationCache(fetch)
    assert await cache.resolve(window(full[:2], 0)) == full[:2]
    assert await cache.resolve(window(full, 2)) == full
    assert fetched == [] and cache.hits == 2
    # Retrying the same call is a hit too.
    assert await cache.resolve(window(full, 2)) == full
    # A delta this worker has not seen the start of: fetched from the workflow.
    other = ConversationCache(fetch)
    assert await other.resolve(window(full, 3)) == full
    assert fetched == [("w", 4)] and other.misses == 1


async def test_a_wrong_conversation_is_never_used() -> None:
    async def fetch(workflow_id: str, length: int) -> list[Message]:
        return msgs("x", "y", "z", "w")[:length]

    cache = ConversationCache(fetch)
    with pytest.raises(ConversationUnavailable, match="does not match"):
        await cache.resolve(window(msgs("a", "b"), 1))


async def test_eviction() -> None:
    async def fetch(workflow_id: str, length: int) -> list[Message]:
        return msgs("a")[:length]

    cache = ConversationCache(fetch, max_entries=2)
    for workflow_id in ("w1", "w2", "w3"):
        await cache.resolve(window(msgs("a"), 0, workflow_id))
    await cache.resolve(window(msgs("a"), 1, "w1"))  # w1 was evicted: refetched
    assert cache.misses == 1


async def test_eviction_by_bytes_keeps_the_count_honest() -> None:
    big = "x" * 10_000

    async def fetch(workflow_id: str, length: int) -> list[Message]:
        return msgs(big, big)[:length]

    cache = ConversationCache(fetch, max_bytes=25_000)  # two conversations of one message fit
    for workflow_id in ("w1", "w2"):
        await cache.resolve(window(msgs(big), 0, workflow_id))
    assert 20_000 < cache.bytes <= 25_000
    await cache.resolve(window(msgs(big, big), 1, "w2"))  # w2 grows: w1 goes
    assert cache.misses == 0 and 20_000 < cache.bytes <= 25_000
    await cache.resolve(window(msgs(big), 1, "w1"))  # w1 was evicted: refetched
    assert cache.misses == 1
    # One conversation larger than the whole budget is still kept while it is in use.
    huge = ConversationCache(fetch, max_bytes=5_000)
    await huge.resolve(window(msgs(big), 0, "w"))
    assert await huge.resolve(window(msgs(big, big), 1, "w")) == msgs(big, big)
    assert huge.misses == 0


def test_the_digest_does_not_change_when_a_defaulted_field_is_added() -> None:
    class Extended(Message):
        added_later: str | None = None

    plain = [Message(role="user", content="hi")]
    extended = [Extended(role="user", content="hi")]
    assert chain_digest("", plain) == chain_digest("", extended)
    assert chain_digest("", plain) != chain_digest(
        "", [Extended(role="user", content="hi", added_later="x")]
    )
