"""Who a loop runs for, resolved at its setup; and the charge of each model call to that
principal's spend ledger.

``PrincipalResolver`` is asked by the setup activities (``resolve_loop``, ``resolve_task``):
a claim becomes a ``Principal`` — *verified* when an issuer the operator enrolled signed it
for this workflow (``orga.core.signatures.principal_text``), or for the workflow this one
descends from (a child whose server-set parent is an orga workflow on its own task queue, or
a next run of the same workflow id); else a *claim*, which the operator may refuse. The
operator's mapping of users to tenants wins over what the claim says.

``SpendGuard`` is asked by the activities that call a model (inference, critic, summary): a
call reserves its worst case in the shared store before it is sent (keyed by the activity's
workflow, run and activity id, which every retry of it shares) and settles to what was served
(``orga.runtime.spend``). A limit it would pass ends the loop with ``BudgetExceeded`` naming
the principal's budget; a ledger that cannot be reached fails the attempt, retryable: a call is
never made uncounted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from orga.contracts.errors import BudgetExceeded, InvalidConfig
from orga.contracts.inference import InferenceResponse, Usage
from orga.contracts.messages import LOOP_WORKFLOW, TASK_WORKFLOW
from orga.contracts.principals import CLAIMED_TENANT, Principal, PrincipalClaim
from orga.contracts.setup import ParentRun, PrincipalSetup
from orga.core.budget import served
from orga.core.signatures import principal_text, signature_holds
from orga.providers.prices import priced
from orga.runtime.settings import ModelPrice
from orga.runtime.spend import Cost, LedgerUnavailable, SpendLedger, SpendRefused
from orga.worker.heartbeat import heartbeating
from orga.worker.metrics import observe
from orga.worker.principals import PrincipalRegistry
from orga.worker.provider_health import ProviderHealth

if TYPE_CHECKING:
    from orga.runtime.store import Store

__all__ = ["BindingUse", "PrincipalResolver", "SpendGuard", "binding_use", "parent_check"]

ParentCheck = Callable[[ParentRun, str], Awaitable[bool]]
"""Whether a parent run is an orga workflow on the given task queue (asked of the server)."""
BindingUse = Callable[[str, str], str]
"""``(binding, execution)`` → the execution that first used ``binding``: records it for
``execution`` when none did (in the store every worker shares), else says which did."""

_WORST_OUTPUT: Final = 4_096
"""Output tokens a call without an output cap is reserved for (its settlement counts what was
served: more, if the provider gave more)."""
_HOLD_MARGIN: Final = timedelta(minutes=1)


class PrincipalResolver:
    """Resolves the principal of a loop or task (see the module docstring)."""

    def __init__(
        self, registry: PrincipalRegistry, parent_is_ours: ParentCheck, used_by: BindingUse
    ) -> None:
        self._registry = registry
        self._parent_is_ours = parent_is_ours
        self._used_by = used_by

    async def resolve(self, setup: PrincipalSetup | None, workflow_id: str) -> Principal | None:
        """The principal ``workflow_id`` runs for (None: nobody).

        Raises:
            InvalidConfig: the operator requires a principal and none was given, or refuses
                claims and this one is not bound.
        """
        if setup is None or setup.claim is None:
            if self._registry.required:
                raise InvalidConfig(
                    f"the worker's operator requires every loop to run for a principal "
                    f"([principals] required = true in {self._registry.origin}): start it "
                    "with principal={'user': …} (orga run --principal USER)"
                )
            return None
        claim = setup.claim
        issuer = await self._bound_by(claim, workflow_id, setup)
        if issuer is None and self._registry.claims == "refuse":
            raise InvalidConfig(
                f"principal {claim.user!r} is only claimed: no enrolled issuer signed it for "
                f"this workflow, and the worker's operator refuses claims ([principals] claims "
                f'= "refuse" in {self._registry.origin}). Start it through an endpoint that '
                "authenticates the user, or with ORGA_ISSUER_KEY set (orga run --principal)"
            )
        # The operator's mapping wins; else an issuer's word; a claim never names a tenant.
        mapped = self._registry.tenant_of(claim.user)
        return Principal(
            user=claim.user,
            tenant=mapped or (claim.tenant if issuer is not None else CLAIMED_TENANT),
            verified=issuer is not None,
            issuer=issuer,
        )

    async def _bound_by(
        self, claim: PrincipalClaim, workflow_id: str, setup: PrincipalSetup
    ) -> str | None:
        """The enrolled issuer whose signature binds ``claim`` to this workflow, if any.

        Raises:
            InvalidConfig: the binding holds, but another execution of this workflow id used
                it first (a binding admits one execution).
        """
        if (
            claim.issuer is None
            or claim.signature is None
            or claim.signed_at is None
            or claim.workflow_id is None
        ):
            return None
        key = self._registry.issuer_key(claim.issuer)
        if key is None:
            return None
        text = principal_text(
            user=claim.user,
            tenant=claim.tenant,
            workflow_id=claim.workflow_id,
            issuer=claim.issuer,
            signed_at=claim.signed_at,
        )
        if not signature_holds(key, text, claim.signature):
            return None
        if claim.workflow_id == workflow_id:
            await self._admit(claim, claim.signature, setup.execution)
            return claim.issuer
        # Signed for another workflow: it holds here only for a child of an orga workflow on
        # this task queue, whose code hands on only a binding it verified itself.
        parent = setup.parent
        if parent is not None and await self._parent_is_ours(parent, activity.info().task_queue):
            return claim.issuer
        return None

    async def _admit(self, claim: PrincipalClaim, signature: str, execution: str | None) -> None:
        """Record that this execution (its first run: every run it continues as new into
        shares it) uses the binding; refuse it where another execution used it first.

        Raises:
            InvalidConfig: used by another execution, or this one is not known.
        """
        key = "principal-binding/" + hashlib.sha256(signature.encode()).hexdigest()
        first = (
            None if execution is None else await asyncio.to_thread(self._used_by, key, execution)
        )
        if first is not None and first == execution:
            return
        raise InvalidConfig(
            f"the binding of {claim.user!r} by issuer {claim.issuer!r} (signed "
            f"{claim.signed_at:%Y-%m-%dT%H:%M:%SZ}) was used by another execution of this "
            f"workflow id (first run {first}): a binding admits the one execution it was issued "
            "for, and a copy of it from that run's history starts nothing. Nothing was run"
        )

    def weight(self, principal: Principal | None) -> float | None:
        """The operator's fairness weight of the principal's tenant (None: the default)."""
        return None if principal is None else self._registry.weight(principal.tenant)


def parent_check(client: Client) -> ParentCheck:
    """A ``ParentCheck`` that asks the server through ``client``: the parent run must be of
    orga's loop or task type, on the child's own task queue."""

    async def check(parent: ParentRun, task_queue: str) -> bool:
        handle = client.get_workflow_handle(parent.workflow_id, run_id=parent.run_id)
        try:
            found = await handle.describe()
        except RPCError:  # a parent the server cannot describe binds nothing
            return False
        return found.workflow_type in (LOOP_WORKFLOW, TASK_WORKFLOW) and (
            found.task_queue == task_queue
        )

    return check


def binding_use(store: Store) -> BindingUse:
    """A ``BindingUse`` kept in ``store``'s idempotency ledger: the first execution to use a
    binding is recorded there once, for every worker."""

    def used_by(binding: str, execution: str) -> str:
        first: str = store.once(binding, lambda _: execution)
        return first

    return used_by


class SpendGuard:
    """Charges each model call to its principal's ledger (see the module docstring)."""

    def __init__(
        self,
        registry: PrincipalRegistry,
        ledger: SpendLedger | None,
        prices: Mapping[str, ModelPrice] | None = None,
        health: ProviderHealth | None = None,
    ) -> None:
        self._registry = registry
        self._ledger = ledger
        self._prices: Mapping[str, ModelPrice] = prices or {}
        """The worker's own prices (``ORGA_MODEL_PRICES``), as the calls are priced."""
        self._health = health or ProviderHealth()
        """The worker's breakers per model, which side calls share with the loop's own."""

    @contextlib.asynccontextmanager
    async def held(
        self,
        principal: Principal | None,
        *,
        provider: str,
        model: str,
        estimated: int,
        max_output: int | None,
    ) -> AsyncGenerator[Callable[[Usage], Awaitable[None]]]:
        """Within it, the call's worst case is held — ``estimated`` input tokens and
        ``max_output`` output tokens of ``model`` at ``provider``, priced — and it yields
        ``settle``, to be awaited with what was served. A call that fails before it settles
        gives its hold back.

        Raises:
            BudgetExceeded: the worst case does not fit the principal's limits (not asked).
            ApplicationError: ``LedgerUnavailable``, retryable: the ledger cannot be reached.
        """
        output = max_output if max_output is not None else _WORST_OUTPUT
        usage = priced(
            Usage(input_tokens=estimated, output_tokens=output), provider, model, self._prices
        )
        cost = Cost(None if usage.unpriced_calls else usage.cost_usd, estimated + output)
        async with self.holding(principal, cost) as settle:
            yield settle

    @contextlib.asynccontextmanager
    async def holding(
        self, principal: Principal | None, worst: Cost
    ) -> AsyncGenerator[Callable[[Usage], Awaitable[None]]]:
        """Within it, ``worst`` is held against the principal's limits for this activity (its
        retries share the hold), and it yields ``settle``, to be awaited with what was
        spent; given back if nothing was settled. ``held``'s, for any cost: a remote
        agent's, say.

        Raises:
            BudgetExceeded, ApplicationError: as ``held``.
        """
        if principal is None or self._ledger is None:

            async def nothing(_: Usage) -> None:
                return None

            yield nothing
            return
        ledger = self._ledger
        info = activity.info()
        key = f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"
        timeout = info.start_to_close_timeout or timedelta(minutes=10)
        holders = self._registry.holders(principal)
        try:
            await asyncio.to_thread(
                ledger.reserve,
                key,
                holders,
                worst,
                ttl=(timeout + _HOLD_MARGIN).total_seconds(),
                workflow_id=info.workflow_id or "",
            )
        except SpendRefused as refused:
            raise BudgetExceeded(
                f"{principal.describe()}'s budget: {refused}",
                {"budget": refused.budget, "principal": principal.user},
            ) from refused
        except LedgerUnavailable as error:
            raise _unavailable(error) from error
        settled = False

        async def settle(served: Usage) -> None:
            nonlocal settled
            spent = Cost(None if served.unpriced_calls else served.cost_usd, served.total_tokens)
            try:
                await asyncio.to_thread(ledger.settle, key, spent, holders=holders)
            except LedgerUnavailable as error:
                raise _unavailable(error) from error
            settled = True
            # Bounded labels: the tenants the operator configured, any other is "other".
            known = principal.tenant is not None and principal.tenant in self._registry.tenants()
            tenant = principal.tenant if known and principal.tenant is not None else "other"
            observe("orga_principal_spend", spent.usd or 0.0, tenant=tenant)

        try:
            yield settle
        finally:
            if not settled:
                with contextlib.suppress(LedgerUnavailable):  # it expires on its own
                    await asyncio.to_thread(ledger.release, key)

    async def charged(
        self,
        principal: Principal | None,
        *,
        provider: str,
        model: str,
        estimated: int,
        max_output: int | None,
        call: Callable[[], Awaitable[InferenceResponse]],
    ) -> tuple[InferenceResponse, Usage]:
        """A model call beside the loop's own (a critic's review, a context summary): ``call``
        made within the principal's hold (``held``), heartbeating, through the worker's breaker
        of ``model`` (``orga.worker.provider_health``); its response and what it served, priced
        as the loop's calls are — and charged so.

        Raises:
            BudgetExceeded, ApplicationError: as ``held``.
            ProviderDown: ``model`` is down on this worker (not asked).
        """
        async with (
            self.held(
                principal,
                provider=provider,
                model=model,
                estimated=estimated,
                max_output=max_output,
            ) as settle,
            heartbeating(),
        ):
            with self._health.guard(provider, model):  # a model down is not asked: ProviderDown
                response = await call()
            usage = priced(served(response, estimated), provider, model, self._prices)
            await settle(usage)
        return response, usage


def _unavailable(error: LedgerUnavailable) -> ApplicationError:
    return ApplicationError(
        f"the spend ledger cannot be reached ({error}); the call is not made uncounted: retrying",
        type="LedgerUnavailable",
    )
