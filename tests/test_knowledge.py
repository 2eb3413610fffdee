"""The knowledge bridge: the store on SQLite and on a real PostgreSQL, and loops that use it."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orga.contracts.journal import Journal, KnowledgeInjected, KnowledgeRecalled, KnowledgeStored
from orga.contracts.knowledge import KNOWLEDGE_MARKER, KnowledgeQuery, KnowledgeWrite
from orga.contracts.state import LoopState
from orga.knowledge import Knowledge, open_knowledge
from orga.runtime.store import Store
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import Tool, tool
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import orga


@pytest.fixture(params=["sqlite", "postgresql"])
def knowledge(request: pytest.FixtureRequest) -> Iterator[Knowledge]:
    """The same behaviour asked of both stores (a fresh SQLite file; the session's PostgreSQL)."""
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='orga-knowledge-')) / 'store.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    with Store(url) as store:
        yield open_knowledge(store)


def space() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


def fact(namespace: str, content: str, **extra: Any) -> KnowledgeWrite:
    return KnowledgeWrite(namespace=namespace, kind="fact", content=content, **extra)


def convention(namespace: str, content: str, **extra: Any) -> KnowledgeWrite:
    return KnowledgeWrite(namespace=namespace, kind="convention", content=content, **extra)


# ---- the store ---------------------------------------------------------------------------


def test_search_ranks_dedups_and_keeps_agents_apart(knowledge: Knowledge) -> None:
    ann, bob = space(), space()
    first = knowledge.add(fact(ann, "the invoice service runs on port 8443"))
    again = knowledge.add(fact(ann, "The invoice service  runs on PORT 8443"))
    assert first.created and not again.created and again.id == first.id  # once per content
    knowledge.add(fact(ann, "the deploy target is the kubernetes cluster blue"))
    knowledge.add(fact(ann, "invoices are archived after ninety days"))
    knowledge.add(fact(bob, "the invoice service runs on port 9000"))
    hits = knowledge.search(KnowledgeQuery(namespace=ann, text="which port does invoice run on"))
    contents = [i.content for i in hits.items]
    assert contents[0] == "the invoice service runs on port 8443"  # more terms matched
    assert "the invoice service runs on port 9000" not in contents  # bob's is bob's
    assert all(i.relevance > 0 for i in hits.items)
    assert hits.items[0].relevance > hits.items[-1].relevance
    # Stemming: "deployment" finds "deploy"; a threshold drops the weak matches.
    assert [
        i.content
        for i in knowledge.search(KnowledgeQuery(namespace=ann, text="deployment clusters")).items
    ] == ["the deploy target is the kubernetes cluster blue"]
    strict = knowledge.search(
        KnowledgeQuery(namespace=ann, text="invoice port 8443", threshold=0.6)
    )
    assert [i.content for i in strict.items] == ["the invoice service runs on port 8443"]
    assert knowledge.search(KnowledgeQuery(namespace=ann, text="the of and")).items == []
    assert knowledge.count(ann) == 3 and knowledge.count(bob) == 1
    assert [i.id for i in knowledge.items(ann, limit=2)] == sorted(
        (i.id for i in knowledge.items(ann)), reverse=True
    )[:2]
    assert knowledge.forget(ann, [first.id]) == 1
    assert knowledge.search(KnowledgeQuery(namespace=ann, text="invoice port")).items[
        0
    ].content == ("invoices are archived after ninety days")
    assert knowledge.forget(ann) == 2 and knowledge.count(ann) == 0 and knowledge.count(bob) == 1


def test_conventions_walk_up_fall_back_to_the_language_dedup_and_cut(
    knowledge: Knowledge,
) -> None:
    ns = space()
    knowledge.add(convention(ns, "Handlers return typed errors", directory="src/api/handlers"))
    knowledge.add(convention(ns, "Every route has a test", directory="src/api"))
    knowledge.add(convention(ns, "Use snake_case names", directory="src", language="python"))
    knowledge.add(convention(ns, "Keep functions short", directory=""))
    knowledge.add(convention(ns, "use SNAKE_CASE names", directory=""))  # said again at the root
    knowledge.add(convention(ns, "Type hints on every function", language="python"))
    knowledge.add(convention(ns, "Prefer interfaces", language="go"))
    knowledge.add(convention(ns, "Unrelated: docs use British spelling", directory="docs"))

    def walk(directory: str, limit: int = 10, **extra: Any) -> list[str]:
        query = KnowledgeQuery(
            namespace=ns, scope="conventions", directory=directory, limit=limit, **extra
        )
        return [i.content for i in knowledge.search(query).items]

    assert walk("src/api/handlers") == [
        "Handlers return typed errors",
        "Every route has a test",
        "Use snake_case names",
        "Keep functions short",  # the root's second line said snake_case again: dropped
        "Type hints on every function",  # python: the language found on the way
    ]
    assert walk("src/api/handlers", limit=3) == walk("src/api/handlers")[:3]
    assert walk("docs") == [
        "Unrelated: docs use British spelling",
        "Keep functions short",
        "use SNAKE_CASE names",
    ]
    assert walk("docs", language="go")[-1] == "Prefer interfaces"  # asked for: its language
    assert walk("") == ["Keep functions short", "use SNAKE_CASE names"]
    # Within a level, what the query names comes first.
    knowledge.add(convention(ns, "Log with structlog", directory="src/api"))
    assert walk("src/api", text="logging structlog")[:2] == [
        "Log with structlog",
        "Every route has a test",
    ]


