"""``orga desk``: serve the operator's inbox as a local web page (``orga.desk.page`` builds
it) on 127.0.0.1, locked to a token printed in its address, deciding as whoever runs it.
"""

from __future__ import annotations

import os
import secrets
import sys
import webbrowser
from typing import Annotated

import typer

from orga.cli.common import Approver, Host, Port, client_for, console, execute, serve_http, settings
from orga.core.signatures import fingerprint
from orga.desk.approvals import signing_key, who_decides
from orga.desk.page import build_app
from orga.runtime.approver_keys import public_key_of
from orga.runtime.pauses import PauseBook

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``desk`` to ``app``."""
    app.command("desk", epilog="Example: orga desk --approver alice")(serve_desk)


def serve_desk(
    host: Host = "127.0.0.1",
    port: Port = 8765,
    approver: Approver = None,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the page in a browser.")
    ] = True,
    principal: Annotated[
        str | None, typer.Option(help="List only what waits in this user's loops and tasks.")
    ] = None,
) -> None:
    """The inbox as a local web page: approve, deny or resolve with a reason, pause or resume
    a tool, an agent or a loop, read a workflow's receipts — in a browser."""

    async def body() -> int:
        who = who_decides(approver)
        config = settings()
        key = signing_key(config)
        client = await client_for(config)
        token = secrets.token_urlsafe(24)
        app = build_app(
            client, token=token, approver=who, hosts=_hosts(host), key=key, principal=principal,
            pauses=PauseBook(config.store()),
        )  # fmt: skip

        def announce(bound: int) -> None:
            url = f"http://{host}:{bound}/?token={token}"
            out = console()
            out.print(f"orga desk on {url}", markup=False, soft_wrap=True)
            signing = (
                f"signing with {fingerprint(public_key_of(key))}"
                if key is not None
                else "decisions unsigned (no ORGA_APPROVER_KEY): where approvers are enrolled "
                "they are refused, elsewhere recorded unverified"
            )
            out.print(f"deciding as {who}, {signing}. Ctrl-C stops it.", markup=False)
            if open_browser and not _open(url):
                out.print(
                    "no browser to open here (a machine without a display): open the address "
                    "above in a browser that can reach this machine (--no-open says nothing)",
                    markup=False,
                )

        return await serve_http(app, host, port, announce)

    execute(body)


def _open(url: str) -> bool:
    """Open ``url`` in a browser; False when this machine has none to open (no display)."""
    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY")
    )
    if not graphical:  # webbrowser would start a text browser in this terminal, or nothing
        return False
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


def _hosts(host: str) -> set[str]:
    names = {host, "127.0.0.1", "localhost"} if host in ("127.0.0.1", "localhost") else {host}
    return names | {f"[{host}]"}
