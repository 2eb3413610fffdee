"""Every ``workflow.patched`` id in orga's workflows, and what it guards.

From 1.0, a change to a workflow that alters the commands it issues (an activity, timer, child
or marker added, removed or reordered) replays older histories only behind a patch:

1. guard it: ``if workflow.patched(ID): <new> else: <old>``, with ``ID`` and what it guards
   listed here, and record a scenario that reaches it (``tests/scenarios.py``) while keeping the
   older recordings (``tests/histories/``), which must go on replaying;
2. deprecate it (``workflow.deprecate_patch(ID)``, the old branch deleted) once no open
   execution started before the change — retention of the namespace tells when;
3. remove it in the next release after that.

A loop asks ``workflow.patched`` only where its setup does not already say: a worker records
its ``SETUP_LEVEL`` in the loop's setup (``LoopSetup.level``, in the setup's marker), and a
patch listed in ``LEVELS`` at or below that level is taken without a marker of its own
(``taken``) — Temporal's SDK writes each patch's marker and a ``TemporalChangeVersion`` search
attribute (two events and a visibility write) in every run that asks. Runs set up before the
level ask ``patched`` as before, so every older history replays as it was recorded.

The history of patches before 1.0 is in ``CHANGELOG.md``.
"""

from __future__ import annotations

from typing import Final

from temporalio import workflow

__all__ = [
    "CALL_RECEIPTS",
    "CARRY_FROM_OWN_RUN",
    "CRITIC_ROUNDS_PER_TURN",
    "ELIDE_REFUSED_ARGUMENTS",
    "FORK_OWN_PROMPTS",
    "GATE_BY_ACTION",
    "GATE_TYPED_ANSWER",
    "LEVELS",
    "MCP_ANSWERS_ARE_CLAIMS",
    "MESSAGE_LIMITS",
    "MODEL_WAITS_FOR_WORKER",
    "ONE_KEY_ONE_APPROVER",
    "ONE_RESOLUTION",
    "PAUSE_STOPS_THE_CLOCK",
    "PAUSE_WAITS_FOR_RESUME",
    "PROVIDER_DOWN_SWITCHES",
    "READ_AFTER_REVIEW",
    "SCHEMA_IN_RETRY",
    "STOP_MEANS_STOP",
    "SUMMARY_AFTER_FAILURE",
    "TASK_CANCELLED_STATUS",
    "TASK_HOLDS_PAUSED_STEPS",
    "TASK_UNKNOWN_STEP",
    "TASK_WAITS_FOR_WORKER",
    "THREAD_FORK_WAITS",
    "TURN_BUDGET_ENDS_TURN",
    "WORKER_WAIT_GROWS",
    "taken",
]

SUMMARY_AFTER_FAILURE: Final = "summary-after-failure"
"""An ``anchored_summary`` loop whose summary was not made (the summariser failed or answered
nothing) asks for one again only when turns past that fold must leave the window, not before
every model call (``RunningSummary.prepare``; scenario ``empty_summary``)."""

ELIDE_REFUSED_ARGUMENTS: Final = "elide-refused-arguments"
"""A tool call whose arguments were refused unread (too long, too deep, not a JSON object)
stays in the conversation with a short stand-in for them, so the next model call (and a fold
of the context) no longer carries them (``AgentLoop._act``; scenario ``refused_arguments``)."""

GATE_TYPED_ANSWER: Final = "gate-typed-answer"
"""A typed loop's answer is checked against its ``output_schema`` before the final-answer
gate, so the gate judges the value (Cedar ``context.answer``, OPA ``input.answer``); before
the patch it was checked after the gate (``AgentLoop._cycle``; scenario ``gated_typed_answer``)."""

MODEL_WAITS_FOR_WORKER: Final = "model-waits-for-worker"
"""A model call that no worker which took it could make, as none registers a tool the loop
names (``ToolNotOnThisWorker`` after the call's retries), waits for a worker that does (status
``awaiting_worker``) and is made again, instead of failing the loop ``ModelCallFailed``
(``call_model``; scenario ``model_waits_for_worker``)."""

CALL_RECEIPTS: Final = "call-receipts"
"""Each tool call ends with a ``CallReceipt`` on the journal and the audit chain (delivered,
denied, failed, or unknown before a person settles it): ``LoopBooks.observed``,
``CallExecutor.run``; scenario ``unknown_outcome``. Older runs' audit chains hold none, and
replay without them."""

TASK_UNKNOWN_STEP: Final = "task-unknown-step"
"""A task's step whose attempt was lost mid-effect (``OutcomeUnknown``) leaves an ``unknown``
receipt and waits for a person on the desk (result: it happened; retry; skip; abort),
whatever the task's ``on_limit_reached`` says (``StepAttempts.run``; scenario
``task_unknown_step``). Asked only when such a step fails."""

TASK_CANCELLED_STATUS: Final = "task-cancelled-status"
"""A cancelled task's ``OrgaStatus`` is ``cancelled`` (``orga list --status cancelled`` shows
it), where it was ``failed`` (``TaskWorkflow._upsert_status``; scenario ``task_cancelled``)."""

