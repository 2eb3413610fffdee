"""``orga knowledge``: an agent's knowledge, by hand — add, search, list, forget, import.

It reads and writes orga's store directly (``ORGA_STORE_URL``; run it with the workers'
settings). ``--agent`` names the agent as loops do (``config.agent_id``): with an agents file
(``ORGA_AGENTS``) its knowledge is the store the file names for it (default: its id).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from orga.cli.common import CliError, Json, console, execute, print_json, print_table, settings
from orga.cli.views import shorten
from orga.contracts.errors import InvalidConfig
from orga.contracts.knowledge import (
    KnowledgeItem,
    KnowledgeKind,
    KnowledgeQuery,
    KnowledgeScope,
    KnowledgeWrite,
)
from orga.core.knowledge import normalise_directory
from orga.runtime.safe_text import one_line
from orga.worker.agent_registry import AgentRegistry

if TYPE_CHECKING:  # the knowledge store (SQLAlchemy) is imported by the verbs that open it
    from orga.knowledge import Knowledge

__all__ = ["register"]

knowledge_app = typer.Typer(
    help="An agent's knowledge: the facts, memories and conventions its loops are shown and "
    "can recall (config.knowledge).",
    no_args_is_help=True,
)
Agent = Annotated[str, typer.Option("--agent", "-a", help="The agent (config.agent_id).")]


def register(app: typer.Typer) -> None:
    """Add the ``knowledge`` group to ``app``."""
    knowledge_app.command("add", epilog='Example: orga knowledge add -a support "ann prefers tea"')(
        add
    )
    knowledge_app.command(
        "search", epilog='Example: orga knowledge search -a support "what does ann drink"'
    )(search)
    knowledge_app.command("list", epilog="Example: orga knowledge list -a support")(list_items)
    knowledge_app.command("forget", epilog="Example: orga knowledge forget -a support 12 14")(
        forget
    )
    knowledge_app.command("import", epilog="Example: orga knowledge import -a coder ./repo")(
        import_tree
    )
    knowledge_app.command("reindex", epilog="Example: orga knowledge reindex --all")(reindex)
    app.add_typer(knowledge_app, name="knowledge")


def _namespace(agent: str) -> str:
    found = settings().agents_file
    if found is None:
        return agent
    try:
        registry = AgentRegistry.load(found, frozenset({"default", "cedar", "opa"}))
        return registry.get(agent).knowledge or agent
    except InvalidConfig as error:
        raise CliError(str(error), 2) from error


def _open() -> Knowledge:
    from orga.knowledge import open_knowledge
    from orga.knowledge.embeddings import embedder  # the provider adapters: lazily

    found = settings()
    return open_knowledge(found.store(), embedder(found))


def _table(items: list[KnowledgeItem], *, relevance: bool = False) -> None:
    table = Table(show_edge=False, box=None, pad_edge=False)
    for column in ("ID", "KIND", "WHERE", *(["RELEVANCE"] if relevance else []), "CONTENT"):
        table.add_column(column, overflow="fold")
    for item in items:
        where = (
            (item.directory or "(root)") if item.directory is not None else (item.language or "")
        )
        score = [f"{item.relevance:.2f}"] if relevance else []
        table.add_row(str(item.id), item.kind, one_line(where), *score, shorten(item.content, 100))
    print_table(table)


def add(
    content: Annotated[str, typer.Argument(help="What to remember, as a sentence.")],
    agent: Agent,
    kind: Annotated[KnowledgeKind, typer.Option(help="fact, memory or convention.")] = "fact",
    directory: Annotated[
        str | None, typer.Option(help="A convention's directory (relative; '' is the root).")
    ] = None,
    language: Annotated[str | None, typer.Option(help="A convention's language.")] = None,
    confidence: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="How sure the fact is, 0 to 1.")
    ] = 1.0,
    as_json: Json = False,
) -> None:
    """Store one item for an agent (an equal one is kept once)."""

    async def body() -> int:
        if kind == "convention" and directory is None and language is None:
            raise CliError("a convention needs --directory or --language", 2)
        try:
            where = normalise_directory(directory) if directory is not None else None
        except ValueError as error:
            raise CliError(str(error), 2) from error
        write = KnowledgeWrite(
            namespace=_namespace(agent),
            kind=kind,
            content=content,
            directory=where,
            language=language,
            confidence=confidence,
            source="cli",
        )
        written = _open().add(write)
        if as_json:
            print_json(written)
        else:
            state = "stored" if written.created else "already known"
            console().print(f"{state}: #{written.id}", markup=False)
        return 0

    execute(body, as_json=as_json)


def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    agent: Agent,
    limit: Annotated[int, typer.Option(min=1, max=50, help="At most this many results.")] = 10,
    scope: Annotated[KnowledgeScope, typer.Option(help="all, or conventions.")] = "all",
    directory: Annotated[str | None, typer.Option(help="With --scope conventions.")] = None,
    language: Annotated[str | None, typer.Option(help="With --scope conventions.")] = None,
    as_json: Json = False,
) -> None:
    """Search an agent's knowledge as its loops do."""

    async def body() -> int:
        try:
            where = normalise_directory(directory) if directory is not None else None
        except ValueError as error:
            raise CliError(str(error), 2) from error
        hits = _open().search(
            KnowledgeQuery(
                namespace=_namespace(agent),
                text=query,
                limit=limit,
                scope=scope,
                directory=where,
                language=language,
            )
        )
        if as_json:
            print_json(hits)
        else:
            _table(hits.items, relevance=scope == "all")
        return 0

    execute(body, as_json=as_json)


