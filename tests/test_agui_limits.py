"""Every size on the web endpoint is bounded and every refusal is an answer (issue 64): each
test does what an attacker did to ``orga api`` — a first message of megabytes, a next message
over the limit, a last event id of ``"².1"``, JSON nested 100 000 deep, one token holding
streams open, requests sent a byte at a time, a 50 MB body — against the endpoint served by
uvicorn with ``uvicorn_limits``, on a real dev server; what it answers is the protocol's, read
as HTTP clients read it (httpx, or the bytes of a raw connection)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.routing import Route
from temporalio.service import RPCError, RPCStatusCode

from orga.contracts.config import LoopConfig
from orga.contracts.conversation import USER_MESSAGE_LIMIT
from orga.scripted.server import Turn
from orga.web.agui import AguiLimits, AguiOptions, agui_app, uvicorn_limits
from orga.web.agui import _Endpoint as AguiEndpoint
from orga.web.agui_run import THREAD_PREFIX
from orga.web.callers import OpenRequests
from tests.harness import Harness
from tests.helpers import Hold, callers_for, conversation, eventually, free_port
from tests.sample_tools import transfer

SLOW = AguiLimits(request_timeout=0.5)
"""A request timeout small enough to wait for (the feature under test)."""


@dataclass
class _Endpoint:
    url: str
    port: int
    tokens: dict[str, str]
    streams: OpenRequests
    """The requests each caller has open at the endpoint."""

    def auth(self, user: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.tokens[user]}"}


@contextlib.asynccontextmanager
async def _served(
    harness: Harness, model: str, limits: AguiLimits, *tools: str
) -> AsyncIterator[_Endpoint]:
    """The endpoint (ann and bob have tokens) served by uvicorn with ``uvicorn_limits``."""
    tokens, callers = callers_for("ann", "bob")
    options = AguiOptions(
        task_queue=harness.task_queue,
        config=LoopConfig(model=model, tools=list(tools)),
        limits=limits,
    )
    app = agui_app(harness.client, callers, options)
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
        **uvicorn_limits(limits),
    )  # fmt: skip
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        await eventually(lambda: server.started, "the endpoint listens")
        route = app.routes[0]
        assert isinstance(route, Route) and isinstance(route.endpoint, AguiEndpoint)
        yield _Endpoint(f"http://127.0.0.1:{port}/agui", port, tokens, route.endpoint.streams)
    finally:
        server.should_exit = True
        await serving


def _input(thread: str, text: str | None = None, **more: Any) -> dict[str, Any]:
    messages = [{"id": uuid.uuid4().hex, "role": "user", "content": text}] if text else []
    return {"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, **more}


def _events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


async def _post(endpoint: _Endpoint, user: str | None, body: Any, **headers: Any) -> httpx.Response:
    sent = {"content-type": "application/json", **headers}
    if user is not None:
        sent |= endpoint.auth(user)
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(timeout=60) as web:
        return await web.post(endpoint.url, content=content, headers=sent)


async def _raw(port: int, sent: bytes, *, trickle: bytes = b"") -> bytes:
    """What the endpoint answers a connection that sends ``sent``, then ``trickle`` a byte at
    a time (or nothing), holding it open: every byte until the endpoint closes it (read from
    the socket itself, which gives what came before a reset)."""
    loop = asyncio.get_running_loop()
    with socket.socket() as conn:
        conn.setblocking(False)
        await loop.sock_connect(conn, ("127.0.0.1", port))
        await loop.sock_sendall(conn, sent)

        async def slowly() -> None:
            with contextlib.suppress(OSError):  # closed under it
                for byte in trickle:
                    await asyncio.sleep(0.2)  # the attacker's pace: inside uvicorn's keep-alive
                    await loop.sock_sendall(conn, bytes([byte]))

        sending = asyncio.create_task(slowly())
        answer = b""
        try:
            async with asyncio.timeout(30):  # bounds a connection never closed: the failure
                while chunk := await loop.sock_recv(conn, 65536):
                    answer += chunk
        except ConnectionResetError:  # closed with bytes of ours unread: closed all the same
            pass
        finally:
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
    return answer


def _head(port: int, body_length: int, *more: str) -> bytes:
    lines = [
        "POST /agui HTTP/1.1",
        f"host: 127.0.0.1:{port}",
        "content-type: application/json",
        f"content-length: {body_length}",
        *more,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _bearer(endpoint: _Endpoint, user: str = "ann") -> str:
    return f"authorization: Bearer {endpoint.tokens[user]}"


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


async def _no_thread(harness: Harness, thread: str) -> bool:
    try:
        await harness.client.get_workflow_handle(f"{THREAD_PREFIX}{thread}").describe()
    except RPCError as error:
        return error.status == RPCStatusCode.NOT_FOUND
    return False


async def test_a_first_message_is_held_to_the_limit_of_every_message(harness: Harness) -> None:
    """A first message of 100 001 characters ends its run ``RUN_ERROR`` and starts nothing, as
    a next one does; one of 6 MB or 20 MB is over the body's bound (413), and starts nothing."""
    model = harness.new_model([Turn(text="never asked")])
    thread = uuid.uuid4().hex
    async with harness.worker(), _served(harness, model, AguiLimits()) as endpoint:
        answer = await _post(endpoint, "ann", _input(thread, "x" * (USER_MESSAGE_LIMIT + 1)))
        assert answer.status_code == 200, answer.text
        events = _events(answer.text)
        assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"], events
        assert f"more than the {USER_MESSAGE_LIMIT}" in events[-1]["message"]
        for size in (6_000_000, 20_000_000):
            body = json.dumps(_input(thread, "x" * size)).encode()
            refused = await _raw(endpoint.port, _head(endpoint.port, len(body), _bearer(endpoint)))
            assert _status(refused) == 413 and b"AguiLimits.body_bytes" in refused, refused
        assert await _no_thread(harness, thread)
    assert harness.model.requests_for(model) == []


