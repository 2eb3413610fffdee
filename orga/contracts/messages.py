"""The names of orga's workflow types and of the messages they answer: queries, updates and
signals.

One list, shared by the workflows that define the handlers and by every client that sends
them (``orga.client``, the desk, the CLI, ``orga mcp``, the inference activity). The names are
part of the stable surface: the plain ``temporal`` CLI uses them too, e.g.
``temporal workflow query --name state``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPROVAL_SIGNAL",
    "APPROVE_UPDATE",
    "AUDIT_QUERY",
    "CLOSE_UPDATE",
    "CONVERSATION_QUERY",
    "FORK_QUERY",
    "JOURNAL_QUERY",
    "LOOP_WORKFLOW",
    "MESSAGE_SIGNAL",
    "MESSAGE_UPDATE",
    "PAUSE_LIFTED_SIGNAL",
    "RESOLVE_ESCALATION",
    "REVIEW_UPDATE",
    "STATE_QUERY",
    "TASK_WORKFLOW",
    "TURN_UPDATE",
]

LOOP_WORKFLOW: Final = "ReasoningLoop"
"""The workflow type of a loop (and a thread, a fork, a delegated child)."""
TASK_WORKFLOW: Final = "Task"
"""The workflow type of a multi-step task (the saga coordinator)."""

STATE_QUERY: Final = "state"
"""A loop's ``LoopState`` or a task's ``TaskState``."""
JOURNAL_QUERY: Final = "journal"
"""The journal of a loop or task."""
AUDIT_QUERY: Final = "audit"
"""The audit chain of a loop or task."""
CONVERSATION_QUERY: Final = "conversation"
"""A range of a loop's conversation (a ``ConversationRange``)."""
APPROVE_UPDATE: Final = "approve"
"""An ``ApprovalDecision`` on a call waiting for a person; answers with its ``ApprovalRecord``."""
APPROVAL_SIGNAL: Final = "approval"
"""The same decision as a signal, for senders that cannot wait for an answer."""
RESOLVE_ESCALATION: Final = "resolve_escalation"
"""An ``EscalationResolution`` of a task's escalated step (an update, and a signal)."""
REVIEW_UPDATE: Final = "review"
"""A person's ``Review`` of an answer waiting for a human critic."""
MESSAGE_UPDATE: Final = "message"
"""A ``UserMessage`` to a loop: steering while it works (the model reads it before its next
call); answers with its ``MessageAccepted``."""
MESSAGE_SIGNAL: Final = "message"
"""The same message as a signal (``temporal workflow signal --name message``)."""
TURN_UPDATE: Final = "turn"
"""A thread's ``TurnWait``: waits for that turn's answer and answers with its ``TurnResult``."""
CLOSE_UPDATE: Final = "close"
"""A thread's ``CloseThread``: it ends now, or once the running turn is answered."""
PAUSE_LIFTED_SIGNAL: Final = "pause_lifted"
"""A pause ended (``orga resume``, the desk): a loop whose calls wait for one asks again now,
spread out, rather than at its next fallback recheck. It carries nothing: the loop's next
call finds out whether its own pause ended."""
FORK_QUERY: Final = "fork_point"
"""A ``ForkPointAsk``: the loop's state after that turn (``ForkPoint``), for ``orga fork``."""