# ---- loops -------------------------------------------------------------------------------


def lookup_tool() -> Tool:
    @tool
    def lookup(topic: str) -> str:
        """Look up notes about a topic.

        Args:
            topic: what to look up.
        """
        return f"notes about {topic}"

    return lookup


def injected(request: RecordedRequest) -> list[str]:
    """The ``[KNOWLEDGE_CONTEXT]`` messages a model call saw."""
    return [
        str(m.get("content"))
        for m in request.body["messages"]
        if str(m.get("content") or "").startswith(KNOWLEDGE_MARKER)
    ]


async def test_the_injection_replaces_the_last_one_and_survives_context_fitting(
    harness: Harness,
) -> None:
    agent = space()
    knowledge = open_knowledge(TEST_STORE)
    invoice = knowledge.add(fact(agent, "the invoice service runs on port 8443")).id
    deploy = knowledge.add(fact(agent, "the deploy target is the kubernetes cluster blue")).id
    model = harness.new_model(
        [
            Turn(tool_calls=[("lookup", {"topic": "deploy target kubernetes"})]),
            Turn(text="port 8443, deployed to blue"),
        ]
    )
    filler = "An old, long and unrelated exchange about the weather. " * 80
    async with harness.worker(tools=[lookup_tool()]):
        handle = await harness.start(
            [
                {"role": "user", "content": filler},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "Which port does the invoice service use?"},
            ],  # type: ignore[arg-type]
            model=model,
            tools=["lookup"],
            agent_id=agent,
            knowledge={},
            context_token_budget=300,
            context_strategy="sliding_window",
        )
        result = await handle.result()
        state = await handle.query("state", result_type=LoopState)
        journal = await handle.query("journal", result_type=Journal)
        conversation = await handle.query("conversation", result_type=list[dict[str, Any]])
    assert result.output == "port 8443, deployed to blue"
    first, second = harness.model.requests_for(model)
    # One injection per call, never two: the second replaced the first.
    [seen_first], [seen_second] = injected(first), injected(second)
    assert "port 8443" in seen_first and "kubernetes" not in seen_first
    assert "kubernetes cluster blue" in seen_second and "port 8443" not in seen_second
    # The old exchange was left out to fit 300 tokens; the injection was not.
    assert any("were left out to fit" in str(m.get("content")) for m in first.body["messages"])
    # Where the injection goes: last, as a user message (material), never with system authority.
    for request in (first, second):
        last = request.body["messages"][-1]
        assert last["role"] == "user" and str(last["content"]).startswith(KNOWLEDGE_MARKER)
        assert not any(
            m["role"] == "system" and KNOWLEDGE_MARKER in str(m.get("content"))
            for m in request.body["messages"]
        )
    # The durable conversation never holds it; the state shows the current one.
    assert not any(str(m["content"]).startswith(KNOWLEDGE_MARKER) for m in conversation)
    assert state.knowledge_context == seen_second
    entries = [e for e in journal.entries if isinstance(e, KnowledgeInjected)]
    assert [e.items for e in entries] == [[invoice], [deploy]]
    assert "invoice" in entries[0].query and "kubernetes" in entries[1].query
    assert all(e.tokens > 0 for e in entries)