async def test_a_next_message_over_the_limit_is_a_run_error_and_the_thread_is_untouched(
    harness: Harness,
) -> None:
    """Over the limit, a next message gets ``RUN_ERROR`` with the reason (its stream no longer
    ends without an event): nothing reaches the workflow, nothing is stored, and the thread
    takes its next message as before."""
    model = harness.new_model([Turn(text="Hello ann."), Turn(text="Still here.")])
    thread = uuid.uuid4().hex
    async with harness.worker(), _served(harness, model, AguiLimits()) as endpoint:
        first = _events((await _post(endpoint, "ann", _input(thread, "hi"))).text)
        assert first[-1]["type"] == "RUN_FINISHED", first
        handle = harness.client.get_workflow_handle(f"{THREAD_PREFIX}{thread}")
        harness.handles.append(handle)
        before = (await conversation(handle), await handle.query("journal"))

        answer = await _post(endpoint, "ann", _input(thread, "y" * (USER_MESSAGE_LIMIT + 1)))
        assert answer.status_code == 200, answer.text
        events = _events(answer.text)
        assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"], events
        said = events[-1]["message"]
        assert f"{USER_MESSAGE_LIMIT + 1} characters" in said and "nothing was sent" in said
        assert (await conversation(handle), await handle.query("journal")) == before
        assert len(harness.model.requests_for(model)) == 1

        after = _events((await _post(endpoint, "ann", _input(thread, "and now?"))).text)
        assert after[-1]["type"] == "RUN_FINISHED", after
        assert after[-1]["result"]["output"] == "Still here."


async def test_an_approval_reason_over_its_limit_decides_nothing(harness: Harness) -> None:
    """The interrupt's ``responseSchema`` says a reason holds at most 2 000 characters; a longer
    one was taken. Now its run ends ``RUN_ERROR``, and the call still waits for a decision."""
    model = harness.new_model([Turn(tool_calls=[("transfer", {"amount": 5, "to": "bo"})])])
    thread = uuid.uuid4().hex
    async with (
        harness.worker(tools=[transfer]),
        _served(harness, model, AguiLimits(), "transfer") as endpoint,
    ):
        first = _events((await _post(endpoint, "ann", _input(thread, "pay bo"))).text)
        [interrupt] = first[-1]["outcome"]["interrupts"]
        handle = harness.client.get_workflow_handle(f"{THREAD_PREFIX}{thread}")
        harness.handles.append(handle)
        limit = interrupt["responseSchema"]["properties"]["reason"]["maxLength"]
        payload = {"approved": False, "reason": "n" * (limit + 1)}
        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
        answer = await _post(endpoint, "ann", _input(thread, resume=resume))
        events = _events(answer.text)
        assert events[-1]["type"] == "RUN_ERROR", events
        assert "nothing was decided" in events[-1]["message"]
        state = await handle.query("state")
    assert [p["call_id"] for p in state["pending_approvals"]] == [interrupt["id"]]


@pytest.mark.parametrize(
    ("props", "header"),
    [({"orga": {"after": "².1"}}, None), ({}, b"\xb2.1"), ({"orga": {"after": "\u0663.1"}}, None)],
    ids=["forwarded-props", "last-event-id-header", "arabic-indic-digit"],
)
async def test_a_last_event_id_of_other_digits_is_422(
    harness: Harness, props: dict[str, Any], header: bytes | None
) -> None:
    """``"².1"`` passes ``str.isdigit`` and breaks ``int``: it answered 500."""
    model = harness.new_model([])
    async with _served(harness, model, AguiLimits()) as endpoint:
        extra = {"last-event-id": header} if header is not None else {}
        body = _input(uuid.uuid4().hex, forwardedProps=props)
        answer = await _post(endpoint, "ann", body, **extra)
    assert answer.status_code == 422, answer.text
    assert "last event id" in answer.json()["error"]


