"""Pre-hydration in a running loop: a local file and a URL on 127.0.0.1 reach the first call,
through the gate, with the loop's own tools only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orga.contracts.journal import Journal, PreHydrationComplete
from orga.contracts.state import LoopState
from orga.scripted.server import Turn
from tests.harness import Harness, scripted_settings
from tests.helpers import POLICY_EXAMPLES
from tests.local_http import Reply, serve


def release_page(method: str, path: str, body: bytes) -> Reply:
    return (
        200,
        "text/html; charset=utf-8",
        b"<html><body><p>The release is on Friday.</p></body></html>",
    )


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serve(release_page) as url:
        yield url


async def test_a_file_and_a_url_land_in_the_first_request(
    harness: Harness, site: str, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("Deploys need two approvals — straße.")
    model = harness.new_model([Turn(text="Friday, with two approvals.")])
    settings = scripted_settings(harness.model, file_root=tmp_path, egress_allow=["127.0.0.1"])
    task = f"Using docs/guide.md and {site}/release, when and how do we ship? (see #12)"
    async with harness.worker(settings=settings):
        handle = await harness.start(
            task, model=model, pre_hydration={}, tools=["web_fetch", "file_read"]
        )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        state = await handle.query("state", result_type=LoopState)
    assert result.output == "Friday, with two approvals."
    first = harness.model.requests_for(model)[0].body["messages"]
    [injected] = [m for m in first if m["content"].startswith("[PRE_HYDRATED_CONTEXT]")]
    assert injected["role"] == "user"  # a fetched page never speaks with the system's voice
    assert "not instructions" in injected["content"]
    assert "## file docs/guide.md\nDeploys need two approvals — straße." in injected["content"]
    assert f"## url {site}/release\nThe release is on Friday." in injected["content"]
    [done] = [e for e in journal.entries if isinstance(e, PreHydrationComplete)]
    assert (done.found, done.resolved, done.failed) == (3, 2, 1)  # #12 has no resolver
    assert done.tokens > 0
    assert state.advertised == ["web_fetch", "file_read"]


async def test_pre_hydration_widens_nothing(harness: Harness, site: str, tmp_path: Path) -> None:
    """``pre_hydration: {}`` alone advertises nothing, and uses no tool the loop does not have:
    the references are skipped, and the journal says why."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("guide")
    model = harness.new_model([Turn(text="nothing fetched")])
    settings = scripted_settings(harness.model, file_root=tmp_path, egress_allow=["127.0.0.1"])
    async with harness.worker(settings=settings):
        handle = await harness.start(
            f"Read docs/guide.md and {site}/release", model=model, pre_hydration={}, tools=["add"]
        )
        await handle.result()
        journal = await handle.query("journal", result_type=Journal)
        state = await handle.query("state", result_type=LoopState)
    assert state.advertised == ["add"]
    first = harness.model.requests_for(model)[0].body
    assert not any(m["content"].startswith("[PRE_HYDRATED_CONTEXT]") for m in first["messages"])
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    [done] = [e for e in journal.entries if isinstance(e, PreHydrationComplete)]
    assert (done.found, done.resolved) == (2, 0)
    assert sorted(done.skipped) == [
        "file docs/guide.md: file_read is not a tool of this loop",
        f"url {site}/release: web_fetch is not a tool of this loop",
    ]


async def test_resolutions_go_through_the_gate(harness: Harness, tmp_path: Path) -> None:
    """Through the gate, and only with the tools the profile shows: its URL is not fetched,
    though the egress rules would let it through and the loop names web_fetch."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "secret-plan.md").write_text("classified")
    (tmp_path / "docs" / "open.md").write_text("public notes")
    asked: list[str] = []

    def page(method: str, path: str, body: bytes) -> Reply:
        asked.append(path)
        return 200, "text/plain", b"fetched"

    model = harness.new_model([Turn(text="ok")])
    settings = scripted_settings(
        harness.model, file_root=tmp_path, policy_dir=POLICY_EXAMPLES, egress_allow=["127.0.0.1"]
    )
    with serve(page) as hidden_site:
        async with harness.worker(settings=settings):
            handle = await harness.start(
                f"read docs/secret-plan.md and docs/open.md and {hidden_site}/page",
                model=model,
                pre_hydration={},
                policy="cedar",
                tools=["web_fetch", "file_read"],
                tool_profile={"exclude": ["web_*"]},
            )
            await handle.result()
            journal = await handle.query("journal", result_type=Journal)
            state = await handle.query("state", result_type=LoopState)
    first = harness.model.requests_for(model)[0].body["messages"]
    [injected] = [m for m in first if m["content"].startswith("[PRE_HYDRATED_CONTEXT]")]
    assert "public notes" in injected["content"] and "classified" not in injected["content"]
    [done] = [e for e in journal.entries if isinstance(e, PreHydrationComplete)]
    assert (done.found, done.resolved, done.failed) == (3, 1, 2)  # a skip counts as failed
    assert done.skipped == [f"url {hidden_site}/page: web_fetch is not a tool of this loop"]
    assert asked == []  # the profile hid web_fetch: the page was never asked for
    assert state.advertised == ["file_read"]  # the profile hid web_fetch
    tools = [t["function"]["name"] for t in harness.model.requests_for(model)[0].body["tools"]]
    assert tools == ["file_read"]
