"""Contracts of the knowledge bridge: an agent's memory across loops, and scoped conventions.

An agent's knowledge is a set of items in orga's store: facts (subject-predicate-object
triples), working memory (a loop's final answer, when ``auto_persist`` is on) and conventions
(scoped to a directory of a source tree, or to a language). A loop with ``config.knowledge``
searches it before every reasoning step and shows the model the best items as one system
message starting ``[KNOWLEDGE_CONTEXT]``; its model may also ``recall_knowledge`` and
``store_knowledge`` (tools, gated like any other). All store access is in activities; the
workflow only sees their results, recorded in history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import ConfigDict, Field, field_validator

from orga.contracts.wire import Compact, Contract

__all__ = [
    "KNOWLEDGE_MARKER",
    "MAX_ITEM_CHARS",
    "RECALL_TOOL",
    "SEARCH_KNOWLEDGE",
    "STORE_TOOL",
    "WRITE_KNOWLEDGE",
    "KnowledgeConfig",
    "KnowledgeHits",
    "KnowledgeItem",
    "KnowledgeKind",
    "KnowledgeQuery",
    "KnowledgeScope",
    "KnowledgeWrite",
    "KnowledgeWritten",
]

KNOWLEDGE_MARKER: Final = "[KNOWLEDGE_CONTEXT]"
"""How the injected message starts (the context fitter never drops it)."""
SEARCH_KNOWLEDGE: Final = "search_knowledge"
"""Name of the activity that searches an agent's knowledge."""
WRITE_KNOWLEDGE: Final = "write_knowledge"
"""Name of the activity that stores one item."""
RECALL_TOOL: Final = "recall_knowledge"
STORE_TOOL: Final = "store_knowledge"
MAX_ITEM_CHARS: Final = 4_000
"""The longest text one item keeps (a longer one is cut, with a marker)."""

KnowledgeKind = Literal["fact", "memory", "convention"]
KnowledgeScope = Literal["all", "conventions"]


class KnowledgeConfig(Contract):
    """``config.knowledge``: how a loop uses its agent's knowledge. Absent: not at all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_context_items: int = Field(default=5, ge=0, le=50)
    """Items injected before each reasoning step (0: none, the tools only)."""
    relevance_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    """Items less relevant than this are not injected. Relevance is the share of the search
    terms an item contains, in [0, 1] (the full-text index only ranks); with hybrid search
    (``ORGA_EMBEDDINGS``), the larger of that and the item's cosine similarity to the query."""
    max_context_tokens: int = Field(default=1_000, ge=50, le=20_000)
    """The injected message is cut to about this many tokens."""
    tools: bool = True
    """The model gets ``recall_knowledge`` and ``store_knowledge`` (gated like any tool)."""
    auto_persist: bool = False
    """When the loop completes, its final answer is stored as working memory (the agent's
    leave needed: ``store_knowledge`` among its tools, or ``auto_persist = true``)."""
    directory: str | None = Field(default=None, max_length=1_000)
    """The directory of the source tree the loop works in (``"src/api"``; default: the root).
    Conventions it is shown or recalls are this directory's, its parents' and its languages',
    never another directory's — however many words they share with the task."""

    @field_validator("directory")
    @classmethod
    def _relative(cls, directory: str | None) -> str | None:
        if directory is None:
            return None
        path = directory.strip().replace("\\", "/")
        if path.startswith("/") or ".." in path.split("/"):
            raise ValueError(
                f"directory {directory!r} must be relative to the tree's root and stay in it"
            )
        return "/".join(p for p in path.split("/") if p not in ("", "."))


class KnowledgeItem(Contract):
    """One item of an agent's knowledge."""

    model_config = ConfigDict(frozen=True)

    id: int
    kind: KnowledgeKind
    content: str
    """What is searched and shown: the fact as a sentence, the memory, the convention."""
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    directory: str | None = None
    """A convention's directory (``""``: the root); ``None`` for a language-level one."""
    language: str | None = None
    confidence: float = 1.0
    source: str | None = None
    """Where it came from: a workflow id, a file, ``cli``."""
    created_at: datetime
    relevance: float = 0.0
    """The share of the search terms it contains, in [0, 1] (0 when it was not ranked); in a
    hybrid search, the larger of that and its cosine similarity to the query."""


class KnowledgeQuery(Compact):
    """The input of ``search_knowledge``."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    """Whose knowledge: the agent's store (its id, or the store its agent file names)."""
    text: str = ""
    limit: int = Field(default=5, ge=1, le=50)
    threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    scope: KnowledgeScope = "all"
    directory: str | None = None
    """With ``scope="conventions"``: walk up from here to the root."""
    language: str | None = None
    """With ``scope="conventions"``: also this language's conventions."""
    within: str | None = None
    """The searching loop's directory: conventions of other directories are left out (those
    of this one and its parents, and language conventions, stay). ``None``: all of them."""


class KnowledgeHits(Compact):
    """What a search found, best first."""

    model_config = ConfigDict(frozen=True)

    items: list[KnowledgeItem] = Field(default_factory=list[KnowledgeItem])
    hybrid: bool = False
    """Whether vectors ranked them too (an embedder, a store that keeps vectors, an endpoint
    that answered), or full-text alone."""


class KnowledgeWrite(Compact):
    """The input of ``write_knowledge``: one item to store (an equal one is kept once)."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    kind: KnowledgeKind
    content: str = Field(min_length=1)
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    directory: str | None = None
    language: str | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    source: str | None = None


class KnowledgeWritten(Compact):
    """What ``write_knowledge`` did."""

    model_config = ConfigDict(frozen=True)

    id: int
    created: bool
    """False when an equal item was there already."""
