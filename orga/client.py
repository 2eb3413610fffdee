"""Starting loops and answering them from Python, with types: the client side of orga.

    import orga

    client = await orga.connect()  # TEMPORAL_ADDRESS …, orga's data converter
    loop = await orga.start_loop(client, "What is 2+3?", orga.LoopConfig(tools=["add"]))
    state = await loop.state()  # what it waits for, its budgets …
    for waiting in state.pending_approvals:  # signed with ORGA_APPROVER_KEY's key, if set
        await loop.approve(waiting.call_id, approver="alice", reason="looks right")
    result = await loop.result()

A ``LoopHandle`` wraps Temporal's workflow handle (``.handle``) with its queries and updates;
every decision names who made it. A thread waits for a message after each answer:

    chat = await orga.start_thread(client, orga.LoopConfig(tools=["add"]))
    turn = await chat.send("What is 2+3?")  # the turn's TurnResult, once answered
    turn = await chat.send("And times 4?")  # with everything before it
    await chat.close()

Over 400 lines: the handles users hold are one public surface, read in one place; what they
send goes through ``orga.desk.sender``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle

from orga.contracts.approvals import ApprovalRecord, EscalationAction, EscalationRecord
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message, MessageAccepted
from orga.contracts.critic import Review, Verdict
from orga.contracts.forks import ForkRequest
from orga.contracts.journal import Journal
from orga.contracts.messages import JOURNAL_QUERY, LOOP_WORKFLOW, STATE_QUERY
from orga.contracts.principals import PrincipalClaim
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.threads import ThreadClosed, ThreadConfig, TurnResult
from orga.desk.approvals import approval_decision
from orga.desk.sender import (
    await_turn,
    send_close,
    send_decision,
    send_resolution,
    send_review,
    send_user_message,
)
from orga.runtime.approver_keys import load_key as load_approver_key
from orga.runtime.binding import Issuer, bind
from orga.runtime.connect import connect as _connect
from orga.runtime.forks import start_fork_run
from orga.runtime.settings import Settings

__all__ = [
    "LOOP_WORKFLOW",
    "LoopHandle",
    "ThreadHandle",
    "connect",
    "load_approver_key",
    "loop",
    "start_fork",
    "start_loop",
    "start_thread",
    "thread",
]


async def connect(settings: Settings | None = None) -> Client:
    """A Temporal client with orga's data converter, from the settings (default: the
    environment's ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, …; large payloads in the
    store ``ORGA_STORE_URL`` names, as the workers keep them)."""
    return await _connect(settings or Settings.from_env())


async def start_loop(
    client: Client,
    task: str | Sequence[Message] | LoopInput,
    config: LoopConfig | None = None,
    *,
    workflow_id: str | None = None,
    task_queue: str | None = None,
    output_type: type[BaseModel] | None = None,
    principal: PrincipalClaim | str | None = None,
    issuer: Issuer | None = None,
) -> LoopHandle:
    """Start a reasoning loop and return its handle (it runs on a worker; this returns at once).

    Args:
        client: a client with orga's data converter (``orga.connect()``, or one connected with
            ``OrgaPlugin``).
        task: the user's task (a string), the conversation so far, or a whole ``LoopInput``.
        config: the loop's config (ignored when ``task`` is a ``LoopInput``).
        workflow_id: default: ``loop-<12 hex digits>``.
        task_queue: default: ``ORGA_TASK_QUEUE`` (``orga``).
        output_type: a pydantic model the answer must match: its JSON Schema becomes the
            config's ``output_schema``, and ``result().value`` is an instance of it.
        principal: whom it runs for (``PrincipalClaim``, or a user's name), charged to their
            spend ledger: verified when ``issuer`` signs it (``orga.runtime.binding``).
    """
    if isinstance(task, LoopInput):
        given = task
    else:
        messages = [Message(role="user", content=task)] if isinstance(task, str) else list(task)
        given = LoopInput(messages=messages, config=config or LoopConfig())
    workflow_id = workflow_id or f"loop-{uuid.uuid4().hex[:12]}"
    if output_type is not None:
        schema = output_type.model_json_schema()
        given = given.model_copy(
            update={"config": given.config.model_copy(update={"output_schema": schema})}
        )
    if principal is not None:
        given = given.model_copy(update={"principal": bind(principal, workflow_id, issuer)})
    handle = await client.start_workflow(
        LOOP_WORKFLOW,
        given,
        id=workflow_id,
        task_queue=task_queue or Settings.from_env().task_queue,
        result_type=LoopResult,
    )
    return LoopHandle(handle, output_type=output_type)


async def start_thread(
    client: Client,
    config: LoopConfig | None = None,
    first: str | None = None,
    *,
    workflow_id: str | None = None,
    task_queue: str | None = None,
    output_type: type[BaseModel] | None = None,
    principal: PrincipalClaim | str | None = None,
    issuer: Issuer | None = None,
) -> ThreadHandle:
    """Start a thread — a loop that after each answer waits for the next message — and return
    its handle; ``send`` a message to run a turn.

    Args:
        client: a client with orga's data converter (``orga.connect()``).
        config: the loop's config; its ``thread`` is set (``ThreadConfig()``) when it is not.
            Its budgets are each turn's; ``config.thread`` bounds the thread.
        first: a first message, run as turn 1 at once (``turn(1)`` reads its answer); without
            it the thread waits for one.
        workflow_id: default: ``thread-<12 hex digits>``.
        task_queue: default: ``ORGA_TASK_QUEUE`` (``orga``).
        output_type: a pydantic model every turn's answer must match (``TurnResult.value``
            and ``result().value`` are instances of it).
        principal: whom it runs for (``start_loop``).
        issuer: who vouches for that (``start_loop``).
    """
    config = config or LoopConfig()
    config = config if config.thread else config.model_copy(update={"thread": ThreadConfig()})
    messages = [Message(role="user", content=first)] if first is not None else []
    started = await start_loop(
        client,
        LoopInput(messages=messages, config=config),
        workflow_id=workflow_id or f"thread-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        output_type=output_type,
        principal=principal,
        issuer=issuer,
    )
    return thread(client, started.id, output_type=output_type)


def thread(
    client: Client, workflow_id: str, *, output_type: type[BaseModel] | None = None
) -> ThreadHandle:
    """The handle of a thread already started (``orga chat``, ``start_thread``, the CLI)."""
    return ThreadHandle(
        client.get_workflow_handle(workflow_id, result_type=LoopResult), output_type=output_type
    )


async def start_fork(
    client: Client,
    source: str,
    at: int,
    *,
    say: str | None = None,
    replace: bool = False,
    workflow_id: str | None = None,
    task_queue: str | None = None,
    output_type: type[BaseModel] | None = None,
    principal: PrincipalClaim | str | None = None,
    issuer: Issuer | None = None,
    **overrides: Any,
) -> LoopHandle:
    """``LoopHandle.fork`` of the loop ``source`` (see there)."""
    ask = ForkRequest(workflow_id=source, at=at, say=say, replace=replace)
    handle, is_thread = await start_fork_run(
        client,
        ask,
        LOOP_WORKFLOW,
        overrides,
        workflow_id=workflow_id,
        task_queue=task_queue,
        principal=lambda fork_id: bind(principal, fork_id, issuer),
    )
    if is_thread:
        return thread(client, handle.id, output_type=output_type)
    return LoopHandle(handle, output_type=output_type)


def loop(
    client: Client, workflow_id: str, *, output_type: type[BaseModel] | None = None
) -> LoopHandle:
    """The handle of a loop already started (by anyone: the CLI, a schedule, a delegation);
    with ``output_type``, ``result().value`` is an instance of it."""
    return LoopHandle(
        client.get_workflow_handle(workflow_id, result_type=LoopResult), output_type=output_type
    )


class LoopHandle:
    """One loop: its result, its queries, and the decisions people make on it."""

    def __init__(
        self,
        handle: WorkflowHandle[Any, LoopResult],
        *,
        output_type: type[BaseModel] | None = None,
    ) -> None:
        self.handle = handle
        """Temporal's handle of the loop's workflow."""
        self.output_type = output_type
        """The model a typed loop's ``result().value`` is an instance of."""

    @property
    def id(self) -> str:
        """The loop's workflow id."""
        return self.handle.id

    async def result(self) -> LoopResult:
        """Wait for the loop's answer (raises ``WorkflowFailureError`` with the typed cause —
        ``BudgetExceeded``, ``UnhandledStopReason``, ``OutputInvalid`` … — when it failed). A
        typed loop's ``value`` is its ``output_type`` instance."""
        result = await self.handle.result()
        if self.output_type is None or result.value is None:
            return result
        return result.model_copy(update={"value": self.output_type.model_validate(result.value)})

    async def state(self) -> LoopState:
        """The ``state`` query: status, iteration, usage, what it waits for, how it ended."""
        return await self.handle.query(STATE_QUERY, result_type=LoopState)

    async def journal(self) -> Journal:
        """The typed journal."""
        return await self.handle.query(JOURNAL_QUERY, result_type=Journal)

    async def approve(
        self,
        call_id: str,
        *,
        approver: str,
        reason: str | None = None,
        key: Ed25519PrivateKey | None = None,
        arguments: Mapping[str, Any] | None = None,
    ) -> ApprovalRecord:
        """Approve a call waiting for a person (the ``approve`` update), signed with ``key``
        (the approver's private key: ``orga.load_approver_key(path)``; default: the one
        ``ORGA_APPROVER_KEY`` names, else the data directory's ``approver.pem``, if any).
        Where the worker enrolled approvers only a signed decision is recorded; elsewhere the
        record says ``verified=False``. With ``arguments``
        the call runs with those instead: they pass the gate again (schema and policy), and a
        refusal raises ``WorkflowUpdateFailedError`` with the call still waiting."""
        return await self._decide(call_id, True, approver, reason, key, arguments)

    async def deny(
        self,
        call_id: str,
        *,
        approver: str,
        reason: str,
        key: Ed25519PrivateKey | None = None,
    ) -> ApprovalRecord:
        """Deny a call waiting for a person; the model reads ``reason``. Signed as ``approve``."""
        return await self._decide(call_id, False, approver, reason, key, None)

    async def say(
        self, text: str, *, sender: str | None = None, message_id: str | None = None
    ) -> MessageAccepted:
        """Send the loop a message while it works (the ``message`` update): it joins the
        conversation at the next Observe — never in the middle of a tool — and the model reads
        it before its next call; an answer already on its way does not end the loop then.
        Refused (``WorkflowUpdateFailedError``) when empty, too long, or the loop answered.
        Taken once: a lost answer is asked for again (``orga.desk.updates``); should it stay
        lost, send again with the same ``message_id`` (a uuid of yours)."""
        return await send_user_message(self.handle, text, sender=sender, message_id=message_id)

    async def fork(
        self,
        at: int,
        *,
        say: str | None = None,
        replace: bool = False,
        workflow_id: str | None = None,
        task_queue: str | None = None,
        **overrides: Any,
    ) -> LoopHandle:
        """Start a new loop from this loop's state after turn ``at`` (``orga journal``'s
        ``it N``; the loop may have ended), with ``say`` added after it (or, with ``replace``,
        instead of its last user message) and config ``overrides`` (``model=…``,
        ``policy=…``). This loop is untouched; nothing it ran runs again. The fork's worker
        reads the state from this loop itself; its journal and audit begin with ``Forked``.
        A thread's fork is a thread; a fork runs for the ``principal=`` it names (``start_loop``).

        Raises:
            ForkPointError: this loop or its turn ``at`` cannot be read.
            pydantic.ValidationError: an override is not a valid config value.
        """
        client = self.handle._client  # pyright: ignore[reportPrivateUsage]
        return await start_fork(
            client,
            self.id,
            at,
            say=say,
            replace=replace,
            workflow_id=workflow_id,
            task_queue=task_queue,
            output_type=self.output_type,
            **overrides,
        )

    async def resolve(
        self,
        escalation_id: str,
        action: EscalationAction,
        *,
        operator: str,
        reason: str | None = None,
        result: Any = None,
    ) -> EscalationRecord:
        """Answer an escalation: ``retry``, ``skip``, ``result`` (with ``result``) or ``abort``."""
        return await send_resolution(
            self.handle,
            escalation_id,
            action=action,
            result=result,
            reason=reason,
            operator=operator,
        )

    async def review(self, verdict: Verdict, *, reviewer: str, feedback: str = "") -> Review:
        """Review the answer waiting for a person (a human critic): approve, revise, reject."""
        return await send_review(self.handle, verdict=verdict, feedback=feedback, reviewer=reviewer)

    async def _decide(
        self,
        call_id: str,
        approved: bool,
        approver: str,
        reason: str | None,
        key: Ed25519PrivateKey | None,
        arguments: Mapping[str, Any] | None,
    ) -> ApprovalRecord:
        configured = Settings.from_env().approver_key_path()
        key = key or (load_approver_key(configured) if configured is not None else None)
        pending = None
        if key is not None:  # signed over the call as it waits; if none waits, the update
            state = await self.state()  # refuses the decision, naming what waits
            pending = next((p for p in state.pending_approvals if p.call_id == call_id), None)
        decision = approval_decision(
            self.id,
            pending,
            call_id=call_id,
            approved=approved,
            reason=reason,
            approver=approver,
            arguments=arguments,
            key=key,
        )
        return await send_decision(self.handle, decision)


