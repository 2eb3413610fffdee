"""Knowledge on PostgreSQL: a generated ``tsvector`` column (English stemming) with a GIN index,
ranked by ``ts_rank``; full-text alone (pgvector is not supported yet)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.engine import Row

from orga.knowledge.items import COLUMNS
from orga.knowledge.store import Knowledge

__all__ = ["PostgresKnowledge"]


class PostgresKnowledge(Knowledge):
    """PostgreSQL full-text search."""

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
        columns = ", ".join(f"k.{c.name}" for c in COLUMNS)
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
