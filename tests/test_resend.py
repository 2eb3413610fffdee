"""A message whose answer is lost on the way is taken once (every instant of a ``say``): the
client sends it again with the same update id, which Temporal answers with how it was taken;
a sender's own resend with the same ``message_id`` after the thread continued as new is
answered by the loop, not taken twice; a caller's cancel is never resent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

import orga
from orga.contracts.config import LoopConfig
from orga.contracts.journal import Journal, MessageReceived
from orga.contracts.threads import ThreadConfig
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import eventually


def _received(journal: Journal, text: str) -> int:
    return sum(1 for e in journal.entries if isinstance(e, MessageReceived) and e.text == text)


async def _answered_hello(harness: Harness, *answers: str) -> orga.ThreadHandle:
    """A thread that answered "hello" and waits, its model scripted to say ``answers`` next."""
    model = harness.new_model([Turn(text=text) for text in ("hi", *answers)])
    config = LoopConfig(model=model, thread=ThreadConfig())
    chat = await orga.start_thread(harness.client, config, "hello", task_queue=harness.task_queue)
    harness.handles.append(chat.handle)
    await chat.turn(1)
    return chat


def _answers_lost(client: Client, lost: int, *, hang: bool = False) -> list[str]:
    """``client``'s ``UpdateWorkflowExecution`` calls reach the server, but the answers of the
    first ``lost`` are lost on the way back (UNAVAILABLE, as a dropped connection says) — or,
    with ``hang``, the first never answers. The update id of each call, in order."""
    service = client.workflow_service
    real = service.update_workflow_execution
    ids: list[str] = []

    async def call(request: Any, **options: Any) -> Any:
        ids.append(request.request.meta.update_id)
        if hang and len(ids) == 1:
            await asyncio.Event().wait()
        answer = await real(request, **options)
        if len(ids) <= lost:
            raise RPCError("the connection dropped on the way back", RPCStatusCode.UNAVAILABLE, b"")
        return answer

    service.update_workflow_execution = call  # pyright: ignore[reportAttributeAccessIssue]
    return ids


async def test_a_message_whose_answer_is_lost_is_sent_again_with_its_id_and_taken_once(
    harness: Harness,
) -> None:
    """The loop took the message but its answer never reached the client, twice: ``say``
    sends it again with the same update id and returns how it was taken — one message in
    the journal, not three."""
    async with harness.worker():
        chat = await _answered_hello(harness, "noted")
        other = await harness.another_process()
        ids = _answers_lost(other.client, lost=2)
        accepted = await orga.loop(other.client, chat.id).say("only once")
        answer = await chat.turn(accepted.turn or 0, message=accepted.seq)
        journal = await chat.journal()
        await chat.close()
    assert len(ids) == 3 and len(set(ids)) == 1, ids
    assert _received(journal, "only once") == 1
    assert answer.output == "noted"


async def test_a_cancelled_say_is_not_sent_again(harness: Harness) -> None:
    """A caller that stops waiting (``asyncio.wait_for``, the desk's ``wait``) stops the
    ``say``: the send it cancelled is not repeated behind its back."""
    async with harness.worker():
        chat = await _answered_hello(harness)
        other = await harness.another_process()
        ids = _answers_lost(other.client, lost=10, hang=True)
        loop = orga.loop(other.client, chat.id)
        sending = asyncio.ensure_future(loop.say("never mind"))
        await eventually(lambda: bool(ids), "the say reached the (hanging) service")
        sending.cancel()
        with pytest.raises(WorkflowUpdateRPCTimeoutOrCancelledError):
            await sending
        journal = await chat.journal()
        await chat.close()
    assert ids[1:] == [], ids
    assert _received(journal, "never mind") == 0


async def test_a_message_sent_again_after_the_thread_continued_as_new_is_not_taken_twice(
    harness: Harness,
) -> None:
    """A sender that lost the answer resends the message with its ``message_id`` once the
    thread has continued as new (Temporal knows update ids only within a run): the new run
    answers with how the first run took it, and the model read it once."""
    model = harness.new_model([])
    harness.model.script(model, [Turn(text=f"answer {n}") for n in range(60)])
    config = LoopConfig(model=model, thread=ThreadConfig(), max_history_events=200)
    async with harness.worker():
        chat = await orga.start_thread(
            harness.client, config, "hello", task_queue=harness.task_queue
        )
        harness.handles.append(chat.handle)
        first_run = (await chat.handle.describe()).run_id
        first = await chat.say("remember me", message_id="a-uuid-of-the-sender")
        again = await chat.say("remember me", message_id="a-uuid-of-the-sender")
        assert again == first  # within the run: Temporal's own answer
        n = 0
        while (await chat.handle.describe()).run_id == first_run:
            n += 1
            await chat.send(f"filler {n}")
        assert n < 30  # fewer than the ids a loop keeps
        later = await chat.say("remember me", message_id="a-uuid-of-the-sender")
        fresh = await chat.say("remember me", message_id="another-uuid")
        await chat.turn(fresh.turn or 0, message=fresh.seq)
        journal = await chat.journal()
        await chat.close()
    assert later == first
    assert fresh.seq > first.seq
    assert _received(journal, "remember me") == 2  # the first, and the one with another id
