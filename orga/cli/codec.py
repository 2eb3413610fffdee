"""``orga codec``: the Web UI's codec endpoint, so it shows payloads kept out of history.

Payloads of 128 KiB or more live in orga's store (``ORGA_STORE_URL``) and history holds a
small ``orga-store`` reference to each. The Temporal Web UI reads history in the browser; given
a *codec endpoint*, it posts every payload it shows to ``<endpoint>/decode`` and shows what
comes back. This server answers with the stored payload in place of each reference (other
payloads pass through untouched) and ``/encode`` with the payloads as sent (orga adds no
encoding of its own). Point the UI at it: ``orga server --codec-endpoint
http://localhost:8081``, ``temporal server start-dev --ui-codec-endpoint …``, or the UI's
``TEMPORAL_CODEC_ENDPOINT`` (docker-compose.yml does). It needs the workers' store settings.

Whoever can reach it can read any stored payload whose reference they know: the references are
in history, so that is what reading the history gives already. It listens on 127.0.0.1 unless
told otherwise, and answers browsers only from the UI origins it is given (CORS).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads

from orga.cli.common import Host, Port, console, execute, serve_http, settings
from orga.runtime.converter import resolve
from orga.runtime.safe_text import one_line

if TYPE_CHECKING:
    from orga.runtime.store import Store

__all__ = ["DEFAULT_ORIGINS", "build_app", "register"]

DEFAULT_ORIGINS = ("http://localhost:8233", "http://localhost:8080")
"""The embedded server's Web UI (``orga server``) and docker-compose.yml's."""


def register(app: typer.Typer) -> None:
    """Add ``codec`` to ``app``."""
    app.command("codec", epilog="Example: orga codec --port 8081")(serve_codec)


def serve_codec(
    host: Host = "127.0.0.1",
    port: Port = 8081,
    ui_origin: Annotated[
        list[str] | None,
        typer.Option(help="A Web UI origin allowed to call it (repeat for several)."),
    ] = None,
) -> None:
    """Serve the Web UI's codec endpoint: it shows payloads kept in the store in place of their
    references."""
    origins = tuple(ui_origin or DEFAULT_ORIGINS)

    async def body() -> int:
        with settings().store() as store:

            def announce(bound: int) -> None:
                console().print(
                    f"orga codec on http://{host}:{bound} (store {store.safe_url}; "
                    f"UI origins: {', '.join(origins)})",
                    markup=False,
                    soft_wrap=True,
                )

            return await serve_http(build_app(store, origins), host, port, announce)

    execute(body)


def build_app(store: Store, origins: tuple[str, ...] = DEFAULT_ORIGINS) -> Starlette:
    """The codec endpoint's application, reading ``store``."""

    async def decode(request: Request) -> JSONResponse:
        payloads = await _payloads(request)
        if isinstance(payloads, JSONResponse):
            return payloads
        resolved = await asyncio.to_thread(_resolve_all, list(payloads.payloads), store)
        return JSONResponse(MessageToDict(Payloads(payloads=resolved)))

    async def encode(request: Request) -> JSONResponse:
        payloads = await _payloads(request)
        if isinstance(payloads, JSONResponse):
            return payloads
        return JSONResponse(MessageToDict(payloads))

    routes = [
        Route(path, endpoint, methods=["POST"])
        for prefix in ("", "/{namespace}")
        for path, endpoint in ((f"{prefix}/decode", decode), (f"{prefix}/encode", encode))
    ]
    cors = Middleware(
        CORSMiddleware,
        allow_origins=list(origins),
        allow_methods=["POST"],
        allow_headers=["content-type", "x-namespace", "authorization"],
        allow_credentials=True,
    )
    return Starlette(routes=routes, middleware=[cors])


async def _payloads(request: Request) -> Payloads | JSONResponse:
    """The request's payloads, or the 400 that says why there are none."""
    try:
        body: Any = await request.json()
        return ParseDict(body, Payloads(), ignore_unknown_fields=True)
    except (ValueError, ParseError) as error:
        return JSONResponse(
            {"error": f'expected {{"payloads": [...]}} as JSON: {error}'}, status_code=400
        )


def _resolve_all(payloads: list[Payload], store: Store) -> list[Payload]:
    """Each payload resolved; one the store has lost stays a reference (and is reported), so
    the rest of the page still shows."""
    resolved: list[Payload] = []
    for payload in payloads:
        try:
            resolved.append(resolve(payload, store))
        except LookupError as error:
            print(f"orga codec: {one_line(str(error))}", file=sys.stderr)
            resolved.append(payload)
    return resolved
