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

**Hybrid search** (SQLite, with an embedder: ``ORGA_EMBEDDINGS``): items are embedded when they
are stored and kept in a sqlite-vec ``vec0`` table (cosine distance, partitioned by namespace,
so one agent's search never scans another's vectors); a search embeds the query, takes the
nearest items and the full-text ranking and fuses them by reciprocal rank
(``orga.core.knowledge.fuse``). Relevance is then the larger of the terms' coverage and the
cosine similarity. Vectors are best effort and nothing waits on them: an embeddings endpoint
that fails leaves the item stored without a vector (and a search full-text alone), with a
warning; ``reindex`` (``orga knowledge reindex``) embeds what is missing, and re-embeds
everything after a change of model — until then, search stays full-text, since vectors of two
models do not compare. PostgreSQL searches full-text alone for now (pgvector is not supported
yet), with a warning when an embedder is configured.

Over 400 lines: ``Knowledge`` is one class whose operations (add, search, conventions,
reindex, forget) share its connections and its vector bookkeeping; the backends' own parts
are ``orga.knowledge.sqlite`` and ``orga.knowledge.postgresql``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import (
    Connection,
    and_,
    func,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row

from orga.contracts.errors import InvalidConfig, ProviderError
from orga.contracts.knowledge import (
    MAX_ITEM_CHARS,
    KnowledgeHits,
    KnowledgeItem,
    KnowledgeKind,
    KnowledgeQuery,
    KnowledgeWrite,
    KnowledgeWritten,
)
from orga.core.knowledge import (
    coverage,
    directory_levels,
    fuse,
    normalise_content,
    search_terms,
)
from orga.core.text import cut
from orga.knowledge.items import COLUMNS, EMBEDDER, ITEMS, METADATA, Embed, item_of, scope_of
from orga.runtime.store import Store

__all__ = ["Knowledge"]

_log = logging.getLogger("orga.knowledge")


_POOL: Final = 20
"""Each ranking of a hybrid search offers at least this many items (four times the limit)."""
_LEVEL_ROWS = 200
"""Conventions read per directory level (a level with more is cut)."""


class Knowledge(ABC):
    """The knowledge of every namespace in one store. Thread-safe (one per process)."""

    def __init__(self, store: Store, embedder: Embed | None = None) -> None:
        self.store = store
        self._engine = store.vector_engine
        self._embedder = embedder
        METADATA.create_all(self._engine)
        with self._engine.begin() as db:
            self._index(db)
        self._warned: set[str] = set()

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            _log.warning("knowledge: %s", message)

    # ---- the dialects ------------------------------------------------------------------------

    @abstractmethod
    def _index(self, db: Connection) -> None:
        """Create the full-text index if it is missing (idempotent)."""

    @abstractmethod
    def _ranked(
        self, db: Connection, namespace: str, terms: Sequence[str], limit: int
    ) -> list[Row[Any]]:
        """Items of ``namespace`` matching any of ``terms``, best first."""

    def _vectors_unavailable(self) -> str | None:
        """Why this store keeps no vectors (None: it does)."""
        return "PostgreSQL stores search full-text alone (pgvector is not supported yet)"

    def _vector_table(self, db: Connection) -> bool:
        """Whether the vector table exists."""
        return False

    def _create_vectors(self, db: Connection, dims: int) -> None:
        raise NotImplementedError

    def _drop_vectors(self, db: Connection) -> None:
        raise NotImplementedError

    def _put_vectors(self, db: Connection, rows: Sequence[tuple[int, str, list[float]]]) -> None:
        raise NotImplementedError

    def _delete_vectors(self, db: Connection, ids: Sequence[int]) -> None:
        raise NotImplementedError

    def _nearest(
        self, db: Connection, namespace: str, vector: list[float], limit: int
    ) -> list[tuple[int, float]]:
        raise NotImplementedError

    def _unvectored(self, db: Connection, namespace: str | None) -> list[tuple[int, str, str]]:
        raise NotImplementedError

    # ---- vectors (hybrid search) -------------------------------------------------------------

    def _vector_model(self, db: Connection) -> tuple[str, int] | None:
        row = db.execute(select(EMBEDDER.c.model, EMBEDDER.c.dims)).first()
        return (row[0], row[1]) if row is not None else None

    def _usable(self, db: Connection) -> bool:
        """Whether vectors may be read and written now: an embedder, a store that keeps them,
        and vectors (if any) made by the same model."""
        if self._embedder is None:
            return False
        reason = self._vectors_unavailable()
        if reason is None:
            made = self._vector_model(db)
            if made is None or made[0] == self._embedder.name:
                return True
            reason = (
                f"the stored vectors were made by {made[0]}, this process embeds with "
                f"{self._embedder.name}: search is full-text alone until `orga knowledge "
                "reindex` re-embeds them"
            )
        self._warn(reason)
        return False

    def _embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Vectors of ``texts``, or None (warned) when the embeddings endpoint fails."""
        assert self._embedder is not None
        try:
            return self._embedder.embed(texts)
        except ProviderError as error:
            self._warn(f"embeddings failed, full-text alone for now: {error.message}")
            return None

    def _store_vectors(self, db: Connection, rows: Sequence[tuple[int, str, list[float]]]) -> None:
        assert self._embedder is not None
        if not rows:
            return
        dims = len(rows[0][2])
        made = self._vector_model(db)
        if made is None:
            self._create_vectors(db, dims)
            db.execute(EMBEDDER.insert().values(id=1, model=self._embedder.name, dims=dims))
        elif made != (self._embedder.name, dims):
            self._warn(
                f"{self._embedder.name} answered vectors of {dims} numbers, the store holds "
                f"{made[1]} from {made[0]}: run `orga knowledge reindex`"
            )
            return
        self._put_vectors(db, rows)

    def reindex(self, namespace: str | None = None) -> int:
        """Embed the items (of ``namespace``, or all) that have no vector — all of them after a
        change of model, whose old vectors are dropped first; how many were embedded.

        Raises:
            InvalidConfig: no embedder, or a store that keeps no vectors.
            ProviderError: the embeddings endpoint failed (what was embedded before is kept).
        """
        if self._embedder is None:
            raise InvalidConfig(
                "reindexing needs an embedding model: set ORGA_EMBEDDINGS=<provider>:<model>"
            )
        if (reason := self._vectors_unavailable()) is not None:
            raise InvalidConfig(reason)
        with self._engine.begin() as db:
            made = self._vector_model(db)
            if made is not None and made[0] != self._embedder.name:
                self._drop_vectors(db)
                db.execute(EMBEDDER.delete())
            todo = self._unvectored(db, namespace)
        done = 0
        for start in range(0, len(todo), 256):
            batch = todo[start : start + 256]
            vectors = self._embedder.embed([content for _, _, content in batch])
            with self._engine.begin() as db:
                self._store_vectors(
                    db, [(id_, ns, v) for (id_, ns, _), v in zip(batch, vectors, strict=True)]
                )
            done += len(batch)
        self._warned.clear()
        return done

    # ---- writing -----------------------------------------------------------------------------

    def add(self, write: KnowledgeWrite) -> KnowledgeWritten:
        """Store one item; an equal one (same namespace, kind, scope, content) is kept once."""
        return self.add_many([write])[0]

    def add_many(self, writes: Sequence[KnowledgeWrite]) -> list[KnowledgeWritten]:
        """Store items in one transaction (an import, a bulk load), each as ``add`` would;
        embedded first when search is hybrid."""
        contents = [cut(w.content.strip(), MAX_ITEM_CHARS, "knowledge item") for w in writes]
        with self._engine.connect() as db:
            usable = self._usable(db)
        vectors = self._embed(contents) if usable and contents else None
        with self._engine.begin() as db:
            written = [
                self._add(db, write, content)
                for write, content in zip(writes, contents, strict=True)
            ]
            if vectors is not None:
                self._store_vectors(
                    db,
                    [
                        (done.id, write.namespace, vector)
                        for done, write, vector in zip(written, writes, vectors, strict=True)
                        if done.created
                    ],
                )
            return written

    def _add(self, db: Connection, write: KnowledgeWrite, content: str) -> KnowledgeWritten:
        directory = write.directory if write.kind == "convention" else None
        language = write.language.lower() if write.language else None
        scope = scope_of(write.kind, directory, language)
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
        return len(self.forget_ids(namespace, ids))

    def forget_ids(self, namespace: str, ids: Sequence[int] | None = None) -> list[int]:
        """Forget items of ``namespace`` (these ``ids``, or all of them); the ids forgotten, in
        order (an id ``namespace`` does not hold is not among them)."""
        condition = ITEMS.c.namespace == namespace
        if ids is not None:
            condition = and_(condition, ITEMS.c.id.in_(list(ids)))
        with self._engine.begin() as db:
            gone = sorted(row[0] for row in db.execute(select(ITEMS.c.id).where(condition)))
            if gone and self._vector_table(db):
                self._delete_vectors(db, gone)
            db.execute(ITEMS.delete().where(condition))
            return gone

    # ---- reading -----------------------------------------------------------------------------

    def items(
        self, namespace: str, kind: KnowledgeKind | None = None, limit: int = 100
    ) -> list[KnowledgeItem]:
        """The newest items of ``namespace`` (of one ``kind``)."""
        query = select(*COLUMNS).where(ITEMS.c.namespace == namespace)
        if kind is not None:
            query = query.where(ITEMS.c.kind == kind)
        with self._engine.connect() as db:
            rows = db.execute(query.order_by(ITEMS.c.id.desc()).limit(limit)).all()
        return [item_of(row) for row in rows]

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
        with self._engine.connect() as db:
            usable = self._usable(db) and self._vector_table(db)
        vector = None
        if usable and query.text.strip():
            found = self._embed([query.text])
            vector = found[0] if found else None
        if not terms and vector is None:
            return KnowledgeHits()
        scoped = query.within is not None  # some found items may be left out: look further
        pool = max(query.limit * 4, _POOL) if vector is not None or scoped else query.limit
        with self._engine.connect() as db:
            ranked = self._ranked(db, query.namespace, terms, pool) if terms else []
            near = self._nearest(db, query.namespace, vector, pool) if vector else []
            rows = {row.id: row for row in ranked}
            missing = [id_ for id_, _ in near if id_ not in rows]
            if missing:
                more = db.execute(
                    select(*COLUMNS).where(
                        ITEMS.c.namespace == query.namespace, ITEMS.c.id.in_(missing)
                    )
                ).all()
                rows.update((row.id, row) for row in more)
        similarity = {id_: max(0.0, 1.0 - distance) for id_, distance in near}
        order = fuse([row.id for row in ranked], [id_ for id_, _ in near])
        items = [
            item_of(rows[id_], max(coverage(terms, rows[id_].content), similarity.get(id_, 0.0)))
            for id_ in order
            if id_ in rows
        ]
        if query.within is not None:
            items = [i for i in items if _applies(i, query.within)]
        items = items[: query.limit]
        return KnowledgeHits(
            items=[i for i in items if i.relevance >= query.threshold], hybrid=vector is not None
        )

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
                    select(*COLUMNS)
                    .where(is_convention, ITEMS.c.directory == level)
                    .order_by(ITEMS.c.id)
                    .limit(_LEVEL_ROWS)
                ).all()
                level_items = _by_terms([item_of(row) for row in rows], terms)
                languages += [i.language for i in level_items if i.language]
                found += level_items
            if query.language:
                languages.append(query.language.lower())
            wanted = list(dict.fromkeys(languages))
            if wanted:
                rows = db.execute(
                    select(*COLUMNS)
                    .where(is_convention, ITEMS.c.directory.is_(None))
                    .where(ITEMS.c.language.in_(wanted))
                    .order_by(ITEMS.c.id)
                    .limit(_LEVEL_ROWS)
                ).all()
                by_language = sorted(
                    (item_of(row) for row in rows), key=lambda i: wanted.index(i.language or "")
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


def _applies(item: KnowledgeItem, directory: str) -> bool:
    """Whether ``item`` may be shown to a loop working in ``directory``: anything but another
    directory's convention (this one's, its parents' and language conventions apply)."""
    if item.kind != "convention" or item.directory is None:
        return True
    return item.directory in directory_levels(directory)


def _by_terms(items: list[KnowledgeItem], terms: Sequence[str]) -> list[KnowledgeItem]:
    """Within one level: items naming more of the query's terms first (stable)."""
    if not terms:
        return items
    return sorted(items, key=lambda i: -sum(t in i.content.lower() for t in terms))
