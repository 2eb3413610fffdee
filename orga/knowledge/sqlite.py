"""Knowledge on SQLite: FTS5 for the words (Porter stemming, BM25), a sqlite-vec ``vec0`` table
for the vectors of hybrid search (cosine distance, partitioned by namespace)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import Connection, select, text
from sqlalchemy.engine import Row

from orga.knowledge.items import COLUMNS, ITEMS
from orga.knowledge.store import Knowledge

__all__ = ["SqliteKnowledge"]


_VEC: Final = "orga_knowledge_vec"


def _packed(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


class SqliteKnowledge(Knowledge):
    """SQLite: FTS5 for the words, a sqlite-vec ``vec0`` table for the vectors."""

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
        columns = ", ".join(f"k.{c.name}" for c in COLUMNS)
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

    def _vectors_unavailable(self) -> str | None:
        return None

    def _vector_table(self, db: Connection) -> bool:
        found = db.execute(
            text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name"),
            {"name": _VEC},
        ).first()
        return found is not None

    def _create_vectors(self, db: Connection, dims: int) -> None:
        db.execute(
            text(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VEC} USING vec0("
                "item_id integer primary key, namespace text partition key, "
                f"embedding float[{int(dims)}] distance_metric=cosine)"
            )
        )

    def _drop_vectors(self, db: Connection) -> None:
        db.execute(text(f"DROP TABLE IF EXISTS {_VEC}"))

    def _put_vectors(self, db: Connection, rows: Sequence[tuple[int, str, list[float]]]) -> None:
        db.execute(
            text(f"INSERT INTO {_VEC}(item_id, namespace, embedding) VALUES (:id, :ns, :v)"),
            [{"id": id_, "ns": ns, "v": _packed(v)} for id_, ns, v in rows],
        )

    def _delete_vectors(self, db: Connection, ids: Sequence[int]) -> None:
        db.execute(text(f"DELETE FROM {_VEC} WHERE item_id = :id"), [{"id": i} for i in ids])

    def _nearest(
        self, db: Connection, namespace: str, vector: list[float], limit: int
    ) -> list[tuple[int, float]]:
        rows = db.execute(
            text(
                f"SELECT item_id, distance FROM {_VEC} WHERE embedding MATCH :v AND k = :k "
                "AND namespace = :ns ORDER BY distance"
            ),
            {"v": _packed(vector), "k": limit, "ns": namespace},
        ).all()
        return [(row[0], float(row[1])) for row in rows]

    def _unvectored(self, db: Connection, namespace: str | None) -> list[tuple[int, str, str]]:
        query = select(ITEMS.c.id, ITEMS.c.namespace, ITEMS.c.content)
        if namespace is not None:
            query = query.where(ITEMS.c.namespace == namespace)
        if self._vector_table(db):
            query = query.where(ITEMS.c.id.not_in(select(text("item_id")).select_from(text(_VEC))))
        return [(row[0], row[1], row[2]) for row in db.execute(query.order_by(ITEMS.c.id))]
