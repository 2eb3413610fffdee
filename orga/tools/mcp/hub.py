"""MCP servers as tool sources: the worker's operator lists them, orga offers their tools.

The servers come from the file ``ORGA_MCP_SERVERS`` names (``orga.tools.mcp.config``). Each
tool is registered as ``<server>__<tool>`` with the server's JSON schema and description, and
runs through the tool activity like any other (gate, timeouts, retries, breakers, recovery,
heartbeats, payload guard); what the model reads of a result is ``orga.tools.mcp.results``'s.
A stdio server that dies is started again, an HTTP server reconnected, with backoff; a call
while it is away waits for it, then fails ``ToolUnavailable`` (retried by Temporal).
``tools/list_changed`` refreshes the tools; a name never moves to another of the server's
tools (``orga.tools.mcp.names``). What a server says of its tools is material: approval,
serial and ``[verified]`` come from the operator's file only.

Worker-side code (never imported by workflows).

Over 400 lines: one hub owns every server's connection (start, list, call, reconnect,
refresh) and the names its tools hold; the file and the names' rules are ``config`` and
``names``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncGenerator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from orga.contracts.errors import InvalidConfig, ToolInputError, ToolUnavailable
from orga.contracts.tools import ToolDefinition
from orga.core.profile import VERIFIED_MARK
from orga.runtime.json_schema import JsonSchema, SchemaRefused
from orga.tools.mcp.config import McpConfig, McpServerSpec, expand, load_mcp_config
from orga.tools.mcp.names import (
    SEPARATOR,
    NameCollision,
    bind,
    matches,
    neutral,
    restricts,
    tool_name,
)
from orga.tools.mcp.results import render_result
from orga.tools.sdk import Tool, ToolContext

__all__ = [
    "McpConfig",
    "McpHub",
    "McpServerSpec",
    "McpTool",
    "McpToolError",
    "load_mcp_config",
    "open_mcp",
    "render_result",
    "tool_name",
]

log = logging.getLogger("orga.mcp")

_CLOSED = (OSError, EOFError, httpx2.HTTPError)
"""What a lost connection raises besides an ``MCPError`` with ``CONNECTION_CLOSED``."""


class McpToolError(Exception):
    """The server answered the call with ``isError``: the model reads the server's message."""


class McpTool(Tool):
    """A tool of an MCP server: arguments checked against the server's JSON schema, calls sent
    to the server."""

    def __init__(self, server: _Server, remote: str, definition: ToolDefinition) -> None:
        super().__init__(self._call, definition, BaseModel, None)
        self.server = server
        self.remote = remote
        try:  # RE2 regexes, bounded work, no $ref fetched (the server's schema, the model's args)
            self._schema = JsonSchema(definition.parameters)
        except SchemaRefused as refused:
            raise InvalidConfig(
                f"MCP server {server.name!r}: the input schema of tool {remote!r} {refused}; "
                "orga does not offer the tool until the server's schema is fixed"
            ) from refused

    def __repr__(self) -> str:
        return f"<McpTool {self.name!r} of {self.server.name!r}>"

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            problems = self._schema.errors(arguments)
        except SchemaRefused as refused:
            raise ToolInputError(
                f"arguments for tool {self.name!r} could not be checked: its input schema "
                f"{refused}. Call another tool, or answer without this one."
            ) from refused
        if problems:
            described = "; ".join(
                f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message}"
                for e in problems[:5]
            )
            raise ToolInputError(
                f"arguments for tool {self.name!r} do not match its schema: {described}. "
                "Call it again with arguments that match the schema."
            )
        return arguments

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self._call(arguments)

    async def _call(self, arguments: dict[str, Any]) -> str:
        result = await self.server.call(self.remote, arguments)
        text = render_result(result)
        if result.is_error:
            raise McpToolError(text or "the server reported an error and said nothing more")
        return text


