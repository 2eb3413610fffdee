"""The example page (``examples/web``, issue 54) in headless Chromium, end to end: as the
README runs it — the offline worker with the shop's tools, ``orga api --page … --user ann`` —
a person asks for a refund, the page streams the thread, shows the refund waiting with its
arguments, the person lowers the amount and approves, and the page shows the refund as it ran
and the answer. A screenshot of the page is saved (its path is printed)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from ag_ui.encoder import EventEncoder
from playwright.async_api import Route, async_playwright
from temporalio.testing import WorkflowEnvironment

from orga.contracts.inference import StreamedText, Usage
from orga.contracts.journal import ApprovalDecided, Journal
from orga.contracts.progress import ProgressItem, ProgressView
from orga.contracts.threads import TurnResult
from orga.web.agui_events import ThreadEvents
from orga.web.agui_run import THREAD_PREFIX
from tests.harness import replay
from tests.helpers import chromium, offline_env, offline_worker, server_process, web_example

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


async def test_the_example_page_streams_a_thread_and_approves_an_edited_refund(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    executable = chromium()
    public = await web_example()
    cli = offline_env(env, tmp_path, ORGA_TOOL_MODULES="examples.shop")
    args = ("api", "--page", str(public), "--user", "ann", "--tool", "issue_refund", "--port", "0")
    shot = Path(os.environ.get("ORGA_TEST_ARTIFACTS", tmp_path)) / "web-example.png"
    async with (
        offline_worker(cli, "--scripted"),
        server_process(*args, env=cli, announce="orga api on") as (api, _),
        async_playwright() as playwright,
    ):
        assert api.stdout is not None
        link = (await api.stdout.readline()).decode().strip().removeprefix("ann: ")
        assert "/#token=" in link, link
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = await browser.new_page()
            await page.goto(link)
            assert "token=" not in page.url  # taken out of the address bar
            await page.fill(
                "#text", "Refund 4200 cents to ann@example.com: the lamp arrived broken"
            )
            await page.click("form#ask button")
            card = page.locator(".approval")
            await card.wait_for(timeout=30_000)
            assert "issue_refund waits for you" in await card.inner_text()
            amount = card.locator('[data-argument="amount"]')
            assert await amount.input_value() == "4200"
            # A message while the card waits: it was lost silently (an uncaught error, the
            # bubble looking sent); now it stays in the box, and the page says why.
            await page.fill("#text", "and the shade too")
            await page.click("form#ask button")
            await page.locator('#error[data-held="true"]').wait_for(timeout=10_000)
            held = await page.locator("#error").inner_text()
            kept = await page.input_value("#text")
            shown = await page.locator(".message.user").all_inner_texts()
            await amount.fill("3000")
            await card.locator('[data-field="reason"]').fill("a partial refund: the base is fine")
            await page.screenshot(path=str(shot.with_name("web-example-approval.png")))
            await card.locator('[data-action="approve"]').click()
            ran = page.locator(".message.tool[data-result]")
            await ran.wait_for(timeout=30_000)
            await page.locator('#status[data-status="awaiting_message"]').wait_for(timeout=30_000)
            said = await page.locator(".message.assistant").all_inner_texts()
            tool = await ran.get_attribute("data-result")
            thread = await page.evaluate("sessionStorage.getItem('orga-thread')")
            await page.screenshot(path=str(shot), full_page=True)
            print(f"screenshots of the example page: {shot.parent}/web-example*.png")
        finally:
            await browser.close()
        handle = env.client.get_workflow_handle(f"{THREAD_PREFIX}{thread}")
        journal = await handle.query("journal", result_type=Journal)
        await replay(handle, env.client)
    assert "Answer the waiting call first" in held and kept == "and the shade too"
    assert not any("shade" in text for text in shown)  # never shown as sent
    assert tool == "refunded 3000 cents to ann@example.com"
    assert said and "[offline scripted model]" in said[-1]
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.approver) == (True, "ann")
    assert decided.reason == "a partial refund: the base is fine"
    assert decided.edited_arguments is not None
    assert json.loads(decided.edited_arguments) == {"amount": 3000, "email": "ann@example.com"}
    assert shot.stat().st_size > 10_000


async def test_the_example_page_drops_what_a_lost_model_call_streamed(tmp_path: Path) -> None:
    """After a worker was lost mid-answer the page showed the partial answer beside the whole
    one. Here the page (built as shipped, in Chromium) gets the events the endpoint derives
    from such a stream (``ThreadEvents``: text, the call asked again, the whole answer): it
    removes the partial bubble and shows one answer."""
    executable = chromium()
    public = await web_example()
    events = _lost_then_whole()

    async def serve(route: Route) -> None:
        path = urlsplit(route.request.url).path
        if path == "/agui":
            await route.fulfill(status=200, content_type="text/event-stream", body=events)
        else:
            await route.fulfill(path=str(public / (path.lstrip("/") or "index.html")))

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = await browser.new_page()
            await page.route("http://127.0.0.1:9/**", serve)  # a secure context, as orga api's
            await page.goto("http://127.0.0.1:9/#token=t")
            await page.wait_for_function("document.getElementById('ask').onsubmit !== null")
            await page.fill("#text", "Tell me a story")
            await page.click("form#ask button")
            await page.locator('#status[data-status="awaiting_message"]').wait_for(timeout=30_000)
            said = await page.locator(".message.assistant").all_inner_texts()
        finally:
            await browser.close()
    assert said == ["Once upon a time, again."]


def _lost_then_whole() -> str:
    """The SSE body of a turn whose model call was lost after "Once upon" and asked again."""
    view = ProgressView(status="running", phase="reasoning", turn=1)
    answer = TurnResult(
        turn=1,
        output="Once upon a time, again.",
        reason="end_turn",
        iterations=1,
        usage=Usage(),
        thread_usage=Usage(),
        ended_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    items: list[StreamedText | ProgressItem] = [
        ProgressItem(kind="turn", view=view, turn=1),
        StreamedText(iteration=1, text="Once upon"),
        StreamedText(iteration=1, restart=True),
        StreamedText(iteration=1, text="Once upon a time, again."),
        StreamedText(iteration=1, done=True),
        ProgressItem(
            kind="answered",
            view=view.model_copy(update={"status": "awaiting_message"}),
            answer=answer,
        ),
    ]
    machine, encoder, body = ThreadEvents("t", "r"), EventEncoder(), ""
    for offset, item in enumerate(items):
        marked = (
            machine.text(offset, item)
            if isinstance(item, StreamedText)
            else machine.progress(offset, item)
        )
        body += "".join(encoder.encode(m.stamped()) for m in marked)
    return body
