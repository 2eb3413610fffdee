"""``orga blob get`` and ``orga store prune``: what the store keeps, read back or forgotten.

The store (``ORGA_STORE_URL``; by default ``<ORGA_DATA_DIR>/store.db``) keeps the full texts
the payload guard cut before the model saw them (``blob:sha256:…`` in the journal) and the
payloads kept out of history. Run these with the workers' settings.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from orga.cli.common import CliError, console, execute, settings
from orga.runtime.safe_text import printable
from orga.runtime.spend import SpendLedger

__all__ = ["register"]

blob_app = typer.Typer(
    help="Full texts the payload guard cut before the model saw them.", no_args_is_help=True
)
store_app = typer.Typer(help="The store every worker and client shares.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``blob`` and ``store`` groups to ``app``."""
    blob_app.command("get", epilog="Example: orga blob get blob:sha256:3f2a…  > result.txt")(get)
    store_app.command("prune", epilog="Example: orga store prune --older-than 90")(prune)
    app.add_typer(blob_app, name="blob")
    app.add_typer(store_app, name="store")


def get(
    reference: Annotated[
        str, typer.Argument(help="The reference the journal records (blob:sha256:…).")
    ],
) -> None:
    """Print the full text kept under a blob reference."""

    from orga.worker.blobs import BlobStore  # the store (SQLAlchemy) for this verb only

    async def body() -> int:
        with settings().store() as store:
            try:
                text = BlobStore(store).get(reference)
            except (ValueError, LookupError) as error:
                raise CliError(str(error)) from error
        # Exact into a pipe or a file; on a terminal, a tool's escapes are shown, not obeyed.
        sys.stdout.write(text if not sys.stdout.isatty() else printable(text))
        return 0

    execute(body)


def prune(
    older_than: Annotated[
        float,
        typer.Option(
            help="Forget payloads and blobs kept, and spend-ledger calls settled, more than "
            "this many days ago."
        ),
    ],
) -> None:
    """Forget old payloads and blobs (keep them longer than the namespace keeps histories), and
    the spend ledger's record of each call settled long ago (its totals stay)."""

    async def body() -> int:
        with settings().store() as store:
            removed = store.prune(older_than)
            calls = SpendLedger(store).prune(older_than)
        console().print(
            f"forgot {removed} stored payload(s) and blob(s), {calls} settled call(s) of the "
            "spend ledger",
            markup=False,
        )
        return 0

    execute(body)
