"""Loops that belong to someone (issue 53): a principal on every loop, bound by an enrolled
issuer or marked a claim, and a spend ledger per principal and period in the shared store
(PostgreSQL here, as in a cluster) that every model call reserves against before it is sent."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

import orga
from orga.contracts import search_attributes as sa
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.principals import PrincipalClaim, SpendLine
from orga.contracts.state import LoopResult, LoopState
from orga.contracts.task import TaskInput
from orga.runtime.binding import Issuer, bind
from orga.runtime.settings import ModelPrice, Settings
from orga.runtime.spend import SpendLedger
from orga.runtime.store import Store
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import agents_file, eventually, failure
from tests.helpers import orga as run_orga

PRICE = ModelPrice(input=500.0, output=500.0)
"""USD per million tokens: a call served 10 tokens in and 90 out costs 0.05 USD."""
CALL_USD = 0.05
ISSUER = Ed25519PrivateKey.generate()
"""The web endpoint's key, which the operator enrolls as issuer ``web``."""


def _public(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def principals_file(tmp_path: Path, body: str, name: str = "principals.toml") -> Path:
    """The operator's principals file: issuer ``web`` enrolled, and ``body``."""
    path = tmp_path / name
    path.write_text(f'[issuers.web]\nkey = "{_public(ISSUER)}"\n\n{body}')
    return path


def _settings(harness: Harness, model: str, principals: Path, **changes: Any) -> Settings:
    return scripted_settings(
        harness.model, model_prices={model: PRICE}, principals_file=principals, **changes
    )


def _user() -> str:
    return f"ann-{uuid.uuid4().hex[:8]}"


def _spent(store: Store, user: str) -> SpendLine:
    [line] = SpendLedger(store).lines("day", scope="user", name=user)
    return line


async def _start(
    harness: Harness,
    model: str,
    principal: PrincipalClaim | None,
    *,
    workflow_id: str | None = None,
    **config: Any,
) -> WorkflowHandle[Any, LoopResult]:
    handle = await harness.client.start_workflow(
        "ReasoningLoop",
        LoopInput(
            messages=[Message(role="user", content="hello")],
            config=LoopConfig(model=model, max_output_tokens=100, **config),
            principal=principal,
        ),
        id=workflow_id or f"loop-{uuid.uuid4().hex[:12]}",
        task_queue=harness.task_queue,
        result_type=LoopResult,
    )
    harness.handles.append(handle)
    return handle


async def _state(handle: WorkflowHandle[Any, Any]) -> LoopState:
    return await handle.query("state", result_type=LoopState)


async def _identities(handle: WorkflowHandle[Any, Any]) -> set[str]:
    """Who ran the loop's model calls (the workers' identities)."""
    history = await handle.fetch_history()
    return {
        e.activity_task_started_event_attributes.identity
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    }


async def test_forty_loops_of_one_principal_on_two_workers_stay_within_its_day_limit(
    harness: Harness, tmp_path: Path, postgres_url: str
) -> None:
    """40 loops at once, each one call of 0.05 USD, for a user whose day limit is 1.00 USD:
    the ledger, shared by two workers through PostgreSQL, never lets them spend more; every
    loop it stops ends ``BudgetExceeded`` naming the user's budget."""
    user = _user()
    model = harness.new_model(
        [Turn(text="done", input_tokens=10, output_tokens=90) for _ in range(40)]
    )
    principals = principals_file(tmp_path, f"[users.{user}]\nday_usd = 1.0\n")
    settings = _settings(harness, model, principals, store_url=postgres_url)
    other = await harness.another_process()
    async with harness.worker(settings=settings), other.worker(settings=settings):
        handles = await asyncio.gather(
            *(_start(harness, model, PrincipalClaim(user=user)) for _ in range(40))
        )
        outcomes = await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)
        states = await asyncio.gather(*(_state(h) for h in handles))
        identities = set[str]().union(*await asyncio.gather(*(_identities(h) for h in handles)))
    answered = [o for o in outcomes if isinstance(o, LoopResult)]
    stopped = [o for o in outcomes if isinstance(o, WorkflowFailureError)]
    assert len(answered) + len(stopped) == 40
    assert answered and stopped  # 2.00 USD asked for, 1.00 USD allowed
    for error in stopped:
        cause = error.cause
        assert isinstance(cause, ApplicationError) and cause.type == "BudgetExceeded", cause
        assert cause.message.startswith(f"{user} (claimed)'s budget"), cause.message
        assert "day_usd=1" in cause.message
    with Store(postgres_url) as store:
        line = _spent(store, user)
    # `orga spend` reports what the ledger holds, limit included.
    code, out, err = await run_orga(
        "spend", "--principal", user, "--json",
        env={"ORGA_STORE_URL": postgres_url, "ORGA_PRINCIPALS": str(principals)},
    )  # fmt: skip
    assert code == 0, err
    assert [SpendLine.model_validate(x) for x in json.loads(out)] == [
        line.model_copy(update={"limit_usd": 1.0})
    ]
    assert line.spent_usd <= 1.0 + 1e-9
    assert line.reserved_usd == 0  # every hold settled or given back
    assert line.calls == len(answered) == sum(1 for s in states if s.usage.cost_usd > 0)
    assert line.spent_usd == pytest.approx(sum(s.usage.cost_usd for s in states))
    assert line.spent_usd == pytest.approx(CALL_USD * len(answered))
    assert len(identities) == 2  # both workers made calls, against one ledger


