"""Agents' knowledge: facts, working memory and scoped conventions, in orga's store.

Modules:

* ``items`` — the table and how its rows read
* ``store`` — ``Knowledge``: adding, searching (full-text, hybrid), conventions, forgetting
* ``sqlite`` — SQLite's full-text (FTS5) and vector (sqlite-vec) search
* ``postgresql`` — PostgreSQL's full-text search
* ``conventions`` — conventions found in a source tree (``orga knowledge import``)
* ``tools`` — ``recall_knowledge`` and ``store_knowledge``, the tools a loop gets
* ``embeddings`` — vectors from a provider's ``/embeddings`` endpoint, for hybrid search

The loop's side of knowledge lives where workflow code may reach it: its types in
``orga.contracts.knowledge``, its pure decisions in ``orga.core.knowledge``, the bridge in
``orga.workflows.reasoning.knowledge_bridge``; the activities in ``orga.activities.knowledge``.

``open_knowledge(store)`` gives the knowledge kept in a store, searched the way its database
does best.
"""

from __future__ import annotations

from orga.knowledge.items import Embed
from orga.knowledge.postgresql import PostgresKnowledge
from orga.knowledge.sqlite import SqliteKnowledge
from orga.knowledge.store import Knowledge
from orga.runtime.store import Store

__all__ = ["Embed", "Knowledge", "open_knowledge"]


def open_knowledge(store: Store, embedder: Embed | None = None) -> Knowledge:
    """The knowledge kept in ``store``, searched the way its database does best — hybrid, where
    the store keeps vectors, when there is an ``embedder``."""
    if store.dialect == "postgresql":
        return PostgresKnowledge(store, embedder)
    return SqliteKnowledge(store, embedder)
