"""A scripted model server on 127.0.0.1 that speaks both wire formats.

OpenAI-compatible ``POST /v1/chat/completions`` and Anthropic ``POST /v1/messages``, served
over real HTTP so the provider adapters run exactly as they do against a real API. Each model
name has its own script (a queue of steps) so concurrent loops do not interfere; a step is a
neutral ``Turn`` (rendered into the endpoint's wire format), a ``Raw`` HTTP answer (status,
headers, body: for errors and recorded real bodies), or a function of the request that returns
one of those; a request with ``"stream": true`` is answered with server-sent events
(``orga.scripted.stream``). Every request is recorded for assertions.
``POST /v1/embeddings`` answers with hashed word and trigram vectors
(``orga.scripted.embeddings``: no language model), or with the ``Raw`` answers queued by
``fail_embeddings``.

Used by the tests, the benchmark and the offline demo (where it is labelled as a scripted model).

Over 400 lines: one HTTP server speaking two wire formats (chat completions and messages,
whole and streamed, with embeddings); its streamed bodies are ``orga.scripted.stream``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from orga.scripted.embeddings import hashed_embedding
from orga.scripted.stream import Wire, stream_events

__all__ = ["Raw", "RecordedRequest", "ScriptedModelServer", "Step", "Turn", "Wire", "stream_events"]

_FINISH = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}


@dataclass
class Turn:
    """A model turn, rendered into whichever wire format the request used."""

    text: str = ""
    tool_calls: Sequence[tuple[str, Mapping[str, Any] | str]] = ()
    """``(tool name, arguments)``; a ``str`` is sent as the raw argument text (OpenAI only)."""
    stop: str | None = None
    """Anthropic ``stop_reason`` (``tool_use`` / ``end_turn`` by default); for OpenAI it is
    mapped to ``finish_reason`` (``tool_use``→``tool_calls``, ``end_turn``→``stop``,
    ``max_tokens``→``length``) and any other value is sent as is."""
    input_tokens: int = 10
    output_tokens: int = 5
    delay: float = 0.0
    """Seconds to wait before answering."""
    piece_delay: float = 0.0
    """Streamed (a request with ``"stream": true``): seconds between the pieces of text."""
    break_after: int | None = None
    """Streamed: drop the connection after this many pieces of text (a stream that breaks)."""


def _within_max_tokens(answer: Turn | Raw, body: Mapping[str, Any]) -> Turn | Raw:
    """A turn as a real provider would answer it under the request's ``max_tokens``: no more
    output tokens than that, stopped for ``max_tokens`` when it was cut."""
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if not isinstance(answer, Turn) or not isinstance(limit, int) or answer.output_tokens <= limit:
        return answer
    return dataclasses.replace(answer, output_tokens=limit, stop="max_tokens")


@dataclass
class Raw:
    """An exact HTTP answer."""

    status: int = 200
    body: Any = None
    """A ``dict``/``list`` is sent as JSON, a ``str`` as is."""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    delay: float = 0.0


Step = Turn | Raw | Callable[["RecordedRequest"], "Turn | Raw"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received."""

    wire: Wire
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = 0.0
    """``time.monotonic()`` when the request arrived."""

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    def tool_results(self) -> int:
        """How many tool results the request carries."""
        return len(self.tool_result_texts())

    def user_texts(self) -> list[str]:
        """The texts of the user messages, in order (tool results excluded)."""
        texts: list[str] = []
        for message in self.body.get("messages", []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                blocks = cast(list[dict[str, Any]], content)
                texts += [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        return texts

    def first_user_text(self) -> str:
        texts = self.user_texts()
        return texts[0] if texts else ""

    def tool_result_texts(self) -> list[str]:
        """The contents of the tool results the request carries, in order."""
        found: list[str] = []
        for message in self.body.get("messages", []):
            content = message.get("content")
            if message.get("role") == "tool":
                found.append(str(content))
            elif isinstance(content, list):
                blocks = cast(list[dict[str, Any]], content)
                found += [
                    str(b.get("content", "")) for b in blocks if b.get("type") == "tool_result"
                ]
        return found


class ScriptedModelServer:
    """The server. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, *, keep_requests: int | None = None
    ) -> None:
        """``keep_requests``: how many recent requests to keep (all by default, for tests; a
        long-running server keeps a bounded number)."""
        self._keep = keep_requests
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[Step]] = {}
        self._fallback: Callable[[RecordedRequest], Turn | Raw] | None = None
        self.requests: list[RecordedRequest] = []
        self.embedded = 0
        """How many texts ``/v1/embeddings`` has embedded."""
        self._embedding_failures: deque[Raw] = deque()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ---- configuration ----------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        """What ``OPENAI_BASE_URL`` / ``OPENROUTER_BASE_URL`` should be."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What ``ANTHROPIC_BASE_URL`` should be."""
        return self.url

    def script(self, model: str, steps: Iterable[Step]) -> None:
        """Queue the answers for requests naming ``model`` (replacing any left)."""
        with self._lock:
            self._scripts[model] = deque(steps)

    def fallback(self, responder: Callable[[RecordedRequest], Turn | Raw] | None) -> None:
        """Answer requests for models without a script with ``responder``."""
        self._fallback = responder

    def fail_embeddings(self, *answers: Raw) -> None:
        """Answer the next embeddings requests with these (errors, malformed bodies)."""
        with self._lock:
            self._embedding_failures.extend(answers)

    def _embeddings(self, body: dict[str, Any]) -> Raw:
        with self._lock:
            if self._embedding_failures:
                return self._embedding_failures.popleft()
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else cast(list[Any], raw or [])
        if not texts or not all(isinstance(t, str) for t in texts):
            return Raw(400, {"error": {"message": "input must be a string or strings"}})
        with self._lock:
            self.embedded += len(texts)
        tokens = sum(len(str(t).split()) for t in texts)
        return Raw(
            body={
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": hashed_embedding(str(t))}
                    for i, t in enumerate(texts)
                ],
                "model": str(body.get("model", "")),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def remaining(self, model: str) -> int:
        with self._lock:
            return len(self._scripts.get(model, ()))

    def requests_for(self, model: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.model == model]

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="scripted-model", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # ---- answering ----------------------------------------------------------------------

    def _next(self, request: RecordedRequest) -> Turn | Raw:
        with self._lock:
            self.requests.append(request)
            if self._keep is not None:
                del self.requests[: -self._keep or len(self.requests)]
            queue = self._scripts.get(request.model)
            step: Step | None = queue.popleft() if queue else None
        if step is None:
            if self._fallback is not None:
                return self._fallback(request)
            return Raw(
                400,
                {
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"no script left for model {request.model!r}",
                    }
                },
            )
        answer = step if isinstance(step, Turn | Raw) else step(request)
        return _within_max_tokens(answer, request.body)

    def _render(self, wire: Wire, model: str, turn: Turn) -> dict[str, Any]:
        n = next(self._ids)
        stop = turn.stop or ("tool_use" if turn.tool_calls else "end_turn")
        if wire == "anthropic":
            content: list[dict[str, Any]] = []
            if turn.text:
                content.append({"type": "text", "text": turn.text})
            for i, (name, arguments) in enumerate(turn.tool_calls):
                value = json.loads(arguments) if isinstance(arguments, str) else arguments
                content.append(
                    {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": value}
                )
            return {
                "id": f"msg_scripted_{n}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens},
            }
        message: dict[str, Any] = {
            "role": "assistant",
            "content": turn.text or None,
            "refusal": None,
        }
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
                for i, (name, arguments) in enumerate(turn.tool_calls)
            ]
        return {
            "id": f"chatcmpl-scripted-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _FINISH.get(stop, stop),
                }
            ],
            "usage": {
                "prompt_tokens": turn.input_tokens,
                "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
            },
        }

    def _events(self, wire: Wire, model: str, turn: Turn) -> list[tuple[str, bool]]:
        return stream_events(wire, self._render(wire, model, turn), turn.input_tokens)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            """Headers and body leave at once: with Nagle's algorithm on, every answer waited
            for the client's delayed ACK, which swamped what was measured (the docs'
            performance page has the figures)."""

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: tests assert on recorded requests instead

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/").endswith("/chat/completions"):
                    wire: Wire = "openai"
                elif self.path.rstrip("/").endswith("/v1/messages"):
                    wire = "anthropic"
                elif self.path.rstrip("/").endswith("/embeddings"):
                    try:
                        answer = server._embeddings(json.loads(raw or b"{}"))
                    except json.JSONDecodeError:
                        answer = Raw(400, {"error": {"message": "body is not JSON"}})
                    self._send(answer.status, answer.body, answer.headers)
                    return
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}}, {})
                    return
                request = RecordedRequest(
                    wire=wire,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    at=time.monotonic(),
                )
                answer = server._next(request)
                if answer.delay:
                    time.sleep(answer.delay)
                if isinstance(answer, Raw):
                    self._send(answer.status, answer.body, answer.headers)
                elif body.get("stream") is True:
                    self._stream(server._events(wire, request.model, answer), answer)
                else:
                    self._send(200, server._render(wire, request.model, answer), {})

            def _stream(self, events: list[tuple[str, bool]], turn: Turn) -> None:
                """Server-sent events, one write each; a ``True`` marks a piece of text."""
                self.close_connection = True
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                pieces = 0
                for event, is_text in events:
                    if is_text:
                        if turn.break_after is not None and pieces >= turn.break_after:
                            return  # the connection drops mid-answer
                        pieces += 1
                        if turn.piece_delay:
                            time.sleep(turn.piece_delay)
                    self.wfile.write(event.encode("utf-8"))
                    self.wfile.flush()

            def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
                data = body if isinstance(body, str) else json.dumps(body)
                encoded = data.encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(encoded)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(encoded)

        return Handler
