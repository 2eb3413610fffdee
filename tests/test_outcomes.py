"""A call's begun effect is marked where the next attempt reads it before the tool runs, and a
lost attempt is settled strictly (issue 63): the tool does not run unless the server stored the
mark; a reconcile that raises, hangs or answers nonsense settles nothing (``unknown``: a person
decides); a lost attempt of an idempotent tool is said, in what the model reads."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import AsyncActivityCancelledError, Client
from temporalio.testing import ActivityEnvironment

from orga.activities.tools import ToolActivities
from orga.contracts.conversation import ToolCall
from orga.contracts.errors import OutcomeUnknown, ToolUnavailable
from orga.contracts.tools import ToolInvocation
from orga.runtime.store import Store
from orga.tools import _outcomes
from orga.tools._outcomes import BEGAN, MAX_HUNG_RECONCILES
from orga.tools.ledger import Ledger
from orga.tools.sdk import Tool, ToolContext, ToolRegistry, tool
from orga.worker.blobs import BlobStore


class _Server:
    """The server as the tool activity's mark meets it: stores it, or refuses it."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        self.refuse = refuse
        self.stored: list[tuple[object, ...]] = []

    def get_async_activity_handle(self, *, task_token: bytes) -> _Server:
        return self

    async def heartbeat(self, *details: object) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.stored.append(details)


def _activities(tmp_path: Path, *tools: Tool) -> ToolActivities:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    return ToolActivities(
        registry=ToolRegistry(list(tools)), blobs=BlobStore(store), ledger=Ledger(store)
    )


def _env(server: _Server, *, lost: bool = False) -> ActivityEnvironment:
    """An attempt (the second, after one lost mid-effect, where ``lost``) whose client is
    ``server`` (duck-typed: the activity asks it only for the call's handle)."""
    env = ActivityEnvironment(client=cast(Client, server))
    if lost:
        env.info = dataclasses.replace(env.info, attempt=2, heartbeat_details=[BEGAN])
    return env


def _call(name: str) -> ToolInvocation:
    return ToolInvocation(call=ToolCall(id="c1", name=name, arguments="{}"), workflow_id="w")


@pytest.mark.parametrize(
    ("refusal", "raised"),
    [
        (AsyncActivityCancelledError(), asyncio.CancelledError),  # cancelled before it began
        (RuntimeError("connection refused"), ToolUnavailable),  # the server out of reach
    ],
)
async def test_a_tool_with_effects_does_not_run_unless_its_mark_is_stored(
    tmp_path: Path, refusal: BaseException, raised: type[BaseException]
) -> None:
    ran: list[str] = []

    @tool(serial=True)
    async def pay() -> str:
        """Pay."""
        ran.append("paid")
        return "paid"

    server = _Server(refuse=refusal)
    with pytest.raises(raised):
        await _env(server).run(_activities(tmp_path, pay).run_tool, _call("pay"))
    assert ran == []  # no effect without its mark where the next attempt reads it


async def test_the_mark_is_stored_before_the_tool_runs(tmp_path: Path) -> None:
    server = _Server()
    seen: list[list[tuple[object, ...]]] = []

    @tool(serial=True)
    async def pay() -> str:
        """Pay."""
        seen.append(list(server.stored))  # what the server had when the effect began
        return "paid"

    await _env(server).run(_activities(tmp_path, pay).run_tool, _call("pay"))
    assert seen == [[(BEGAN,)]]


async def test_a_lost_attempt_of_an_idempotent_tool_is_said_to_the_model(tmp_path: Path) -> None:
    @tool(idempotent=True)
    async def upsert() -> str:
        """Write the record (again, harmlessly)."""
        return "written"

    result = await _env(_Server(), lost=True).run(
        _activities(tmp_path, upsert).run_tool, _call("upsert")
    )
    assert result.settled == "ran again"
    assert result.content.startswith("[an earlier attempt of this call was lost after it began")


def _reconciling(reconcile: Any, timeout: float = 5.0) -> Tool:
    @tool(serial=True, reconcile=reconcile, reconcile_timeout=timeout)
    async def pay() -> str:
        """Pay."""
        return "paid again"

    return pay


async def _settled(tmp_path: Path, pay: Tool) -> Any:
    return await _env(_Server(), lost=True).run(_activities(tmp_path, pay).run_tool, _call("pay"))


def _raises(ctx: ToolContext) -> str | None:
    raise ConnectionError("the bank's API is down")


async def _hangs(ctx: ToolContext) -> str | None:
    await asyncio.Event().wait()
    return None


def _nonsense(ctx: ToolContext) -> object:
    return True


@pytest.mark.parametrize(
    ("reconcile", "why"),
    [
        (_raises, "reconcile raised ConnectionError: the bank's API is down"),
        (_hangs, "reconcile did not answer within 0.2 s"),
        (_nonsense, "reconcile raised TypeError: it answered True"),
    ],
    ids=["raises", "hangs", "nonsense"],
)
async def test_a_reconcile_that_raises_hangs_or_answers_nonsense_leaves_it_unknown(
    tmp_path: Path, reconcile: Any, why: str
) -> None:
    with pytest.raises(OutcomeUnknown) as unknown:
        await _settled(tmp_path, _reconciling(reconcile, timeout=0.2))
    assert why in str(unknown.value) and "a person decides" in str(unknown.value)
    assert unknown.value.non_retryable


async def test_a_reconcile_that_answers_settles_the_call(tmp_path: Path) -> None:
    happened = await _settled(tmp_path, _reconciling(lambda ctx: "paid 300"))
    assert (happened.settled, happened.content.splitlines()[-1]) == ("reconciled", "paid 300")
    not_yet = await _settled(tmp_path, _reconciling(lambda ctx: None))
    assert (not_yet.settled, not_yet.content.splitlines()[-1]) == ("ran again", "paid again")


async def test_a_hanging_sync_reconcile_keeps_only_its_own_thread_and_few_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync reconcile that hangs cannot be stopped: it keeps a daemon thread of its own (not
    the activity's executor, not the worker's exit), and past ``MAX_HUNG_RECONCILES`` of them
    a reconcile is not started at all — the outcome is unknown at once."""
    release = threading.Event()
    started: list[float] = []

    def stuck(ctx: ToolContext) -> str | None:
        started.append(time.monotonic())
        release.wait(30)
        return None

    monkeypatch.setattr(_outcomes, "_hung", 0)
    try:
        for _ in range(MAX_HUNG_RECONCILES):
            with pytest.raises(OutcomeUnknown, match="did not answer within"):
                await _settled(tmp_path, _reconciling(stuck, timeout=0.1))
        hung = [t for t in threading.enumerate() if t.name.startswith("reconcile ")]
        assert len(hung) == MAX_HUNG_RECONCILES and all(t.daemon for t in hung)
        with pytest.raises(OutcomeUnknown, match="still hang past their timeout"):
            await _settled(tmp_path, _reconciling(stuck, timeout=0.1))
        assert len(started) == MAX_HUNG_RECONCILES  # the last one was not started
    finally:
        release.set()
    for thread in hung:
        thread.join(5)
    assert _outcomes._hung == 0  # they ended: the count let them go  # pyright: ignore[reportPrivateUsage]
