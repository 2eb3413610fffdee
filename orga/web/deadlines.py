"""A deadline on the time a client takes to send a request, for orga's HTTP servers.

uvicorn (0.54, h11) has no such timeout (Kludex/uvicorn#157): its ``timeout_keep_alive``
closes only a connection idle between requests, and each byte received restarts it, so a
request sent a byte at a time holds its connection for ever — 300 of them held the AG-UI
endpoint's for 16 s and more. ``bounded_requests`` gives ``uvicorn.Config`` (through its
documented ``http`` hook) an h11 protocol that answers 408 and closes a request not sent whole
within its deadline, and h11's own bound on the size of a request's headers.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar, TypedDict

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["UvicornLimits", "bounded_requests"]


class UvicornLimits(TypedDict):
    """``uvicorn.Config`` options that hold the server to ``AguiLimits``."""

    http: type[H11Protocol]
    h11_max_incomplete_event_size: int


def bounded_requests(
    request_timeout: float, header_bytes: int, setting: str = "request_timeout"
) -> UvicornLimits:
    """The ``uvicorn.Config`` options that answer 408 and close a request not sent whole
    within ``request_timeout`` seconds (the answer names ``setting``), and refuse headers over
    ``header_bytes``."""

    class Bounded(_RequestDeadline):
        pass

    Bounded.request_timeout = request_timeout
    Bounded.setting = setting
    return {"http": Bounded, "h11_max_incomplete_event_size": header_bytes}


class _RequestDeadline(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each request: sent whole — its headers
    and body — within ``request_timeout`` of its first byte (of the connection's start, for
    its first request), or answered 408 (unless its answer has begun) and closed.

    uvicorn's own ``timeout_keep_alive`` only closes a connection idle between requests, and
    each byte received starts it again: a request sent a byte at a time is held for ever.
    """

    request_timeout: ClassVar[float] = 10.0
    setting: ClassVar[str] = "request_timeout"
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._receiving():
            self._stop()
        elif self._deadline is None:  # a request begins on a kept-alive connection
            self._deadline = self.loop.call_later(self.request_timeout, self._too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._stop()  # the connection is the WebSocket protocol's now
        super().handle_websocket_upgrade(event)

    def _receiving(self) -> bool:
        """Whether a request has begun and is not whole yet."""
        state = self.conn.their_state
        return state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))

    def _stop(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # nothing answered yet
            self.transport.write(_timed_out(self.request_timeout, self.setting))
        self.transport.close()  # the app, if it waits for the body, is told the client left


def _timed_out(seconds: float, setting: str) -> bytes:
    """A 408 answer, written as it is: h11 sends no answer before it has read a request's
    headers."""
    error = f"the request was not sent within {seconds:g} s ({setting})"
    said = json.dumps({"error": error}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(said)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + said
