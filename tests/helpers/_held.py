"""A point a loop stops at until the test lets it go, and an OPA that holds its answers there.

The every-instant tests park a loop at a phase (a model call, a tool, a policy check) and act
while it waits there: ``Hold`` is that point; ``held_opa`` an OPA on 127.0.0.1 whose answers to
the questions ``holds`` picks wait at one, so a policy check can be caught running.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.local_http import Reply, serve

__all__ = ["Hold", "held_opa"]

Facts = dict[str, Any]
"""What orga asks OPA about an action (the request's ``input``)."""


@dataclass
class Hold:
    """A point the loop stops at until the test lets it go (then nothing stops there)."""

    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def wait_here(self) -> None:
        """Say it is here, then wait (a thread of the test's servers or tools) for the release."""
        self.reached.set()
        self.release.wait(30)

    async def arrived(self) -> None:
        """Until something waits here."""
        await asyncio.to_thread(self.reached.wait, 30)
        assert self.reached.is_set(), "the loop never reached the held point"


def _allow(facts: Facts) -> dict[str, Any]:
    return {"allow": True}


@contextmanager
def held_opa(
    decide: Callable[[Facts], dict[str, Any]] = _allow,
    *,
    holds: Callable[[Facts], bool] = lambda facts: True,
) -> Iterator[tuple[str, Hold]]:
    """An OPA answering ``decide(facts)`` (allow, by default), whose answers to the questions
    ``holds`` picks wait at a ``Hold`` until it is released: its gate URL (``opa_url``) and the
    hold, released when the block ends."""
    hold = Hold()

    def answer(method: str, target: str, raw: bytes) -> Reply:
        if method == "GET":  # the policies it lists
            return 200, "application/json", b'{"result": []}'
        facts: Facts = json.loads(raw)["input"]
        if holds(facts):
            hold.wait_here()
        return 200, "application/json", json.dumps({"result": decide(facts)}).encode()

    with serve(answer) as url:
        try:
            yield f"{url}/v1/data/orga/gate", hold
        finally:
            hold.release.set()
