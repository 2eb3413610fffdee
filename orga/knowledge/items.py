"""The table of agents' knowledge and how its rows read: one table (``orga_knowledge``) in the
store every worker and client shares, an item per namespace, kind, scope and content.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Row

from orga.contracts.knowledge import KnowledgeItem, KnowledgeKind

__all__ = ["COLUMNS", "EMBEDDER", "ITEMS", "METADATA", "Embed", "item_of", "scope_of"]


class Embed(Protocol):
    """What makes vectors of texts (``orga.knowledge.embeddings.Embedder``)."""

    @property
    def name(self) -> str:
        """The provider and model (``openai:text-embedding-3-small``): vectors of two models do
        not compare, so the store remembers which made its vectors."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text (may raise ``ProviderError``)."""
        ...


METADATA = MetaData()
ITEMS: Final = Table(
    "orga_knowledge",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(200), nullable=False),
    Column("kind", String(20), nullable=False),
    # ``d:<directory>`` or ``l:<language>`` for conventions, ``""`` otherwise: part of the
    # uniqueness key (NULLs are never equal in a unique index).
    Column("scope", Text, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("content", Text, nullable=False),
    Column("subject", Text),
    Column("predicate", Text),
    Column("object", Text),
    Column("directory", Text),
    Column("language", String(50)),
    Column("confidence", Float, nullable=False),
    Column("source", Text),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("namespace", "kind", "scope", "digest", name="orga_knowledge_once"),
    Index("orga_knowledge_by_scope", "namespace", "kind", "directory", "language"),
)
EMBEDDER: Final = Table(
    "orga_knowledge_embedder",
    METADATA,
    Column("id", Integer, primary_key=True),
    Column("model", Text, nullable=False),
    Column("dims", Integer, nullable=False),
)
"""One row: the model that made the vectors of ``orga_knowledge_vec``, and their length."""
COLUMNS = [c for c in ITEMS.c if c.name not in ("scope", "digest")]


def scope_of(kind: KnowledgeKind, directory: str | None, language: str | None) -> str:
    if kind != "convention":
        return ""
    return f"d:{directory}" if directory is not None else f"l:{language or ''}"


def item_of(row: Row[Any], relevance: float = 0.0) -> KnowledgeItem:
    values = row._mapping  # pyright: ignore[reportPrivateUsage]
    return KnowledgeItem(
        id=values["id"],
        kind=values["kind"],
        content=values["content"],
        subject=values["subject"],
        predicate=values["predicate"],
        object=values["object"],
        directory=values["directory"],
        language=values["language"],
        confidence=values["confidence"],
        source=values["source"],
        created_at=datetime.fromtimestamp(values["created_at"], UTC),
        relevance=round(relevance, 6),
    )
