"""Continue-as-new: a long loop starts a fresh history at an iteration boundary.

Workflow code. Between iterations, with nobody asked anything, a loop whose history is long
(Temporal suggests it, or ``config.max_history_events`` is reached) continues as new with a
``LoopCarry``: the conversation travels as the next run's ``messages`` (checked against the
carried digest), and usage, budgets spent, the working clock, journal, tool records, breakers,
cached results, dead letters, decided approvals, evidence and the running context summary
come along. The result and the
queries of a loop that continued look the same as those of one that never did. On versioned
workers a thread whose next message finds a new current build of its deployment continues as
new onto it (``check_upgrade``, ``config.upgrade_on_continue``).
"""

from __future__ import annotations

from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import FailureError
from temporalio.workflow import ContinueAsNewVersioningBehavior

from orga.contracts.carry import LoopCarry, ToolStateSnapshot
from orga.contracts.config import Limits, LoopConfig, LoopInput
from orga.contracts.errors import StateTooLarge
from orga.contracts.evidence import EvidenceCollection
from orga.contracts.principals import PrincipalClaim
from orga.contracts.setup import CONTINUED_FROM, CURRENT_BUILD, ContinuedRun
from orga.contracts.threads import ThreadCarry
from orga.contracts.vocabulary import PolicyMode
from orga.core.audit import AuditLog
from orga.core.carry import bounded
from orga.workflows.reasoning.durable_conversation import Conversation
from orga.workflows.reasoning.loop_books import LoopBooks
from orga.workflows.reasoning.loop_parts import LoopParts
from orga.workflows.reasoning.progress import ProgressStream
from orga.workflows.reasoning.steering import Steering
from orga.workflows.reasoning.thread import Thread
from orga.workflows.reasoning.tool_state import ToolState
from orga.workflows.shared.failures import failure_message
from orga.workflows.shared.metrics import count
from orga.workflows.shared.options import SETUP_TIMEOUT, SHORT_RETRY
from orga.workflows.shared.patches import CARRY_FROM_OWN_RUN

__all__ = [
    "carried",
    "check_upgrade",
    "continue_as_new",
    "foreign_carry",
    "forget",
    "next_run",
    "restore",
    "should_continue_as_new",
    "start_problem",
]


_DELEGATIONS = 50
"""Finished delegations carried into the next run (the newest)."""


def start_problem(loop: LoopInput, info: workflow.Info) -> str | None:
    """Why a run may not start with ``loop`` (a carry no earlier run gave it, a cron
    schedule), or None."""
    if loop.carry is not None and info.continued_run_id is None:
        return (
            "the loop input carries state (carry) but this run continues no earlier one: "
            "carry is set by a loop for its next run, never by a client. Nothing was run."
        )
    if info.cron_schedule:
        # Each cron run "continues" the one before with the client's input: a carry in it
        # would pass for the loop's own. Schedules start fresh loops instead.
        return (
            f"loops do not run on a cron schedule ({info.cron_schedule!r}): start them "
            "from a Temporal Schedule (`orga schedule create`), which starts a fresh loop "
            "each time. Nothing was run."
        )
    return None


async def foreign_carry() -> str | None:
    """Why this run, handed a carry, may not take it (None: it may). Asked of the server
    (``continued_from``): the run it continues must be a run of this workflow type on this
    task queue that continued as new; a workflow of any other type or queue can continue as
    new into a loop with any input, and a failed run's retry is handed its client's input
    again. Older runs (before patch ``carry-from-own-run``) took the carry unasked."""
    info = workflow.info()
    if info.continued_run_id is None or not workflow.patched(CARRY_FROM_OWN_RUN):
        return None
    try:
        problem: str | None = await workflow.execute_local_activity(
            CONTINUED_FROM,
            ContinuedRun(
                workflow_id=info.workflow_id,
                continued_run_id=info.continued_run_id,
                workflow_type=info.workflow_type,
                task_queue=info.task_queue,
            ),
            result_type=str | None,  # pyright: ignore[reportArgumentType]
            start_to_close_timeout=SETUP_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary="the run this one continues",
        )
    except FailureError as error:
        problem = f"the server could not say what it continues ({failure_message(error)})"
    if problem is None:
        return None
    return (
        f"the loop input carries state (carry), but {problem}. A carry is written by a loop "
        "for its next run, never by a client or another workflow. Nothing was run."
    )


