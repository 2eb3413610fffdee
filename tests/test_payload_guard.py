"""Oversized payloads are cut before they enter history: never a PayloadsTooLarge loop."""

from __future__ import annotations

import pytest

from orga.contracts.journal import Journal, ObservationsCollected, ReasoningComplete
from orga.core.text import cut_bytes
from orga.scripted.server import Turn
from orga.worker.blobs import BlobStore
from tests.harness import TEST_STORE, Harness
from tests.helpers import conversation
from tests.sample_tools import dump


def test_cut_bytes_keeps_characters_whole() -> None:
    text = "é" * 10  # two bytes each
    cut = cut_bytes(text, 9, "!")
    assert cut == "éééé!" and len(cut.encode()) <= 9
    assert cut_bytes("short", 100, "!") == "short"


def test_blob_store_round_trip() -> None:
    store = BlobStore(TEST_STORE)
    text = "x" * 5000
    cut, reference = store.guard(text, 1000, "result")
    assert reference is not None and reference.startswith("blob:sha256:")
    assert len(cut.encode()) <= 1000 and reference in cut
    assert store.get(reference) == text
    assert store.guard("small", 1000, "result") == ("small", None)
    for bad in ("blob:sha256:zz", "payload:sha256:" + "a" * 64, "x"):
        with pytest.raises(ValueError, match="not a blob reference"):
            store.get(bad)
    with pytest.raises(LookupError, match="is not in the store"):
        store.get("blob:sha256:" + "0" * 64)


async def test_a_huge_tool_result_and_answer_are_cut(harness: Harness) -> None:
    answer = "A" * (300 * 1024)
    model = harness.new_model([Turn(tool_calls=[("dump", {"kib": 1024})]), Turn(text=answer)])
    async with harness.worker(tools=[dump]):
        handle = await harness.start("dump it", model=model, tools=["dump"])
        result = await handle.result()
        messages = await conversation(handle)
        journal = await handle.query("journal", result_type=Journal)
    [cut] = messages[2].tool_results
    assert cut.status == "ok" and cut.blob_ref is not None
    assert len(cut.content.encode()) <= 256 * 1024
    assert "tool result cut to 262144 of" in cut.content
    full = BlobStore(TEST_STORE).get(cut.blob_ref)
    assert len(full.encode()) > 1024 * 1024 and full.startswith(cut.content[:1000])
    [observed] = [e for e in journal.entries if isinstance(e, ObservationsCollected)]
    assert observed.outcomes[0].blob_ref == cut.blob_ref
    assert len(result.output.encode()) <= 256 * 1024 and "answer cut to" in result.output
    last = [e for e in journal.entries if isinstance(e, ReasoningComplete)][-1]
    assert last.blob_ref is not None
    assert BlobStore(TEST_STORE).get(last.blob_ref) == answer
