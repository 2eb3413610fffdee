"""What every ``orga`` verb shares: reaching Temporal, starting and updating workflows, and
reporting failures in one line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from orga.runtime.connect import connect
from orga.runtime.settings import Settings

__all__ = [
    "CliError",
    "Handler",
    "Verbs",
    "client_for",
    "data_dir",
    "not_found",
    "print_json",
    "send_update",
    "start_workflow",
    "ui_base",
    "ui_link",
]

Handler = Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]

# What add_subparsers() returns; argparse names its type privately, so it is named once here.
Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # pyright: ignore[reportPrivateUsage]

_Model = TypeVar("_Model", bound=BaseModel)


class CliError(Exception):
    """A failure to report in one line, with an exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def ui_base() -> str:
    return os.environ.get("ORGA_UI_URL", "http://localhost:8233").rstrip("/")


def ui_link(settings: Settings, workflow_id: str) -> str:
    return f"{ui_base()}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id}"


def data_dir(explicit: str | None = None) -> Path:
    """Where the embedded server keeps ``temporal.db``: the flag, ``ORGA_DATA_DIR``, or .orga."""
    return Path(os.path.abspath(explicit or os.environ.get("ORGA_DATA_DIR") or ".orga"))


async def client_for(settings: Settings) -> Client:
    try:
        return await connect(settings, timeout=5)
    except RuntimeError as error:
        raise CliError(
            f"cannot reach Temporal at {settings.temporal_address} ({error}). Start the "
            "embedded server with `uv run orga server`, or set TEMPORAL_ADDRESS."
        ) from error


def not_found(error: RPCError, workflow_id: str) -> CliError:
    if error.status == RPCStatusCode.NOT_FOUND:
        return CliError(f"there is no workflow {workflow_id!r} in this namespace")
    return CliError(f"Temporal refused the request for {workflow_id!r}: {error.message}")


def print_json(value: BaseModel | Any) -> None:
    if isinstance(value, BaseModel):
        print(value.model_dump_json(indent=2))
    else:
        print(json.dumps(value, indent=2, default=str))


async def start_workflow(
    settings: Settings,
    workflow: str,
    payload: BaseModel,
    *,
    workflow_id: str,
    result_type: type[_Model],
    summary: str,
) -> WorkflowHandle[Any, _Model]:
    """Start a workflow on the worker's task queue and say where to watch it."""
    client = await client_for(settings)
    handle = await client.start_workflow(
        workflow,
        payload,
        id=workflow_id,
        task_queue=settings.task_queue,
        result_type=result_type,
        static_summary=summary,
    )
    print(f"started {workflow_id}", file=sys.stderr)
    print(f"web ui: {ui_link(settings, workflow_id)}", file=sys.stderr)
    return handle


async def send_update(
    settings: Settings, workflow_id: str, update: str, payload: BaseModel, result: type[_Model]
) -> _Model:
    """Send a person's decision as an update; the workflow's validator may refuse it."""
    client = await client_for(settings)
    handle = client.get_workflow_handle(workflow_id)
    try:
        # temporalio's overloads of execute_update mention a bare Callable: "partially unknown".
        return await handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
            update, payload, result_type=result
        )
    except WorkflowUpdateFailedError as error:
        raise CliError(f"not recorded: {error.cause or error}") from error
    except RPCError as error:
        raise not_found(error, workflow_id) from error
