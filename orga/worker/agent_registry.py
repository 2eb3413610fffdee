"""The worker's agents, from the TOML file ``ORGA_AGENTS`` names (or one implicit agent).

Read once when the worker starts; a file that does not parse, an unknown key, or an agent whose
policy floor needs a gate the worker has not configured stops the worker with the file and the
problem. Without ``ORGA_AGENTS`` the worker has one implicit agent: every tool, the policy floor
``ORGA_POLICY`` (``default`` unless set), no ceilings beyond the defaults; any ``agent_id`` runs
as it (an id is then a label the client chooses, so policies keyed on it need an agents file).
The format is ``orga.contracts.agents``'s docstring.

Approvers — the people who may decide on gated calls — are enrolled as ``[approvers.<name>]``
tables (``key``: an Ed25519 public key in base64, ``groups``: optional) in the agents file or in
the file ``ORGA_APPROVERS`` names (``load_approvers``); a name enrolled twice, or a key that is
not one, stops the worker. Judges — approvers that are code, or a model of one of the agents
— are ``[judges.<name>]`` tables (``orga.contracts.judges``); an agent names its judge
(``judge``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from orga.contracts.agents import IMPLICIT_AGENT, AgentSpec, PolicyFloor
from orga.contracts.approvals import EnrolledApprover
from orga.contracts.errors import InvalidConfig, describe_validation_error
from orga.contracts.judges import JudgeSpec
from orga.contracts.vocabulary import PolicyMode
from orga.core.signatures import fingerprint, public_key_problem
from orga.worker.principals import TABLES as PRINCIPAL_TABLES

__all__ = ["AgentRegistry", "load_approvers", "one_key_each"]

_LOCAL = AgentSpec(id="local")


def _document(path: Path, origin: str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InvalidConfig(f"{origin}: cannot read the {what} ({error})") from error
    except tomllib.TOMLDecodeError as error:
        raise InvalidConfig(f"{origin}: the {what} is not TOML ({error})") from error


def _tables(table: Any, origin: str, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``[<kind>.<name>]`` tables of ``table``, by name."""
    if not isinstance(table, dict):
        raise InvalidConfig(f"{origin}: {kind} must be [{kind}.<name>] tables")
    found: list[tuple[str, dict[str, Any]]] = []
    for name, body in cast(dict[str, Any], table).items():
        if not isinstance(body, dict):
            raise InvalidConfig(f"{origin}: {kind}.{name} must be a table")
        found.append((name, cast(dict[str, Any], body)))
    return found


def _approvers(table: Any, origin: str) -> list[EnrolledApprover]:
    found: list[EnrolledApprover] = []
    for name, fields in _tables(table, origin, "approvers"):
        unknown = sorted(set(fields) - {"key", "groups"})
        if unknown:
            raise InvalidConfig(
                f"{origin}: approver {name!r} has unknown keys {unknown!r} (known: key, groups)"
            )
        try:
            approver = EnrolledApprover(
                name=name, public_key=fields.get("key", ""), groups=fields.get("groups", [])
            )
        except ValidationError as error:
            raise InvalidConfig(
                f"{origin}: approver {name!r} is invalid: {describe_validation_error(error)}"
            ) from error
        if problem := public_key_problem(approver.public_key):
            raise InvalidConfig(f"{origin}: approver {name!r}: the key is {problem}")
        found.append(approver)
    one_key_each(found, origin)
    return found


def _judges(table: Any, origin: str) -> list[JudgeSpec]:
    judges: list[JudgeSpec] = []
    for name, fields in _tables(table, origin, "judges"):
        try:
            judges.append(JudgeSpec.model_validate({**fields, "name": name}))
        except ValidationError as error:
            raise InvalidConfig(
                f"{origin}: judge {name!r} is invalid: {describe_validation_error(error)}"
            ) from error
    return judges


def one_key_each(approvers: list[EnrolledApprover], origin: str) -> None:
    """Refuse one key enrolled under two names: four eyes counts keys, not names, so two
    names with one key would let one person count as two approvers.

    Raises:
        InvalidConfig: naming both approvers and the key's fingerprint.
    """
    holders: dict[str, str] = {}
    for approver in approvers:
        key = fingerprint(approver.public_key)
        if (first := holders.setdefault(key, approver.name)) != approver.name:
            raise InvalidConfig(
                f"{origin}: approvers {first!r} and {approver.name!r} are enrolled with one key "
                f"({key}): one key is one person, and a call that needs two approvers must "
                "have two. Enroll each person once, with a key of their own (`orga approver "
                "keygen` writes one)"
            )


def load_approvers(path: Path) -> list[EnrolledApprover]:
    """The approvers of the file at ``path`` (``ORGA_APPROVERS``): ``[approvers.<name>]`` only.

    Raises:
        InvalidConfig: the file cannot be read or parsed, or an approver is invalid.
    """
    origin = f"ORGA_APPROVERS={path}"
    document = _document(path, origin, "approvers file")
    unknown = sorted(set(document) - {"approvers"})
    if unknown or "approvers" not in document:
        raise InvalidConfig(
            f"{origin}: the file must hold approvers as [approvers.<name>] tables, and only them"
            + (f" (unknown: {unknown!r})" if unknown else "")
        )
    return _approvers(document["approvers"], origin)


