"""The OpenTelemetry GenAI attributes of an agent invocation (one loop), from what its config
says: the span ``orga run`` opens and the span a worker starts a loop's trace with carry the
same ones, and only values someone gave (no default shown as if chosen)."""

from __future__ import annotations

from orga.contracts.config import LoopConfig

__all__ = ["invocation_attributes"]


def invocation_attributes(
    config: LoopConfig, workflow_id: str, *, agent_known: bool = True
) -> dict[str, str]:
    """``gen_ai.operation.name`` ``invoke_agent``, the conversation (the loop's workflow id,
    which it keeps across runs), the agent unless ``agent_known`` is false (an input that did
    not validate), and the provider and model when the config names them."""
    given = {
        "gen_ai.agent.name": config.agent_id if agent_known else None,
        "gen_ai.provider.name": config.provider,
        "gen_ai.request.model": config.model,
    }
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": workflow_id,
        **{key: value for key, value in given.items() if value},
    }