TASK_WAITS_FOR_WORKER: Final = "task-waits-for-worker"
"""A task's step or compensation whose tool the workers that took it do not register waits for
a worker that does and runs again, instead of counting as a failed attempt (``StepRunner``,
``Compensation``; scenario ``task_waits_for_worker``)."""

GATE_BY_ACTION: Final = "gate-by-action"
"""The ``default`` gate's decisions made in the model call are taken action by action (kind,
call id, tool, arguments: ``ModelCallDecisions``), so a turn some of whose calls were
answered before the gate (the evidence tracker) needs no policy call; before the patch they
were taken only for the whole turn as the model answered it (``Gate.decide``; scenario
``gate_by_action``)."""

ONE_KEY_ONE_APPROVER: Final = "one-key-one-approver"
"""A second approval of a call that needs several, signed by a key that already approved it
under another enrolled name, is refused (``HumanDesk._proof``; four eyes counts keys, not
names). Asked only when that happens, so a history records the marker only where the rule
refused something; histories recorded before it replay as they ran. No scenario records it:
a worker refuses one key under two names since the same change, so only a loop set up by an
older worker can reach it (``tests/test_signed_approvals.py`` plays that worker)."""

FORK_OWN_PROMPTS: Final = "fork-own-prompts"
"""A fork checks the state it read is one a loop records (``orga.core.fork_points``) and opens
its conversation with its own system messages, not the source's copies (which doubled the
agent's prompt), its running summary's marks moved to match (``start_fork``,
``forked_summary``; scenario ``fork``)."""

MESSAGE_LIMITS: Final = "message-limits"
"""A person's message (the task, a steering or thread message by signal, a fork's) that begins
with a mark of orga's own notices (``orga.core.speakers``) is refused, and so is a message past
``MAX_WAITING`` waiting (``Steering.check``, ``AgentLoop.run``, ``start_fork``). Asked only
when a rule would refuse (the ``message`` update's validator refuses without it), so histories
record the marker only where it refused something; scenario ``message_limits``."""

TURN_BUDGET_ENDS_TURN: Final = "turn-budget-ends-turn"
"""In a thread, a turn whose own budget (``max_iterations``, ``max_total_tokens``, ``max_cost``,
``timeout`` of the config: each turn's) runs out ends unanswered and the thread waits for the
next message; only the thread's budgets end it (``AgentLoop._turn``, ``Thread.binds``). Asked
only when a turn's budget runs out; scenario ``turn_budget``."""

SCHEMA_IN_RETRY: Final = "schema-in-retry"
"""A typed loop's answer that does not match its ``output_schema`` goes back to the model with
the schema itself, not only the validation error (``typed_answer``): the model must see the
schema even where the provider is not asked to constrain the answer. Asked only on a miss;
scenario ``typed_answer_with_tools``."""

MCP_ANSWERS_ARE_CLAIMS: Final = "mcp-answers-are-claims"
"""Where approvers are enrolled, a decision that came through ``orga mcp``'s form (``via``
``mcp-elicitation``) is refused, signed or not: the MCP client app answers the form, and
earlier ``orga mcp`` signed its answer with the operator's key (``HumanDesk._proof``). Asked
only when such a decision arrives by signal (the ``approve`` update's validator refuses it
without the patch); no scenario: ``orga mcp`` no longer sends one where approvers are
enrolled."""

THREAD_FORK_WAITS: Final = "thread-fork-waits"
"""A thread forked after one of its answers with nothing to say waits for its next message
instead of failing ``InvalidConfig`` (``start_fork``): a thread's fork may say nothing, as the
client and the guide allow. Asked only for such a fork; scenario ``thread_fork_waits``."""

PROVIDER_DOWN_SWITCHES: Final = "provider-down-switches"
"""A loop with a fallback model left lists ``ProviderDown`` (the worker refused the call: its
model is down there, ``orga.worker.provider_health``) as non-retryable in its model call's
retry policy, so it turns to its fallback at once instead of after the call's retries
(``call_with_fallbacks``). Only the retry policy's attributes change; asked only while a
fallback is left, so histories record the marker only for loops with fallbacks; scenario
``provider_down``."""

STOP_MEANS_STOP: Final = "stop-means-stop"
"""A loop, thread or task that is cancelled, or a cycle whose ``timeout`` passes, while an
activity runs (a tool, the policy check, a model call, a review) stops there: the turn's
receipts are recorded and nothing new is asked or run (``orga.workflows.shared.stopping``);
before it, the cancelled activity was read as an ordinary failure and the cycle went on (a new
model call, the next tool, a fallback, an escalation). A loop's call of a tool with effects
(``serial``, ``requires_approval``) is cancelled waiting for the tool to stop, so its receipt
says what the tool reports, not a guess. Taken at setup level 2 without a marker; asked (by
a run set up earlier, or a task) only where a stop is met and where such a call is scheduled;
scenario ``cancelled_mid_tool``."""