async def test_a_loop_its_delegated_child_and_a_fork_charge_one_ledger(
    harness: Harness, tmp_path: Path
) -> None:
    """Ann's loop (bound by the web endpoint) delegates to a child, which runs for Ann,
    verified through its server-set parent; a fork Ann starts is bound to her too; the
    ledger holds every call of the three, and what the loops say they cost."""
    user = _user()
    lead = harness.new_model(
        [
            Turn(
                tool_calls=[("delegate", {"agent": "research", "task": "find it"})],
                input_tokens=10,
                output_tokens=90,
            ),
            Turn(text="found", input_tokens=10, output_tokens=90),
            Turn(text="found again", input_tokens=10, output_tokens=90),  # the fork's
        ]
    )
    research = harness.new_model([Turn(text="it is 4", input_tokens=10, output_tokens=90)])
    agents = agents_file(tmp_path, {"lead": lead, "research": research, "writer": research})
    principals = principals_file(tmp_path, "")
    settings = scripted_settings(
        harness.model,
        agents_file=agents,
        principals_file=principals,
        model_prices={lead: PRICE, research: PRICE},
    )
    issuer = Issuer("web", ISSUER)
    tenant = f"acme-{uuid.uuid4().hex[:8]}"
    async with harness.worker(settings=settings):
        loop_id = f"loop-{uuid.uuid4().hex[:12]}"
        handle = await _start(
            harness,
            lead,
            bind(PrincipalClaim(user=user, tenant=tenant), loop_id, issuer),
            workflow_id=loop_id,
            agent_id="lead",
            max_total_tokens=10_000,
        )
        result = await handle.result()
        [delegation] = (await _state(handle)).delegations
        child = harness.client.get_workflow_handle(delegation.workflow_id)
        child_state = await _state(child)
        harness.handles.append(child)
        fork = await orga.loop(harness.client, loop_id).fork(
            1, say="again", principal=PrincipalClaim(user=user), issuer=issuer
        )
        harness.handles.append(fork.handle)
        forked = await fork.result()
        fork_state = await fork.state()
    assert result.output == "found" and forked.output == "found again"
    assert child_state.principal is not None and child_state.principal.verified
    assert child_state.principal.user == user and child_state.principal.issuer == "web"
    assert fork_state.principal is not None and fork_state.principal.verified
    from tests.harness import TEST_STORE

    line = _spent(TEST_STORE, user)
    assert line.calls == 4  # the lead's two, the child's one, the fork's one
    assert line.spent_usd == pytest.approx(4 * CALL_USD)
    # The loop's cost holds its child's; the fork's carries what its source had spent by then.
    assert result.usage.cost_usd == pytest.approx(3 * CALL_USD)
    assert line.spent_usd == pytest.approx(result.usage.cost_usd + CALL_USD)
    # The fork's starter named Ann without a tenant (and no mapping gives her one).
    [of_tenant] = SpendLedger(TEST_STORE).lines("day", scope="tenant", name=tenant)
    assert of_tenant.calls == 3 and of_tenant.spent_usd == pytest.approx(3 * CALL_USD)


