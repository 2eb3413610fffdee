"""``orga demo`` and ``orga server``: the embedded Temporal dev server, and a loop run end to
end on it."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from orga.cli.common import CliError, console, data_dir, execute, settings, ui_base
from orga.contracts import search_attributes as sa

__all__ = ["register"]

DataDir = Annotated[
    str | None,
    typer.Option("--data-dir", help="Where temporal.db lives; default: ORGA_DATA_DIR, else .orga."),
]


def register(app: typer.Typer) -> None:
    """Add ``demo``, ``server`` and ``worker`` to ``app``."""
    app.command("demo", epilog="Example: uv run orga demo")(demo)
    app.command("server", epilog="Example: uv run orga server --ui-port 8233")(server)
    app.command("worker", epilog="Example: uv run orga worker --scripted")(worker)


def worker(
    scripted: Annotated[
        bool,
        typer.Option(
            "--scripted",
            help="Serve the offline scripted model (no API key, no network; answers labelled).",
        ),
    ] = False,
) -> None:
    """Run a worker: orga's workflows and activities on ORGA_TASK_QUEUE, configured from the
    environment (the same as `uv run worker.py`). Ctrl-C stops it gracefully."""
    from orga.cli.worker import main  # the workflow code, loaded only for a worker

    raise typer.Exit(main(["--scripted"] if scripted else []))


def demo(data_dir_option: DataDir = None) -> None:
    """Run a demo loop end to end: an embedded server (if none answers), a worker, a loop that
    calls a tool; the offline scripted model when no API key is set. Stops all it started."""
    directory = data_dir(data_dir_option)

    async def body() -> int:
        from orga.cli.demo import DEMO_PROMPT, run_demo

        out = console()
        out.print(f"orga demo — task: {DEMO_PROMPT}", markup=False)
        outcome = await run_demo(settings(), directory, ui_url=ui_base())
        result = outcome.result
        out.print(f"model:       {outcome.model_label}", markup=False)
        out.print(f"answer:      {result.output}", markup=False)
        out.print(
            f"loop:        {result.iterations} iteration(s), {result.tool_call_count} tool "
            f"call(s), {result.usage.total_tokens} tokens",
            markup=False,
        )
        out.print(f"workflow id: {outcome.workflow_id}", markup=False)
        out.print(f"web ui:      {outcome.ui_url}", markup=False)
        if outcome.started_server:
            out.print(
                f"             (the embedded server has stopped; its history is kept in "
                f"{directory / 'temporal.db'}: run `uv run orga server` and open the link)",
                markup=False,
            )
        return 0

    execute(body)


def server(
    data_dir_option: DataDir = None,
    ui_port: Annotated[int, typer.Option(help="Port of the Web UI.")] = 8233,
    headless: Annotated[bool, typer.Option("--headless", help="No Web UI.")] = False,
    codec_endpoint: Annotated[
        str | None,
        typer.Option(
            help="The Web UI's codec endpoint (run `orga codec`: the UI then shows payloads "
            "kept in the store), e.g. http://localhost:8081."
        ),
    ] = None,
) -> None:
    """Run the embedded Temporal dev server on a SQLite file (TEMPORAL_ADDRESS says where),
    with orga's search attributes registered. Ctrl-C stops it cleanly."""
    directory = data_dir(data_dir_option)

    async def body() -> int:
        from orga.server.devserver import DevServer

        host, _, port = settings().temporal_address.rpartition(":")
        dev = DevServer(
            directory,
            ip=host if host not in ("", "localhost") else "127.0.0.1",
            port=int(port),
            ui_port=ui_port,
            headless=headless,
            codec_endpoint=codec_endpoint,
        )
        try:
            await dev.start()
        except (RuntimeError, TimeoutError) as error:
            raise CliError(str(error)) from error
        out = console()
        out.print(f"Temporal dev server on {dev.address} (SQLite: {dev.database})", markup=False)
        if not headless:
            out.print(f"Web UI: {dev.ui_url}", markup=False)
        out.print("Search attributes: " + ", ".join(k.name for k in sa.ALL) + ". Ctrl-C stops it.")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        waiter = asyncio.ensure_future(dev.wait())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if waiter.done():
            raise CliError(f"the dev server exited unexpectedly (code {waiter.result()})")
        out.print("stopping…")
        await dev.stop()
        out.print("stopped")
        return 0

    execute(body)
