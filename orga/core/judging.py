"""Reading a judge's answer, and whether it may decide (pure): anything unclear escalates.

A judge never fails open. Its answer decides a call only when it is a ``JudgeVerdict`` (or a
dict of one) that approves or denies, at or above the operator's confidence floor; anything
else — another type, prose, a verdict outside approve/deny/escalate, a confidence outside 0 to
1, a sure answer below the floor — escalates to a person, saying why.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from orga.contracts.conversation import Message
from orga.contracts.errors import describe_validation_error
from orga.contracts.judges import JudgeAnswer, JudgeOpinion, JudgeVerdict
from orga.contracts.task import LoopStep, TaskInput

__all__ = ["failed", "loop_task", "opinion_text", "read_answer", "task_of"]


def read_answer(raw: object, floor: float) -> JudgeAnswer:
    """What a judge's callable returned, as an answer (unsigned; an escalation says why)."""
    if isinstance(raw, JudgeVerdict):
        verdict = raw
    elif isinstance(raw, dict):
        try:
            verdict = JudgeVerdict.model_validate(raw)
        except ValidationError as error:
            return JudgeAnswer(
                verdict="escalate",
                why_not=f"the judge answered no verdict: {describe_validation_error(error)}",
            )
    else:
        shown = repr(raw)
        shown = shown if len(shown) <= 120 else shown[:119] + "…"
        return JudgeAnswer(
            verdict="escalate",
            why_not=f"the judge answered {type(raw).__name__} {shown}, not a verdict",
        )
    answer = JudgeAnswer(
        verdict=verdict.verdict, confidence=verdict.confidence, reasons=verdict.reasons
    )
    if verdict.verdict == "escalate":
        return answer.model_copy(update={"why_not": "the judge escalated it"})
    if verdict.confidence < floor:
        return answer.model_copy(
            update={
                "why_not": f"the judge is unsure: confidence {verdict.confidence:g} is below "
                f"the floor {floor:g}"
            }
        )
    return answer


def failed(error: BaseException | str) -> JudgeAnswer:
    """The escalation of a judge that failed (an exception it raised, or what the workflow
    saw of its activity), in one bounded line."""
    said = error if isinstance(error, str) else f"failed: {type(error).__name__}: {error}"
    return JudgeAnswer(verdict="escalate", why_not=f"the judge {said}"[:500])


def opinion_text(judge: JudgeOpinion) -> str:
    """What a judge said of a waiting call, for the person who decides instead."""
    reasons = f": {judge.reasons}" if judge.reasons else ""
    return (
        f"the judge {judge.judge} said {judge.verdict} (confidence {judge.confidence:g})"
        f"{reasons} — not its decision: {judge.why_not or 'it decided'}"
    )


def task_of(task: TaskInput) -> str:
    """A task's steps as its judge is shown them (``JudgeCase.task``): each step's id and what
    it does — its tool, or the agent of its loop."""

    def doing(action: object) -> str:
        return (
            f"loop of {action.input.config.agent_id}"
            if isinstance(action, LoopStep)
            else (getattr(action, "tool", "?"))
        )

    steps = ", ".join(f"{step.id} ({doing(step.action)})" for step in task.steps)
    return f"a task of {len(task.steps)} step(s): {steps}"


def loop_task(messages: Sequence[Message]) -> str:
    """A loop's task as its judge is shown it (``JudgeCase.task``): its first user message."""
    return next((m.content for m in messages if m.role == "user"), "")
