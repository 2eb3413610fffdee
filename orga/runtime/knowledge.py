"""Agents' knowledge in orga's store: full-text search on SQLite (FTS5, BM25) or PostgreSQL.

One table of items (``orga_knowledge``) in the store every worker and client shares
(``ORGA_STORE_URL``), each item belonging to one namespace — an agent's knowledge store — and
kept once per namespace, kind, scope and content. The search index is the database's own:

* SQLite: an FTS5 table over the items (Porter stemming), ranked by BM25;
* PostgreSQL: a generated ``tsvector`` column (English stemming) with a GIN index, ranked by
  ``ts_rank``.

Both rank by their own score (more query terms matched, rarer terms weigh more) and report
orga's relevance — the share of the search terms an item contains (``orga.core.knowledge.
coverage``) — so a threshold means the same on both; they behave the same otherwise (the tests
run both). Worker- and client-side code: the loop reaches it only through activities.
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    func,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row

from orga.contracts.knowledge import (
    MAX_ITEM_CHARS,
    KnowledgeHits,
    KnowledgeItem,
    KnowledgeKind,
    KnowledgeQuery,
    KnowledgeWrite,
    KnowledgeWritten,
)
from orga.core.knowledge import coverage, directory_levels, normalise_content, search_terms
from orga.core.text import cut
from orga.runtime.store import Store

__all__ = ["ITEMS", "Knowledge", "open_knowledge"]

_METADATA = MetaData()
ITEMS: Final = Table(
    "orga_knowledge",
    _METADATA,
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
_COLUMNS = [c for c in ITEMS.c if c.name not in ("scope", "digest")]
_LEVEL_ROWS = 200
"""Conventions read per directory level (a level with more is cut)."""


def _scope(kind: KnowledgeKind, directory: str | None, language: str | None) -> str:
    if kind != "convention":
        return ""
    return f"d:{directory}" if directory is not None else f"l:{language or ''}"


def _item(row: Row[Any], relevance: float = 0.0) -> KnowledgeItem:
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


class Knowledge(ABC):
    """The knowledge of every namespace in one store. Thread-safe (one per process)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._engine = store.engine
        _METADATA.create_all(self._engine)
        with self._engine.begin() as db:
            self._index(db)

    # ---- the dialects ------------------------------------------------------------------------

    @abstractmethod
    def _index(self, db: Connection) -> None:
        """Create the full-text index if it is missing (idempotent)."""

    @abstractmethod
    def _ranked(
        self, db: Connection, namespace: str, terms: Sequence[str], limit: int
    ) -> list[Row[Any]]:
        """Items of ``namespace`` matching any of ``terms``, best first."""

    # ---- writing -----------------------------------------------------------------------------

    def add(self, write: KnowledgeWrite) -> KnowledgeWritten:
        """Store one item; an equal one (same namespace, kind, scope, content) is kept once."""
        return self.add_many([write])[0]

    def add_many(self, writes: Sequence[KnowledgeWrite]) -> list[KnowledgeWritten]:
        """Store items in one transaction (an import, a bulk load), each as ``add`` would."""
        with self._engine.begin() as db:
            return [self._add(db, write) for write in writes]

    def _add(self, db: Connection, write: KnowledgeWrite) -> KnowledgeWritten:
        content = cut(write.content.strip(), MAX_ITEM_CHARS, "knowledge item")
        directory = write.directory if write.kind == "convention" else None
        language = write.language.lower() if write.language else None
        scope = _scope(write.kind, directory, language)
        digest = hashlib.sha256(normalise_content(content).encode()).hexdigest()
        key = and_(
            ITEMS.c.namespace == write.namespace,
            ITEMS.c.kind == write.kind,
            ITEMS.c.scope == scope,
            ITEMS.c.digest == digest,
        )
        found = db.execute(select(ITEMS.c.id).where(key)).first()
        if found is not None:
            return KnowledgeWritten(id=found[0], created=False)
        insert = (postgresql.insert if self.store.dialect == "postgresql" else sqlite.insert)(ITEMS)
        inserted = db.execute(
            insert.values(
                namespace=write.namespace,
                kind=write.kind,
                scope=scope,
                digest=digest,
                content=content,
                subject=write.subject,
                predicate=write.predicate,
                object=write.object,
                directory=directory,
                language=language,
                confidence=write.confidence,
                source=write.source,
                created_at=time.time(),
            )
            .on_conflict_do_nothing(index_elements=["namespace", "kind", "scope", "digest"])
            .returning(ITEMS.c.id)
        ).scalar()
        if inserted is None:  # another worker stored it between our look and our insert
            return KnowledgeWritten(
                id=db.execute(select(ITEMS.c.id).where(key)).scalar_one(), created=False
            )
        return KnowledgeWritten(id=inserted, created=True)

    def forget(self, namespace: str, ids: Sequence[int] | None = None) -> int:
        """Forget items of ``namespace`` (these ``ids``, or all of them); how many."""
        condition = ITEMS.c.namespace == namespace
        if ids is not None:
            condition = and_(condition, ITEMS.c.id.in_(list(ids)))
        with self._engine.begin() as db:
            return db.execute(ITEMS.delete().where(condition)).rowcount

    # ---- reading -----------------------------------------------------------------------------

    def items(
        self, namespace: str, kind: KnowledgeKind | None = None, limit: int = 100
    ) -> list[KnowledgeItem]:
        """The newest items of ``namespace`` (of one ``kind``)."""
        query = select(*_COLUMNS).where(ITEMS.c.namespace == namespace)
        if kind is not None:
            query = query.where(ITEMS.c.kind == kind)
        with self._engine.connect() as db:
            rows = db.execute(query.order_by(ITEMS.c.id.desc()).limit(limit)).all()
        return [_item(row) for row in rows]

    def count(self, namespace: str) -> int:
        """How many items ``namespace`` holds."""
        with self._engine.connect() as db:
            query = select(func.count()).select_from(ITEMS).where(ITEMS.c.namespace == namespace)
            return int(db.execute(query).scalar_one())

    def search(self, query: KnowledgeQuery) -> KnowledgeHits:
        """A plain search of ``query.text`` (conventions included), or — with
        ``scope="conventions"`` and a directory — the conventions that apply there."""
        if query.scope == "conventions":
            return KnowledgeHits(items=self._conventions(query))
        terms = search_terms(query.text)
        if not terms:
            return KnowledgeHits()
        with self._engine.connect() as db:
            ranked = self._ranked(db, query.namespace, terms, query.limit)
        items = [_item(row, coverage(terms, row.content)) for row in ranked]
        return KnowledgeHits(items=[i for i in items if i.relevance >= query.threshold])

    def _conventions(self, query: KnowledgeQuery) -> list[KnowledgeItem]:
        """Nearest directory first, up to the root, then the languages found on the way (and
        the one asked for); equal contents once; at most ``query.limit``."""
        terms = search_terms(query.text)
        found: list[KnowledgeItem] = []
        seen: set[str] = set()
        languages: list[str] = []
        is_convention = and_(ITEMS.c.namespace == query.namespace, ITEMS.c.kind == "convention")
        with self._engine.connect() as db:
            for level in directory_levels(query.directory or ""):
                rows = db.execute(
                    select(*_COLUMNS)
                    .where(is_convention, ITEMS.c.directory == level)
                    .order_by(ITEMS.c.id)
                    .limit(_LEVEL_ROWS)
                ).all()
                level_items = _by_terms([_item(row) for row in rows], terms)
                languages += [i.language for i in level_items if i.language]
                found += level_items
            if query.language:
                languages.append(query.language.lower())
            wanted = list(dict.fromkeys(languages))
            if wanted:
                rows = db.execute(
                    select(*_COLUMNS)
                    .where(is_convention, ITEMS.c.directory.is_(None))
                    .where(ITEMS.c.language.in_(wanted))
                    .order_by(ITEMS.c.id)
                    .limit(_LEVEL_ROWS)
                ).all()
                by_language = sorted(
                    (_item(row) for row in rows), key=lambda i: wanted.index(i.language or "")
                )
                found += _by_terms(by_language, terms)
        unique: list[KnowledgeItem] = []
        for item in found:
            digest = normalise_content(item.content)
            if digest in seen:
                continue
            seen.add(digest)
            unique.append(item)
        return unique[: query.limit]