class ThreadHandle(LoopHandle):
    """A thread: a loop that waits for the next message after each answer. Its handle targets
    the workflow's current run, so it follows the thread through continue-as-new."""

    async def send(
        self, text: str, *, sender: str | None = None, message_id: str | None = None
    ) -> TurnResult:
        """Send the next message and return the answer of the turn that read it (the running
        turn's, or — if that one ran out of its budget first — the next one's). ``message_id``:
        as ``say``'s — sent again with the same id, the message is not taken twice.

        Raises:
            WorkflowUpdateFailedError: refused (empty, too long, the thread closed or ended),
                or the thread ended before the message was answered."""
        accepted = await self.say(text, sender=sender, message_id=message_id)
        assert accepted.turn is not None, "a thread names the turn a message joins"
        return await self.turn(accepted.turn, message=accepted.seq)

    async def turn(self, number: int, *, message: int | None = None) -> TurnResult:
        """Turn ``number``'s answer, once there (the newest 20 stay readable); with ``message``
        (``MessageAccepted.seq``), that of the turn that read it (``number`` or a later one)."""
        answered = await await_turn(self.handle, number, message)
        if self.output_type is not None and answered.value is not None:
            value = self.output_type.model_validate(answered.value)
            answered = answered.model_copy(update={"value": value})
        return answered

    async def close(self, reason: str = "closed", *, sender: str | None = None) -> ThreadClosed:
        """Close the thread: it ends now (its last answer is the result), or once the turn it
        works on is answered; it takes no more messages."""
        return await send_close(self.handle, reason=reason, sender=sender)
