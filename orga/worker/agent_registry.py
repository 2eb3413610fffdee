"""The worker's agents, from the TOML file ``ORGA_AGENTS`` names (or one implicit agent).

Read once when the worker starts; a file that does not parse, an unknown key, or an agent whose
policy floor needs a gate the worker has not configured stops the worker with the file and the
problem. Without ``ORGA_AGENTS`` the worker has one implicit agent: every tool, the policy floor
``ORGA_POLICY`` (``default`` unless set), no ceilings beyond the defaults; any ``agent_id`` runs
as it (an id is then a label the client chooses, so policies keyed on it need an agents file).
The format is ``orga.contracts.agents``'s docstring.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from orga.contracts.agents import IMPLICIT_AGENT, AgentSpec, PolicyFloor
from orga.contracts.errors import InvalidConfig, describe_validation_error
from orga.contracts.vocabulary import PolicyMode

__all__ = ["AgentRegistry"]


class AgentRegistry:
    """The agents one worker serves."""

    def __init__(
        self, agents: dict[str, AgentSpec], origin: str, implicit: AgentSpec | None
    ) -> None:
        self._agents = agents
        self.origin = origin
        """Where the agents come from, for messages."""
        self._implicit = implicit

    @classmethod
    def implicit(cls, floor: PolicyFloor = "default") -> AgentRegistry:
        """The one agent of a worker without ``ORGA_AGENTS``."""
        agent = AgentSpec(id=IMPLICIT_AGENT, tools=["*"], policy=floor)
        origin = f"the worker's implicit agent (no ORGA_AGENTS; ORGA_POLICY={floor})"
        return cls({}, origin, agent)

    @classmethod
    def load(cls, path: Path, engines: frozenset[PolicyMode]) -> AgentRegistry:
        """The agents of the file at ``path``.

        Raises:
            InvalidConfig: the file cannot be read or parsed, an agent is invalid, or its
                policy floor needs a gate not in ``engines``.
        """
        origin = f"ORGA_AGENTS={path}"
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise InvalidConfig(f"{origin}: cannot read the agents file ({error})") from error
        except tomllib.TOMLDecodeError as error:
            raise InvalidConfig(f"{origin}: the agents file is not TOML ({error})") from error
        unknown = sorted(set(document) - {"agents"})
        table = document.get("agents")
        if unknown or not isinstance(table, dict) or not table:
            raise InvalidConfig(
                f"{origin}: the file must hold agents as [agents.<id>] tables, and only them"
                + (f" (unknown: {unknown!r})" if unknown else "")
            )
        agents: dict[str, AgentSpec] = {}
        for agent_id, body in cast(dict[str, Any], table).items():
            if not isinstance(body, dict):
                raise InvalidConfig(f"{origin}: agents.{agent_id} must be a table")
            try:
                agent = AgentSpec.model_validate({**cast(dict[str, Any], body), "id": agent_id})
            except ValidationError as error:
                raise InvalidConfig(
                    f"{origin}: agent {agent_id!r} is invalid: {describe_validation_error(error)}"
                ) from error
            if agent.policy not in engines:
                raise InvalidConfig(
                    f"{origin}: agent {agent_id!r} has the policy floor {agent.policy!r}, which "
                    "this worker has not configured (ORGA_POLICY_DIR for cedar, ORGA_OPA_URL "
                    "for opa)"
                )
            agents[agent_id] = agent
        for agent in agents.values():
            unknown = [d for d in agent.delegates if d not in agents]
            if unknown:
                raise InvalidConfig(
                    f"{origin}: agent {agent.id!r} delegates to {unknown!r}, which are not "
                    f"agents of this file ({sorted(agents)!r})"
                )
        return cls(agents, origin, None)

    def get(self, agent_id: str) -> AgentSpec:
        """The agent a loop or task named ``agent_id`` runs as.

        Raises:
            InvalidConfig: there is no such agent (and no implicit one).
        """
        if self._implicit is not None:
            return self._implicit
        found = self._agents.get(agent_id)
        if found is None:
            raise InvalidConfig(
                f"there is no agent {agent_id!r} on this worker (agents: "
                f"{sorted(self._agents)!r}, defined in {self.origin}); set config.agent_id to "
                "one of them"
            )
        return found

    def ids(self) -> list[str]:
        return sorted(self._agents) if self._implicit is None else [IMPLICIT_AGENT]
