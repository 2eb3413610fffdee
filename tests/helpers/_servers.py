"""Servers a test runs beside the session's: an MCP server over streamable HTTP, a worker
client that serves Prometheus metrics (and reading what it serves)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import socket
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from orga.runtime.connect import metrics_runtime
from orga.tools.sdk import Tool
from orga.web.agui import AguiOptions, agui_app
from orga.web.callers import Callers, new_token
from orga.worker.agent_registry import AgentRegistry
from tests.harness import Harness, scripted_settings
from tests.helpers._waiting import eventually


def callers_for(*users: str) -> tuple[dict[str, str], Callers]:
    """A fresh token for each of ``users``, and the endpoint's ``Callers`` that admit them."""
    tokens: dict[str, str] = {}
    digests: dict[str, str] = {}
    for user in users:
        tokens[user], digest = new_token()
        digests[digest] = user
    return tokens, Callers(digests)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reusable_port() -> int:
    """A free TCP port on 127.0.0.1 below Linux's ephemeral range (32768 up), for a server
    started again on the same port: a port from ``free_port`` may be handed to any outgoing
    connection as its source port once the first server let go of it."""
    for port in random.sample(range(20_000, 32_000), 200):
        if port_is_free(port):
            return port
    raise AssertionError("no free port between 20000 and 32000")


def port_is_free(port: int) -> bool:
    """Nothing holds ``port`` on 127.0.0.1 (it can be bound now)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@contextlib.asynccontextmanager
async def asgi_server(app: Any) -> AsyncIterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 (a free port): its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    running = uvicorn.Server(config)
    serving = asyncio.create_task(running.serve())

    def started() -> bool:
        assert not serving.done(), "the server did not start"
        return running.started

    await eventually(started, "the server listens")
    port = running.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        running.should_exit = True
        await serving


@contextlib.asynccontextmanager
async def agents_endpoint(
    harness: Harness, agents: Path, *tools: Tool
) -> AsyncIterator[tuple[str, str]]:
    """``orga api --a2a``'s app serving each agent of the ``agents`` file at
    ``/a2a/<agent>`` (its worker, with ``tools``, reads the same file), on 127.0.0.1: its base
    URL, and ann's token."""
    tokens, callers = callers_for("ann")
    specs = AgentRegistry.load(agents, frozenset({"default"})).specs()
    options = AguiOptions(task_queue=harness.task_queue)
    app = agui_app(harness.client, callers, options, a2a="orga", a2a_agents=specs)
    settings = scripted_settings(harness.model, agents_file=agents)
    async with harness.worker(settings=settings, tools=tools), asgi_server(app) as base:
        yield base, tokens["ann"]


@contextlib.asynccontextmanager
async def http_server(server: MCPServer, token: str) -> AsyncIterator[str]:
    """``server`` over streamable HTTP on 127.0.0.1, refusing requests without ``token``."""
    app = server.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no"})
                return
        await app(scope, receive, send)

    async with asgi_server(guarded) as base:
        yield f"{base}/mcp"


async def measured_harness(env: WorkflowEnvironment, harness: Harness) -> tuple[Harness, str]:
    """A harness whose client (and so its workers) serves Prometheus metrics at the address
    returned (a fresh runtime: counts start at zero)."""
    address = f"127.0.0.1:{free_port()}"
    runtime = metrics_runtime(address)
    assert runtime is not None
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        data_converter=env.client.data_converter,
        runtime=runtime,
    )
    return Harness(client=client, model=harness.model, task_queue=harness.task_queue), address


_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)"
)


def scrape(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text exposition → name → [(labels, value)]."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or line.startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group("labels") or ""))
        samples[match.group("name")].append((labels, float(match.group("value"))))
    return samples


def total(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **want: str) -> float:
    """The sum of ``name``'s samples whose labels include ``want``."""
    return sum(
        value
        for labels, value in samples.get(name, [])
        if all(labels.get(k) == v for k, v in want.items())
    )