def _by_terms(items: list[KnowledgeItem], terms: Sequence[str]) -> list[KnowledgeItem]:
    """Within one level: items naming more of the query's terms first (stable)."""
    if not terms:
        return items
    return sorted(items, key=lambda i: -sum(t in i.content.lower() for t in terms))


class _Sqlite(Knowledge):
    def _index(self, db: Connection) -> None:
        db.execute(
            text(
                "CREATE VIRTUAL TABLE IF NOT EXISTS orga_knowledge_fts USING fts5("
                "content, content='orga_knowledge', content_rowid='id', "
                "tokenize='porter unicode61')"
            )
        )
        db.execute(
            text(
                "CREATE TRIGGER IF NOT EXISTS orga_knowledge_ai AFTER INSERT ON orga_knowledge "
                "BEGIN INSERT INTO orga_knowledge_fts(rowid, content) "
                "VALUES (new.id, new.content); END"
            )
        )
        db.execute(
            text(
                "CREATE TRIGGER IF NOT EXISTS orga_knowledge_ad AFTER DELETE ON orga_knowledge "
                "BEGIN INSERT INTO orga_knowledge_fts(orga_knowledge_fts, rowid, content) "
                "VALUES ('delete', old.id, old.content); END"
            )
        )

    def _ranked(
        self, db: Connection, namespace: str, terms: Sequence[str], limit: int
    ) -> list[Row[Any]]:
        match = " OR ".join(f'"{term}"' for term in terms)  # quoted: no query syntax
        columns = ", ".join(f"k.{c.name}" for c in _COLUMNS)
        rows = db.execute(
            text(
                f"SELECT {columns}, bm25(orga_knowledge_fts) AS score "
                "FROM orga_knowledge_fts JOIN orga_knowledge k "
                "ON k.id = orga_knowledge_fts.rowid "
                "WHERE orga_knowledge_fts MATCH :match AND k.namespace = :namespace "
                "ORDER BY score, k.id DESC LIMIT :limit"  # BM25 here: lower is better
            ),
            {"match": match, "namespace": namespace, "limit": limit},
        ).all()
        return list(rows)


