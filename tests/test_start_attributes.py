"""Loops started through orga's clients carry their search attributes from the start.

Set at start, they save each loop the upsert of its first workflow task (an event and a
visibility write); the loop still compares them with its own and upserts what differs. On a
namespace without orga's attributes the start fails at once, naming the commands that register
them.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment

from orga.client import start_loop, start_thread
from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.errors import InvalidConfig
from orga.contracts.state import LoopResult
from orga.contracts.threads import ThreadConfig
from orga.runtime.connect import connect
from orga.runtime.settings import Settings
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import eventually


async def orga_client(env: WorkflowEnvironment) -> Client:
    address = env.client.service_client.config.target_host
    return await connect(Settings(temporal_address=address), store=TEST_STORE)


async def upserts(handle: WorkflowHandle[Any, Any]) -> list[set[str]]:
    """The names each search-attribute upsert of the loop's history set."""
    found: list[set[str]] = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            attributes = event.upsert_workflow_search_attributes_event_attributes
            found.append(set(attributes.search_attributes.indexed_fields))
    return found


async def test_a_loop_started_through_orga_upserts_nothing_at_start(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    client = await orga_client(env)
    model = harness.new_model([Turn(text="hello"), Turn(text="hello")])  # one for each loop
    async with harness.worker():
        started = await start_loop(
            client, "hi", LoopConfig(model=model, agent_id="greeter"), task_queue=harness.task_queue
        )
        plain = await harness.start("hi", model=model, agent_id="greeter")
        harness.handles.append(started.handle)
        assert (await started.result()).output == "hello"
        assert (await plain.result()).output == "hello"
    first = await anext(started.handle.fetch_history_events())
    given = first.workflow_execution_started_event_attributes.search_attributes.indexed_fields
    assert set(given) == {"OrgaAgentId", "OrgaStatus", "OrgaIteration", "OrgaTotalTokens"}
    # Its only upsert is at the end; the loop a plain client started also upserts at start.
    assert await upserts(started.handle) == [{"OrgaStatus", "OrgaIteration", "OrgaTotalTokens"}]
    assert len(await upserts(plain)) == 2
    described = await started.handle.describe()
    attributes = described.typed_search_attributes
    assert (attributes.get(sa.AGENT_ID), attributes.get(sa.STATUS)) == ("greeter", "completed")
    assert attributes.get(sa.TOTAL_TOKENS) == (await plain.describe()).typed_search_attributes.get(
        sa.TOTAL_TOKENS
    )


async def test_the_loop_corrects_a_status_set_at_start_and_keeps_given_keys(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """A thread started with no message waits for one: it upserts ``awaiting_message`` over
    the ``running`` its client set. A key the caller set is not overwritten."""
    client = await orga_client(env)
    model = harness.new_model([Turn(text="hello")])
    async with harness.worker():
        chat = await start_thread(
            client, LoopConfig(model=model, thread=ThreadConfig()), task_queue=harness.task_queue
        )
        harness.handles.append(chat.handle)

        async def waits_for_a_message() -> bool:
            described = await chat.handle.describe()
            return described.typed_search_attributes.get(sa.STATUS) == "awaiting_message"

        await eventually(waits_for_a_message, "the thread's status is awaiting_message")
        assert await upserts(chat.handle) == [{"OrgaStatus"}]
        await chat.handle.terminate("test over")
        given = await client.start_workflow(
            "ReasoningLoop",
            LoopInput(messages=[], config=LoopConfig(model=model, thread=ThreadConfig())),
            id=f"{chat.handle.id}-given",
            task_queue=harness.task_queue,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(sa.FORKED_FROM, "loop-a"),
                    SearchAttributePair(sa.ITERATION, 7),
                ]
            ),
        )
        described = await given.describe()
        await given.terminate("test over")
    attributes = described.typed_search_attributes
    assert (attributes.get(sa.FORKED_FROM), attributes.get(sa.ITERATION)) == ("loop-a", 7)
    assert attributes.get(sa.AGENT_ID) == LoopConfig().agent_id


async def test_a_namespace_without_the_attributes_refuses_the_start_saying_how_to_register(
    skipping_env: WorkflowEnvironment,
) -> None:
    address = skipping_env.client.service_client.config.target_host
    client = await connect(Settings(temporal_address=address), store=TEST_STORE)
    with pytest.raises(InvalidConfig, match=r"temporal operator search-attribute create"):
        await start_loop(client, "hi", LoopConfig(model="any"), task_queue="nobody-polls")


async def test_values_a_client_forged_at_start_are_corrected_in_the_first_task(
    harness: Harness,
) -> None:
    """A client may start a loop with any attributes: only the values the loop itself would
    set count as its first upsert; others are overwritten at once, not a minute later."""
    model = harness.new_model([Turn(text="hello")])
    forged = TypedSearchAttributes(
        [
            SearchAttributePair(sa.AGENT_ID, LoopConfig().agent_id),
            SearchAttributePair(sa.STATUS, "running"),
            SearchAttributePair(sa.ITERATION, 999),
            SearchAttributePair(sa.TOTAL_TOKENS, 0),
        ]
    )
    async with harness.worker():
        handle = await harness.client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content="hi")], config=LoopConfig(model=model)
            ),
            id=f"forged-{harness.task_queue}",
            task_queue=harness.task_queue,
            search_attributes=forged,
            result_type=LoopResult,
        )
        harness.handles.append(handle)
        assert (await handle.result()).output == "hello"
    first, last = await upserts(handle)
    assert first == {"OrgaIteration"}  # in the first workflow task, before the model call
    assert "OrgaStatus" in last
