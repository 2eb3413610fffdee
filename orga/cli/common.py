"""What every ``orga`` verb shares: settings, reaching Temporal, output, and failing in one line.

Each verb's body is a coroutine run by ``execute``, which turns every expected failure into one
line on stderr (a JSON object with ``--json``) and an exit code: 1 for a failure, 2 for input
that is wrong, 130 when interrupted. A pipe closed early (``orga list | head``) ends quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import re
import socket
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table
from temporalio.client import Client, WorkflowHandle

from orga.cli.leave import exit_process
from orga.contracts.errors import InvalidConfig, describe_validation_error
from orga.contracts.vocabulary import ProviderName
from orga.desk.facts import DeskError
from orga.runtime.connect import connect
from orga.runtime.safe_text import SafeConsole, json_text, one_line
from orga.runtime.settings import Settings
from orga.runtime.tracing import client_interceptors, traced_process

if TYPE_CHECKING:  # imported where used: a verb that reads needs neither (CLI start-up)
    from orga.contracts.config import LoopInput
    from orga.contracts.principals import PrincipalClaim

__all__ = [
    "Approver",
    "CliError",
    "Json",
    "Model",
    "Provider",
    "Tools",
    "client_for",
    "console",
    "data_dir",
    "execute",
    "exit_process",
    "loop_input",
    "print_json",
    "print_table",
    "settings",
    "start_workflow",
    "ui_base",
    "ui_link",
    "with_workflow_id",
]

Json = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts (errors too, as JSON on stderr).")
]
"""The ``--json`` flag every verb takes."""
Approver = Annotated[
    str | None,
    typer.Option(help="Who decides; default: ORGA_APPROVER, else the operating-system user."),
]
"""Whose name a decision is recorded under (``orga.desk.approvals.who_decides``)."""
Tools = Annotated[
    list[str] | None,
    typer.Option("--tool", help="Advertise a registered tool to the model (repeatable)."),
]
Provider = Annotated[
    ProviderName | None,
    typer.Option(help="Model provider; default: the worker's (ORGA_PROVIDER)."),
]
Model = Annotated[
    str | None,
    typer.Option(help="Model name as the provider spells it; default: the worker's."),
]

_Model = TypeVar("_Model", bound=BaseModel)


class CliError(Exception):
    """A failure to report in one line, with an exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class _Console(SafeConsole):
    def on_broken_pipe(self) -> None:
        # Rich would exit with 1; a reader that stopped reading is not our failure.
        self.quiet = True
        raise BrokenPipeError


_console: Console | None = None


def console() -> Console:
    """Where human output goes: colour on a terminal; plain and never cut in a pipe. Every
    string printed through it is shown as ``safe_text.printable`` plain text (no markup)."""
    global _console
    if _console is None:
        tty = sys.stdout.isatty()
        _console = _Console(highlight=False, soft_wrap=True, width=None if tty else 10_000)
    return _console


def print_table(table: Table) -> None:
    """A table: drawn for a terminal; in a pipe, plain columns without trailing blanks."""
    out = console()
    if out.is_terminal:
        out.print(table)
        return
    with out.capture() as captured:
        out.print(table)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def print_json(value: BaseModel | Any) -> None:
    """``value`` as JSON: the exact values, with characters a terminal would act on escaped."""
    text = (
        value.model_dump_json(indent=2)
        if isinstance(value, BaseModel)
        else json.dumps(value, indent=2, default=str)
    )
    sys.stdout.write(json_text(text) + "\n")


def with_workflow_id(workflow_id: str, answer: BaseModel) -> dict[str, Any]:
    """``answer`` as JSON fields, after the workflow id it came from (a turn's answer does not
    name its thread: a script that started one needs the id to go on)."""
    return {"workflow_id": workflow_id, **answer.model_dump(mode="json")}