async def test_a_fact_one_loop_stores_is_recalled_by_a_later_loop_of_the_same_agent_only(
    harness: Harness,
) -> None:
    agent, other = space(), space()
    teach = harness.new_model(
        [
            Turn(
                tool_calls=[
                    (
                        "store_knowledge",
                        {"subject": "ann", "predicate": "prefers", "object": "green tea"},
                    )
                ]
            ),
            Turn(text="noted"),
        ]
    )
    ask = harness.new_model(
        [Turn(tool_calls=[("recall_knowledge", {"query": "ann drink"})]), Turn(text="green tea")]
    )
    stranger = harness.new_model(
        [Turn(tool_calls=[("recall_knowledge", {"query": "ann drink"})]), Turn(text="no idea")]
    )
    async with harness.worker():
        first = await harness.start(
            "Remember: Ann prefers green tea.", model=teach, agent_id=agent, knowledge={}
        )
        await first.result()
        later = await harness.start(
            "What does Ann like to drink?", model=ask, agent_id=agent, knowledge={}
        )
        await later.result()
        elsewhere = await harness.start(
            "What does Ann like to drink?", model=stranger, agent_id=other, knowledge={}
        )
        await elsewhere.result()
        journals = [
            await h.query("journal", result_type=Journal) for h in (first, later, elsewhere)
        ]
    # The later loop of the same agent is shown the fact before its first step, and finds it.
    [request, after_recall] = harness.model.requests_for(ask)
    assert "ann prefers green tea" in injected(request)[0]
    assert "ann prefers green tea" in after_recall.tool_result_texts()[0]
    # The other agent is shown nothing and finds nothing.
    [request, after_recall] = harness.model.requests_for(stranger)
    assert injected(request) == []
    assert after_recall.tool_result_texts() == ["nothing found"]
    stored = [e for e in journals[0].entries if isinstance(e, KnowledgeStored)]
    assert len(stored) == 1 and stored[0].created and stored[0].item_kind == "fact"
    [recalled] = [e for e in journals[1].entries if isinstance(e, KnowledgeRecalled)]
    assert (recalled.query, recalled.found) == ("ann drink", 1)
    [recalled] = [e for e in journals[2].entries if isinstance(e, KnowledgeRecalled)]
    assert recalled.found == 0


async def test_auto_persist_remembers_the_answer_for_later_loops(harness: Harness) -> None:
    agent = space()
    first = harness.new_model([Turn(text="The staging database is pg-stage-3.")])
    second = harness.new_model([Turn(text="pg-stage-3")])
    async with harness.worker():
        handle = await harness.start(
            "Find the staging database host.",
            model=first,
            agent_id=agent,
            knowledge={"auto_persist": True, "tools": False},
        )
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        later = await harness.start(
            "Which host is the staging database?", model=second, agent_id=agent, knowledge={}
        )
        await later.result()
    [stored] = [e for e in journal.entries if isinstance(e, KnowledgeStored)]
    assert stored.item_kind == "memory" and stored.created and stored.call_id is None
    [request] = harness.model.requests_for(second)
    [seen] = injected(request)
    assert "The staging database is pg-stage-3." in seen and "[memory]" in seen
    # tools: false — the first loop's model was offered no knowledge tools.
    [offered] = harness.model.requests_for(first)
    assert "tools" not in offered.body or all(
        t["function"]["name"] not in ("recall_knowledge", "store_knowledge")
        for t in offered.body["tools"]
    )


async def test_without_knowledge_a_loop_neither_searches_nor_offers_the_tools(
    harness: Harness,
) -> None:
    model = harness.new_model([Turn(text="hello")])
    async with harness.worker():
        handle = await harness.start("hello", model=model)
        await handle.result()
        history = await handle.fetch_history()
        journal = await handle.query("journal", result_type=Journal)
    kinds = {e.kind for e in journal.entries}
    assert not kinds & {"KnowledgeInjected", "KnowledgeRecalled", "KnowledgeStored"}
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert activities == ["call_model"]
    [request] = harness.model.requests_for(model)
    assert injected(request) == [] and "tools" not in request.body


async def test_a_loop_on_a_postgresql_store_uses_its_knowledge(
    harness: Harness, postgres_url: str
) -> None:
    agent = space()
    with Store(postgres_url) as store:
        open_knowledge(store).add(fact(agent, "the on-call rota lives in the ops wiki"))
    model = harness.new_model(
        [Turn(tool_calls=[("recall_knowledge", {"query": "rota"})]), Turn(text="the ops wiki")]
    )
    async with harness.worker(settings=scripted_settings(harness.model, store_url=postgres_url)):
        handle = await harness.start(
            "Where is the on-call rota?", model=model, agent_id=agent, knowledge={}
        )
        await handle.result()
    first, second = harness.model.requests_for(model)
    assert "ops wiki" in injected(first)[0]
    assert "ops wiki" in second.tool_result_texts()[0]


async def test_recall_knowledge_refuses_a_directory_outside_the_tree(harness: Harness) -> None:
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    (
                        "recall_knowledge",
                        {"query": "x", "scope": "conventions", "directory": "../etc"},
                    )
                ]
            ),
            Turn(text="ok"),
        ]
    )
    async with harness.worker():
        handle = await harness.start("go", model=model, agent_id=space(), knowledge={})
        await handle.result()
    [_, second] = harness.model.requests_for(model)
    [text] = second.tool_result_texts()
    assert "climbs out of the tree" in text
    assert json.dumps(text)  # an is_error result the model can read


# ---- for people ----------------------------------------------------------------------------


