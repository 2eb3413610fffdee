"""``orga api``: the AG-UI endpoint a web app drives threads through (``orga.web.agui``).

    orga api-token ann >> tokens.toml        # ann's token on the terminal, its SHA-256 in the file
    orga api --tokens tokens.toml --tool issue_refund --origin http://localhost:5173
    orga api --page examples/web/public --user ann --tool issue_refund   # a page, and ann's link

Every thread it starts runs for its caller — signed as the principal by ``ORGA_ISSUER`` /
``ORGA_ISSUER_KEY`` when set (else a claim) — and each decision is the caller's, signed with
the caller's own approver key when ``--approver-keys DIR`` holds ``DIR/<user>.pem``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Final

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orga.cli.common import CliError, Host, Port, Tools, client_for, console, execute, serve_http
from orga.cli.common import settings as read_settings
from orga.contracts.config import LoopConfig
from orga.contracts.errors import InvalidConfig
from orga.contracts.principals import NAME_PATTERN
from orga.contracts.vocabulary import PolicyMode
from orga.runtime.approver_keys import ApproverKeyError, load_key
from orga.runtime.binding import issuer_from
from orga.runtime.safe_text import printable
from orga.web.agui import AguiOptions, agui_app, uvicorn_limits
from orga.web.callers import Callers, new_token

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``api`` and ``api-token`` to ``app``."""
    app.command("api", epilog="Example: orga api --tokens tokens.toml --tool issue_refund")(api)
    app.command("api-token", epilog="Example: orga api-token ann >> tokens.toml")(api_token)


