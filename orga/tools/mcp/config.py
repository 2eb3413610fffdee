"""The MCP servers file: which servers a worker offers tools from, and how to reach them.

``ORGA_MCP_SERVERS`` names a TOML file::

    [servers.time]                       # stdio: orga starts the process and talks over stdin/out
    command = "mcp-server-time"
    args = ["--local-timezone", "UTC"]

    [servers.github]                     # streamable HTTP
    url = "https://api.githubcopilot.com/mcp/"
    headers = { Authorization = "Bearer ${GITHUB_TOKEN}" }   # ${NAME}: the worker's environment
    tools = ["get_*", "list_*"]          # which of its tools to offer (globs; all by default)
    verified = ["get_*"]                 # which pass tool_profile.require_verified (none)
    required = false                     # down at start: start without its tools, keep trying

Secrets never sit in the file: ``env`` passes variables of the worker's environment to a stdio
server by name (``env = ["GITHUB_TOKEN"]``, or ``{CHILD = "${WORKER_VAR}"}``), and header values
take ``${NAME}`` from it (``expand``); an optional server (``required = false``) whose variables
are missing is skipped with a warning. Each tool is registered as ``<server>__<tool>``
(``orga.tools.mcp.names``, which also says how names that collide are refused). Connecting to
the servers is ``orga.tools.mcp.hub``'s.

Worker-side code (never imported by workflows).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orga.contracts.errors import InvalidConfig, describe_validation_error
from orga.tools.mcp.names import SEPARATOR

__all__ = [
    "McpConfig",
    "McpServerSpec",
    "expand",
    "load_mcp_config",
]

_SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*(?:_[A-Za-z0-9-]+)*$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpServerSpec(BaseModel):
    """One server of the file: stdio (``command``) or streamable HTTP (``url``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list[str])
    env: list[str] | dict[str, str] = Field(default_factory=list[str])
    """Variables of the worker's environment passed to a stdio server: names, or ``{CHILD =
    "${WORKER_VAR}"}``. Nothing else of the worker's environment reaches it but a safe few
    (``PATH``, ``HOME``, …)."""
    cwd: Path | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    """HTTP headers; ``${NAME}`` in a value is taken from the worker's environment."""
    tools: list[str] = Field(default_factory=lambda: ["*"])
    """Which of the server's tools to offer (globs over the server's own names)."""
    approval: list[str] = Field(default_factory=list[str])
    """Tools (globs) whose calls wait for a person under the default gate; matched against the
    server's own name and the name orga offers (``delete_repo`` holds for ``delete.repo``)."""
    serial: list[str] = Field(default_factory=list[str])
    """Tools (globs) with side effects: their calls run one at a time, in order; matched as
    ``approval`` is."""
    verified: list[str] = Field(default_factory=list[str])
    """Tools (globs over the server's own names) that carry ``[verified]`` and so pass
    ``tool_profile.require_verified``; none by default. Only this file grants the mark: a
    server's own text never does."""
    on_name_collision: Literal["stop", "skip"] = "stop"
    """Two of its tools that would get one name in orga (``delete_repo`` and ``delete.repo``)
    at the worker's start: stop the worker, naming both (``"stop"``), or offer neither, with a
    warning (``"skip"``). Later, through ``tools/list_changed``, both are refused either way."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one call may take (the tool activity's start-to-close timeout)."""
    connect_timeout: float = Field(default=30.0, gt=0)
    """Seconds to wait for the server to (re)connect: at start, and when a call finds it away."""
    required: bool = True
    """Down at start: stop the worker (true), or start without its tools and keep trying."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for stdio servers (command)")
        if self.command is not None and self.headers:
            raise ValueError("headers are for HTTP servers (url)")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def describe(self) -> str:
        return f"{self.command} {' '.join(self.args)}".strip() if self.command else str(self.url)


class McpConfig(BaseModel):
    """The file ``ORGA_MCP_SERVERS`` names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, McpServerSpec] = Field(default_factory=dict[str, McpServerSpec])


def load_mcp_config(path: Path) -> McpConfig:
    """Read and check the servers file.

    Raises:
        InvalidConfig: the file is missing, not TOML, or a server entry is wrong.
    """
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as error:
        raise InvalidConfig(f"ORGA_MCP_SERVERS={path}: cannot read it ({error})") from error
    except tomllib.TOMLDecodeError as error:
        raise InvalidConfig(f"ORGA_MCP_SERVERS={path} is not valid TOML: {error}") from error
    try:
        config = McpConfig.model_validate(raw)
    except ValidationError as error:
        problems = describe_validation_error(error, "")
        raise InvalidConfig(f"ORGA_MCP_SERVERS={path}: {problems}") from error
    for name in config.servers:
        if not _SERVER_NAME.fullmatch(name) or len(name) > 24:
            raise InvalidConfig(
                f"ORGA_MCP_SERVERS={path}: server name {name!r} is not allowed: letters, "
                "digits, '-' and single '_', starting with a letter, at most 24 characters "
                f"(its tools are named {name}{SEPARATOR}<tool>)"
            )
    return config


def expand(text: str, environ: Mapping[str, str], where: str) -> str:
    """``text`` with each ``${NAME}`` taken from ``environ``.

    Raises:
        InvalidConfig: ``where`` needs a variable ``environ`` lacks.
    """

    def value(match: re.Match[str]) -> str:
        variable = match.group(1)
        if variable not in environ:
            raise InvalidConfig(
                f"{where} needs ${{{variable}}}, which the worker's environment lacks"
            )
        return environ[variable]

    return _VARIABLE.sub(value, text)
