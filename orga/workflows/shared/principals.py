"""Who a workflow runs for, as workflow code asks and uses it.

Workflow code. The setup activity is told the principal the input claims and, for a child,
its parent run as the server knows it (``workflow.info().parent``: no client sets it); the
resolved principal's tenant becomes the fairness key of the workflow's model and tool calls,
so Temporal's matching service shares a busy task queue between tenants (weighted by the
operator's ``weight``) instead of serving one tenant's flood first.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import Priority

from orga.contracts.principals import Principal, PrincipalClaim
from orga.contracts.setup import ParentRun, PrincipalSetup

__all__ = ["fair_share", "principal_setup"]


def principal_setup(claim: PrincipalClaim | None) -> PrincipalSetup | None:
    """What the setup activity is asked about this workflow's principal (None: nothing to
    resolve — no claim and no parent — which keeps a setup without principals as it was)."""
    info = workflow.info()
    parent = info.parent
    if claim is None:
        return None
    return PrincipalSetup(
        claim=claim,
        parent=(
            ParentRun(workflow_id=parent.workflow_id, run_id=parent.run_id)
            if parent is not None
            else None
        ),
        execution=info.first_execution_run_id,
    )


def fair_share(principal: Principal | None, weight: float | None) -> Priority:
    """The priority of the calls a workflow makes for ``principal``: its tenant (else its
    user) as the fairness key, with the operator's weight."""
    if principal is None:
        return Priority.default
    return Priority(fairness_key=principal.tenant or principal.user, fairness_weight=weight)
