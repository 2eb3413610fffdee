"""How a journal entry reads on one line (``orga journal``, ``orga audit``): its number, time,
iteration and kind, then what it says — a step of the cycle, what people did, what the loop
shared with other agents and its knowledge.
"""

from __future__ import annotations

from datetime import datetime

from orga.cli.views import shorten
from orga.contracts.journal import (
    ApprovalDecided,
    CompensationSettled,
    ContextSummarised,
    DelegationFinished,
    DelegationStarted,
    EscalationResolved,
    EvidenceJudged,
    EvidenceSaturated,
    Forked,
    JournalEntry,
    JudgeConsulted,
    KnowledgeInjected,
    KnowledgeRecalled,
    KnowledgeStored,
    MessageReceived,
    ModelSwitched,
    ObservationsCollected,
    PolicyEvaluated,
    PreHydrationComplete,
    ReasoningComplete,
    RecoveryTriggered,
    ReviewDecided,
    Started,
    StepLimitReached,
    Terminated,
    ToolsDispatched,
    TurnAnswered,
)
from orga.runtime.safe_text import one_line

__all__ = ["render_entry"]


def _time(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S")


def _detail(entry: JournalEntry) -> str:
    return _step_detail(entry) or _people_detail(entry) or _shared_detail(entry) or ""


def _step_detail(entry: JournalEntry) -> str | None:
    """What a step of the cycle did: the model, the gate, the tools, the trackers, the end."""
    match entry:
        case Started():
            tools = ", ".join(entry.tools) or "no tools"
            return f"policy {entry.policy}, {tools}"
        case ReasoningComplete():
            calls = f" → {', '.join(entry.tool_calls)}" if entry.tool_calls else ""
            return f"{entry.stop_reason} ({entry.model}, {entry.usage.total_tokens} tokens){calls}"
        case PolicyEvaluated():
            verdicts = "; ".join(
                f"{d.decision} {d.tool or d.action}"
                + (f" [{', '.join(d.policy_ids)}]" if d.policy_ids else "")
                + (f": {d.reason}" if d.reason and d.decision != "allow" else "")
                for d in entry.decisions
            )
            return f"{entry.engine}: {verdicts}"
        case ToolsDispatched():
            return ", ".join(entry.tools) or "nothing to run"
        case ObservationsCollected():
            return ", ".join(
                f"{o.tool} {o.status}" + (f" ({shorten(o.error, 120)})" if o.error else "")
                for o in entry.outcomes
            )
        case RecoveryTriggered():
            return f"{entry.tool}: {entry.strategy} after {entry.error}"
        case ModelSwitched():
            return (
                f"{entry.from_provider}:{entry.from_model} → {entry.to_provider}:{entry.to_model}"
                f" after {entry.error}"
            )
        case StepLimitReached():
            return f"step {entry.step_id} after {entry.attempts} attempts: {entry.reason}"
        case PreHydrationComplete():
            return (
                f"found {entry.found}, resolved {entry.resolved}, failed {entry.failed}, "
                f"{entry.tokens} tokens"
            )
        case EvidenceJudged():
            return (
                f"{entry.tool} {entry.call_id}: {entry.judgement} "
                f"({entry.consecutive_no_gain} without gain, {entry.state})"
            )
        case EvidenceSaturated():
            return entry.reason
        case ContextSummarised():
            if entry.error:
                return (
                    f"messages [{entry.start}, {entry.through}) NOT summarised "
                    f"({shorten(entry.error, 120)}): a marker stands for them"
                )
            return (
                f"{entry.folded} message(s) folded in: the summary covers {entry.through} "
                f"({entry.tokens} tokens, {entry.usage.total_tokens} spent)"
            )
        case Terminated():
            return f"{entry.reason}: {entry.message}" if entry.message else entry.reason
        case _:
            return None


def _people_detail(entry: JournalEntry) -> str | None:
    """What people did or were told: decisions, escalations, reviews, messages, turns, forks."""
    match entry:
        case JudgeConsulted():
            said = entry.opinion
            reasons = f" ({shorten(said.reasons, 100)})" if said.reasons else ""
            outcome = (
                "it decided"
                if said.decides
                else f"left to a person: {shorten(said.why_not or '', 120)}"
            )
            return (
                f"{entry.call_id} {entry.tool}: judge {said.judge} said {said.verdict} "
                f"{said.confidence:g}{reasons}; {outcome}"
            )
        case ApprovalDecided():
            verdict = "approved" if entry.approved else "denied"
            who = f" by {entry.approver}" if entry.approver else ""
            why = f": {entry.reason}" if entry.reason else ""
            keys = ", ".join(p.key_fingerprint for p in entry.decisions if p.key_fingerprint)
            proof = (
                f"verified {keys}"
                if entry.verified and keys
                else "timed out"
                if entry.source == "timeout"
                else "unverified"
            )
            edit = (  # what a reviewer most needs: the arguments before and after
                f"; edited {shorten(entry.arguments or '', 300)} → "
                f"{shorten(entry.edited_arguments, 300)}"
                if entry.edited_arguments is not None
                else ""
            )
            return (
                f"{entry.tool} {entry.call_id} {verdict}{who} ({entry.source}, {proof}){why}{edit}"
            )
        case EscalationResolved():
            who = f" by {entry.operator}" if entry.operator else ""
            return f"{entry.tool} {entry.escalation_id}: {entry.action}{who} ({entry.source})"
        case CompensationSettled():
            asked = f", {entry.escalations} escalation(s)" if entry.escalations else ""
            who = f" by {entry.operator}" if entry.operator else ""
            note = f": {entry.note}" if entry.note else ""
            error = f" (last error: {shorten(entry.error, 120)})" if entry.error else ""
            return f"{entry.step_id} · {entry.tool}: {entry.how}{who}{note}{asked}{error}"
        case ReviewDecided():
            who = f" by {entry.reviewer}" if entry.reviewer else ""
            note = f": {shorten(entry.feedback, 120)}" if entry.feedback else ""
            return f"review {entry.round}: {entry.verdict}{who} ({entry.source}){note}"
        case MessageReceived():
            who = f" from {entry.sender}" if entry.sender else ""
            return f"message {entry.number}{who}: {shorten(entry.text, 120)}"
        case TurnAnswered():
            how = "ended unanswered" if entry.reason == "budget_exceeded" else "answered"
            return (
                f"turn {entry.turn} {how} ({entry.reason}, {entry.iterations} model call(s), "
                f"{entry.tokens} tokens): {shorten(entry.output, 120)}"
            )
        case Forked():
            said = f", saying {shorten(entry.said, 80)!r}" if entry.said is not None else ""
            how = " (replacing its last user message)" if entry.replaced else ""
            return (
                f"forked from {entry.source_workflow_id} (run {entry.source_run_id}) after turn "
                f"{entry.turn}{said}{how}; state {entry.state_hash[:16]}…"
            )
        case _:
            return None


def _shared_detail(entry: JournalEntry) -> str | None:
    """What the loop shared: work handed to other agents, knowledge shown, found or stored."""
    match entry:
        case DelegationStarted():
            return (
                f"{entry.call_id} → {entry.agent} ({entry.workflow_id}): "
                f"{entry.max_tokens} tokens, {entry.max_iterations} model calls, "
                f"{entry.timeout_seconds:g} s"
            )
        case DelegationFinished():
            error = f": {shorten(entry.error, 120)}" if entry.error else ""
            return (
                f"{entry.call_id} ← {entry.agent}: {entry.status}, "
                f"{entry.usage.total_tokens} tokens{error}"
            )
        case KnowledgeInjected():
            if entry.error:
                return f"search failed ({shorten(entry.error, 100)}): {entry.query}"
            shown = ", ".join(f"#{i}" for i in entry.items) or "nothing relevant"
            return f"{shown} ({entry.tokens} tokens) for: {shorten(entry.query, 80)}"
        case KnowledgeRecalled():
            where = f" in {entry.directory or '(root)'}" if entry.scope == "conventions" else ""
            return f"{entry.call_id}: {entry.found} found for {entry.query!r}{where}"
        case KnowledgeStored():
            if entry.error:
                return f"{entry.item_kind} NOT stored ({shorten(entry.error, 100)})"
            how = "" if entry.created is None else (" (new)" if entry.created else " (known)")
            item = f" #{entry.item_id}" if entry.item_id is not None else ""
            return f"{entry.item_kind}{item}{how}: {shorten(entry.content, 100)}"
        case _:
            return None


def render_entry(entry: JournalEntry) -> str:
    """One journal entry on one line (a newline in a model's or tool's text shows as ``␤``)."""
    head = f"#{entry.seq:<4} {_time(entry.at)}  it {entry.iteration:<3} {entry.kind:<22}"
    return one_line(f"{head} {_detail(entry)}")
