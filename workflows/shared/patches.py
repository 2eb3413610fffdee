"""Every ``workflow.patched`` id in orga's workflows, and what it guards.

A patch lets a changed workflow replay histories recorded before the change: the new code runs
only in executions that reached the patch point after the change shipped (they carry a marker);
older histories take the old branch. A patch can be retired (its old branch deleted, the
``deprecate_patch`` step skipped) once no execution that started before it is still open and
no committed history under ``tests/histories/`` predates it.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPROVER_REQUIRED",
    "CHILD_WAITS_FOR_TOOLS",
    "COMPENSATE_UNFINISHED",
    "CONTEXT_SUMMARY",
    "GATED_MEMORY",
    "GATE_IN_MODEL_CALL",
    "NO_CRON",
    "RESOLVE_LOOP",
    "RESOLVE_TASK",
    "SAGA_ATTEMPTED",
    "TREE_BUDGET",
]

RESOLVE_LOOP: Final = "orga-resolve-loop"
"""Loops resolve their setup with ``resolve_loop`` — their agent, tools, gate, budgets and
effective model —, pre-hydration only uses tools the model sees, and calls get the loop's own
ids (``orga.core.ids``); before, loops described their tools with ``describe_tools``, took
their gate and budgets from the client, listed their pre-hydration resolvers among their tools
and kept the provider's call ids."""

APPROVER_REQUIRED: Final = "orga-approver-required"
"""The ``approval`` and ``resolve_escalation`` signals are ignored when they name nobody (the
updates' validators refuse them); before, a decision could be recorded with no approver."""

RESOLVE_TASK: Final = "orga-resolve-task"
"""Tasks resolve their agent and tools with ``resolve_task`` before the first step (a missing
tool or agent fails the task at once), and every step and compensation passes the gate;
before, a missing tool failed the step that named it and steps ran ungated."""

SAGA_ATTEMPTED: Final = "orga-saga-attempted"
"""A stopping task waits for its running steps to finish cancelling, then compensates every
step it *attempted* (not only the completed ones), newest first; a compensation retries without
a cap and goes to an operator after ``compensation_escalate_after`` failures; steps interrupted
by cancellation are ``cancelled``. Before, only completed steps were compensated, a running
activity was abandoned, and a compensation gave up after three attempts."""

GATE_IN_MODEL_CALL: Final = "orga-gate-in-model-call"
"""Under the ``default`` gate, the model call decides the gate for the answer's actions on the
worker (``InferenceRequest.gate``: the policy activity's own rules), and the loop uses those
decisions instead of a policy local activity when the actions match; before, every turn ran
the ``evaluate_policy`` local activity (a marker in history)."""

NO_CRON: Final = "orga-no-cron"
"""A loop started with a cron schedule fails at once with ``InvalidConfig`` (every cron run
continues the one before it with the client's input, so a forged ``carry`` would pass for the
loop's own); before, cron loops ran. Checked only in cron runs: other loops get no marker."""

COMPENSATE_UNFINISHED: Final = "orga-compensate-unfinished"
"""A compensation whose arguments refer into the result of a step that never completed
(``"${result.id}"``) runs with null there, like ``"${result}"``, and tells by the step's
idempotency key whether the effect happened; before, it was settled ``compensation_failed``
without running, and the effect of a step still running at the abort stayed."""

CHILD_WAITS_FOR_TOOLS: Final = "orga-child-waits-for-tools"
"""A child loop (a task's step, a delegation) waits for a cancelled tool call until it has
stopped (``WAIT_CANCELLATION_COMPLETED``), so the loop ends — and its parent compensates — only
after the call's effect landed; before, it let go at once (``TRY_CANCEL``). Checked only in
child loops: other loops get no marker."""

GATED_MEMORY: Final = "orga-gated-memory"
"""A loop's ``auto_persist`` write passes the gate first (``Action::"remember"`` on its agent's
knowledge store, journaled and audited as ``PolicyEvaluated``); anything the gate does not
simply allow stores nothing. Before, the write went straight to the store. Checked only when a
loop with ``auto_persist`` completes: other loops get no marker."""

TREE_BUDGET: Final = "orga-tree-budget"
"""A loop's ``max_iterations`` counts the model calls of its critic and delegated children
too (``LoopBooks.other_calls``), children are carved from what is left of that, and a model
critic is checked against the loop's budgets before and after it reviews. Before, only the
loop's own calls counted and a critic's tokens were charged unchecked. Checked only once a
critic or child has made a call: other loops get no marker."""

CONTEXT_SUMMARY: Final = "orga-context-summary"
"""An ``anchored_summary`` loop folds the turns that leave its context window into a running
summary (the ``summarise_context`` activity, a model call its budget pays for), carries it
across continue-as-new and shows it after the anchors; before, the model saw a marker where
those turns were. Checked only in ``anchored_summary`` loops, when turns first must leave the
window: other loops get no marker."""