async def test_malformed_bodies_are_4xx_never_500(harness: Harness) -> None:
    """JSON nested 100 000 deep answered 500 (the parser's recursion); now 400 before it is
    parsed, whether the whole body or a field nests; other garbage is 422."""
    model = harness.new_model([])
    deep = 100_000
    thread = uuid.uuid4().hex
    async with _served(harness, model, AguiLimits()) as endpoint:
        nested = (b"[" * deep) + (b"]" * deep)
        assert (await _post(endpoint, "ann", nested)).status_code == 400
        objects = b'{"a":' * deep + b"1" + b"}" * deep
        assert (await _post(endpoint, "ann", objects)).status_code == 400
        state = json.dumps(_input(thread, "hi")).encode()
        inside = state[:-1] + b', "state": ' + nested + b"}"
        answer = await _post(endpoint, "ann", inside)
        assert answer.status_code == 400 and "AguiLimits.json_depth" in answer.json()["error"]
        brackets = b'{"a": "' + b"[" * deep + b'"}'  # inside a string: not structure
        assert (await _post(endpoint, "ann", brackets)).status_code == 422
        # Deep, then a string never closed, full of escaped quotes: a scan that looked for
        # strings again from each quote would take hours on it.
        unclosed = b"[" * 100 + b'"' + b'a\\"' * 600_000
        assert (await _post(endpoint, "ann", unclosed)).status_code == 400
        for garbage in (b"not json", b"\xff\xfe", b"", b"[]", _input(thread + "\n", "hi")):
            assert (await _post(endpoint, "ann", garbage)).status_code == 422, garbage
    assert await _no_thread(harness, thread)


@dataclass
class _Stream:
    response: httpx.Response
    lines: AsyncIterator[str]

    async def until(self, kind: str) -> list[dict[str, Any]]:
        """The stream's events up to the first ``kind``."""
        seen: list[dict[str, Any]] = []
        async for line in self.lines:
            if line.startswith("data: "):
                seen.append(json.loads(line.removeprefix("data: ")))
                if seen[-1]["type"] == kind:
                    return seen
        raise AssertionError(f"the stream ended before {kind}: {seen}")


async def _open(
    stack: contextlib.AsyncExitStack, web: httpx.AsyncClient, endpoint: _Endpoint, body: Any
) -> _Stream:
    """A stream of ann's, open until ``stack`` closes (or the test closes its response)."""
    request = web.build_request("POST", endpoint.url, json=body, headers=endpoint.auth("ann"))
    response = await web.send(request, stream=True)
    if response.status_code != 200:
        said = await response.aread()
        await response.aclose()
        raise AssertionError(f"{response.status_code}: {said!r}")
    stack.push_async_callback(response.aclose)
    stream = _Stream(response, response.aiter_lines())
    await stream.until("RUN_STARTED")
    return stream


async def test_one_caller_holds_at_most_its_streams_open(harness: Harness) -> None:
    """One token held 300 streams open at once; now ``streams_per_caller`` (3 here): one more
    is 429 with the reason, another caller is not counted with it, a stream the client leaves
    frees its place, and so does one whose run ends."""
    hold = Hold()

    def held(_: Any) -> Turn:
        hold.wait_here()
        return Turn(text="At last.")

    model = harness.new_model([held])
    thread = uuid.uuid4().hex
    reconnect = _input(thread, forwardedProps={"orga": {"connect": True}})
    async with (
        harness.worker(),
        _served(harness, model, AguiLimits(streams_per_caller=3)) as endpoint,
        httpx.AsyncClient(timeout=60) as web,
        contextlib.AsyncExitStack() as stack,
    ):
        try:
            streams = [await _open(stack, web, endpoint, _input(thread, "tell me"))]
            harness.handles.append(harness.client.get_workflow_handle(f"{THREAD_PREFIX}{thread}"))
            await hold.arrived()  # the run is open until the model answers
            for _ in range(2):
                streams.append(await _open(stack, web, endpoint, reconnect))
            refused = await _post(endpoint, "ann", reconnect)
            assert refused.status_code == 429, refused.text
            assert "AguiLimits.streams_per_caller" in refused.json()["error"]
            bob = await _post(endpoint, "bob", reconnect)
            assert bob.status_code == 404  # counted for himself: ann's thread is not his

            await streams.pop().response.aclose()  # the client leaves: its place is free

            async def reopened() -> _Stream | None:
                try:
                    return await _open(stack, web, endpoint, reconnect)
                except AssertionError:  # still 429
                    return None

            streams.append(await eventually(reopened, "a place freed by a client that left"))
        finally:
            hold.release.set()
        for stream in streams:
            ended = await stream.until("RUN_FINISHED")
            assert ended[-1]["result"]["output"] == "At last."
        again = await _post(endpoint, "ann", reconnect)
        assert again.status_code == 200 and _events(again.text)[-1]["type"] == "RUN_FINISHED"