class _Server:
    """One server: a supervisor keeps a session open, restarting or reconnecting it."""

    def __init__(self, name: str, spec: McpServerSpec, environ: Mapping[str, str]) -> None:
        self.name = name
        self.spec = spec
        self.environ = environ
        self.tools: dict[str, McpTool] = {}
        self.withdrawn: set[str] = set()
        self.bound: dict[str, str] = {}
        """Offered name → the remote tool it runs, for the worker's life: never rebound."""
        self.refused: dict[str, str] = {}
        """Offered names no tool holds now, because of a collision, with why."""
        self.at_start = True
        """A collision now stops the worker (when the operator asked for that)."""
        self.fatal: str | None = None
        self.error: str | None = None
        self.connected = asyncio.Event()
        self.first_attempt = asyncio.Event()
        self.connections = 0
        self._client: Client | None = None
        self._lost = asyncio.Event()
        self.env = self._child_env()  # checked at load: a missing variable stops the worker
        self.headers = {
            key: expand(value, environ, f"MCP server {name!r} header {key!r}")
            for key, value in spec.headers.items()
        }

    def _child_env(self) -> dict[str, str]:
        where = f"MCP server {self.name!r} env"
        if isinstance(self.spec.env, list):
            return {var: expand(f"${{{var}}}", self.environ, where) for var in self.spec.env}
        return {key: expand(value, self.environ, where) for key, value in self.spec.env.items()}

    def _target(self, stack: contextlib.AsyncExitStack) -> Any:
        spec = self.spec
        if spec.command is not None:
            return StdioServerParameters(
                command=spec.command,
                args=list(spec.args),
                env=self.env or None,
                cwd=spec.cwd,
            )
        assert spec.url is not None
        http = httpx2.AsyncClient(
            headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=False
        )
        stack.push_async_callback(http.aclose)
        return streamable_http_client(spec.url, http_client=http)

    async def supervise(self) -> None:
        """Keep the server connected until cancelled."""
        delay = 0.5
        while True:
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client = await stack.enter_async_context(
                        Client(
                            self._target(stack),
                            message_handler=self._on_message,
                            client_info=types.Implementation(name="orga", version="0.1.0"),
                        )
                    )
                    await asyncio.wait_for(
                        self._refresh(client, connecting=True), self.spec.connect_timeout
                    )
                    self._client, self.error = client, None
                    self.connections += 1
                    self.connected.set()
                    self.first_attempt.set()
                    log.info(
                        "MCP server %r connected (%s, protocol %s): %d tool(s)",
                        self.name,
                        self.spec.transport,
                        client.protocol_version,
                        len(self.tools),
                    )
                    delay = 0.5
                    await self._watch(client)
                    log.warning("MCP server %r: connection lost; reconnecting", self.name)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # every failure of a connection: try again, later
                if self.fatal is not None:  # the operator's file says: stop the worker
                    self.error = self.fatal
                    self.first_attempt.set()
                    return
                self.error = f"{type(error).__name__}: {error}"
                log.warning(
                    "MCP server %r (%s) is down: %s; retrying in %.1f s",
                    self.name,
                    self.spec.describe(),
                    self.error,
                    delay,
                )
            finally:
                self._client = None
                self.connected.clear()
                self._lost.clear()
            self.first_attempt.set()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def _watch(self, client: Client) -> None:
        """Return when the connection is gone; refresh the tools when the server says so."""
        watchers: list[asyncio.Future[Any]] = [asyncio.ensure_future(self._lost.wait())]
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            watchers.append(asyncio.ensure_future(self._listen(client)))
        try:
            await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers announce changes on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    await self._refresh(client)
        except Exception as error:
            if not isinstance(error, MCPError) or error.code != types.METHOD_NOT_FOUND:
                return  # the stream broke with the connection: reconnect
            await asyncio.Event().wait()  # the server cannot announce changes; calls still work

    async def _on_message(self, message: Any) -> None:
        """Handshake-era servers send ``notifications/tools/list_changed`` on the session."""
        if isinstance(message, Exception):
            log.debug("MCP server %r: %s", self.name, message)
            return
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification) and self._client is not None:
            await self._refresh(self._client)

    async def _refresh(self, client: Client, *, connecting: bool = False) -> None:
        """Take the server's tool list (``connecting``: a new connection's first)."""
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        offered = {t.name: t for t in reversed(listed) if matches(t.name, self.spec.tools)}
        try:
            binding = bind(
                self.name,
                [t.name for t in listed if t.name in offered],
                self.bound,
                stop=connecting and self.at_start and self.spec.on_name_collision == "stop",
            )
        except NameCollision as error:  # the SDK wraps what the session raises: keep it here
            self.fatal = str(error)
            raise
        fresh: dict[str, McpTool] = {}
        refused = dict(binding.refused)
        for name, remote in binding.names.items():
            try:
                fresh[name] = McpTool(self, remote, self._definition(name, offered[remote]))
            except InvalidConfig as error:  # its schema is refused: the others still serve
                refused[name] = error.message
        for name, why in refused.items():
            if self.refused.get(name) != why:
                log.warning("%s", why)
        self.refused = refused
        self.bound.update(binding.names)
        gone = set(self.tools) - set(fresh)
        if gone and self.tools:
            log.warning("MCP server %r withdrew tool(s) %s", self.name, ", ".join(sorted(gone)))
        self.withdrawn = (self.withdrawn | gone) - set(fresh)
        self.tools = fresh

    def _definition(self, name: str, remote: types.Tool) -> ToolDefinition:
        """What orga declares of ``remote``: its schema and words (material, never carrying
        orga's marks), and the operator's rules for it."""
        schema = dict(remote.input_schema or {"type": "object"})
        schema.setdefault("type", "object")
        schema.pop("title", None)
        said = remote.description or remote.title or remote.name
        description = neutral(f"{said.strip()} (MCP server {self.name!r}, tool {remote.name!r})")
        if matches(remote.name, self.spec.verified):
            description = f"{description} {VERIFIED_MARK}"
        return ToolDefinition(
            name=name,
            description=description,
            parameters=schema,
            serial=restricts(self.name, remote.name, self.spec.serial),
            requires_approval=restricts(self.name, remote.name, self.spec.approval),
            timeout=timedelta(seconds=self.spec.timeout),
        )

    async def call(self, remote: str, arguments: dict[str, Any]) -> types.CallToolResult:
        client = self._client
        if client is None:
            try:
                await asyncio.wait_for(self.connected.wait(), self.spec.connect_timeout)
            except TimeoutError:
                raise ToolUnavailable(
                    f"MCP server {self.name!r} is not connected ({self.error or 'starting'}); "
                    f"waited {self.spec.connect_timeout:g} s for it"
                ) from None
            client = self._client
            assert client is not None
        try:
            return await client.call_tool(remote, arguments)
        except MCPError as error:
            if error.code != types.CONNECTION_CLOSED:
                raise  # the server refused the request itself: a tool error
            self._lost.set()
            raise ToolUnavailable(
                f"MCP server {self.name!r} lost its connection during the call ({error}); it is "
                "being restarted"
            ) from error
        except _CLOSED as error:
            self._lost.set()
            raise ToolUnavailable(
                f"MCP server {self.name!r} could not be reached ({type(error).__name__}: "
                f"{error}); it is being reconnected"
            ) from error


