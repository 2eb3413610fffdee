"""What a tool declares, which tools a loop shows, and the inputs of the tool activities.

``ToolDefinition`` is what a worker's registry says about a tool (the ``@tool`` decorator in
``orga.tools.sdk`` builds it); ``ToolProfile`` filters the tools a loop advertises
(``orga.core.profile`` applies it); ``ToolInvocation`` is the input of the ``run_tool``
activity.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any, Final

from pydantic import ConfigDict, Field

from orga.contracts.conversation import ToolCall
from orga.contracts.wire import Compact, Contract

__all__ = [
    "LOCAL_TOOL_TIMEOUT",
    "RUN_TOOL",
    "VERIFIED_MARK",
    "ToolDefinition",
    "ToolInvocation",
    "ToolProfile",
    "idempotency_key",
]

RUN_TOOL = "run_tool"
"""Name of the tool activity."""
"""Name of the activity that resolves tool names into definitions."""
VERIFIED_MARK: Final = "[verified]"
"""The mark in a tool's description that a tool profile's ``require_verified`` looks for
(only orga writes it: ``orga.tools.mcp``)."""
LOCAL_TOOL_TIMEOUT: Final = timedelta(seconds=10)
"""The longest attempt a local tool may take (and its default): a local activity holds the
loop's workflow task while it runs."""


class ToolDefinition(Contract):
    """What a tool declares: what the model sees and how the runtime must run it."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON Schema of the arguments object."""
    serial: bool = False
    """Side-effecting: calls run one at a time, in the order the model gave them."""
    timeout: timedelta | None = None
    """Start-to-close timeout of one attempt; the loop's ``tool_timeout`` when unset."""
    requires_approval: bool = False
    """Under the default gate, every call waits for a human decision."""
    resource_arg: str | None = None
    """Argument naming the resource the call touches: calls on the same resource serialise,
    and a call after a failed call on the same resource is skipped."""
    evidence: bool = False
    """An evidence tool: its calls are tracked for information gain (``orga.core.evidence``)."""
    local: bool = False
    """A short pure tool run as a local activity (in the worker that runs the loop's workflow
    task, recorded as a marker): still gated, retried and journaled, without a round trip
    through the server. At most ``LOCAL_TOOL_TIMEOUT`` per attempt."""
    path_arguments: list[str] = Field(default_factory=list[str])
    """Arguments naming a file under a root: the gate judges (and the call runs with) them
    normalised, and refuses absolute paths, escapes and hidden files (``orga.core.paths``)."""
    schema_digest: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """``sha256:`` of ``parameters`` (canonical JSON) where a loop's setup left the schema
    itself out (``referenced``): the workflow never reads a schema — the worker shows the
    model its own registry's — so its history names each schema once, by digest."""
    verified: bool = Field(default=False, exclude_if=lambda v: not v)
    """Where a setup left the description out (``referenced``): whether it carried
    ``VERIFIED_MARK``."""

    def referenced(self) -> ToolDefinition:
        """This definition as a loop's or a task's setup records it: its schema named by digest
        instead of written out, its description left out (whether it carries
        ``VERIFIED_MARK`` kept as ``verified``)."""
        canonical = json.dumps(self.parameters, sort_keys=True, separators=(",", ":"))
        digest = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]
        return self.model_copy(
            update={
                "parameters": {},
                "schema_digest": digest,
                "description": "",
                "verified": self.verified or VERIFIED_MARK in self.description,
            }
        )


class ToolProfile(Contract):
    """A filter on the tools a loop advertises (``config.tool_profile``).

    Applied, in this order, to the complete tool list (the loop's tools and the tools
    pre-hydration uses): ``include`` globs (when any are given, only matching tools pass),
    ``exclude`` globs, ``require_verified`` (only tools whose description carries
    ``[verified]``), then ``max_tools`` (the first N that are left). Globs know ``*`` and ``?``
    only, match the whole name and are case-sensitive. A tool the profile hides is not
    advertised, and a call to it is denied.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    include: list[str] = Field(default_factory=list[str])
    """Globs; when any are given, only tools matching one of them pass."""
    exclude: list[str] = Field(default_factory=list[str])
    """Globs; tools matching any of them are removed."""
    require_verified: bool = False
    """Only tools whose description carries ``[verified]``."""
    max_tools: int | None = Field(default=None, ge=0)
    """Keep at most the first N tools left."""


class ToolInvocation(Compact):
    """The input of the ``run_tool`` activity."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall
    workflow_id: str
    chain: str | None = None
    """The first run id of the workflow's execution chain: part of the idempotency key, so a
    workflow id used again (a new execution) never gets an earlier execution's keys."""
    retry_tool_errors: bool = False
    """Let Temporal retry when the tool raises (otherwise the error goes to the model)."""
    max_result_bytes: int = 256 * 1024
    """Longer results are cut, with a marker the model can read; the store keeps the full
    text."""
    knowledge_namespace: str | None = None
    """The loop's knowledge store (``recall_knowledge`` and ``store_knowledge`` use it)."""
    knowledge_directory: str | None = None
    """The loop's directory (``config.knowledge.directory``): its recalls stay in it."""
    compensates: str | None = None
    """For a compensation: the call id of the step it undoes (the tool gets that step's
    idempotency key as ``ctx.step_key``)."""
    agent_id: str | None = None
    """The agent the call runs for (a loop's ``config.agent_id``, a task's ``agent_id``): a
    pause of it (``orga pause --agent``) holds the call as a paused tool's is held. ``None``
    in a call a worker from before this field scheduled: only its tool's and its loop's
    pauses hold that one."""


def idempotency_key(workflow_id: str, call_id: str, chain: str | None = None) -> str:
    """The key a tool uses to make its side effect happen once: the same on every retry, after
    continue-as-new and on any worker; different for a new execution under the same workflow
    id (``chain`` is the execution chain's first run id)."""
    return f"{workflow_id}/{chain}/{call_id}" if chain else f"{workflow_id}/{call_id}"