def source_tree(root: Path) -> Path:
    """A small repository with conventions at three levels and an .editorconfig."""
    (root / "src" / "api" / "handlers").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "node_modules" / "x").mkdir(parents=True)
    (root / "AGENTS.md").write_text(
        "# Project\n\nWe ship small pull requests,\none change each.\n\n## Style\n"
        "- Use snake_case names\n- Keep functions short\n\n```sh\nmake test\n```\n"
    )
    (root / ".editorconfig").write_text(
        "root = true\n[*]\nindent_style = space  # everywhere\n[*.py]\nindent_size = 4\n"
    )
    (root / "src" / "api" / "handlers" / "CONVENTIONS.md").write_text(
        "1. Handlers return typed errors\n"
    )
    (root / "node_modules" / "x" / "AGENTS.md").write_text("- not ours\n")
    for name in ("src/a.py", "src/b.py", "src/api/c.py", "src/api/handlers/d.py", "docs/x.md"):
        (root / name).write_text("")
    return root


def test_convention_files_are_found_per_directory_with_their_language(tmp_path: Path) -> None:
    from orga.knowledge.conventions import find_conventions

    tree = find_conventions(source_tree(tmp_path))
    found = {(c.directory, c.language, c.content) for c in tree.conventions}
    assert found == {
        ("", "python", "Project: We ship small pull requests, one change each."),
        ("", "python", "Style: Use snake_case names"),
        ("", "python", "Style: Keep functions short"),
        ("", "python", "Files *: indent_style = space"),
        (None, "python", "Files *.py: indent_size = 4"),  # the root's, for one file type
        ("src/api/handlers", "python", "Handlers return typed errors"),
    }
    assert [s.path for s in tree.skipped] == ["node_modules"]  # said, not silently passed


async def test_orga_knowledge_imports_searches_lists_and_forgets(tmp_path: Path) -> None:

    env = {"ORGA_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}"}
    tree = source_tree(tmp_path / "repo")
    code, out, err = await orga("knowledge", "import", str(tree), "-a", "coder", "--json", env=env)
    assert code == 0, err
    skipped = [
        {
            "path": "node_modules",
            "reason": "dependencies, build output or version control; never read",
        }
    ]
    assert json.loads(out) == {"created": 6, "known": 0, "skipped": skipped}
    code, out, err = await orga("knowledge", "import", str(tree), "-a", "coder", "--json", env=env)
    assert json.loads(out) == {"created": 0, "known": 6, "skipped": skipped}  # once per scope
    code, out, err = await orga(
        "knowledge",
        "search",
        "errors",
        "-a",
        "coder",
        "--scope",
        "conventions",
        "--directory",
        "src/api/handlers",
        "--json",
        env=env,
    )
    assert code == 0, err
    contents = [i["content"] for i in json.loads(out)["items"]]
    assert contents[0] == "Handlers return typed errors"
    assert contents[-1] == "Files *.py: indent_size = 4"  # the language's, last
    code, out, err = await orga("knowledge", "add", "ann prefers tea", "-a", "support", env=env)
    assert code == 0 and "stored: #" in out
    code, out, err = await orga(
        "knowledge", "search", "what does ann drink, tea?", "-a", "support", "--json", env=env
    )
    [hit] = json.loads(out)["items"]
    assert hit["content"] == "ann prefers tea" and hit["relevance"] > 0
    code, out, err = await orga("knowledge", "search", "tea", "-a", "coder", "--json", env=env)
    assert json.loads(out)["items"] == []  # the coder never learned it
    code, out, err = await orga("knowledge", "list", "-a", "coder", "--json", env=env)
    listed = json.loads(out)
    assert len(listed) == 6
    # One id it holds and one it does not: both are accounted for.
    kept, absent = listed[0]["id"], max(i["id"] for i in listed) + 1000
    code, out, err = await orga(
        "knowledge", "forget", "-a", "coder", str(kept), str(absent), env=env
    )
    assert code == 0 and "forgot 1 item(s)" in out
    assert f"'coder' holds no item {absent}: nothing to forget there" in out
    code, out, err = await orga("knowledge", "forget", "-a", "coder", str(absent), env=env)
    assert code == 1 and "forgot 0 item(s)" in out
    code, out, err = await orga("knowledge", "forget", "-a", "coder", env=env)
    assert code == 2 and "--all" in err
    code, out, err = await orga("knowledge", "forget", "-a", "coder", "--all", env=env)
    assert code == 0 and "forgot 5 item(s)" in out
    code, out, err = await orga(
        "knowledge",
        "add",
        "x",
        "-a",
        "coder",
        "--kind",
        "convention",
        "--directory",
        "../up",
        env=env,
    )
    assert code == 2 and "climbs out of the tree" in err
