"""Which tools a loop has, and which of them the model sees.

Workflow code. A loop's tools are the ones its config lists, then the tools its pre-hydration
resolvers use; the recovery strategies' fallback tools are resolved too (they run, but are not
advertised). Their definitions come from the worker's registry through the ``describe_tools``
local activity; the tool profile then decides what is advertised.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

from orga.contracts.config import LoopConfig
from orga.contracts.errors import InvalidConfig
from orga.contracts.tools import DESCRIBE_TOOLS, DescribeToolsRequest, ToolDefinition
from orga.core.profile import visible_tools
from workflows.options import DESCRIBE_TOOLS_TIMEOUT, SHORT_RETRY

__all__ = ["advertised_tools", "describe_tools", "loop_tools"]


def loop_tools(config: LoopConfig) -> list[str]:
    """The loop's complete tool list: its tools, then the tools pre-hydration uses."""
    names = list(config.tools)
    if config.pre_hydration is not None:
        for resolver in config.pre_hydration.resolvers.values():
            if resolver.tool not in names:
                names.append(resolver.tool)
    return names


def advertised_tools(config: LoopConfig, definitions: dict[str, ToolDefinition]) -> list[str]:
    """The tools the model sees: the complete tool list, filtered by the tool profile."""
    listed = [definitions[name] for name in loop_tools(config)]
    return [d.name for d in visible_tools(config.tool_profile, listed)]


async def describe_tools(config: LoopConfig) -> dict[str, ToolDefinition]:
    """Definitions of the loop's tools and of the fallback tools recovery may use.

    Raises:
        InvalidConfig: a tool is not registered on the worker.
    """
    names = loop_tools(config)
    names += [n for n in config.recovery.fallback_tools() if n not in names]
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
    except FailureError as error:  # a local activity: the error itself, or a timeout
        cause = error.cause if isinstance(error, ActivityError) else error
        message = cause.message if isinstance(cause, FailureError) else str(error)
        raise InvalidConfig(f"the loop's tools could not be resolved: {message}") from error
    return {definition.name: definition for definition in found}
