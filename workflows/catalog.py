"""What a loop has to work with: its setup (agent, tools, gate, budgets, model), and what the
model sees.

Workflow code. A loop's tools are the ones its config lists; the recovery strategies' fallback
tools are resolved too (they run, but are not advertised). The worker resolves them against the
loop's agent, with the effective gate, budgets, provider and model, in the ``resolve_loop``
local activity when the loop starts; the tool profile then decides what is advertised.
Pre-hydration advertises nothing by itself: it may only use resolver tools the model sees.

Loops recorded before ``resolve_loop`` existed used ``describe_tools`` (tools only), and listed
their pre-hydration resolvers' tools among their own (``legacy=True``): kept so their
histories replay.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

from orga.contracts.config import LoopConfig
from orga.contracts.errors import InvalidConfig
from orga.contracts.knowledge import RECALL_TOOL, STORE_TOOL
from orga.contracts.setup import RESOLVE_LOOP, LoopSetup, LoopSetupRequest
from orga.contracts.tools import DESCRIBE_TOOLS, DescribeToolsRequest, ToolDefinition
from orga.core.profile import visible_tools
from workflows.common import failure_message
from workflows.options import DESCRIBE_TOOLS_TIMEOUT, SHORT_RETRY

__all__ = ["advertised_tools", "describe", "describe_tools", "loop_tools", "resolve_loop"]


def loop_tools(config: LoopConfig, *, legacy: bool = False) -> list[str]:
    """The loop's tool list (``legacy``: with its pre-hydration resolvers' tools, as loops
    recorded before ``resolve_loop`` had it)."""
    names = list(config.tools)
    if config.knowledge is not None and config.knowledge.tools:  # (no legacy loop has it)
        names += [n for n in (RECALL_TOOL, STORE_TOOL) if n not in names]
    if legacy and config.pre_hydration is not None:
        for resolver in config.pre_hydration.resolvers.values():
            if resolver.tool not in names:
                names.append(resolver.tool)
    return names


def advertised_tools(
    config: LoopConfig, definitions: dict[str, ToolDefinition], *, legacy: bool = False
) -> list[str]:
    """The tools the model sees: the loop's tool list, filtered by the tool profile."""
    listed = [definitions[name] for name in loop_tools(config, legacy=legacy)]
    return [d.name for d in visible_tools(config.tool_profile, listed)]


def _runnable_tools(config: LoopConfig, *, legacy: bool = False) -> list[str]:
    names = loop_tools(config, legacy=legacy)
    return names + [n for n in config.recovery.fallback_tools() if n not in names]


async def resolve_loop(config: LoopConfig) -> LoopSetup:
    """The loop's setup as this worker resolves it, recorded as one marker.

    Raises:
        InvalidConfig: a tool is not registered on the worker, or its provider is not served.
    """
    request = LoopSetupRequest(config=config, tools=_runnable_tools(config))
    try:
        return await workflow.execute_local_activity(
            RESOLVE_LOOP,
            request,
            result_type=LoopSetup,
            start_to_close_timeout=DESCRIBE_TOOLS_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary=f"resolve the loop's setup · {len(request.tools)} tool(s)",
        )
    except FailureError as error:
        raise InvalidConfig(f"the loop could not be set up: {failure_message(error)}") from error


async def describe_tools(config: LoopConfig) -> dict[str, ToolDefinition]:
    """Definitions of the loop's tools and of the fallback tools recovery may use (the step
    of loops recorded before ``resolve_loop``).

    Raises:
        InvalidConfig: a tool is not registered on the worker.
    """
    names = _runnable_tools(config, legacy=True)
    return await describe(names, "the loop's tools could not be resolved")


async def describe(names: list[str], failure: str) -> dict[str, ToolDefinition]:
    """Definitions of the named tools, from the worker's registry (nothing asked: nothing run).

    Raises:
        InvalidConfig: ``failure``, then why (a tool is not registered on the worker).
    """
    if not names:
        return {}
    try:
        # A local activity: a registry lookup on the worker, recorded as one marker.
        found = await workflow.execute_local_activity(
            DESCRIBE_TOOLS,
            DescribeToolsRequest(names=names),
            result_type=list[ToolDefinition],
            start_to_close_timeout=DESCRIBE_TOOLS_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary=f"describe {len(names)} tool(s)",
        )
    except FailureError as error:
        raise InvalidConfig(f"{failure}: {failure_message(error)}") from error
    return {definition.name: definition for definition in found}