def list_items(
    agent: Agent,
    kind: Annotated[KnowledgeKind | None, typer.Option(help="Only this kind.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=10_000, help="At most this many items (newest first).")
    ] = 50,
    as_json: Json = False,
) -> None:
    """An agent's newest items."""

    async def body() -> int:
        items = _open().items(_namespace(agent), kind, limit)
        if as_json:
            print_json([i.model_dump(mode="json") for i in items])
        else:
            _table(items)
        return 0

    execute(body, as_json=as_json)


def forget(
    ids: Annotated[list[int] | None, typer.Argument(help="The items' ids.")] = None,
    agent: Agent = "",
    everything: Annotated[
        bool, typer.Option("--all", help="Forget every item of the agent.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Forget items of an agent (by id, or --all)."""

    async def body() -> int:
        if not agent:
            raise CliError("name the agent: --agent", 2)
        if bool(ids) == everything:
            raise CliError("name the items' ids, or --all (not both)", 2)
        removed = _open().forget_ids(_namespace(agent), None if everything else ids)
        missing = [i for i in dict.fromkeys(ids or []) if i not in removed]
        if as_json:
            print_json({"forgotten": len(removed), "ids": removed, "not_found": missing})
        else:
            console().print(f"forgot {len(removed)} item(s)", markup=False)
            if missing:
                console().print(
                    f"{agent!r} holds no item {', '.join(map(str, missing))}: nothing to forget "
                    f"there (orga knowledge list -a {agent} shows its items)",
                    markup=False,
                )
        return 1 if missing and not removed else 0

    execute(body, as_json=as_json)


def import_tree(
    path: Annotated[Path, typer.Argument(help="The root of a source tree.")],
    agent: Agent,
    include_hidden: Annotated[
        bool,
        typer.Option(
            "--include-hidden",
            help="Also walk hidden directories (.github, .cursor …); .git, dependency and "
            "build directories are never walked, links never followed out of the tree.",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Read the convention files of a source tree (AGENTS.md, CONVENTIONS.md, CLAUDE.md,
    .cursorrules, .editorconfig) into the agent's scoped conventions, and list what was
    skipped (links out of the tree, hidden directories, files that are not regular)."""

    async def body() -> int:
        from orga.knowledge.conventions import find_conventions

        if not path.is_dir():
            raise CliError(f"{path} is not a directory", 2)
        knowledge, namespace = _open(), _namespace(agent)
        tree = find_conventions(path, include_hidden=include_hidden)
        created = known = 0
        for found in tree.conventions:
            written = knowledge.add(
                KnowledgeWrite(
                    namespace=namespace,
                    kind="convention",
                    content=found.content,
                    directory=found.directory,
                    language=found.language,
                    source=found.source,
                )
            )
            created, known = (created + 1, known) if written.created else (created, known + 1)
        skipped = [{"path": s.path, "reason": s.reason} for s in tree.skipped]
        if as_json:
            print_json({"created": created, "known": known, "skipped": skipped})
        else:
            out = console()
            out.print(
                f"imported {created} convention(s) ({known} already known) for {agent}",
                markup=False,
            )
            if skipped:
                out.print(f"skipped {len(skipped)} path(s):", markup=False)
            for each in skipped:  # repr: a file name cannot write escapes to the terminal
                out.print(f"  {each['path']!r}: {each['reason']}", markup=False)
        return 0

    execute(body, as_json=as_json)


def reindex(
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Only this agent's items.")
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every agent's items.")] = False,
    as_json: Json = False,
) -> None:
    """Embed the items that have no vector yet with ORGA_EMBEDDINGS's model (all of them after
    a change of model), so that search is hybrid again."""

    async def body() -> int:
        if (agent is None) == (not everything):
            raise CliError("name the agent (--agent) or --all (not both)", 2)
        try:
            done = _open().reindex(None if everything else _namespace(agent or ""))
        except InvalidConfig as error:
            raise CliError(str(error), 2) from error
        if as_json:
            print_json({"embedded": done})
        else:
            console().print(f"embedded {done} item(s)", markup=False)
        return 0

    execute(body, as_json=as_json)
