"""Asking a policy set again what an engine was asked: ``orga policy what-if`` and ``test``.

Either engine: a Cedar directory, or an OPA decision endpoint serving the candidate policies.
Every decision a Cedar or OPA gate made carries what it was asked (``AskedPolicy``: the orga
action it judged, with the loop's facts, and what the default checks said before it). Here a
candidate policy set is asked the same question through the same gate code — the request is
built again from the action, so a candidate whose schema declares other attributes sees what
it declares — and its verdict joins the recorded default checks as the gate joins them
(``combine``). ``flip`` names what changed: ``allow→deny``, ``deny→allow``, ``approval
needed``, ``approval no longer needed`` or ``modification changed``.

A policy test case (``PolicyCase``, one JSON object per line of a cases file) is the same
question with the answer it must get; ``orga policy record`` writes them from recorded
decisions, so a what-if that looks right becomes a regression test.

A record or a case is data to check (a history can be written by any worker of the namespace,
a cases file by anyone who edits the repository): ``question`` holds its action to what a gate
is ever asked — an orga action whose arguments are a JSON object within ``orga.core.arguments``'
bounds — and a cases file is read line by line, each at most ``CASE_LINE_LIMIT`` characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orga.contracts.errors import InvalidConfig, ToolInputError
from orga.contracts.inference import Usage
from orga.contracts.policy import Decision, PolicyAction, PolicyDecision, PolicyRequest
from orga.contracts.verdicts import AskedPolicy
from orga.core.arguments import parse_arguments
from orga.gates.cedar import CedarGate
from orga.gates.default import combine, inherit
from orga.gates.opa import OpaGate

__all__ = [
    "CASE_LINE_LIMIT",
    "FLIP_KINDS",
    "Candidate",
    "CaseResult",
    "PolicyCase",
    "ask_again",
    "flip",
    "problems",
    "question",
    "read_cases",
    "run_cases",
]

CASE_LINE_LIMIT: Final = 16 * 1024 * 1024
"""Characters of one line of a cases file (a case's arguments are at most 1 Mi characters,
each written as up to six in JSON)."""

Candidate = CedarGate | OpaGate
"""A policy set to ask: a Cedar directory, or an OPA decision endpoint."""

FLIP_KINDS = (
    "allow→deny",
    "deny→allow",
    "approval needed",
    "approval no longer needed",
    "modification changed",
)
"""What a candidate policy set can change about one recorded decision."""


def problems(error: ValidationError, limit: int = 3) -> str:
    """A validation error in one bounded line: its first ``limit`` problems, each ``field:
    message`` (a field named by the input is cut short: it may be anything)."""
    found = error.errors()
    said = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])[:60] or 'value'}: {e['msg'][:200]}"
        for e in found[:limit]
    )
    return said + (f"; and {len(found) - limit} more" if len(found) > limit else "")


def question(action: Mapping[str, Any]) -> PolicyAction:
    """The orga action a record or a case holds, as a gate is ever asked one: a
    ``PolicyAction`` whose arguments are a JSON object within ``orga.core.arguments``' bounds
    (a call whose arguments are not was refused before any engine was asked).

    Raises:
        ValueError: it is not such an action, and why.
    """
    try:
        checked = PolicyAction.model_validate(action)
    except ValidationError as error:
        raise ValueError(f"holds no action ({problems(error)})") from None
    try:
        parse_arguments(checked.tool or "", checked.arguments)
    except ToolInputError as error:
        said = error.message.split(". Call it again")[0]  # the model's advice: not here
        raise ValueError(f"holds arguments no gate is asked ({said[:300]})") from None
    return checked


async def ask_again(gate: Candidate, asked: AskedPolicy) -> PolicyDecision:
    """What ``gate`` decides for the question ``asked`` records, joined with the recorded
    default checks as the gate joins them.

    Raises:
        InvalidConfig: the record does not hold an action a gate is asked (a long one whose
            store is gone, or a record no gate wrote).
    """
    try:
        action = question(asked.action)
    except ValueError as error:
        raise InvalidConfig(f"the recorded request {error}") from error
    request = PolicyRequest(
        mode="cedar" if isinstance(gate, CedarGate) else "opa",
        agent_id=asked.agent_id,
        workflow_id=asked.workflow_id,
        subject=asked.subject,
        iteration=asked.iteration,
        usage=Usage(total_tokens=asked.tokens_used),
        advertised=[action.tool] if action.tool else [],
        actions=[action],
    )
    if isinstance(gate, CedarGate):
        [verdict] = gate.decide([action], request)
    else:
        [verdict] = await gate.decide([action], request)
    default = PolicyDecision(
        decision=asked.default,
        policy_ids=list(asked.default_ids),
        arguments=asked.default_arguments,
    )
    if asked.inherits:  # a gate up a delegation tree, as the policy activity joins it
        return inherit(default, verdict, f"the {asked.engine} gate of {asked.agent_id!r}")
    return combine(default, verdict) if default.decision != "deny" else default


def flip(before: Decision, before_arguments: str | None, after: PolicyDecision) -> str | None:
    """What changed from the recorded decision to ``after`` (one of ``FLIP_KINDS``), or None."""
    permits = ("allow", "modify")
    if before == "require_approval" and after.decision != "require_approval":
        return "approval no longer needed"
    if after.decision == "require_approval" and before != "require_approval":
        return "approval needed"
    if before in permits and after.decision == "deny":
        return "allow→deny"
    if before == "deny" and after.decision in permits:
        return "deny→allow"
    before_run = _arguments(before_arguments if before == "modify" else None)
    after_run = _arguments(after.arguments if after.decision == "modify" else None)
    if before in permits and after.decision in permits and before_run != after_run:
        return "modification changed"
    return None


def _arguments(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class PolicyCase(BaseModel):
    """One line of a policy test file: a question for the policy set and the answer it must
    get. The question is what a gate decision records (``AskedPolicy``: the action, the loop's
    facts, the default checks' verdict); the answer is ``expect`` (and, for ``modify``, the
    ``arguments`` the call must run with)."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    action: dict[str, Any]
    """A ``PolicyAction``: ``{"kind": "call_tool", "tool": "file_read", "arguments": "{…}"}``."""
    agent_id: str = "default"
    subject: Literal["loop", "task"] = "loop"
    iteration: int = 1
    tokens_used: int = 0
    default: Decision = "allow"
    """What the default checks say first (``require_approval`` for a tool that needs one)."""
    default_ids: list[str] = Field(default_factory=list[str])
    expect: Decision
    arguments: str | None = None
    """For ``expect: modify``: the arguments, as JSON text."""

    def asked(self) -> AskedPolicy:
        return AskedPolicy(
            engine="cedar",
            action=self.action,
            agent_id=self.agent_id,
            subject=self.subject,
            iteration=self.iteration,
            tokens_used=self.tokens_used,
            default=self.default,
            default_ids=self.default_ids,
            decision=self.expect,
            arguments=self.arguments,
        )

    @classmethod
    def of(cls, asked: AskedPolicy, name: str = "") -> PolicyCase:
        """The case that ``asked`` gets the decision it got."""
        return cls(
            name=name,
            action=asked.action,
            agent_id=asked.agent_id,
            subject=asked.subject,
            iteration=asked.iteration,
            tokens_used=asked.tokens_used,
            default=asked.default,
            default_ids=asked.default_ids,
            expect=asked.decision,
            arguments=asked.arguments,
        )