async def test_a_request_not_sent_in_time_is_408_and_closed(harness: Harness) -> None:
    """Connections that send nothing, their headers a byte at a time, or their body a byte at
    a time are answered 408 and closed once ``request_timeout`` (0.5 s here) has passed: a
    byte received does not start it again (uvicorn's keep-alive timeout, the only one it
    has, does)."""
    model = harness.new_model([])
    async with _served(harness, model, SLOW) as endpoint:
        port = endpoint.port
        half = f"POST /agui HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-a: ".encode()
        partial = _head(port, 1000, _bearer(endpoint)) + b'{"threadId": "t'
        answers = await asyncio.gather(
            _raw(port, b""),
            _raw(port, half, trickle=b"a" * 1000),
            _raw(port, partial, trickle=b"a" * 1000),
        )
    for answer in answers:
        assert _status(answer) == 408 and b"AguiLimits.request_timeout" in answer, answer


async def test_slow_bodies_without_a_token_are_401_and_closed_at_once(harness: Harness) -> None:
    """300 connections with no token sending their bodies slowly were held for as long as
    they sent: each is answered 401 and closed without waiting for its body (this endpoint's
    timeout, 60 s, is longer than the test waits for a connection to close)."""
    model = harness.new_model([])
    async with _served(harness, model, AguiLimits(request_timeout=60)) as endpoint:
        port = endpoint.port
        slow = _head(port, 100_000) + b'{"threadId": "'
        answers = await asyncio.gather(*(_raw(port, slow, trickle=b"a" * 500) for _ in range(300)))
    assert {_status(answer) for answer in answers} == {401}


async def test_one_tokens_slow_bodies_are_429_or_408_and_closed(harness: Harness) -> None:
    """300 slow bodies of one token: ``streams_per_caller`` of them wait, each until its
    timeout (408); every other is refused at once (429); all are closed.

    The first ``streams_per_caller`` are seen held before the rest are sent, with a timeout the
    rest are answered well within on a loaded machine (with 0.5 s, every one had waited its
    timeout, 408, once in a full run)."""
    limits = AguiLimits(request_timeout=3.0)
    model = harness.new_model([])
    async with _served(harness, model, limits) as endpoint:
        port = endpoint.port
        slow = _head(port, 100_000, _bearer(endpoint)) + b'{"threadId": "'
        most = limits.streams_per_caller
        held = [asyncio.create_task(_raw(port, slow, trickle=b"a" * 500)) for _ in range(most)]
        await eventually(lambda: endpoint.streams.count("ann") == most, "all held")
        refused = await asyncio.gather(
            *(_raw(port, slow, trickle=b"a" * 500) for _ in range(300 - most))
        )
        waited = await asyncio.gather(*held)
    assert [_status(answer) for answer in refused] == [429] * (300 - most)
    assert [_status(answer) for answer in waited] == [408] * most


async def test_a_body_over_the_bound_is_413_before_it_is_read(harness: Harness) -> None:
    """A 50 MB body was read whole and taken: declared, it is refused before a byte of it is
    read; sent in chunks with no length, once one chunk passes ``body_bytes``. Headers past
    ``header_bytes`` are refused too. Each connection is closed."""
    model = harness.new_model([])
    limits = AguiLimits()
    async with _served(harness, model, limits) as endpoint:
        port = endpoint.port
        declared = await _raw(port, _head(port, 50_000_000, _bearer(endpoint)))
        assert _status(declared) == 413 and b"AguiLimits.body_bytes" in declared, declared
        size = limits.body_bytes + 1
        head = "\r\n".join(
            [
                "POST /agui HTTP/1.1",
                f"host: 127.0.0.1:{port}",
                "transfer-encoding: chunked",
                _bearer(endpoint),
            ]
        )
        chunked = f"{head}\r\n\r\n{size:x}\r\n".encode() + b"[" * size  # and no end
        assert _status(await _raw(port, chunked)) == 413
        big = "x-big: " + "a" * limits.header_bytes
        arriving = f"POST /agui HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{big}\r\n".encode()
        assert _status(await _raw(port, arriving)) == 400  # h11: an incomplete head too long
        whole = _head(port, 2, _bearer(endpoint), big)  # read whole (431) or in pieces (400)
        assert _status(await _raw(port, whole)) in (400, 431)
