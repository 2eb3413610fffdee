"""``orga spend``: what each user and tenant spent today or this month, against their limits.

It reads the spend ledger in orga's store directly (``ORGA_STORE_URL``) and the limits from the
operator's principals (``ORGA_PRINCIPALS`` or the agents file): run it with the workers'
settings. Held is what calls in flight reserved (their worst case), not yet settled.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from orga.cli.common import CliError, Json, console, execute, print_json, print_table, settings
from orga.contracts.principals import Period, Scope, SpendLine
from orga.runtime.spend import LedgerUnavailable, SpendLedger
from orga.worker.principals import PrincipalRegistry

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``orga spend`` to ``app``."""
    app.command("spend", epilog="Example: orga spend --principal ann --period month")(spend)


def spend(
    principal: Annotated[
        str | None, typer.Option(help="Only this user (and, with --tenant, that tenant).")
    ] = None,
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant (and, with --principal, that user).")
    ] = None,
    period: Annotated[Period, typer.Option(help="day (UTC, today) or month (this one).")] = "day",
    as_json: Json = False,
) -> None:
    """What each user and tenant spent and holds, against their limits."""

    async def body() -> int:
        found = settings()
        registry = PrincipalRegistry.load(found)
        wanted: list[tuple[Scope | None, str | None]] = []
        if principal is not None:
            wanted.append(("user", principal))
        if tenant is not None:
            wanted.append(("tenant", tenant))
        wanted = wanted or [(None, None)]
        with found.store() as store:
            ledger = SpendLedger(store)
            try:
                lines = [
                    line
                    for scope, name in wanted
                    for line in ledger.lines(period, scope=scope, name=name, limits=registry.limits)
                ]
            except LedgerUnavailable as error:
                raise CliError(str(error)) from error
        if as_json:
            print_json([line.model_dump(mode="json") for line in lines])
        elif not any(line.calls or line.reserved_tokens or line.reserved_usd for line in lines):
            key = time.strftime("%Y-%m-%d" if period == "day" else "%Y-%m", time.gmtime())
            whose = " and ".join(f"{scope} {name!r}" for scope, name in wanted if scope is not None)
            console().print(
                f"no spend recorded for {whose or 'anyone'} in {key} (UTC {period})",
                markup=False,
            )
        else:
            _table(lines)
        return 0

    execute(body, as_json=as_json)


def _usd(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _tokens(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _table(lines: list[SpendLine]) -> None:
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ("SCOPE", "NAME", "PERIOD", "SPENT USD", "HELD USD", "LIMIT USD")
    for column in (*columns, "TOKENS", "HELD TOKENS", "LIMIT TOKENS", "CALLS"):
        table.add_column(column, justify="left" if column in columns[:3] else "right")
    for line in lines:
        table.add_row(
            line.scope,
            line.name,
            line.key,
            _usd(line.spent_usd),
            _usd(line.reserved_usd),
            _usd(line.limit_usd),
            _tokens(line.spent_tokens),
            _tokens(line.reserved_tokens),
            _tokens(line.limit_tokens),
            str(line.calls),
        )
    print_table(table)