class McpHub:
    """The worker's MCP servers, as one source of tools for its registry."""

    def __init__(self, config: McpConfig, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.servers: dict[str, _Server] = {}
        self.skipped: dict[str, str] = {}
        """Optional servers left out because the environment lacks a variable they need."""
        self._tasks: list[asyncio.Task[None]] = []
        for name, spec in config.servers.items():
            try:
                self.servers[name] = _Server(name, spec, environ)
            except InvalidConfig as error:
                if spec.required:
                    raise InvalidConfig(
                        f"{error.message}: set it, or set required = false for {name!r} in "
                        "ORGA_MCP_SERVERS to start without its tools"
                    ) from error
                self.skipped[name] = error.message
                log.warning("%s: starting without its tools (required = false)", error.message)

    def current(self) -> Mapping[str, Tool]:
        tools: dict[str, Tool] = {}
        for server in self.servers.values():
            tools.update(server.tools)
        return tools

    def absent(self, name: str) -> str | None:
        prefix, separator, _ = name.partition(SEPARATOR)
        if separator and prefix in self.skipped:
            return f"{self.skipped[prefix]}, so its tools, such as {name!r}, are not offered"
        server = self._owner(name)
        if server is None:
            return None
        if name in server.refused:
            return server.refused[name]
        if name in server.withdrawn:
            return (
                f"tool {name!r} is no longer offered by MCP server {server.name!r} (its tool "
                "list changed)"
            )
        if not server.connections:
            return (
                f"MCP server {server.name!r} has not connected yet ({server.error or 'starting'})"
                f"; its tools, such as {name!r}, are unknown until it does"
            )
        return f"MCP server {server.name!r} offers no tool {name!r}"

    def _owner(self, name: str) -> _Server | None:
        server, separator, _ = name.partition(SEPARATOR)
        return self.servers.get(server) if separator else None

    async def start(self) -> None:
        """Connect every server. A required one that does not connect stops the worker.

        Raises:
            InvalidConfig: a required server is down (named, with why and the way out), or a
                server offers two tools that would share a name (``on_name_collision``).
        """
        for server in self.servers.values():
            self._tasks.append(asyncio.create_task(server.supervise(), name=f"mcp-{server.name}"))
        await asyncio.gather(*(s.first_attempt.wait() for s in self.servers.values()))
        for server in self.servers.values():
            server.at_start = False
        fatal = [s.fatal for s in self.servers.values() if s.fatal is not None]
        if fatal:
            await self.stop()
            raise InvalidConfig(fatal[0])
        down = [s for s in self.servers.values() if not s.connected.is_set()]
        for server in down:
            if server.spec.required:
                await self.stop()
                raise InvalidConfig(
                    f"MCP server {server.name!r} ({server.spec.describe()}) is down: "
                    f"{server.error}. Fix it, or set required = false for it in ORGA_MCP_SERVERS "
                    "to start without its tools"
                )
            log.warning(
                "MCP server %r is down (%s): starting without its tools; they appear when it "
                "connects",
                server.name,
                server.error,
            )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()


@contextlib.asynccontextmanager
async def open_mcp(path: Path | None) -> AsyncGenerator[McpHub | None]:
    """The servers of ``path`` (``ORGA_MCP_SERVERS``), connected while the block runs; ``None``
    without a file."""
    if path is None:
        yield None
        return
    hub = McpHub(load_mcp_config(path))
    await hub.start()
    try:
        yield hub
    finally:
        await hub.stop()