def api(
    tokens: Annotated[
        Path | None,
        typer.Option(help="The tokens file ([users.NAME] token_sha256 = …).", dir_okay=False),
    ] = None,
    trust_header: Annotated[
        str | None,
        typer.Option(
            help="Take the user from this header (set by a reverse proxy that authenticates "
            "people; only where nothing else reaches the endpoint)."
        ),
    ] = None,
    tool: Tools = None,
    agent: Annotated[str | None, typer.Option(help="The agent every thread runs as.")] = None,
    model: Annotated[str | None, typer.Option(help="The threads' model.")] = None,
    origin: Annotated[
        list[str] | None, typer.Option(help="A browser origin allowed to call (repeat).")
    ] = None,
    approver_keys: Annotated[
        Path | None,
        typer.Option(help="A directory of users' approver keys (NAME.pem).", file_okay=False),
    ] = None,
    user: Annotated[
        list[str] | None,
        typer.Option(
            "--user",
            help="Admit this user with a fresh token for as long as the process runs, printed "
            "(with --page, as a link to the page that signs them in). Repeat for more.",
        ),
    ] = None,
    page: Annotated[
        Path | None,
        typer.Option(
            help="Serve this directory's page at / (e.g. examples/web/public, once built).",
            file_okay=False,
            exists=True,
        ),
    ] = None,
    a2a: Annotated[
        bool,
        typer.Option(
            "--a2a",
            help="Also serve the A2A endpoint at /a2a (agent card, JSON-RPC), for the same "
            "callers: each A2A context a thread, each message a turn.",
        ),
    ] = False,
    a2a_decider: Annotated[
        list[str] | None,
        typer.Option(
            "--a2a-decider",
            help="Let this A2A caller decide its own tasks' input-required, with a decision "
            "signed by its enrolled approver key (repeat for more).",
        ),
    ] = None,
    host: Host = "127.0.0.1",
    port: Port = 8766,
) -> None:
    """Serve the AG-UI endpoint (POST /agui): web apps run threads, stream them and answer
    their approvals, each caller as the principal and approver of its own threads."""

    async def body() -> int:
        if trust_header is not None and (tokens is not None or user):
            raise CliError("--trust-header takes the user from a header: not with tokens", 2)
        if tokens is None and trust_header is None and not user:
            raise CliError("give --tokens FILE, --user NAME or --trust-header NAME", 2)
        try:
            callers = (
                Callers.from_file(tokens)
                if tokens is not None
                else Callers({}, header=trust_header)
            )
            admitted = {name: callers.admit(name) for name in user or []}
            found = read_settings()
            issuer = issuer_from(found)
            keys = _keys(approver_keys) if approver_keys is not None else {}
            # With --a2a, each agent of the agents file has an A2A endpoint of its own.
            from orga.worker.agent_registry import AgentRegistry  # only where it is read

            agents = (
                AgentRegistry.load(found.agents_file, _EVERY_GATE).specs()
                if a2a and found.agents_file is not None
                else []
            )
        except (InvalidConfig, ApproverKeyError) as error:
            raise CliError(str(error), 2) from error
        config = LoopConfig.model_validate(
            {
                k: v
                for k, v in {"tools": tool or [], "agent_id": agent, "model": model}.items()
                if v is not None
            }
        )
        options = AguiOptions(
            task_queue=found.task_queue,
            config=config,
            issuer=issuer,
            approver_keys=keys,
            hosts=frozenset({host, "127.0.0.1", "localhost", f"[{host}]"}),
            origins=frozenset(origin or []),
            a2a_deciders=frozenset(a2a_decider or []),
        )
        if a2a_decider and not a2a:
            raise CliError("--a2a-decider is for the A2A endpoint: give --a2a too", 2)
        served = (agent or "orga") if a2a else None
        tasks = None
        if a2a:  # its tasks in orga's store: they outlive this process
            from orga.web.a2a import ENDED_KEPT
            from orga.web.a2a_store import StoredTasks, async_engine

            tasks = StoredTasks(async_engine(found.store().url), ENDED_KEPT)
        app = agui_app(
            await client_for(found),
            callers,
            options,
            page,
            a2a=served,
            a2a_agents=agents,
            a2a_tasks=tasks,
        )

        def announce(bound: int) -> None:
            signing = f"binding callers as issuer {issuer.name}" if issuer else "callers claimed"
            out = console()
            out.print(
                f"orga api on http://{host}:{bound}/agui ({signing}). Ctrl-C stops it.",
                markup=False,
            )
            if a2a:
                base = f"http://{host}:{bound}/a2a"
                card = ".well-known/agent-card.json"
                out.print(f"A2A agent {served!r}: card {base}/{card}", markup=False)
                for each in agents:
                    if each.a2a is None:
                        said = f"A2A agent {each.id!r}: card {base}/{each.id}/{card}"
                        out.print(said, markup=False)
            for name, token in admitted.items():  # the token after '#': never sent to a server
                shown = f"http://{host}:{bound}/#token={token}" if page else f"token {token}"
                out.print(f"{name}: {shown}", markup=False)

        limits = uvicorn_limits(options.limits)
        return await serve_http(app, host, port, announce, options=limits)

    execute(body)


_EVERY_GATE: Final = frozenset[PolicyMode]({"default", "cedar", "opa", "permissive"})
"""The API reads the agents file for its cards: whether a gate is configured is the workers'."""


def _keys(directory: Path) -> dict[str, Ed25519PrivateKey]:
    """Each ``<user>.pem`` of ``directory``: that user's approver key."""
    return {
        path.stem: load_key(path, f"--approver-keys {directory}")
        for path in sorted(directory.glob("*.pem"))
    }


def api_token(user: Annotated[str, typer.Argument(help="The user the token stands for.")]) -> None:
    """A new bearer token for ``user``: give the token to the user, the lines to the file."""

    async def body() -> int:
        if not re.fullmatch(NAME_PATTERN, user):  # it goes into a TOML key and a terminal
            raise CliError(f"{user!r} is not a plain user name", 2)
        token, digest = new_token()
        # The token to the terminal only (stderr): `>> tokens.toml` takes the file's lines,
        # which hold its SHA-256 and never the token.
        console().print(f'[users.{user}]\ntoken_sha256 = "{digest}"', markup=False)
        sys.stdout.flush()
        said = f"{user}'s token (give it to them; it is shown once): {token}"
        print(printable(said), file=sys.stderr)
        return 0

    execute(body)
