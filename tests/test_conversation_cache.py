"""The worker's conversation cache: deltas on hits, the workflow's query on misses, never a
wrong conversation."""

from __future__ import annotations

import pytest

from orga.contracts.conversation import Message, chain_digest
from orga.contracts.errors import ConversationUnavailable
from orga.contracts.inference import ConversationSlice
from orga.worker.conversation_cache import ConversationCache
from orga.workflows.reasoning.durable_conversation import Conversation


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


def answer(text: str) -> Message:
    return Message(role="assistant", content=text)


async def after_one_call(
    kept: str, expected: str, recorded: str, fetched: list[int]
) -> tuple[Conversation, ConversationCache]:
    """A loop whose first model call's worker kept the answer ``kept``, while the loop received
    ``expected`` and recorded ``recorded`` and a tool's result after it; the cache reads the
    conversation back into ``fetched``."""

    async def fetch(workflow_id: str, length: int) -> list[Message]:
        fetched.append(length)
        return conversation.messages[:length]

    conversation = Conversation()
    conversation.append(msgs("a"))
    cache = ConversationCache(fetch)
    first = conversation.unsent("w")
    conversation.mark_sent()
    await cache.resolve(first)
    cache.expect(first, answer(kept))
    conversation.expect(answer(expected))
    conversation.append([answer(recorded), *msgs("result")])
    return conversation, cache


async def test_the_models_answer_is_kept_and_not_carried_back() -> None:
    """The worker that made a call keeps the answer as the loop records it; the loop's next
    call then carries only what follows it (``Conversation``), and the cache checks it."""
    fetched: list[int] = []
    conversation, cache = await after_one_call("thinking", "thinking", "thinking", fetched)
    second = conversation.unsent("w")
    assert second.start == 2 and second.messages == msgs("result")  # the answer is not carried
    assert await cache.resolve(second) == conversation.messages
    assert (cache.hits, fetched) == (2, [])


async def test_an_answer_the_loop_changed_is_carried_and_replaces_the_kept_one() -> None:
    fetched: list[int] = []
    said, shown = "as the model said", "as the loop shows it"  # modified arguments, say
    conversation, cache = await after_one_call(said, said, shown, fetched)
    second = conversation.unsent("w")
    assert second.start == 1 and second.messages[0] == answer(shown)
    assert await cache.resolve(second) == conversation.messages and fetched == []


async def test_an_answer_kept_from_another_attempt_is_never_used() -> None:
    """An attempt whose answer the loop did not record (it timed out, another worker's was):
    the kept turn is wrong, the digest says so, and the conversation is read back."""
    fetched: list[int] = []
    recorded = "the recorded attempt's"
    conversation, cache = await after_one_call("the first attempt's", recorded, recorded, fetched)
    second = conversation.unsent("w")
    assert second.start == 2  # the loop expected its own record to be kept
    assert await cache.resolve(second) == conversation.messages and fetched == [3]


def test_only_the_answer_right_after_what_was_sent_counts_as_sent() -> None:
    conversation = Conversation()
    conversation.append(msgs("a"))
    conversation.mark_sent()
    conversation.expect(answer("x"))
    conversation.append(msgs("a person spoke first"))
    conversation.append([answer("x")])
    assert conversation.sent == 1  # the expectation was for the message after what was sent
    conversation.expect(answer("y"))
    conversation.append([])
    conversation.append([answer("y")])
    assert conversation.sent == 1  # an expectation lasts until the next append