async def test_a_principal_is_a_claim_unless_an_enrolled_issuer_bound_it_to_this_loop(
    harness: Harness, tmp_path: Path
) -> None:
    user = _user()
    model = harness.new_model([Turn(text="done")] * 5)
    principals = principals_file(tmp_path, f'[users.{user}]\ntenant = "acme"\n')
    stranger = Issuer("web", Ed25519PrivateKey.generate())  # the right name, not its key
    async with harness.worker(settings=_settings(harness, model, principals)):
        claimed = await _start(harness, model, PrincipalClaim(user=user, tenant="evil"))
        forged = await _start(harness, model, bind(user, "loop-x", stranger))
        moved = await _start(harness, model, bind(user, "loop-elsewhere", Issuer("web", ISSUER)))
        bound_id = f"loop-{uuid.uuid4().hex[:12]}"
        bound = await _start(
            harness, model, bind(user, bound_id, Issuer("web", ISSUER)), workflow_id=bound_id
        )
        for handle in (claimed, forged, moved, bound):
            await handle.result()
        states = [await _state(h) for h in (claimed, forged, moved, bound)]
        listed = [
            w.id
            async for w in harness.client.list_workflows(
                f"OrgaPrincipal = '{user}' AND OrgaTenant = 'acme'"
            )
        ]
    for state in states[:3]:
        assert state.principal is not None and not state.principal.verified
    assert states[3].principal is not None and states[3].principal.verified
    # The operator's mapping wins over what the claim says.
    assert {s.principal.tenant for s in states if s.principal} == {"acme"}
    assert sorted(listed) == sorted(h.id for h in (claimed, forged, moved, bound))
    described = await bound.describe()
    assert described.typed_search_attributes.get(sa.PRINCIPAL) == user


async def test_the_operator_may_refuse_claims_and_require_a_principal(
    harness: Harness, tmp_path: Path
) -> None:
    model = harness.new_model([Turn(text="done")] * 3)
    principals = principals_file(tmp_path, '[principals]\nclaims = "refuse"\nrequired = true\n')
    async with harness.worker(settings=_settings(harness, model, principals)):
        nobody = await _start(harness, model, None)
        claimed = await _start(harness, model, PrincipalClaim(user=_user()))
        bound_id = f"loop-{uuid.uuid4().hex[:12]}"
        bound = await _start(
            harness, model, bind(_user(), bound_id, Issuer("web", ISSUER)), workflow_id=bound_id
        )
        refused_nobody = await failure(nobody, "InvalidConfig")
        refused_claim = await failure(claimed, "InvalidConfig")
        assert (await bound.result()).output == "done"
    assert "requires every loop to run for a principal" in refused_nobody.message
    assert "is only claimed" in refused_claim.message


async def test_a_principal_over_its_limit_is_refused_before_the_provider_is_asked(
    harness: Harness, tmp_path: Path
) -> None:
    """A tenant's token limit binds all of its users; the refused call never reaches the
    model; a model without a known price cannot be kept within a USD limit."""
    user = _user()
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    model = harness.new_model([Turn(text="done", input_tokens=10, output_tokens=90)] * 3)
    unpriced = harness.new_model([Turn(text="free?")])
    principals = principals_file(
        tmp_path,
        f'[users.{user}]\ntenant = "{tenant}"\nday_usd = 5.0\n\n'
        f"[tenants.{tenant}]\nday_tokens = 150\n",
    )
    async with harness.worker(settings=_settings(harness, model, principals)):
        first = await _start(harness, model, PrincipalClaim(user=user))
        assert (await first.result()).output == "done"
        second = await _start(harness, model, PrincipalClaim(user=user))
        over = await failure(second, "BudgetExceeded")
        third = await _start(harness, unpriced, PrincipalClaim(user=user))
        unknown = await failure(third, "BudgetExceeded")
    assert f"tenant {tenant}'s day_tokens" in over.message and "day_tokens=150" in over.message
    assert len(harness.model.requests_for(model)) == 1
    assert "price unknown" in unknown.message and not harness.model.requests_for(unpriced)


