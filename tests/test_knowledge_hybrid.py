"""Hybrid knowledge search: vectors from a real ``/embeddings`` endpoint over HTTP (the scripted
server's hashed embeddings), kept in sqlite-vec, fused with the full-text ranking."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from orga.contracts.errors import (
    InvalidConfig,
    MalformedModelResponse,
    ProviderAuthError,
    ProviderUnavailable,
)
from orga.contracts.journal import Journal, KnowledgeInjected
from orga.contracts.knowledge import KNOWLEDGE_MARKER, KnowledgeQuery, KnowledgeWrite
from orga.core.knowledge import fuse
from orga.knowledge import open_knowledge
from orga.knowledge.embeddings import Embedder, embedder, parse_embeddings
from orga.runtime.settings import Settings
from orga.runtime.store import Store
from orga.scripted.server import Raw, ScriptedModelServer, Turn
from tests.harness import TEST_STORE, Harness, scripted_settings

FIXTURES = Path(__file__).parent / "fixtures" / "providers"
PAYROLL = "the payroll service runs on the kubernetes cluster saturn"
REFUNDS = "refunds above 500 euros need approval from finance"
TYPO = "kubrenetes"  # a transposition: no stemmer maps it to "kubernetes"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as running:
        yield running


def settings_for(server: ScriptedModelServer, model: str = "hashed-256") -> Settings:
    return Settings.from_env(
        {"OPENAI_BASE_URL": server.openai_base_url, "ORGA_EMBEDDINGS": f"openai:{model}"}
    )


_OPENED: list[Embedder] = []


def make_embedder(server: ScriptedModelServer, model: str = "hashed-256") -> Embedder:
    found = embedder(settings_for(server, model))
    assert found is not None
    _OPENED.append(found)
    return found


@pytest.fixture(autouse=True)
def close_embedders() -> Iterator[None]:
    yield
    while _OPENED:
        _OPENED.pop().close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as opened:
        yield opened


def space() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


def fact(namespace: str, content: str) -> KnowledgeWrite:
    return KnowledgeWrite(namespace=namespace, kind="fact", content=content)


def query(namespace: str, words: str, **extra: Any) -> KnowledgeQuery:
    return KnowledgeQuery(namespace=namespace, text=words, **extra)


def vectors_of(store: Store) -> int:
    with store.vector_engine.connect() as db:
        return db.execute(text("SELECT count(*) FROM orga_knowledge_vec")).scalar_one()


# ---- pieces --------------------------------------------------------------------------------


def test_rank_fusion_prefers_what_both_rankings_agree_on() -> None:
    assert fuse([1, 2, 3], [3, 4]) == [3, 1, 2, 4]  # 3 is in both; 2 and 4 tie: first seen
    assert fuse([], [7, 8]) == [7, 8]
    assert fuse() == []


def test_the_documented_embeddings_body_is_read() -> None:
    body = json.loads((FIXTURES / "openai_17_embeddings_DOCS.json").read_text())
    assert parse_embeddings(body, 1, "openai") == [[0.0023064255, -0.009327292, -0.0028842222]]
    swapped = {"data": [{"index": 1, "embedding": [1, 0]}, {"index": 0, "embedding": [0, 1]}]}
    assert parse_embeddings(swapped, 2, "openai") == [[0.0, 1.0], [1.0, 0.0]]  # by index


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"error": "x"}, "no 'data' list"),
        ({"data": [{"index": 0, "embedding": [1.0]}]}, "1 vectors for 2 inputs"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}, "index"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": ["a"]}]}, "other"),
        (
            {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1, 2]}]},
            "lengths",
        ),
    ],
)
def test_a_malformed_embeddings_body_is_a_typed_error(body: dict[str, Any], why: str) -> None:
    with pytest.raises(MalformedModelResponse, match=why):
        parse_embeddings(body, 2, "openai")


def test_embeddings_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(InvalidConfig, match="Anthropic has no embeddings endpoint"):
        Settings.from_env({"ORGA_EMBEDDINGS": "anthropic:voyage"})
    with pytest.raises(InvalidConfig, match="is not <provider>:<model>"):
        Settings.from_env({"ORGA_EMBEDDINGS": "text-embedding-3-small"})
    assert Settings.from_env({}).embeddings is None


def test_the_endpoint_s_errors_are_the_providers_errors(server: ScriptedModelServer) -> None:
    found = make_embedder(server)
    server.fail_embeddings(
        Raw(401, {"error": {"message": "bad key", "code": "invalid_api_key"}}),
        Raw(429, {"error": {"message": "slow down"}}, {"retry-after": "7"}),
    )
    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        found.embed(["a"])
    with pytest.raises(ProviderUnavailable) as raised:
        found.embed(["a"])
    assert raised.value.next_retry_delay is not None
    assert raised.value.next_retry_delay.total_seconds() == 7
    assert len(found.embed(["a", "b"])) == 2  # and then it answers


# ---- the store -----------------------------------------------------------------------------


def test_hybrid_search_finds_what_full_text_misses_and_keeps_agents_apart(
    server: ScriptedModelServer, store: Store
) -> None:
    ann, bob = space(), space()
    hybrid = open_knowledge(store, make_embedder(server))
    mine = {hybrid.add(fact(ann, PAYROLL)).id, hybrid.add(fact(ann, REFUNDS)).id}
    theirs = hybrid.add(fact(bob, PAYROLL)).id
    assert vectors_of(store) == 3

    words_only = open_knowledge(store).search(query(ann, TYPO))
    assert words_only.items == [] and not words_only.hybrid

    hits = hybrid.search(query(ann, TYPO, limit=5))
    assert hits.hybrid
    assert hits.items[0].content == PAYROLL
    assert {i.id for i in hits.items} <= mine and theirs not in {i.id for i in hits.items}
    assert hits.items[0].relevance > hits.items[-1].relevance  # the cosine similarity
    # Words still count: an exact question ranks its fact first in both rankings.
    assert hybrid.search(query(ann, "who approves refunds in euros")).items[0].content == REFUNDS


def test_forgetting_an_item_forgets_its_vector(server: ScriptedModelServer, store: Store) -> None:
    ann = space()
    hybrid = open_knowledge(store, make_embedder(server))
    first = hybrid.add(fact(ann, PAYROLL)).id
    hybrid.add(fact(ann, REFUNDS))
    assert hybrid.forget(ann, [first]) == 1
    assert vectors_of(store) == 1
    assert PAYROLL not in [i.content for i in hybrid.search(query(ann, TYPO)).items]
    assert hybrid.forget(ann) == 1 and vectors_of(store) == 0


def test_a_failing_endpoint_loses_nothing_and_reindex_fills_in(
    server: ScriptedModelServer, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    ann = space()
    hybrid = open_knowledge(store, make_embedder(server))
    hybrid.add(fact(ann, REFUNDS))  # the vector table exists
    server.fail_embeddings(Raw(503, {"error": {"message": "down for maintenance"}}))
    with caplog.at_level(logging.WARNING, logger="orga.knowledge"):
        written = hybrid.add(fact(ann, PAYROLL))
    assert written.created  # stored, without its vector
    assert "embeddings failed" in caplog.text and "down for maintenance" in caplog.text
    assert vectors_of(store) == 1
    assert PAYROLL not in [i.content for i in hybrid.search(query(ann, TYPO)).items]
    assert hybrid.reindex(ann) == 1 and vectors_of(store) == 2
    assert hybrid.search(query(ann, TYPO)).items[0].content == PAYROLL
    assert hybrid.reindex(ann) == 0  # nothing left to embed


def test_a_new_model_keeps_search_full_text_until_reindex(
    server: ScriptedModelServer, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    ann = space()
    old = open_knowledge(store, make_embedder(server, "hashed-old"))
    old.add(fact(ann, PAYROLL))
    old.add(fact(ann, REFUNDS))
    new = open_knowledge(store, make_embedder(server, "hashed-new"))
    with caplog.at_level(logging.WARNING, logger="orga.knowledge"):
        hits = new.search(query(ann, TYPO))
        new.add(fact(ann, "the mailer logs to grafana"))  # stored, no vector of a third kind
    assert not hits.hybrid and hits.items == []
    assert "made by openai:hashed-old" in caplog.text and "reindex" in caplog.text
    assert new.reindex() == 3  # every item again, with the new model
    assert vectors_of(store) == 3
    after = new.search(query(ann, TYPO))
    assert after.hybrid and after.items[0].content == PAYROLL
    with pytest.raises(InvalidConfig, match="ORGA_EMBEDDINGS"):
        open_knowledge(store).reindex()


def test_postgresql_searches_full_text_alone_and_says_so(
    server: ScriptedModelServer, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    ann = space()
    with Store(postgres_url) as store:
        knowledge = open_knowledge(store, make_embedder(server))
        with caplog.at_level(logging.WARNING, logger="orga.knowledge"):
            knowledge.add(fact(ann, PAYROLL))
            hits = knowledge.search(query(ann, "payroll cluster"))
        assert not hits.hybrid and hits.items[0].content == PAYROLL
        assert "pgvector" in caplog.text
        with pytest.raises(InvalidConfig, match="pgvector"):
            knowledge.reindex()


# ---- a loop ----------------------------------------------------------------------------------


async def test_a_loop_on_a_worker_with_embeddings_is_shown_what_a_typo_finds(
    harness: Harness,
) -> None:
    agent = space()
    settings = scripted_settings(harness.model, embeddings=("openai", "hashed-256"))
    stored = open_knowledge(TEST_STORE, make_embedder(harness.model)).add(fact(agent, PAYROLL))
    model = harness.new_model([Turn(text="saturn")])
    async with harness.worker(settings=settings):
        handle = await harness.start(
            f"Where does {TYPO} run payroll?", model=model, agent_id=agent, knowledge={}
        )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "saturn"
    [request] = harness.model.requests_for(model)
    [shown] = [
        str(m["content"])
        for m in request.body["messages"]
        if str(m.get("content") or "").startswith(KNOWLEDGE_MARKER)
    ]
    assert PAYROLL in shown
    [injected] = [e for e in journal.entries if isinstance(e, KnowledgeInjected)]
    assert injected.items == [stored.id]