def should_continue_as_new(books: LoopBooks, config: LoopConfig) -> bool:
    """At an iteration boundary (nothing is pending mid-batch): is the history long, or is a
    thread to move to its deployment's new current version (``check_upgrade``)?"""
    if books.desk.waiting:
        return False
    info = workflow.info()
    return (
        info.is_continue_as_new_suggested()
        or info.get_current_history_length() >= config.max_history_events
        or books.leaving is not None
    )


def _build() -> str | None:
    """The build this run is on (None on workers without versioning)."""
    version = workflow.info().get_current_deployment_version()
    return version.build_id if version is not None else None


async def check_upgrade(books: LoopBooks, config: LoopConfig) -> None:
    """A versioned thread's next message arrived: ask which build its deployment now routes
    to (``current_build``, a local activity); another than this run's means the turn first
    continues as new onto it (``config.upgrade_on_continue``). Not asked again on a build
    this run was kept on when its previous run asked to leave it (a pinned override).

    The server's own flag (``is_target_worker_deployment_version_changed``) is not used: it
    never reaches a task a worker's sticky cache takes (Server 1.32), so a thread its worker
    kept cached would never move.
    """
    version = workflow.info().get_current_deployment_version()
    if (
        not config.upgrade_on_continue
        or config.thread is None
        or version is None
        or not version.deployment_name  # an unversioned worker (its build id: a checksum)
        or version.build_id == books.moved_from
    ):
        return
    current = await workflow.execute_local_activity(
        CURRENT_BUILD,
        version.deployment_name,
        start_to_close_timeout=SETUP_TIMEOUT,
        retry_policy=SHORT_RETRY,
        summary="which build is current",
    )
    if current is not None and current != version.build_id:
        books.leaving = version.build_id


def carried(
    runs: int,
    books: LoopBooks,
    conversation: Conversation,
    tools: ToolState,
    evidence: EvidenceCollection | None,
    calibration: float,
    summary: tuple[str | None, int, int] = (None, 0, 0),
    thread: ThreadCarry | None = None,
) -> LoopCarry:
    """Everything the next run needs besides the conversation itself, bounded
    (``orga.core.carry``); ``summary`` is the running summary of an ``anchored_summary`` loop,
    how many messages it covers and where the last fold not made would have ended; ``thread``
    a thread's turns (its inbox: ``continue_as_new``)."""
    carry = LoopCarry(
        runs=runs,
        digest=conversation.digest,
        sent=conversation.sent,
        usage=books.usage,
        iteration=books.iteration,
        other_calls=books.other_calls,
        started_at=books.started_at,
        human_wait=books.human_wait,
        last_stop_reason=books.last_stop_reason,
        journal=books.journal,
        tool_calls=books.tool_calls,
        tool_call_count=books.tool_call_count,
        receipts=books.receipts,
        tools=tools.snapshot(),
        evidence=evidence,
        calibration=calibration,
        delegations=books.delegations[-_DELEGATIONS:],
        reviews=books.reviews,
        audit_count=books.audit.count,
        audit_head=books.audit.head,
        context_summary=summary[0],
        summarised_through=summary[1],
        unsummarised_through=summary[2],
        thread=thread,
        moved_from=books.leaving or books.moved_from,
    )
    return bounded(carry)


async def next_run(
    carry: LoopCarry,
    config: LoopConfig,
    parts: LoopParts,
    *,
    policy: PolicyMode,
    turn_limits: Limits,
    conversation: Conversation,
    steering: Steering,
    thread: Thread | None,
    progress: ProgressStream | None,
) -> NoReturn:
    """Move the loop to its next run with ``carry``, keeping this run's gate (``policy``),
    budgets (a thread's per turn: ``turn_limits``), provider and model, whatever its worker's
    defaults (its setup is resolved again, and can only narrow them)."""
    # Messages that arrive while the run waits for its handlers wait in the inbox, which is
    # carried once they have finished (the conversation itself is sealed by its digest).
    if thread is not None:
        thread.moving = True  # waiting `turn` updates let go: they ask the next run
    pinned = config.model_copy(
        update={
            "provider": parts.provider,
            "model": parts.model,
            "policy": policy,
            **turn_limits.model_dump(),  # a thread's per turn, not shifted
        }
    )
    if progress is not None:  # release long-polling readers: they follow the next run
        progress.stream.detach_pollers()
    await continue_as_new(pinned, conversation, carry, parts.claim, progress, steering)