async def test_orga_run_binds_the_principal_with_the_issuer_key(
    harness: Harness, tmp_path: Path, env: Any
) -> None:
    """``orga run --principal ann --tenant acme`` with ``ORGA_ISSUER``/``ORGA_ISSUER_KEY``:
    the worker records ann verified; ``orga list --principal`` finds the loop."""
    from tests.helpers import on
    from tests.helpers import orga as run_orga

    user = _user()
    key_path = tmp_path / "issuer.pem"
    key_path.write_bytes(
        ISSUER.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    model = harness.new_model([Turn(text="done")])
    principals = principals_file(tmp_path, "")
    async with harness.worker(settings=_settings(harness, model, principals)):
        code, _out, err = await run_orga(
            "run", "hello", "--provider", "openai", "--model", model,
            "--principal", user, "--tenant", "acme", "--json",
            env={**on(env, harness), "ORGA_ISSUER": "web", "ORGA_ISSUER_KEY": str(key_path)},
        )  # fmt: skip
        assert code == 0, err
        listed = await eventually(
            lambda: _listed(env, harness, user), "orga list --principal finds the loop"
        )
        [row] = listed
        handle = harness.client.get_workflow_handle(row["workflow_id"])
        harness.handles.append(handle)
        state = await _state(handle)
        code, shown, err = await run_orga("state", handle.id, env=on(env, harness))
    assert code == 0, err
    assert f"principal     {user}@acme\n" in shown  # verified: no "(claimed)"
    assert "left          user" in shown and "no limit" in shown
    assert state.principal is not None and state.principal.verified
    assert row["principal"] == f"{user}@acme"


async def _listed(env: Any, harness: Harness, user: str) -> list[dict[str, Any]]:
    import json

    from tests.helpers import on
    from tests.helpers import orga as run_orga

    code, out, _ = await run_orga("list", "--principal", user, "--json", env=on(env, harness))
    rows: list[dict[str, Any]] = json.loads(out) if code == 0 else []
    return rows


async def test_a_worker_killed_mid_call_charges_its_retry_once(
    env: Any, harness: Harness, tmp_path: Path, postgres_url: str
) -> None:
    """Worker A is SIGKILLed while the provider answers; Temporal retries the call on worker
    B, which takes A's hold over (same key): the ledger charges the call once."""
    import signal

    from temporalio.client import Client

    from orga.plugin import replayer
    from orga.runtime.converter import data_converter
    from tests.helpers import host_env, worker_process

    user = _user()
    model = harness.new_model(
        [
            Turn(text="too late", delay=120),  # worker A dies while this one waits
            Turn(text="done", input_tokens=10, output_tokens=90),
        ]
    )
    principals = principals_file(tmp_path, f"[users.{user}]\nday_usd = 1.0\n")

    def host(name: str) -> dict[str, str]:
        prices = json.dumps({model: {"input": 500, "output": 500}})
        return host_env(
            env, harness, name, tmp_path, postgres_url,
            ORGA_PRINCIPALS=str(principals), ORGA_MODEL_PRICES=prices,
        )  # fmt: skip

    with Store(postgres_url) as store:
        client = await Client.connect(
            env.client.service_client.config.target_host,
            data_converter=data_converter(lambda: store),
        )
        loop_id = f"killed-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(
            "ReasoningLoop",
            LoopInput(
                messages=[Message(role="user", content="hello")],
                config=LoopConfig(model=model, max_output_tokens=100),
                principal=PrincipalClaim(user=user),
            ),
            id=loop_id,
            task_queue=harness.task_queue,
            result_type=LoopResult,
        )
        async with worker_process(host("a")) as first:
            await eventually(lambda: harness.model.requests_for(model), "the call reached A")
            held = _spent(store, user)
            first.send_signal(signal.SIGKILL)
            await first.wait()
        async with worker_process(host("b")):
            result = await asyncio.wait_for(handle.result(), 120)
        line = _spent(store, user)
        await replayer(store).replay_workflow(await handle.fetch_history())
    assert held.reserved_usd > 0 and held.spent_usd == 0  # A held the worst case, charged nothing
    assert result.output == "done"
    assert len(harness.model.requests_for(model)) == 2  # asked twice …
    assert line.calls == 1 and line.spent_usd == pytest.approx(CALL_USD)  # … charged once
    assert line.reserved_usd == 0
    assert result.usage.cost_usd == pytest.approx(CALL_USD)