class AgentRegistry:
    """The agents one worker serves."""

    def __init__(
        self,
        agents: dict[str, AgentSpec],
        origin: str,
        implicit: AgentSpec | None,
        approvers: list[EnrolledApprover] | None = None,
        judges: list[JudgeSpec] | None = None,
        folder: Path | None = None,
    ) -> None:
        self._agents = agents
        self.judges: list[JudgeSpec] = list(judges or [])
        """The judges its agents may name (``[judges.<name>]``)."""
        self.folder = folder or Path.cwd()
        """Where the agents file is: a judge's ``key_file`` is relative to it."""
        self.origin = origin
        """Where the agents come from, for messages."""
        self._implicit = implicit
        self._own: list[EnrolledApprover] = list(approvers or [])
        self._roll: Path | None = None
        self._read: tuple[int, list[EnrolledApprover]] | None = None

    @property
    def approvers(self) -> list[EnrolledApprover]:
        """The people enrolled to decide (none: decisions are recorded unverified): the agents
        file's, and the approvers file's as it is now (read again when it changed).

        Raises:
            InvalidConfig: the approvers file became invalid, or names someone twice.
        """
        if self._roll is None:
            return self._own
        try:
            changed = self._roll.stat().st_mtime_ns
        except FileNotFoundError:
            return self._own
        except OSError as error:
            raise InvalidConfig(f"ORGA_APPROVERS={self._roll}: cannot read it ({error})") from error
        if self._read is None or self._read[0] != changed:
            more = load_approvers(self._roll)
            twice = sorted({a.name for a in more} & {a.name for a in self._own})
            if twice:
                raise InvalidConfig(
                    f"ORGA_APPROVERS={self._roll}: approver(s) {twice!r} are enrolled in "
                    f"{self.origin} too: enroll each person once"
                )
            one_key_each([*self._own, *more], f"{self.origin} with ORGA_APPROVERS={self._roll}")
            self._read = (changed, more)
        return [*self._own, *self._read[1]]

    def with_approvers(self, path: Path) -> AgentRegistry:
        """These agents, with the approvers of the file at ``path`` too (if it exists; read
        again whenever it changes).

        Raises:
            InvalidConfig: the file is invalid, or names someone the agents file enrolled.
        """
        registry = AgentRegistry(
            self._agents, self.origin, self._implicit, self._own, self.judges, self.folder
        )
        registry._roll = path
        _ = registry.approvers  # checked now: a bad file stops the worker
        return registry

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
        document = _document(path, origin, "agents file")
        # Principals, issuers, tenants and users may live here too (orga.worker.principals).
        unknown = sorted(set(document) - {"agents", "approvers", "judges", *PRINCIPAL_TABLES})
        table = document.get("agents")
        if unknown or not isinstance(table, dict) or not table:
            raise InvalidConfig(
                f"{origin}: the file must hold agents as [agents.<id>] tables (and approvers as "
                "[approvers.<name>], judges as [judges.<name>]; principals, issuers, tenants "
                "and users), and only them" + (f" (unknown: {unknown!r})" if unknown else "")
            )
        approvers = _approvers(document.get("approvers", {}), origin)
        judges = _judges(document.get("judges", {}), origin)
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
            if agent.judge is not None and agent.judge not in {j.name for j in judges}:
                raise InvalidConfig(
                    f"{origin}: agent {agent.id!r} names the judge {agent.judge!r}, which is "
                    f"not a judge of this file ({sorted(j.name for j in judges)!r})"
                )
        for judge in judges:
            if judge.agent is not None and agents.get(judge.agent, _LOCAL).a2a is not None:
                raise InvalidConfig(
                    f"{origin}: judge {judge.name!r} is a model of agent {judge.agent!r}, which "
                    "runs at an a2a endpoint: a judge's model is a local agent's"
                )
            if judge.agent is not None and judge.agent not in agents:
                raise InvalidConfig(
                    f"{origin}: judge {judge.name!r} is a model of agent {judge.agent!r}, which "
                    f"is not an agent of this file ({sorted(agents)!r})"
                )
        return cls(agents, origin, None, approvers, judges, path.parent)

    def judge_of(self, agent: AgentSpec) -> JudgeSpec | None:
        """The judge ``agent`` names, if any."""
        return next((j for j in self.judges if j.name == agent.judge), None)

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

    def specs(self) -> list[AgentSpec]:
        """Every agent of the file (none for the implicit agent), by id."""
        return [self._agents[name] for name in sorted(self._agents)]

    def remote(self) -> list[AgentSpec]:
        """The agents that run at an A2A endpoint (``AgentSpec.a2a``)."""
        return [a for a in self.specs() if a.a2a is not None]