def settings() -> Settings:
    """The same settings the worker reads (``TEMPORAL_ADDRESS`` …)."""
    try:
        return Settings.from_env()
    except InvalidConfig as error:
        raise CliError(error.message, 2) from error


def ui_base() -> str:
    return settings().ui_url.rstrip("/")


def ui_link(settings: Settings, workflow_id: str) -> str:
    return f"{ui_base()}/namespaces/{settings.temporal_namespace}/workflows/{workflow_id}"


def data_dir(explicit: str | None = None) -> Path:
    """Where the embedded server keeps ``temporal.db``: the flag, ``ORGA_DATA_DIR``, or .orga."""
    return Path(os.path.abspath(explicit)) if explicit else settings().data_dir


async def client_for(settings: Settings) -> Client:
    try:
        return await connect(settings, timeout=5, interceptors=client_interceptors())
    except RuntimeError as error:
        raise CliError(
            f"cannot reach Temporal at {settings.temporal_address} ({unreachable(error)}). "
            "Start the embedded server with `uv run orga server`, or set TEMPORAL_ADDRESS."
        ) from error


def unreachable(error: BaseException) -> str:
    """Why a connection failed, in words: the operating system's message inside the client's
    ``tonic::transport::Error(…)`` dump (``Connection refused``), else its first line."""
    text = str(error)
    found = re.search(r'message: "([^"]+)"', text) or re.search(r"\"([a-z][a-z ]+ error)\"", text)
    if found is not None:
        return found.group(1).lower()
    first = text.splitlines()[0] if text else type(error).__name__
    return first if len(first) <= 120 else first[:119] + "…"


async def start_workflow(
    settings: Settings,
    workflow: str,
    payload: BaseModel,
    *,
    workflow_id: str,
    result_type: type[_Model],
    summary: str,
    client: Client | None = None,
) -> WorkflowHandle[Any, _Model]:
    """Start a workflow on the worker's task queue and say (on stderr) where to watch it."""
    client = client or await client_for(settings)
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


Host = Annotated[str, typer.Option(help="Address to listen on (keep it local).")]
Port = Annotated[int, typer.Option(help="Port to listen on (0: any free port).")]


async def serve_http(
    app: Any,
    host: str,
    port: int,
    announce: Callable[[int], Awaitable[None] | None],
    *,
    lifespan: bool = False,
    options: Mapping[str, Any] | None = None,
) -> int:
    """Serve ``app`` with uvicorn until stopped; ``announce`` gets the bound port once it
    listens (``port`` 0 picks a free one). ``lifespan``: run the app's start-up and shut-down
    (an MCP server's session manager); ``options``: more of ``uvicorn.Config``'s (limits).

    Raises:
        CliError: the port is taken or the address cannot be listened on (one line, naming
            the option that changes it).
    """
    import uvicorn

    sockets = _listen(host, port)
    life = "on" if lifespan else "off"
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan=life, **(options or {})
    )
    server = uvicorn.Server(config)

    async def serve() -> bool:
        try:
            await server.serve(sockets=sockets)
        except SystemExit:  # uvicorn's way to say the app did not start (it logged why)
            return False
        return True

    bound: int = sockets[0].getsockname()[1]
    serving = asyncio.create_task(serve())
    while not server.started:
        if serving.done():
            if await serving:
                return 0  # stopped before it started (interrupted)
            raise CliError(f"the server on {host} port {bound} did not start (see above)")
        await asyncio.sleep(0.05)
    announced = announce(bound)
    if announced is not None:
        await announced
    await serving
    return 0