def read_cases(path: Path) -> list[PolicyCase]:
    """The cases of a file (JSON Lines; blank lines and ``#`` comments skipped), read a line
    at a time.

    Raises:
        InvalidConfig: the file cannot be read, or a line is not a case (too long, not JSON,
            not a case's fields, an action no gate is asked), naming the line.
    """
    cases: list[PolicyCase] = []
    try:
        with path.open(encoding="utf-8", newline=None) as lines:
            number = 0
            while line := lines.readline(CASE_LINE_LIMIT + 1):
                number += 1
                if len(line.rstrip("\n")) > CASE_LINE_LIMIT:
                    raise InvalidConfig(
                        f"{path.name}:{number}: not a policy case (longer than "
                        f"{CASE_LINE_LIMIT} characters: no case a gate was asked is as long)"
                    )
                if line.strip() and not line.lstrip().startswith("#"):
                    cases.append(_case(path, number, line))
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidConfig(f"cannot read the cases file {str(path)!r}: {error}") from error
    return cases


def _case(path: Path, number: int, line: str) -> PolicyCase:
    try:
        case = PolicyCase.model_validate_json(line)
        question(case.action)
    except ValidationError as error:
        raise InvalidConfig(
            f"{path.name}:{number}: not a policy case ({problems(error)})"
        ) from None
    except ValueError as error:
        raise InvalidConfig(f"{path.name}:{number}: not a policy case (action: {error})") from None
    return case.model_copy(update={"name": case.name or f"{path.name}:{number}"})


@dataclass(frozen=True)
class CaseResult:
    """How one case fared."""

    case: PolicyCase
    got: PolicyDecision

    @property
    def passed(self) -> bool:
        return flip(self.case.expect, self.case.arguments, self.got) is None and (
            self.got.decision == self.case.expect
        )


async def run_cases(gate: Candidate, cases: Iterable[PolicyCase]) -> list[CaseResult]:
    """Each case asked of ``gate``."""
    return [CaseResult(case, await ask_again(gate, case.asked())) for case in cases]
