"""Embeddings without a model: hashed words and character trigrams, for the scripted server.

The offline scripted model server answers ``POST /v1/embeddings`` with these, so hybrid knowledge
search runs end to end without a key or a download. They are not a language model's: two texts
are near when they share words or pieces of words (``deploy`` ~ ``deployment``, a typo ~ the
word), not when they mean the same thing. Deterministic across processes (BLAKE2, not ``hash``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Final

from orga.core.knowledge import search_terms

__all__ = ["DIMS", "hashed_embedding"]

DIMS: Final = 256
_WORD_WEIGHT: Final = 1.0
_TRIGRAM_WEIGHT: Final = 0.5


def _add(vector: list[float], feature: str, weight: float) -> None:
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    vector[digest % len(vector)] += weight if (digest >> 40) & 1 else -weight


def hashed_embedding(text: str, dims: int = DIMS) -> list[float]:
    """A unit vector of ``dims`` numbers for ``text`` (its words without stop words, each word
    and each of its character trigrams hashed to a signed position)."""
    vector = [0.0] * dims
    for word in search_terms(text, limit=10_000):
        _add(vector, f"w:{word}", _WORD_WEIGHT)
        padded = f"#{word}#"
        for start in range(len(padded) - 2):
            _add(vector, f"t:{padded[start : start + 3]}", _TRIGRAM_WEIGHT)
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:  # nothing to embed: one fixed direction, never a zero vector
        return [1.0] + [0.0] * (dims - 1)
    return [x / norm for x in vector]
