"""The A2A endpoint's tasks in orga's shared store: they outlive the endpoint's process, and
every endpoint of the deployment reads them.

``a2a-sdk``'s ``DatabaseTaskStore`` — each caller's tasks its own (their owner) — over the
database ``ORGA_STORE_URL`` names (SQLite through aiosqlite, PostgreSQL through psycopg), in a
table of orga's (``orga_a2a_tasks``: task and context ids up to 200 characters, where the
SDK's own table holds 36, fewer than the context ids orga takes). A caller keeps its newest
``most`` ended tasks: older ones are deleted as newer ones end (an older one's ``GetTask`` is
"task not found"; its thread keeps the turn).

``Resuming`` is the request handler that picks a task up again where no execution of this
process follows it (the endpoint that did has ended): a ``SubscribeToTask`` of a task that has
not ended runs the executor again for it, which follows the turn's thread from where it is
(``Threads`` reads the turn from the task's last status message).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import urlsplit

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.models import create_task_model
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import SubscribeToTaskRequest, Task, TaskState
from sqlalchemy import JSON, Column, DateTime, Index, MetaData, String, Table, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase

from orga.contracts.errors import InvalidConfig

__all__ = ["ENDED", "Resuming", "StoredTasks"]

ENDED: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_TABLE: Final = "orga_a2a_tasks"
_METADATA: Final = MetaData()
_TASKS: Final = Table(
    _TABLE,
    _METADATA,
    Column("id", String(200), primary_key=True),
    Column("context_id", String(200), nullable=False),
    Column("kind", String(16), nullable=False, default="task"),
    Column("owner", String(255), nullable=True),
    Column("last_updated", DateTime, nullable=True),
    Column("status", JSON, nullable=False),
    Column("artifacts", JSON, nullable=True),
    Column("history", JSON, nullable=True),
    Column("protocol_version", String(16), nullable=True),
    Column("metadata", JSON, nullable=True),
    Index(f"idx_{_TABLE}_owner_last_updated", "owner", "last_updated"),
)


class _Base(DeclarativeBase):
    """orga's own declarative base (the SDK's already maps a ``TaskModel``)."""


_MODEL: Final[Any] = create_task_model(_TABLE, _Base)
"""The SDK's mapping of a task onto the table (made once: a table is declared once)."""


def async_engine(url: str) -> AsyncEngine:
    """An asyncio engine of the store ``url`` names (``orga.runtime.store``'s forms).

    Raises:
        InvalidConfig: not a store orga knows.
    """
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        path = Path(url.removeprefix("sqlite:///"))
        return create_async_engine(f"sqlite+aiosqlite:///{path}", connect_args={"timeout": 30})
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        rest = url.split("://", 1)[1]
        return create_async_engine(f"postgresql+psycopg://{rest}", pool_pre_ping=True)
    raise InvalidConfig(f"ORGA_STORE_URL={url!r} is not a store orga knows")


class StoredTasks(DatabaseTaskStore):
    """The tasks in the store (see the module)."""

    def __init__(self, engine: AsyncEngine, most: int) -> None:
        super().__init__(engine, create_table=False)
        self.task_model = _MODEL
        self._most = most

    async def initialize(self) -> None:
        if self._initialized:
            return
        async with self.engine.begin() as connection:
            await connection.run_sync(_METADATA.create_all)
        self._initialized = True

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        if task.status.state in ENDED:
            await self._prune(self.owner_resolver(context))

    async def _prune(self, owner: str) -> None:
        """Delete the owner's ended tasks past its newest ``most``."""
        async with self.engine.begin() as connection:
            found = await connection.execute(
                select(_TASKS.c.id, _TASKS.c.status)
                .where(_TASKS.c.owner == owner)
                .order_by(_TASKS.c.last_updated.desc())
            )
            ended = [row.id for row in found if _ended(row.status)]
            if len(ended) > self._most:
                await connection.execute(delete(_TASKS).where(_TASKS.c.id.in_(ended[self._most :])))


def _ended(status: object) -> bool:
    """Whether a stored status (its JSON) is an ended task's."""
    state = cast(dict[str, Any], status).get("state") if isinstance(status, dict) else None
    return isinstance(state, str) and state in {TaskState.Name(s) for s in ENDED}


class Resuming(DefaultRequestHandler):
    """``a2a-sdk``'s handler, which picks up a task no execution here follows (the module)."""

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        await self._pick_up(params.id, context)
        subscribed: Any = super().on_subscribe_to_task  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        events = cast(AsyncGenerator[Event], subscribed(params, context))
        async for event in events:
            yield event

    async def _pick_up(self, task_id: str, context: ServerCallContext) -> None:
        """Follow the caller's task ``task_id`` again, where nothing here does."""
        registry = self._active_task_registry  # pyright: ignore[reportPrivateUsage]
        if await registry.get(task_id) is not None:
            return
        found = await self._versioned_store.get(task_id, context)  # pyright: ignore[reportPrivateUsage]
        if found is None or found.task.status.state in ENDED:
            return
        task = found.task
        active = await registry.get_or_create(task_id, call_context=context)
        again = RequestContext(
            call_context=context, task_id=task.id, context_id=task.context_id, task=task
        )
        await active.enqueue_request(again)
