"""Embeddings for knowledge search, from a provider's OpenAI-compatible ``/embeddings`` endpoint.

``ORGA_EMBEDDINGS=<provider>:<model>`` (``openai:text-embedding-3-small``; Ollama, vLLM and
llama.cpp through ``OPENAI_BASE_URL``; ``openrouter:…``) turns on hybrid knowledge search: items
are embedded when they are stored, queries when they are searched, and the nearest vectors are
fused with the full-text ranking (``orga.knowledge.store``). The request and the errors are the
provider adapters' own: the key comes from the worker's environment, 401/403 fail at once, 429 and
5xx are retryable with the provider's ``Retry-After``; a body that is not a list of vectors is a
``MalformedModelResponse``. Synchronous: the knowledge store calls it from a worker thread.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any, cast

import httpx

from orga.contracts.errors import MalformedModelResponse
from orga.providers.client import request_headers
from orga.providers.http_errors import (
    parse_json_body,
    raise_for_provider_status,
    transport_error,
)
from orga.runtime.settings import ProviderSettings, Settings
from orga.runtime.tls import tls

__all__ = ["BATCH", "Embedder", "embedder", "parse_embeddings"]

BATCH = 128
"""Texts per request (OpenAI takes up to 2,048; local servers are happier with fewer)."""


def parse_embeddings(body: dict[str, Any], expected: int, provider: str) -> list[list[float]]:
    """The vectors of an embeddings response, in the order of the inputs.

    Raises:
        MalformedModelResponse: not ``expected`` vectors of numbers, all of one length.
    """

    def malformed(why: str) -> MalformedModelResponse:
        return MalformedModelResponse(f"{provider} embeddings response: {why}")

    data = body.get("data")
    if not isinstance(data, list):
        raise malformed("no 'data' list")
    vectors: dict[int, list[float]] = {}
    for position, raw in enumerate(cast(list[Any], data)):
        if not isinstance(raw, dict):
            raise malformed(f"data[{position}] is not an object")
        entry = cast(dict[str, Any], raw)
        index = entry.get("index", position)
        vector = entry.get("embedding")
        if not isinstance(index, int) or not 0 <= index < expected or index in vectors:
            raise malformed(f"data[{position}] has index {index!r} (expected 0..{expected - 1})")
        if not isinstance(vector, list) or not vector:
            raise malformed(f"data[{position}].embedding is not a list of numbers")
        numbers = cast(list[Any], vector)
        if not all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            for x in numbers
        ):
            raise malformed(f"data[{position}].embedding holds something other than numbers")
        vectors[index] = [float(x) for x in numbers]
    if len(vectors) != expected:
        raise malformed(f"{len(vectors)} vectors for {expected} inputs")
    lengths = {len(v) for v in vectors.values()}
    if len(lengths) != 1:
        raise malformed(f"vectors of different lengths {sorted(lengths)}")
    return [vectors[i] for i in range(expected)]


class Embedder:
    """One provider's embedding model. Thread-safe (one per worker)."""

    def __init__(self, provider: ProviderSettings, model: str, *, timeout: float = 30.0) -> None:
        self.provider = provider
        self.model = model
        self.name = f"{provider.name}:{model}"
        """What made the vectors: stored with them, so a change of model is noticed."""
        self._url = f"{provider.base_url}/embeddings"
        self._http = httpx.Client(timeout=timeout, verify=tls())
        # Its pooled connection lives as long as the embedder (the worker's, the CLI's).
        self._closer = weakref.finalize(self, self._http.close)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text (requests of at most ``BATCH`` texts).

        Raises:
            ProviderError: the endpoint refused or failed (each subclass says whether to retry).
            InvalidConfig: the worker has no key for a provider that needs one.
        """
        vectors: list[list[float]] = []
        headers = request_headers(self.provider)
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start : start + BATCH])
            try:
                response = self._http.post(
                    self._url, json={"model": self.model, "input": batch}, headers=headers
                )
            except httpx.TransportError as error:
                raise transport_error(error, self.provider) from error
            raise_for_provider_status(response, self.provider)
            body = parse_json_body(response, self.provider)
            vectors += parse_embeddings(body, len(batch), self.provider.name)
        return vectors

    def close(self) -> None:
        self._closer()


def embedder(settings: Settings) -> Embedder | None:
    """The embedder ``ORGA_EMBEDDINGS`` names (None: knowledge search is full-text alone)."""
    if settings.embeddings is None:
        return None
    provider, model = settings.embeddings
    return Embedder(settings.provider(provider), model)
