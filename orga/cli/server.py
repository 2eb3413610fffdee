"""``orga demo`` and ``orga server``: the embedded Temporal dev server, and a loop run end to
end on it."""

from __future__ import annotations

import argparse
import asyncio
import signal

from orga.cli.common import CliError, Verbs, ui_base
from orga.contracts import search_attributes as sa
from orga.runtime.settings import Settings

__all__ = ["cmd_demo", "cmd_server", "register"]


async def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from orga.cli.demo import DEMO_PROMPT, run_demo

    print(f"orga demo — task: {DEMO_PROMPT}")
    outcome = await run_demo(settings, args.data_dir, ui_url=ui_base())
    print(f"model:       {outcome.model_label}")
    print(f"answer:      {outcome.result.output}")
    print(
        f"loop:        {outcome.result.iterations} iteration(s), "
        f"{outcome.result.tool_call_count} tool call(s), {outcome.result.usage.total_tokens} tokens"
    )
    print(f"workflow id: {outcome.workflow_id}")
    print(f"web ui:      {outcome.ui_url}")
    if outcome.started_server:
        print(
            f"             (the embedded server has stopped; its history is kept in "
            f"{args.data_dir / 'temporal.db'}: run `uv run orga server` and open the link)"
        )
    return 0


async def cmd_server(args: argparse.Namespace, settings: Settings) -> int:
    from orga.runtime.devserver import DevServer

    host, _, port = settings.temporal_address.rpartition(":")
    server = DevServer(
        args.data_dir,
        ip=host if host not in ("", "localhost") else "127.0.0.1",
        port=int(port),
        ui_port=args.ui_port,
        headless=args.headless,
    )
    try:
        await server.start()
    except (RuntimeError, TimeoutError) as error:
        raise CliError(str(error)) from error
    print(f"Temporal dev server on {server.address} (SQLite: {server.database})")
    if not args.headless:
        print(f"Web UI: {server.ui_url}")
    print("Search attributes: " + ", ".join(k.name for k in sa.ALL) + ". Ctrl-C stops it.")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    waiter = asyncio.ensure_future(server.wait())
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if waiter.done():
        raise CliError(f"the dev server exited unexpectedly (code {waiter.result()})")
    print("stopping…")
    await server.stop()
    print("stopped")
    return 0


def register(verbs: Verbs) -> None:
    """Add ``demo`` and ``server`` to the top parser's verbs."""
    data_help = "where temporal.db lives (default: ORGA_DATA_DIR or .orga)"
    demo = verbs.add_parser("demo", help="run a demo loop end to end on the embedded server")
    demo.add_argument("--data-dir", help=data_help)
    demo.set_defaults(handler=cmd_demo)

    server = verbs.add_parser("server", help="run the embedded Temporal dev server (SQLite)")
    server.add_argument("--data-dir", help=data_help)
    server.add_argument("--ui-port", type=int, default=8233)
    server.add_argument("--headless", action="store_true", help="no Web UI")
    server.set_defaults(handler=cmd_server)