READ_AFTER_REVIEW: Final = "read-after-review"
"""A message a person sent while the critic reviewed the loop's answer is read: the model gets
it (after its reviewed answer) and answers again, where the accepted answer ended the loop and
the message was never read (``FinalAnswers.judge``). Asked only when a message waits after a
review; scenario ``message_during_review``."""

CRITIC_ROUNDS_PER_TURN: Final = "critic-rounds-per-turn"
"""In a thread, the critic's ``max_rounds`` counts the reviews of the turn's answers, each turn
anew, where it counted every review of the thread (a later turn's first ``revise`` then ended
it ``critic_rejected``), and a loop keeps its newest ``KEPT_REVIEWS`` reviews (``Critic``).
Asked only where the two rules disagree; scenario ``critic_thread``."""

ONE_RESOLUTION: Final = "one-resolution"
"""An escalation answered twice before the workflow read the first answer (two decisions in
one workflow task) takes the first; the second is refused (``HumanDesk.check_resolution``),
where both were answered "recorded" and the second replaced the first — the journal and the
audit chain kept one. The validator refuses without the patch; asked only when a handler
meets a second answer (a signal, or an update accepted before the first was recorded); no
scenario: ``tests/test_desk_races.py`` plays it."""

PAUSE_WAITS_FOR_RESUME: Final = "pause-waits-for-resume"
"""A call held by a pause asks again once after ``pause_recheck``, then waits for the
``pause_lifted`` signal (``orga resume``, the desk) with a fallback of an hour, where it asked
every ``pause_recheck`` until the history reached the server's limit (``wait_out_pause``).
Asked at a held call's second wait; scenario ``paused_for_long``."""

WORKER_WAIT_GROWS: Final = "worker-wait-grows"
"""A call (a task's step, most of all, which no timeout bounds) that has waited ten minutes for
a worker with its tool asks every 15 minutes, where it asked every minute until its history
reached the server's limit in about four days (``WorkerWait.pause``). Asked after ten minutes
of waiting; no scenario (a ten-minute wait): ``tests/test_pause_waits.py`` plays it on the
time-skipping server."""

PAUSE_STOPS_THE_CLOCK: Final = "pause-stops-the-clock"
"""While a call waits for its pause to end, the loop's deadline timer is cancelled as while a
person is asked (``within``, ``LoopBooks.clock_stopped``): the working clock stood still, but
the timer set before the pause fired, and a loop paused longer than its ``timeout`` ended
``BudgetExceeded``. Asked when a call first waits for a pause; scenario ``paused_for_long``
(recorded before the patch: it replays the old rule) and ``tests/test_pause_waits.py``."""

CARRY_FROM_OWN_RUN: Final = "carry-from-own-run"
"""A run handed a carry (``LoopInput.carry``) first asks the server what the run it continues
was (``continued_from``, a local activity) and takes the carry only from a ``ReasoningLoop``
on its own task queue that continued as new; before it, any run that continued anything took
it — a foreign workflow's continue-as-new, or a failed run's retry, could hand a loop its
journal, usage, receipts and conversation (``continuation.foreign_carry``). Asked by every run
that has a carry, before its setup; scenario ``carry_from_own_run``."""

TASK_HOLDS_PAUSED_STEPS: Final = "task-holds-paused-steps"
"""A task's step whose call a pause holds (its tool's, its task's — ``orga pause ID`` — or
its agent's) waits for the pause to end, then runs once, its approval kept, as a loop's call
does (``StepRunner``), where the held call failed the attempt: re-attempted, then skipped,
escalated or aborted as ``on_limit_reached`` says — a paused refund tool could skip a task's
refund step. Asked when a step's call is first held; scenario ``task_step_paused``."""

RESUME_WHILE_ASKING: Final = "resume-while-asking"
"""A held call that a ``pause_lifted`` signal reached while it was being asked (the resume
came after the worker found it paused, before the workflow read that answer) asks again at
once, where it began waiting for the next signal — for the hour of ``PAUSE_FALLBACK``, the
resume it had been sent already spent (``wait_out_pause``'s ``asked``). Asked only when that
happens; no scenario (a race of one signal): ``tests/test_pause_waits.py`` plays it.
"""

WORKER_WAIT_ASKS_ELSEWHERE: Final = "worker-wait-asks-elsewhere"
"""A call that found no tool on the worker that took it asks again at once, handed to any
worker of the queue (``orga.core.eager``), where it waited 2 s, doubling, and each try went
eagerly back to the workflow's own worker — when that worker was the one without the tool, a
call never reached the one with it. Asked at a call's first wait for a worker; no scenario:
``tests/test_many_agents.py`` plays it (every workflow on the worker without the tool)."""

LEVELS: Final = {CALL_RECEIPTS: 1, STOP_MEANS_STOP: 2}
"""The setup level (``orga.contracts.setup.SETUP_LEVEL``) from which a loop takes a patch
without asking ``workflow.patched``."""


def taken(patch: str, level: int) -> bool:
    """Whether this run takes ``patch``'s new path: at once where the worker that set it up
    was at ``LEVELS[patch]`` or later, else as ``workflow.patched`` says."""
    known = LEVELS.get(patch)
    return (known is not None and level >= known) or workflow.patched(patch)