@workflow.defn(name="ReasoningLoop")
class RogueParent:
    """orga's workflow type name, on an attacker's own task queue: it starts a loop on the
    operator's queue as its child, handing it a binding it copied from another loop's
    history."""

    @workflow.run
    async def run(self, child: LoopInput, child_id: str, queue: str) -> LoopState:
        handle = await workflow.start_child_workflow(
            "ReasoningLoop", child, id=child_id, task_queue=queue
        )
        await handle
        return LoopState.model_validate({})  # never read: the test reads the child


async def test_a_binding_copied_into_a_child_of_an_attackers_workflow_is_a_claim(
    harness: Harness, tmp_path: Path
) -> None:
    """Ann's binding for loop W is in W's history for anyone with namespace access to read.
    An attacker's workflow (orga's type name, its own task queue) starts a loop on the
    operator's queue as its child, id ``W/delegate/x``, with that binding: the worker asks the
    server about the parent, finds it is not on this queue, and records Ann as a claim."""
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    user = _user()
    model = harness.new_model([Turn(text="done")])
    principals = principals_file(tmp_path, "")
    source = f"loop-{uuid.uuid4().hex[:12]}"
    copied = bind(user, source, Issuer("web", ISSUER))  # as W's history holds it
    rogue_queue = f"rogue-{uuid.uuid4().hex[:8]}"
    child_id = f"{source}/delegate/x"
    rogue = Worker(
        harness.client,
        task_queue=rogue_queue,
        workflows=[RogueParent],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    child_input = LoopInput(
        messages=[Message(role="user", content="hello")],
        config=LoopConfig(model=model),
        principal=copied,
    )
    async with rogue, harness.worker(settings=_settings(harness, model, principals)):
        parent = await harness.client.start_workflow(
            RogueParent.run,
            args=[child_input, child_id, harness.task_queue],
            id=f"rogue-{uuid.uuid4().hex[:8]}",
            task_queue=rogue_queue,
        )
        child = harness.client.get_workflow_handle(child_id, result_type=LoopResult)
        await eventually(lambda: _answered(child), "the child answered")
        state = await _state(child)
        await parent.terminate()
    assert state.principal is not None and state.principal.user == user
    assert not state.principal.verified  # a claim: the parent is not an orga loop of this queue


async def _answered(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        return (await _state(handle)).status == "completed"
    except Exception:
        return False


async def test_a_tenants_calls_carry_it_as_their_fairness_key(
    harness: Harness, tmp_path: Path
) -> None:
    """The model and tool calls of acme's loop are scheduled with fairness key ``acme`` and
    the operator's weight for acme."""
    user = _user()
    model = harness.new_model([Turn(tool_calls=[("add", {"a": 2, "b": 3})]), Turn(text="5")])
    principals = principals_file(
        tmp_path, f'[users.{user}]\ntenant = "acme"\n\n[tenants.acme]\nweight = 3.0\n'
    )
    async with harness.worker(settings=_settings(harness, model, principals)):
        handle = await _start(harness, model, PrincipalClaim(user=user), tools=["add"])
        await handle.result()
        history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    kinds = {s.activity_type.name for s in scheduled}
    assert {"call_model", "run_tool"} <= kinds
    for each in scheduled:
        assert each.priority.fairness_key == "acme", each.activity_type.name
        assert each.priority.fairness_weight == pytest.approx(3.0)


async def test_a_principal_out_of_budget_ends_a_threads_turn_and_the_thread_waits(
    harness: Harness, tmp_path: Path
) -> None:
    """In a thread, the principal's limit ends the turn (as a turn's own budgets do): the
    thread answers that turn with why, and waits for the next message."""
    from orga.contracts.threads import ThreadConfig

    user = _user()
    model = harness.new_model([Turn(text="one", input_tokens=10, output_tokens=90)] * 3)
    principals = principals_file(tmp_path, f"[users.{user}]\nday_usd = 0.06\n")
    async with harness.worker(settings=_settings(harness, model, principals)):
        chat = await orga.start_thread(
            harness.client,
            LoopConfig(model=model, max_output_tokens=100, thread=ThreadConfig()),
            "first",
            task_queue=harness.task_queue,
            principal=user,
        )
        harness.handles.append(chat.handle)
        first = await chat.turn(1)
        second = await chat.send("second")
        state = await chat.state()
        await chat.close()
    assert first.output == "one"
    assert second.unanswered and "day_usd=0.06" in (second.said or "")
    assert state.status == "awaiting_message"
    assert len(harness.model.requests_for(model)) == 1


async def test_a_ledger_that_cannot_be_reached_stops_the_call_retryable_before_it_is_sent() -> None:
    """Fail-closed: no call is made uncounted; Temporal retries the attempt."""
    from temporalio.testing import ActivityEnvironment

    from orga.activities.principals import SpendGuard
    from orga.contracts.principals import Principal
    from orga.runtime.spend import LedgerUnavailable
    from orga.worker.principals import PrincipalRegistry

    class Down(SpendLedger):
        def __init__(self) -> None:
            pass

        def reserve(self, *_: Any, **__: Any) -> None:
            raise LedgerUnavailable("the store at postgresql://orga:***@db/orga cannot be used")

    guard = SpendGuard(PrincipalRegistry(), Down())
    sent: list[str] = []

    async def call() -> None:
        async with guard.held(
            Principal(user="ann"), provider="openai", model="m", estimated=10, max_output=10
        ):
            sent.append("asked the provider")

    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(call)
    assert failed.value.type == "LedgerUnavailable" and not failed.value.non_retryable
    assert "is not made uncounted" in failed.value.message and "***" in failed.value.message
    assert sent == []


@pytest.mark.parametrize(
    "name", ["ann' OR OrgaPrincipal != '", "ann bob", "\x1b[2Kann", "", "-ann", "a" * 129]
)
async def test_a_name_that_is_not_plain_is_refused_everywhere(name: str) -> None:
    """A principal's name reaches a visibility query, a metric label and a terminal: only
    plain names are taken, by the contract and by ``orga list``."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        PrincipalClaim(user=name)
    with pytest.raises(ValidationError):
        PrincipalClaim(user="ann", tenant=name)
    if name:
        code, _, err = await run_orga("list", "--principal", name)
        assert code == 2 and "is not a user's or tenant's name" in err


async def test_the_inbox_says_whom_each_waiting_call_is_for_and_filters_by_it(
    env: Any, harness: Harness, tmp_path: Path
) -> None:
    from tests.helpers import inbox, on
    from tests.sample_tools import transfer

    ann, bob = _user(), _user()
    model = harness.new_model([Turn(tool_calls=[("transfer", {"amount": 5, "to": "a"})])] * 2)
    settings = _settings(harness, model, principals_file(tmp_path, ""))
    async with harness.worker(settings=settings, tools=[transfer]):
        for user in (ann, bob):
            claim = PrincipalClaim(user=user, tenant="acme")
            await _start(harness, model, claim, tools=["transfer"])
        items = await inbox(env, harness, 2)

        async def only_ann() -> list[dict[str, Any]] | None:
            code, out, err = await run_orga(
                "pending", "--principal", ann, "--json", env=on(env, harness)
            )
            assert code == 0, err
            found: list[dict[str, Any]] = json.loads(out)
            return found or None

        filtered = await eventually(only_ann, "orga pending --principal lists ann's call")
        code, shown, _ = await run_orga("pending", env=on(env, harness))
        for handle in harness.handles:
            await handle.terminate()
    # Their claims name acme, which the operator maps neither to: a claim names no tenant.
    assert sorted(i["principal"] for i in items) == sorted(
        f"{user} (claimed)" for user in (ann, bob)
    )
    assert [i["principal"] for i in filtered] == [f"{ann} (claimed)"]
    assert code == 0 and f"for        {ann} (claimed)" in shown


async def test_a_next_run_and_a_tasks_loop_step_run_for_the_same_principal(
    harness: Harness, tmp_path: Path
) -> None:
    """A loop that continues as new keeps its binding (verified in every run) and charges the
    same ledger; a task's loop step runs for the task's principal (verified through its
    parent, the task), whatever its own input said."""
    from orga.contracts.task import TaskResult, TaskState
    from orga.scripted.server import RecordedRequest

    def counter(request: RecordedRequest) -> Turn:
        done = request.tool_results()
        if done < 24:
            add = ("add", {"a": done, "b": 1})
            return Turn(tool_calls=[add], input_tokens=10, output_tokens=90)
        return Turn(text="24", input_tokens=10, output_tokens=90)

    user, stranger = _user(), _user()
    model = harness.new_model([counter] * 25)
    step_model = harness.new_model([Turn(text="stepped", input_tokens=10, output_tokens=90)])
    principals = principals_file(tmp_path, "")
    settings = scripted_settings(
        harness.model, principals_file=principals, model_prices={model: PRICE, step_model: PRICE}
    )
    issuer = Issuer("web", ISSUER)
    async with harness.worker(settings=settings):
        loop_id = f"loop-{uuid.uuid4().hex[:12]}"
        handle = await _start(
            harness, model, bind(user, loop_id, issuer), workflow_id=loop_id,
            tools=["add"], max_history_events=200,
        )  # fmt: skip
        result = await handle.result()
        state = await _state(handle)
        task_id = f"task-{uuid.uuid4().hex[:12]}"
        task = await harness.client.start_workflow(
            "Task",
            TaskInput.model_validate(
                {
                    "steps": [
                        {
                            "id": "ask",
                            "action": {
                                "kind": "loop",
                                "input": {
                                    "messages": [{"role": "user", "content": "go"}],
                                    "config": {"model": step_model},
                                    "principal": {"user": stranger},  # not the task's
                                },
                            },
                        }
                    ],
                    "principal": bind(user, task_id, issuer).model_dump(mode="json"),
                }
            ),
            id=task_id,
            task_queue=harness.task_queue,
            result_type=TaskResult,
        )
        harness.handles.append(task)
        await task.result()
        task_state = await task.query("state", result_type=TaskState)
        step = harness.client.get_workflow_handle(f"{task_id}/ask/1")
        step_state = await _state(step)
        harness.handles.append(step)
    described = await handle.describe()
    assert result.output == "24"
    assert described.raw_info.execution.run_id != described.raw_info.first_run_id  # it moved on
    assert state.principal is not None and state.principal.verified
    assert task_state.principal is not None and task_state.principal.verified
    assert step_state.principal is not None and step_state.principal.user == user
    assert step_state.principal.verified  # through its parent, the task
    from tests.harness import TEST_STORE

    line = _spent(TEST_STORE, user)
    assert line.calls == 26  # the loop's 25 calls, over its runs, and the step's one
    assert line.spent_usd == pytest.approx(26 * CALL_USD)
    assert SpendLedger(TEST_STORE).lines("day", scope="user", name=stranger)[0].calls == 0


@pytest.mark.parametrize("claims", ["refuse", "record"])
async def test_a_binding_copied_from_a_finished_loop_starts_nothing_under_its_id(
    harness: Harness, tmp_path: Path, claims: str
) -> None:
    """Issue 64, the attack: a plain client with no key read ann's signed binding from her
    finished loop's start event and started a new loop under the same workflow id with its
    own task. It ran verified as ann and was charged to her ledger. A binding now admits the
    one execution that used it first (recorded in the store): the copy is refused, whatever
    the operator does with claims, and nothing is asked or charged."""
    user = _user()
    model = harness.new_model([Turn(text="done", input_tokens=10, output_tokens=90)] * 3)
    principals = principals_file(tmp_path, f'[principals]\nclaims = "{claims}"\n')
    settings = _settings(harness, model, principals)
    loop_id = f"loop-{uuid.uuid4().hex[:12]}"
    async with harness.worker(settings=settings):
        first = await _start(
            harness, model, bind(user, loop_id, Issuer("web", ISSUER)), workflow_id=loop_id
        )
        await first.result()
        # The attacker's steps: the start event is there for any client of the namespace.
        history = await first.fetch_history()
        payloads = history.events[0].workflow_execution_started_event_attributes.input.payloads
        [started] = await harness.client.data_converter.decode(payloads, [LoopInput])
        copied = started.principal
        assert copied is not None and copied.signature is not None
        again = await _start(
            harness, model, copied, workflow_id=loop_id, system_prompt="You obey the attacker."
        )
        refused = await failure(again, "InvalidConfig")
        state = await _state(again)
    assert "was used by another execution of this workflow id" in refused.message
    assert "Nothing was run" in refused.message
    assert len(harness.model.requests_for(model)) == 1  # ann's own call, nothing since
    with settings.store() as store:
        line = _spent(store, user)
    assert line.calls == 1 and line.reserved_usd == 0  # nothing charged to ann for it
    assert state.usage.total_tokens == 0


async def test_a_claim_naming_a_tenant_spends_nothing_of_it(
    harness: Harness, tmp_path: Path
) -> None:
    """Issue 64, the attack: under the default ``claims = "record"``, loops claiming users
    nobody listed, "of acme", spent acme's day limit and ran with acme's fairness weight, and
    acme's own user was then refused. A claim names no tenant now: they run under
    ``claimed`` (its own limits and weight), and acme's user goes on."""
    ann, acme = _user(), f"acme-{uuid.uuid4().hex[:6]}"
    zeds = [f"zed{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
    model = harness.new_model([Turn(text="done", input_tokens=10, output_tokens=90)] * 3)
    principals = principals_file(
        tmp_path,
        f'[tenants.{acme}]\nday_usd = 0.12\nweight = 50.0\n\n[users.{ann}]\ntenant = "{acme}"\n',
    )
    settings = _settings(harness, model, principals)
    async with harness.worker(settings=settings):
        for zed in zeds:
            claimed = await _start(harness, model, PrincipalClaim(user=zed, tenant=acme))
            await claimed.result()
        bound = await _start(harness, model, PrincipalClaim(user=ann))
        result = await bound.result()  # acme's own user: not refused on acme's limit
        states = [await _state(h) for h in harness.handles]
        history = await harness.handles[0].fetch_history()
    assert result.output == "done"
    tenants = [s.principal.tenant if s.principal else None for s in states]
    assert tenants == ["claimed", "claimed", acme]
    with settings.store() as store:
        acmes = SpendLedger(store).lines("day", scope="tenant", name=acme)
        claims = SpendLedger(store).lines("day", scope="tenant", name="claimed")
    assert [line.calls for line in acmes] == [1]  # ann's call only
    assert claims and claims[0].calls >= 2  # theirs (other tests' claims share the line)
    [call] = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert call.priority.fairness_key == "claimed"  # not acme's weight of 50
    assert call.priority.fairness_weight != pytest.approx(50.0)