def _listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of ``host`` (``localhost``: IPv4 and IPv6) on one port."""
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        found = socket.getaddrinfo(literal, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as error:
        raise CliError(f"--host {host}: not an address to listen on ({error})", 2) from error
    addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in found))
    sockets: list[socket.socket] = []
    try:
        for family, address in addresses:
            listener = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and len(addresses) > 1:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if len(sockets) > 1:  # port 0: the others take the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            try:
                listener.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRNOTAVAIL and len(sockets) > 1:
                    sockets.pop().close()  # that family is off on this machine
                    continue
                raise
    except OSError as error:
        for listener in sockets:
            listener.close()
        if error.errno == errno.EADDRINUSE:
            raise CliError(
                f"port {port} on {host} is in use: pass --port N (0 picks a free one)"
            ) from error
        raise CliError(
            f"cannot listen on {host} port {port} ({error.strerror}): pass another --host or --port"
        ) from error
    return sockets


def _report(message: str, code: int, as_json: bool) -> None:
    if as_json:
        sys.stderr.write(json.dumps({"error": {"message": message, "code": code}}) + "\n")
    else:
        sys.stderr.write(f"orga: {one_line(message)}\n")


def execute(
    body: Callable[[], Coroutine[Any, Any, int]], *, as_json: bool = False, traced: bool = False
) -> NoReturn:
    """Run a verb's body and exit with its code (see the module docstring).

    ``traced``: the verb sends traces when the ``OTEL_*`` variables ask for them (service
    ``orga``): its clients carry the trace context of the spans it opens, and every span has
    left before the process exits.
    """
    code = 1
    try:
        with traced_process("orga") if traced else contextlib.nullcontext():
            code = asyncio.run(body())
    except CliError as error:
        _report(str(error), error.code, as_json)
        code = error.code
    except DeskError as error:
        _report(str(error), 1, as_json)
    except InvalidConfig as error:
        _report(error.message, 2, as_json)
        code = 2
    except KeyboardInterrupt:
        _report("interrupted", 130, as_json)
        code = 130
    except BrokenPipeError:
        code = 0  # the reader stopped reading (`| head`): nothing more to say
    except Exception as error:
        if _debug():
            raise
        _report(
            f"unexpected error: {type(error).__name__}: {error} (ORGA_DEBUG=1 shows more)",
            1,
            as_json,
        )
    exit_process(code)


def _debug() -> bool:
    """``ORGA_DEBUG``: show the traceback of an unexpected error."""
    try:
        return Settings.from_env().debug
    except InvalidConfig:
        return False  # settings that do not read cannot ask for tracebacks either


def principal_of(
    user: str | None, tenant: str | None, workflow_id: str, settings: Settings
) -> PrincipalClaim:
    """The principal ``--principal``/``--tenant`` name, for ``workflow_id``: signed by the
    issuer the settings name (``ORGA_ISSUER``, ``ORGA_ISSUER_KEY``), else a claim.

    Raises:
        CliError: no user, a name that is not one, or an issuer key that cannot be read (2).
    """
    from orga.contracts.principals import PrincipalClaim
    from orga.runtime.approver_keys import ApproverKeyError
    from orga.runtime.binding import bind, issuer_from

    if user is None:
        raise CliError("--tenant needs --principal (the user the loop runs for)", 2)
    try:
        claim = PrincipalClaim(user=user, tenant=tenant)
        return bind(claim, workflow_id, issuer_from(settings))
    except ValidationError as error:
        raise CliError(f"invalid principal: {describe_validation_error(error)}", 2) from error
    except ApproverKeyError as error:
        raise CliError(str(error), 2) from error


def loop_input(prompt: str | None, **config: Any) -> LoopInput:
    """A loop's input from a prompt and config values (``None`` ones left to their defaults);
    no prompt: a thread that waits for its first message.

    Raises:
        CliError: the config is invalid (exit code 2), saying which field and why.
    """
    from orga.contracts.config import LoopConfig, LoopInput
    from orga.contracts.conversation import Message

    try:
        return LoopInput(
            messages=[Message(role="user", content=prompt)] if prompt is not None else [],
            config=LoopConfig.model_validate({k: v for k, v in config.items() if v is not None}),
        )
    except ValidationError as error:
        raise CliError(f"invalid loop input: {describe_validation_error(error)}", 2) from error
