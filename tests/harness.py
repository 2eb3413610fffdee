"""Shared test machinery: a worker per test on a fresh task queue, loops run and replayed."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.worker import Replayer

from orga.cli.worker import build_workers
from orga.client import ThreadHandle, start_thread
from orga.contracts.config import LoopConfig, LoopInput
from orga.contracts.conversation import Message
from orga.contracts.state import LoopResult
from orga.contracts.task import TaskInput, TaskResult
from orga.contracts.threads import ThreadConfig
from orga.contracts.vocabulary import ProviderName
from orga.plugin import OrgaPlugin, http_client, replayer
from orga.runtime.settings import ProviderSettings, Settings
from orga.runtime.store import Store
from orga.scripted.server import ScriptedModelServer, Step
from orga.tools.mcp.hub import McpHub, open_mcp
from orga.tools.sdk import Tool

TEST_STORE = Store(f"sqlite:///{Path(tempfile.mkdtemp(prefix='orga-test-store-')) / 'store.db'}")
"""The store of the test session's clients and workers (large payloads, blobs, the ledger)."""

API_KEYS: dict[ProviderName, str] = {
    "openrouter": "sk-or-SENTINEL-openrouter-7f3a9c",
    "openai": "sk-SENTINEL-openai-2b8d41",
    "anthropic": "sk-ant-SENTINEL-anthropic-91ce5e",
}
"""Keys the test worker holds. Tests prove none of them leaks out of the worker."""


_DATA_DIR = Path(tempfile.mkdtemp(prefix="orga-test-data-"))


def scripted_settings(server: ScriptedModelServer, **changes: Any) -> Settings:
    """Worker settings whose providers all point at the scripted model server.

    Unless a test says otherwise: loops may ask for the permissive gate (a development setting
    the tests use), and ``file_read`` reads an empty scratch directory.
    """
    providers: dict[ProviderName, ProviderSettings] = {
        name: ProviderSettings(
            name=name,
            base_url=server.anthropic_base_url if name == "anthropic" else server.openai_base_url,
            api_key=SecretStr(API_KEYS[name]),
            api_key_env=f"{name.upper()}_API_KEY",
            default_model=f"default-{name}-model",
            official=False,
        )
        for name in API_KEYS
    }
    changes.setdefault("store_url", TEST_STORE.url)
    # Nobody's approvers (or key) in the checkout's .orga: a worker of a test enrolls only
    # what the test enrolls.
    changes.setdefault("data_dir", _DATA_DIR)
    changes.setdefault("allow_permissive", True)
    if "file_root" not in changes:
        scratch = Path(tempfile.gettempdir()) / "orga-test-files"
        scratch.mkdir(exist_ok=True)
        changes["file_root"] = scratch
    return Settings(providers=providers, default_provider="openai", **changes)


async def replay(handle: WorkflowHandle[Any, Any], client: Client | None = None) -> int:
    """Replay a workflow's history with the production workflows and converter — every run
    of it, following continue-as-new — in the strict sandbox, which re-imports the workflows'
    helpers for the replay and checks what they do (workers share them across runs). Returns
    how many runs were replayed."""
    return await replay_all([handle], client)


async def replay_all(handles: Iterable[WorkflowHandle[Any, Any]], client: Client | None) -> int:
    """``replay`` for several workflows at once, by one replay worker (each call of the
    replayer prepares the workflows in the strict sandbox anew: tens of milliseconds). Returns
    how many runs were replayed. A history that does not replay is kept on disk (its path in
    the failure's notes), to be replayed again and read while the test's server is gone."""
    replayed: list[str] = []
    kept: list[WorkflowHistory] = []

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for handle in handles:
            first = handle.first_execution_run_id or handle.run_id
            if client is not None and first is not None:
                handle = client.get_workflow_handle(handle.id, run_id=first)
            while True:
                history = await handle.fetch_history()
                replayed.append(history.run_id)
                kept.append(history)
                yield history
                last = history.events[-1]
                if client is None or not last.HasField(
                    "workflow_execution_continued_as_new_event_attributes"
                ):
                    break
                following = last.workflow_execution_continued_as_new_event_attributes
                handle = client.get_workflow_handle(
                    handle.id, run_id=following.new_execution_run_id
                )

    try:
        await _strict_replayer().replay_workflows(histories())
    except Exception as error:
        folder = Path(tempfile.gettempdir()) / "orga-failed-replays"
        folder.mkdir(exist_ok=True)
        for history in kept:
            path = folder / f"{history.workflow_id}-{history.run_id}.json"
            path.write_text(history.to_json())
            error.add_note(f"history kept: {path}")
        raise
    return len(replayed)


