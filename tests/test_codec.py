"""``orga codec``: the Web UI's codec endpoint shows payloads kept in the store, over real HTTP."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
from google.protobuf.json_format import MessageToDict, ParseDict
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orga.runtime.converter import DRIVER_NAME
from orga.scripted.server import Turn
from tests.harness import TEST_STORE, Harness
from tests.helpers import on, serving

UI = "http://localhost:8233"
BIG_ANSWER = "the whole report, line after line.\n" * 5_500  # ~190 KB: kept in the store


def codec(env: dict[str, str]) -> AbstractAsyncContextManager[str]:
    """``orga codec`` on a free port; yields its address."""
    args = ("codec", "--port", "0", "--ui-origin", UI)
    return serving(*args, env=env, announce="orga codec on")


def references(events: Any) -> list[Payload]:
    """Every payload in the history that stands for one kept in the store."""
    found: list[Payload] = []

    def walk(message: Any) -> None:
        if isinstance(message, Payload):
            if message.metadata.get("messageType", b"").endswith(b"ExternalStorageReference"):
                found.append(message)
            return
        for _, value in message.ListFields():
            if hasattr(value, "ListFields"):
                walk(value)
            elif isinstance(value, str | bytes | int | float):
                continue
            else:  # a repeated field or a map
                for item in value.values() if hasattr(value, "values") else value:
                    if hasattr(item, "ListFields"):
                        walk(item)

    for event in events:
        walk(event)
    return found


async def test_the_web_ui_sees_stored_payloads_through_orga_codec(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(text=BIG_ANSWER)])
    async with harness.worker():
        handle = await harness.start("Write the report.", model=model)
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.output == BIG_ANSWER
    stored = references(history.events)
    assert stored, "the answer should have been kept out of history"
    assert all(DRIVER_NAME.encode() in p.data for p in stored)
    small = pydantic_data_converter.payload_converter.to_payloads(["a small value"])[0]
    body = MessageToDict(Payloads(payloads=[*stored, small]))

    async with (
        codec({**on(env, harness), "ORGA_STORE_URL": TEST_STORE.url}) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        # The browser asks first (CORS preflight), from the UI's origin only.
        preflight = await http.options(
            "/decode",
            headers={
                "origin": UI,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type,x-namespace",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == UI
        elsewhere = await http.options(
            "/decode",
            headers={"origin": "http://evil.example", "access-control-request-method": "POST"},
        )
        assert "access-control-allow-origin" not in elsewhere.headers

        reply = await http.post(
            "/decode", json=body, headers={"origin": UI, "x-namespace": "default"}
        )
        assert reply.status_code == 200, reply.text
        assert reply.headers["access-control-allow-origin"] == UI
        decoded = ParseDict(reply.json(), Payloads()).payloads
        assert len(decoded) == len(stored) + 1
        values = pydantic_data_converter.payload_converter.from_payloads(list(decoded[:-1]))
        # The model's answer and the loop's result: the full text, as the worker saw it.
        assert sum(json.dumps(BIG_ANSWER) in json.dumps(v) for v in values) >= 2
        assert decoded[-1] == small  # passed through untouched

        # The namespaced form, and /encode (orga adds no encoding: as sent).
        namespaced = await http.post("/default/decode", json=body)
        assert ParseDict(namespaced.json(), Payloads()).payloads == decoded
        encoded = await http.post("/encode", json=MessageToDict(Payloads(payloads=[small])))
        assert ParseDict(encoded.json(), Payloads()).payloads == [small]

        # A reference the store does not hold stays a reference; the page still shows.
        lost = Payload()
        lost.CopyFrom(stored[0])
        lost.data = lost.data.replace(b"sha256:", b"sha256:0000", 1)
        partial = await http.post("/decode", json=MessageToDict(Payloads(payloads=[lost])))
        assert partial.status_code == 200
        assert ParseDict(partial.json(), Payloads()).payloads == [lost]

        malformed = await http.post("/decode", content=b"not json")
        assert malformed.status_code == 400
        assert "payloads" in malformed.json()["error"]
