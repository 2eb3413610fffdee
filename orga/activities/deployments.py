"""Which build of a worker deployment is current: what a waiting thread asks when its next
message arrives, to move onto new code (``LoopConfig.upgrade_on_continue``).

Worker code. The server tells a pinned workflow that its deployment's target version changed
on the tasks it dispatches through the task queue, but not on those a worker's sticky cache
takes (measured on Server 1.32: a thread the same worker held never heard of it), so a thread
that waits for weeks on a worker that keeps it cached would never move. Asked once per message
of a versioned thread, as a local activity; each worker asks the server at most every
``FRESH`` per deployment.
"""

from __future__ import annotations

import time
from typing import Final

from temporalio import activity
from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest
from temporalio.client import Client
from temporalio.service import RPCError

from orga.contracts.setup import CURRENT_BUILD

__all__ = ["FRESH", "CurrentBuilds"]

FRESH: Final = 5.0
"""Seconds a worker reuses what the server said of a deployment's current build."""


class CurrentBuilds:
    """The current build of each deployment, as the server says, briefly cached."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._known: dict[str, tuple[float, str | None]] = {}

    @activity.defn(name=CURRENT_BUILD)
    async def current_build(self, deployment: str) -> str | None:
        """The build id ``deployment`` routes new workflows to, or None when it has none (or
        the server cannot say: the thread stays where it is)."""
        now = time.monotonic()
        known = self._known.get(deployment)
        if known is not None and now - known[0] < FRESH:
            return known[1]
        try:
            described = await self._client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(
                    namespace=self._client.namespace, deployment_name=deployment
                )
            )
        except RPCError as error:
            activity.logger.warning("deployment %r not described: %s", deployment, error)
            return None
        current = described.worker_deployment_info.routing_config.current_deployment_version
        build = current.build_id or None
        self._known[deployment] = (now, build)
        return build