async def continue_as_new(
    config: LoopConfig,
    conversation: Conversation,
    carry: LoopCarry,
    principal: PrincipalClaim | None = None,
    progress: ProgressStream | None = None,
    steering: Steering | None = None,
) -> NoReturn:
    """Wait for running handlers, then end this run and start the next (never returns).

    ``principal``: the claim the loop was started with (its next run runs for it too);
    ``progress``: a streamed loop's stream, whose items the next run keeps at their offsets;
    ``steering``: its inbox, carried as it stands once the handlers finished (a message that
    came meanwhile is read by the next run, never lost).

    Raises:
        StateTooLarge: the next run's input would be larger than ``config.max_state_bytes``.
    """
    await workflow.wait_condition(workflow.all_handlers_finished)
    if progress is not None:  # what was published up to now, handlers' publishes included
        carry = carry.model_copy(update={"stream": progress.carry()})
    if steering is not None:  # what was sent up to now, messages of the handlers included
        carry = carry.model_copy(update={"inbox": steering.carry()})
    next_input = LoopInput(
        messages=conversation.messages, config=config, carry=carry, principal=principal
    )
    size = len(next_input.model_dump_json())
    if size > config.max_state_bytes:
        raise StateTooLarge(
            f"the loop's state is {size / 2**20:.1f} MiB at iteration {carry.iteration}, more "
            f"than config.max_state_bytes={config.max_state_bytes} a loop carries into its next "
            "run; the conversation is too long for one loop (lower max_payload_bytes, or split "
            "the task)",
            {"bytes": size, "limit": config.max_state_bytes, "iteration": carry.iteration},
        )
    workflow.logger.info(
        "continuing as new at iteration %d (%d events)",
        carry.iteration,
        workflow.info().get_current_history_length(),
    )
    count("orga_continue_as_new", workflow="loop")
    if carry.moved_from is not None and carry.moved_from == _build():  # onto the target
        workflow.logger.info("the deployment's current version changed: the next run moves to it")
        workflow.continue_as_new(
            next_input, initial_versioning_behavior=ContinueAsNewVersioningBehavior.AUTO_UPGRADE
        )
    workflow.continue_as_new(next_input)


def restore(
    carry: LoopCarry, books: LoopBooks, conversation: Conversation, tools: ToolState
) -> None:
    """Pick up where the previous run stopped (its conversation is the input's ``messages``).

    Raises:
        ValueError: the conversation does not match the carried digest.
    """
    if carry.digest != conversation.digest:
        raise ValueError(
            "the conversation carried into this run does not match its digest; "
            "refusing to continue with a different conversation"
        )
    conversation.sent = carry.sent
    books.usage = carry.usage
    books.iteration = carry.iteration
    books.other_calls = carry.other_calls
    books.started_at = carry.started_at
    books.human_wait = carry.human_wait
    books.last_stop_reason = carry.last_stop_reason
    books.journal = carry.journal
    books.tool_calls = list(carry.tool_calls)
    books.tool_call_count = carry.tool_call_count
    books.receipts = list(carry.receipts)
    books.delegations = list(carry.delegations)
    books.reviews = list(carry.reviews)
    books.audit = AuditLog(carry.audit_count, carry.audit_head)
    books.moved_from = carry.moved_from
    tools.restore(carry.tools)


def forget(books: LoopBooks, tools: ToolState, config: LoopConfig) -> None:
    """Drop what ``restore`` took from a carry this run refused (``foreign_carry``): the failed
    run's queries, journal and receipts show none of it."""
    fresh = LoopBooks(config, books.limits, started_at=workflow.now())
    books.usage = fresh.usage
    books.iteration = fresh.iteration
    books.other_calls = fresh.other_calls
    books.started_at = fresh.started_at
    books.human_wait = fresh.human_wait
    books.last_stop_reason = fresh.last_stop_reason
    books.journal = fresh.journal
    books.tool_calls = fresh.tool_calls
    books.tool_call_count = fresh.tool_call_count
    books.receipts = fresh.receipts
    books.delegations = fresh.delegations
    books.reviews = fresh.reviews
    books.audit = fresh.audit
    books.moved_from = fresh.moved_from
    tools.restore(ToolStateSnapshot())
