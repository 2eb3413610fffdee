"""The ``consult_judge`` activity: a judge's opinion on a held call, signed when it decides.

The worker loads its judges when it starts (``load_judges``: each ``[judges.<name>]`` of the
agents file, its callable imported and its key read and matched with the public key enrolled as
``[approvers.<name>]``), so a judge that cannot run stops the worker instead of every call it
would judge. The activity calls the judge with the case, reads its answer
(``orga.core.judging``: anything unclear escalates) and signs a clear, sure one as the judge's
decision. A judge that raises escalates too, with its error in the opinion; one that takes
longer than its ``timeout`` is cut off by the activity's own timeout (the workflow escalates).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio import activity

from orga.contracts.approvals import ApprovalDecision, EnrolledApprover
from orga.contracts.errors import InvalidConfig
from orga.contracts.judges import CONSULT_JUDGE, JudgeAnswer, JudgeRequest, JudgeSpec
from orga.core.judging import read_answer
from orga.runtime.approver_keys import ApproverKeyError, load_key, public_key_of, sign_decision
from orga.runtime.files import check_private_file

__all__ = ["JudgeActivities", "LoadedJudge", "load_judges"]


@dataclass(frozen=True)
class LoadedJudge:
    """A judge ready to run: its spec, its callable and its key."""

    spec: JudgeSpec
    judge: Callable[..., Any]
    key: Ed25519PrivateKey


def _callable(spec: JudgeSpec, origin: str) -> Callable[..., Any]:
    module_name, _, name = spec.code.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InvalidConfig(
            f"{origin}: judge {spec.name!r}: cannot import {module_name!r} ({error})"
        ) from error
    found = getattr(module, name, None)
    if not callable(found):
        raise InvalidConfig(f"{origin}: judge {spec.name!r}: {spec.code!r} is not a callable")
    return found


def load_judges(
    specs: Sequence[JudgeSpec], approvers: Sequence[EnrolledApprover], folder: Path, origin: str
) -> dict[str, LoadedJudge]:
    """Each judge of ``specs``, its callable imported and its key (relative to ``folder``)
    read and checked against the key enrolled for it.

    Raises:
        InvalidConfig: a callable cannot be imported, a key cannot be read or is readable by
            others, or the judge is not enrolled as an approver with that key.
    """
    enrolled = {a.name: a for a in approvers}
    loaded: dict[str, LoadedJudge] = {}
    for spec in specs:
        path = folder / spec.key_file
        setting = f"judges.{spec.name}.key_file"
        check_private_file(path, setting)
        try:
            if path.stat().st_mode & 0o077:
                raise InvalidConfig(
                    f"{origin}: {setting}={path}: others may read this private key: "
                    f"chmod 600 {path}"
                )
            key = load_key(path, setting)
        except (ApproverKeyError, OSError) as error:
            raise InvalidConfig(f"{origin}: judge {spec.name!r}: {error}") from error
        seat = enrolled.get(spec.name)
        if seat is None or seat.public_key != public_key_of(key):
            raise InvalidConfig(
                f"{origin}: judge {spec.name!r} signs with a key not enrolled for it: enroll "
                f'[approvers.{spec.name}] key = "{public_key_of(key)}" (groups for your '
                "policies), so its decisions are verified like a person's"
            )
        loaded[spec.name] = LoadedJudge(spec, _callable(spec, origin), key)
    return loaded


class JudgeActivities:
    """The judges one worker runs."""

    def __init__(self, judges: Mapping[str, LoadedJudge]) -> None:
        self._judges = dict(judges)

    @activity.defn(name=CONSULT_JUDGE)
    async def consult_judge(self, request: JudgeRequest) -> JudgeAnswer:
        """The judge's answer on ``request.case``; a clear, sure one signed as its decision."""
        loaded = self._judges.get(request.judge)
        if loaded is None:
            return JudgeAnswer(
                verdict="escalate",
                why_not=f"this worker has no judge {request.judge!r} (its agents file names "
                f"{sorted(self._judges) or 'none'})",
            )
        try:
            if inspect.iscoroutinefunction(loaded.judge):
                raw = await loaded.judge(request.case)
            else:
                raw = await asyncio.to_thread(functools.partial(loaded.judge, request.case))
        except Exception as error:  # the judge's own failure: a person decides
            return JudgeAnswer(
                verdict="escalate",
                why_not=f"the judge failed: {type(error).__name__}: {error}"[:500],
            )
        answer = read_answer(raw, loaded.spec.confidence_floor)
        if answer.why_not is not None:
            return answer
        decision = sign_decision(
            ApprovalDecision(
                call_id=request.case.call_id,
                approved=answer.verdict == "approve",
                reason=answer.reasons or None,
                approver=request.judge,
            ),
            workflow_id=request.case.workflow_id,
            pending=request.pending,
            key=loaded.key,
        )
        return answer.model_copy(update={"decision": decision})