@functools.cache
def _strict_replayer() -> Replayer:
    return replayer(TEST_STORE, strict=True)


@dataclass
class Harness:
    """One test's view: a client, the model server, and a task queue of its own."""

    client: Client
    model: ScriptedModelServer
    task_queue: str = field(default_factory=lambda: f"test-{uuid.uuid4().hex[:12]}")
    handles: list[WorkflowHandle[Any, Any]] = field(default_factory=list[WorkflowHandle[Any, Any]])
    mcp: McpHub | None = None
    """The MCP servers of the running worker (``settings.mcp_servers_file``)."""
    plugin: OrgaPlugin | None = None
    """The plugin of the running worker (its activities: ``plugin.parts(client)``)."""
    memo: dict[str, Any] = field(default_factory=dict[str, Any])
    """Memo of every loop started here (the time-skipping harness turns search attributes off)."""

    async def another_process(self) -> Harness:
        """This test's view from a second process: its own client (one client runs one worker
        per queue) with its own identity (another process's pid), on the same task queue."""
        other = await Client.connect(
            self.client.service_client.config.target_host,
            namespace=self.client.namespace,
            data_converter=self.client.data_converter,
            identity=f"other-{self.client.identity}",
        )
        return dataclasses.replace(self, client=other, handles=[])

    def new_model(self, steps: Iterable[Step]) -> str:
        """A fresh model name with its own script."""
        name = f"scripted-{uuid.uuid4().hex[:10]}"
        self.model.script(name, steps)
        return name

    @contextlib.asynccontextmanager
    async def worker(
        self,
        *,
        settings: Settings | None = None,
        tools: Iterable[Tool] = (),
        http: httpx.AsyncClient | None = None,
    ) -> AsyncIterator[None]:
        settings = settings or scripted_settings(self.model)
        async with contextlib.AsyncExitStack() as stack:
            client_http = http or await stack.enter_async_context(http_client())
            mcp = await stack.enter_async_context(open_mcp(settings.mcp_servers_file))
            self.mcp = mcp
            plugin = OrgaPlugin(
                tools=tools,
                settings=settings,
                store=TEST_STORE
                if settings.store_url == TEST_STORE.url
                else stack.enter_context(settings.store()),  # closed with the worker
                http=client_http,
                mcp=mcp,
                tracing=False,
            )
            self.plugin = plugin
            workers = build_workers(self.client, settings, plugin, task_queue=self.task_queue)
            for each in workers:
                await stack.enter_async_context(each)
            yield

    async def start_thread(self, first: str, *, model: str) -> ThreadHandle:
        """A thread (``config.thread`` with its defaults) on ``model``, its first message
        ``first``; replayed after the test as every handle is."""
        chat = await start_thread(
            self.client,
            LoopConfig(model=model, thread=ThreadConfig()),
            first,
            task_queue=self.task_queue,
        )
        self.handles.append(chat.handle)
        return chat

    async def start(
        self,
        prompt: str | list[Message],
        *,
        workflow_id: str | None = None,
        **config: Any,
    ) -> WorkflowHandle[Any, LoopResult]:
        messages = [Message(role="user", content=prompt)] if isinstance(prompt, str) else prompt
        handle = await self.client.start_workflow(
            "ReasoningLoop",
            LoopInput(messages=messages, config=LoopConfig(**config)),
            id=workflow_id or f"loop-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=LoopResult,
            memo=self.memo or None,
        )
        self.handles.append(handle)
        return handle

    async def start_task(
        self, steps: list[dict[str, Any]], *, workflow_id: str | None = None, **options: Any
    ) -> WorkflowHandle[Any, TaskResult]:
        """Start a ``Task`` workflow from plain step dicts (validated here first)."""
        handle = await self.client.start_workflow(
            "Task",
            TaskInput.model_validate({"steps": steps, **options}),
            id=workflow_id or f"task-{uuid.uuid4().hex[:12]}",
            task_queue=self.task_queue,
            result_type=TaskResult,
            memo=self.memo or None,
        )
        self.handles.append(handle)
        return handle

    async def run(self, prompt: str | list[Message], **config: Any) -> LoopResult:
        handle = await self.start(prompt, **config)
        return await handle.result()
