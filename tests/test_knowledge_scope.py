"""Conventions stay in their directory: a loop working under ``src/api`` is shown and recalls
its own, its parents' and its languages' conventions, never ``src/web``'s — not in the first
injection, not after a recall brought words the two share, in either direction."""

from __future__ import annotations

import uuid

import pytest

from orga.contracts.knowledge import KNOWLEDGE_MARKER, KnowledgeWrite
from orga.knowledge import open_knowledge
from orga.scripted.server import RecordedRequest, Turn
from tests.harness import TEST_STORE, Harness

API = "api handlers report errors as problem+json responses"
WEB = "web components report errors in a toast banner"
ROOT = "every service logs errors with structlog"


def conventions() -> str:
    namespace = f"agent-{uuid.uuid4().hex[:8]}"
    knowledge = open_knowledge(TEST_STORE)
    for content, directory in ((API, "src/api"), (WEB, "src/web"), (ROOT, "")):
        knowledge.add(
            KnowledgeWrite(
                namespace=namespace, kind="convention", content=content, directory=directory
            )
        )
    return namespace


def seen(request: RecordedRequest) -> str:
    """What one model call was shown of the agent's knowledge: the injection and the results
    of its recalls."""
    injected = [
        str(m.get("content"))
        for m in request.body["messages"]
        if str(m.get("content") or "").startswith(KNOWLEDGE_MARKER)
    ]
    return "\n".join(injected + request.tool_result_texts())


@pytest.mark.parametrize(("home", "own", "other"), [("src/api", API, WEB), ("src/web", WEB, API)])
async def test_two_directories_conventions_never_mix_across_five_turns_with_recalls(
    harness: Harness, home: str, own: str, other: str
) -> None:
    agent = conventions()
    recalls = [
        Turn(tool_calls=[("recall_knowledge", {"query": "how are errors reported"})]),
        Turn(tool_calls=[("recall_knowledge", {"query": "errors", "scope": "conventions"})]),
        Turn(tool_calls=[("recall_knowledge", {"query": "report errors banner problem"})]),
        Turn(
            tool_calls=[
                (
                    "recall_knowledge",
                    {"query": "errors", "scope": "conventions", "directory": f"{home}/deep"},
                )
            ]
        ),
    ]
    model = harness.new_model([*recalls, Turn(text="done")])
    async with harness.worker():
        handle = await harness.start(
            "How should errors be reported here?",
            model=model,
            agent_id=agent,
            knowledge={"directory": home},
        )
        await handle.result()
    requests = harness.model.requests_for(model)
    assert len(requests) == 5
    for request in requests:
        assert other not in seen(request)
    assert own in seen(requests[0]) and ROOT in seen(requests[0])  # the first injection
    assert all(own in seen(r) for r in requests[1:])


async def test_a_recall_cannot_walk_another_directory(harness: Harness) -> None:
    agent = conventions()
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    (
                        "recall_knowledge",
                        {"query": "errors", "scope": "conventions", "directory": "src/web"},
                    )
                ]
            ),
            Turn(text="done"),
        ]
    )
    async with harness.worker():
        handle = await harness.start(
            "errors?", model=model, agent_id=agent, knowledge={"directory": "src/api"}
        )
        await handle.result()
    [result] = harness.model.requests_for(model)[1].tool_result_texts()
    assert "outside the directory this loop works in ('src/api'" in result
    assert WEB not in result


def test_a_loop_s_directory_stays_in_the_tree() -> None:
    from orga.contracts.knowledge import KnowledgeConfig

    assert KnowledgeConfig(directory="./src//api/").directory == "src/api"
    for escaping in ("/etc", "src/../../etc"):
        with pytest.raises(ValueError, match="must be relative to the tree's root"):
            KnowledgeConfig(directory=escaping)