class _Postgres(Knowledge):
    def _index(self, db: Connection) -> None:
        db.execute(text("SELECT pg_advisory_xact_lock(hashtextextended('orga_knowledge', 0))"))
        db.execute(
            text(
                "ALTER TABLE orga_knowledge ADD COLUMN IF NOT EXISTS tsv tsvector "
                "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
            )
        )
        db.execute(
            text("CREATE INDEX IF NOT EXISTS orga_knowledge_tsv ON orga_knowledge USING GIN (tsv)")
        )

    def _ranked(
        self, db: Connection, namespace: str, terms: Sequence[str], limit: int
    ) -> list[Row[Any]]:
        query = " | ".join(terms)  # terms are words: no tsquery syntax
        columns = ", ".join(f"k.{c.name}" for c in _COLUMNS)
        rows = db.execute(
            text(
                f"SELECT {columns}, ts_rank(k.tsv, q) AS score "
                "FROM orga_knowledge k, to_tsquery('english', :query) q "
                "WHERE k.namespace = :namespace AND k.tsv @@ q "
                "ORDER BY score DESC, k.id DESC LIMIT :limit"
            ),
            {"query": query, "namespace": namespace, "limit": limit},
        ).all()
        return list(rows)


def open_knowledge(store: Store) -> Knowledge:
    """The knowledge kept in ``store``, searched the way its database does best."""
    return _Postgres(store) if store.dialect == "postgresql" else _Sqlite(store)
