"""``orga desk`` in a real browser: headless Chromium (Debian's package) approves a waiting loop,
shows a call held by a paused tool and each loop's receipts, pauses a tool and resumes it, and
reads the receipts of a loop that finished; and its API, which a thread waiting for its next
message is answered through, and which pauses only what it is sent plainly, behind its lock.

``.ci/run`` installs Chromium when it is missing; the test fails, naming it, when it is absent.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta

import httpx
from playwright.async_api import Page, async_playwright
from temporalio.testing import WorkflowEnvironment

from orga.contracts.journal import ApprovalDecided, EscalationResolved, Journal
from orga.contracts.state import LoopState
from orga.desk.page import TOKEN_HEADER, build_app
from orga.desk.releases import release_held
from orga.runtime.pauses import PauseBook
from orga.scripted.server import Turn
from orga.tools.sdk import tool
from tests.harness import TEST_STORE, Harness
from tests.helpers import (
    ask,
    chromium,
    conversation,
    escalated,
    eventually,
    inbox,
    loop_state,
    on,
    pending,
    serving,
    tool_results,
    waiting_review,
)
from tests.helpers import orga as orga_command
from tests.sample_tools import Flaky, explode, get_weather, transfer

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def desk(
    env: WorkflowEnvironment, harness: Harness, approver: str
) -> AbstractAsyncContextManager[str]:
    """``orga desk`` on a free port; yields the address it prints (with its token)."""
    args = ("desk", "--port", "0", "--no-open", "--approver", approver)
    return serving(*args, env=on(env, harness), announce="orga desk on")


@asynccontextmanager
async def desk_page(
    env: WorkflowEnvironment, harness: Harness, approver: str
) -> AsyncIterator[Page]:
    """``orga desk`` opened in headless Chromium (the address's token taken in)."""
    async with desk(env, harness, approver) as url, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = await browser.new_page()
            await page.goto(url)
            yield page
        finally:
            await browser.close()


async def test_approve_a_waiting_loop_in_the_browser(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 250, "to": "eve"})]), Turn(text="paid eve")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("Pay eve 250 for the lamp.", model=model, tools=["transfer"])
        [call] = (await pending(handle)).pending_approvals
        async with desk_page(env, harness, "pat") as page:
            card = page.locator(f'[data-item="{handle.id}/{call.call_id}"]')
            await card.wait_for(timeout=20_000)  # the page polls the inbox every 3 s
            text = await card.inner_text()
            assert "transfer" in text and '"amount": 250' in text
            assert "tool 'transfer' requires approval" in text
            assert "Pay eve 250 for the lamp." in text  # the conversation's last messages
            assert "deciding as pat" in await page.inner_text("header")
            assert "token=" not in page.url  # taken out of the address bar
            await card.locator('[data-field="reason"]').fill("invoice checked")
            await card.locator('[data-action="approve"]').click()
            await page.locator(f'[data-outcome="{handle.id}/{call.call_id}"]').wait_for(
                timeout=20_000
            )
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "paid eve"
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.approver, decided.reason, decided.source) == (
        True,
        "pat",
        "invoice checked",
        "update",
    )


async def test_approve_with_edits_in_the_browser(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 9000, "to": "eve"})]), Turn(text="paid eve")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("Pay eve for the lamp.", model=model, tools=["transfer"])
        [call] = (await pending(handle)).pending_approvals
        key = f"{handle.id}/{call.call_id}"
        async with desk_page(env, harness, "pat") as page:
            card = page.locator(f'[data-item="{key}"]')
            await card.wait_for(timeout=20_000)
            decides = await card.locator('[data-field="decided_by"]').inner_text()
            assert "unverified: no approvers are enrolled" in decides
            await card.locator('[data-field="edit"]').fill('{"amount": 250, "to": "eve"}')
            await click(page, key, "approve", "the lamp was 250")
            outcome = page.locator(f'[data-outcome="{key}"]')
            await outcome.wait_for(timeout=20_000)
            assert "runs with" in await outcome.inner_text()
        result = await handle.result()
        [ran] = tool_results(await conversation(handle))
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "paid eve" and ran.content == "sent 250 to eve"
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert decided.edited_arguments is not None and '"amount": 250' in decided.edited_arguments


async def test_the_desk_api_is_locked(env: WorkflowEnvironment, harness: Harness) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 5, "to": "mal"})]), Turn(text="ok")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start("pay mal", model=model, tools=["transfer"])
        [call] = (await pending(handle)).pending_approvals
        # Patient: a workflow another test left waiting without a worker costs the inbox up
        # to INBOX_QUERY_TIMEOUT (it is listed as unreadable).
        async with desk(env, harness, "pat") as url, httpx.AsyncClient(timeout=30) as http:
            base, token = url.split("/?token=")
            decision = {"workflow_id": handle.id, "call_id": call.call_id, "approved": True}
            # No token, a wrong one, another host name (DNS rebinding), a form post.
            assert (await http.get(f"{base}/api/inbox")).status_code == 401
            wrong = {TOKEN_HEADER: "guess"}
            assert (
                await http.post(f"{base}/api/approve", json=decision, headers=wrong)
            ).status_code == 401
            rebound = {TOKEN_HEADER: token, "host": "evil.example:80"}
            assert (await http.get(f"{base}/api/inbox", headers=rebound)).status_code == 403
            form = await http.post(
                f"{base}/api/approve",
                content="workflow_id=x",
                headers={TOKEN_HEADER: token, "content-type": "application/x-www-form-urlencoded"},
            )
            assert form.status_code == 415
            state = await handle.query("state", result_type=LoopState)
            assert [p.call_id for p in state.pending_approvals] == [call.call_id]  # untouched
            # With the token, a refusal comes back as a reason, not a crash.
            inbox = await http.get(f"{base}/api/inbox", headers={TOKEN_HEADER: token})
            assert inbox.status_code == 200 and inbox.json()["approver"] == "pat"
            unknown = {**decision, "call_id": "nope"}
            refused = await http.post(
                f"{base}/api/approve", json=unknown, headers={TOKEN_HEADER: token}
            )
            assert (
                refused.status_code == 409 and "not waiting for approval" in refused.json()["error"]
            )
            denied = await http.post(
                f"{base}/api/approve",
                json={**decision, "approved": False, "reason": "no"},
                headers={TOKEN_HEADER: token},
            )
            assert denied.status_code == 200 and denied.json()["approver"] == "pat"
        assert (await handle.result()).output == "ok"


async def click(page: Page, key: str, action: str, text: str = "", field: str = "reason") -> None:
    """Act on the card of ``key`` (``workflow/item``) and wait for the page to show the outcome."""
    card = page.locator(f'[data-item="{key}"]')
    await card.wait_for(timeout=20_000)  # the page polls the inbox every 3 s
    if text:
        await card.locator(f'[data-field="{field}"]').fill(text)
    await card.locator(f'[data-action="{action}"]').click()
    await page.locator(f'[data-outcome="{key}"]').wait_for(timeout=20_000)


async def test_review_an_answer_and_resolve_an_escalation_in_the_browser(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The desk acts on every kind of item: a critic's review (revise, then approve) and an
    escalation (its result given by hand), each through the workflow's own update."""
    flaky = Flaky(failures=5)
    writer = harness.new_model([Turn(text="draft one"), Turn(text="draft two")])
    failing = harness.new_model([ask("flaky"), Turn(text="used the given result")])
    async with harness.worker(tools=flaky.tools):
        reviewed = await harness.start(
            "Write the release note.", model=writer, critic={"kind": "human", "max_rounds": 2}
        )
        escalating = await harness.start(
            "go", model=failing, tools=["flaky"], recovery={"default": {"strategy": "escalate"}}
        )
        escalation = await escalated(escalating)
        await waiting_review(reviewed, 1)
        async with desk_page(env, harness, "pat") as page:
            first = page.locator(f'[data-item="{reviewed.id}/answer#1"]')
            await first.wait_for(timeout=20_000)
            assert "draft one" in await first.inner_text()
            await click(page, f"{reviewed.id}/answer#1", "revise", "add the numbers")
            await waiting_review(reviewed, 2)
            await click(page, f"{reviewed.id}/answer#2", "approve")
            await click(page, f"{escalating.id}/{escalation}", "result", "42", field="result")
            outcomes = await page.inner_text("#inbox")
        review_result = await reviewed.result()
        escalation_result = await escalating.result()
        state = await reviewed.query("state", result_type=LoopState)
        journal = await escalating.query("journal", result_type=Journal)
    assert "revise by pat" in outcomes and "approve by pat" in outcomes
    assert "result by pat" in outcomes
    assert (review_result.output, review_result.termination_reason) == ("draft two", "end_turn")
    assert [(r.verdict, r.reviewer, r.feedback) for r in state.reviews] == [
        ("revise", "pat", "add the numbers"),
        ("approve", "pat", ""),
    ]
    assert "add the numbers" in harness.model.requests_for(writer)[1].user_texts()[-1]
    assert escalation_result.output == "used the given result"
    [resolved] = [e for e in journal.entries if isinstance(e, EscalationResolved)]
    assert (resolved.action, resolved.operator) == ("result", "pat")
    [given] = harness.model.requests_for(failing)[1].tool_result_texts()
    assert given == "[result supplied by an operator by pat]\n42"  # labelled as such


async def test_the_desk_shows_every_argument_and_asks_why_before_denying(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The attacker's call: a long address before the amount, escapes and a bidi override in the
    address, an amount JavaScript would round. The page shows all of it, cleaned, before its
    buttons; a denial without a reason is refused (by the page and by the API) and nothing is
    recorded; with one, it is recorded as on the command line."""
    amount = 2**53 + 1  # 9007199254740993: JSON.parse in the page would show ...992
    address = "refunds." + "x" * 300 + "@attacker.example\x1b[2K\x1b[1A\u202e"
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"to": address, "amount": amount})]), Turn(text="ok")]
    )
    async with harness.worker(tools=[transfer]):
        handle = await harness.start(
            "Refund ann 5 cents.\u202e\x1b]0;TITLE\x07", model=model, tools=["transfer"]
        )
        [call] = (await pending(handle)).pending_approvals
        key = f"{handle.id}/{call.call_id}"
        async with desk_page(env, harness, "pat") as page:
            card = page.locator(f'[data-item="{key}"]')
            await card.wait_for(timeout=20_000)
            arguments = card.locator('[data-field="arguments"]')
            shown = await arguments.inner_text()
            assert f'"amount": {amount}' in shown
            assert "x" * 300 + "@attacker.example\\u001b[2K\\u001b[1A<U+202E>" in shown
            assert await arguments.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
            text = await page.inner_text("#inbox")
            assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)
            assert "Refund ann 5 cents.<U+202E>␛]0;TITLE␇" in text  # the conversation, cleaned

            await card.locator('[data-action="deny"]').click()  # no reason given
            assert "say why you deny" in await card.locator('[data-field="hint"]').inner_text()
            token = await page.evaluate("sessionStorage.getItem('orga-desk-token')")
            refused = await page.evaluate(
                """([id, call, token]) => fetch("/api/approve", {method: "POST",
                     headers: {"content-type": "application/json", "x-orga-desk-token": token},
                     body: JSON.stringify({workflow_id: id, call_id: call, approved: false})})
                   .then(async (r) => [r.status, (await r.json()).error])""",
                [handle.id, call.call_id, token],
            )
            assert refused[0] == 400 and "a denial needs a reason" in refused[1]
            state = await handle.query("state", result_type=LoopState)
            assert [p.call_id for p in state.pending_approvals] == [call.call_id]  # still waits

            await click(page, key, "deny", "not to that address")
        result = await handle.result()
        journal = await handle.query("journal", result_type=Journal)
    assert result.output == "ok"
    [decided] = [e for e in journal.entries if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.approver, decided.reason) == (
        False,
        "pat",
        "not to that address",
    )


async def test_a_thread_waiting_for_its_next_message_is_on_the_desk(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(text="hello"), Turn(text="5")])
    async with harness.worker():
        chat = await harness.start_thread("hi", model=model)
        await chat.turn(1)
        [item] = await inbox(env, harness, 1)
        code, text, err = await orga_command("pending", env=on(env, harness))
        async with desk(env, harness, "pat") as url, httpx.AsyncClient(timeout=30) as http:
            base, token = url.split("/?token=")
            headers = {TOKEN_HEADER: token}
            listed = (await http.get(f"{base}/api/inbox", headers=headers)).json()
            said = await http.post(
                f"{base}/api/say", json={"workflow_id": chat.id, "text": "2+3?"}, headers=headers
            )
            second = await chat.turn(2)
            empty = await http.post(
                f"{base}/api/say", json={"workflow_id": chat.id, "text": ""}, headers=headers
            )
            closed = await http.post(
                f"{base}/api/close", json={"workflow_id": chat.id}, headers=headers
            )
        result = await chat.handle.result()
    assert (item["kind"], item["item_id"], item["arguments"]) == ("message", "message#2", "hello")
    assert item["reason"].startswith("the thread waits for message 2; it ends if nobody writes by")
    assert item["commands"] == [
        f"orga say {chat.id} '…'",
        f"orga chat {chat.id}",
        f"orga close {chat.id}",
    ]
    assert code == 0, err
    assert "message  message#2  (thread)" in text and "answered   hello" in text
    assert [i["kind"] for i in listed["items"] if i["workflow_id"] == chat.id] == ["message"]
    assert said.status_code == 200 and said.json()["turn"] == 2
    assert second.output == "5"
    assert empty.status_code == 409 and "empty" in empty.json()["error"]  # refused, with why
    assert closed.status_code == 200 and closed.json()["turns"] == 2
    assert result.termination_reason == "thread_closed"


async def test_answer_a_thread_in_the_browser(env: WorkflowEnvironment, harness: Harness) -> None:
    model = harness.new_model([Turn(text="hello"), Turn(text="5")])
    async with harness.worker():
        chat = await harness.start_thread("hi", model=model)
        await chat.turn(1)
        async with desk_page(env, harness, "pat") as page:
            key = f"{chat.id}/message#2"
            card = page.locator(f'[data-item="{key}"]')
            await card.wait_for(timeout=20_000)
            shown = await card.inner_text()
            await card.locator('[data-action="say"]').click()  # nothing written: nothing sent
            hint = await card.locator('[data-field="hint"]').inner_text()
            await click(page, key, "say", "2+3?")
            second = await chat.turn(2)
        await chat.close()
    assert "the thread waits for message 2" in shown and "hello" in shown
    assert "write the message" in hint
    assert second.output == "5"
    assert harness.model.requests_for(model)[1].user_texts() == ["hi", "2+3?"]


async def test_a_paused_call_and_its_loops_receipts_in_the_browser(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """A call of a paused tool is on the desk with who paused the tool, since when and why, and
    one button, which ends the pause (``orga resume --tool`` does the same); beside it the
    loop's receipts so far — the digest of what the model read, and a failure whose note
    carries markup, shown as text."""
    name = f"refund_{uuid.uuid4().hex[:6]}"  # the pause is the store's: one tool per test
    markup = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'

    @tool(name=name)
    def refund(amount: int) -> str:
        """Refund an amount.

        Args:
            amount: cents.
        """
        return f"refunded {amount}"

    pauses = PauseBook(TEST_STORE)
    pauses.pause(f"tool:{name}", "olu", "refunds double-paid")
    model = harness.new_model(
        [
            Turn(
                tool_calls=[("get_weather", {"location": "Oslo"}), ("explode", {"reason": markup})]
            ),
            Turn(tool_calls=[(name, {"amount": 5})]),
            Turn(text="refunded 5"),
        ]
    )
    async with harness.worker(tools=[refund, get_weather, explode]):
        handle = await harness.start(
            "Refund ann 5 cents.",
            model=model,
            tools=[name, "get_weather", "explode"],
            pause_recheck=timedelta(seconds=1),
        )

        async def held() -> LoopState | None:
            state = await loop_state(handle)
            return state if state.status == "paused" and state.paused_calls else None

        state = await eventually(held, f"{handle.id} waiting for its paused tool")
        [call_id] = state.paused_calls
        async with desk_page(env, harness, "pat") as page:
            card = page.locator(f'[data-item="{handle.id}/{call_id}"]')
            await card.wait_for(timeout=20_000)  # the page polls the inbox every 3 s
            kind = await card.locator(".kind").inner_text()
            why = await card.locator('[data-field="paused"]').inner_text()
            text = await card.inner_text()
            controls = await card.locator("button, input, textarea").all_inner_texts()
            receipts = await card.locator('[data-field="receipts"]').inner_text()
            injected = await card.locator("script, img").count()
            pwned = await page.evaluate("window.pwned")
        pauses.resume(f"tool:{name}")
        await release_held(harness.client, f"tool:{name}")  # as orga resume does
        result = await handle.result()
    assert kind.lower() == "paused"
    assert f"tool {name!r} is paused by olu since " in why and "refunds double-paid" in why
    assert f"orga resume --tool {name}" in text and "for every loop it holds" in text
    assert controls == [f"Resume tool {name} (every loop)"]  # no approve or deny
    [delivered, failed] = state.receipts
    assert (delivered.outcome, delivered.tool, failed.outcome, failed.tool) == (
        "delivered",
        "get_weather",
        "failed",
        "explode",
    )
    assert delivered.digest is not None
    assert f"delivered get_weather · {delivered.call_id} · sha256:{delivered.digest[:16]}…" in (
        receipts
    )
    assert f"failed explode · {failed.call_id}" in receipts
    assert markup in failed.note and markup in receipts  # the note, as text
    assert injected == 0 and pwned is None  # nothing of it became an element, nothing ran
    assert result.output == "refunded 5"


async def test_an_unknown_receipt_stands_out_beside_its_escalation(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """A call whose attempt was lost after its effect began (here it timed out while it ran) has
    an ``unknown`` receipt and waits for a person: beside its escalation, that receipt is
    marked unsettled, until the person settles it on the desk."""

    @tool(name="pay", timeout=1, serial=True)
    async def pay(amount: int) -> str:
        """Pay an amount (hangs past its 1 s timeout: nobody can tell whether it paid).

        Args:
            amount: cents.
        """
        await asyncio.sleep(30)
        return f"paid {amount}"

    model = harness.new_model([Turn(tool_calls=[("pay", {"amount": 5})]), Turn(text="settled")])
    async with harness.worker(tools=[pay]):
        handle = await harness.start("Pay ann 5 cents.", model=model, tools=["pay"])
        escalation = await escalated(handle)
        [unknown] = (await loop_state(handle)).receipts
        key = f"{handle.id}/{escalation}"
        async with desk_page(env, harness, "pat") as page:
            card = page.locator(f'[data-item="{key}"]')
            await card.wait_for(timeout=20_000)
            receipt = card.locator(f'[data-receipt="{unknown.call_id}"]')
            shown = await receipt.inner_text()
            classes = await receipt.get_attribute("class")
            border = await receipt.evaluate("e => getComputedStyle(e).borderLeftColor")
            await click(page, key, "result", "paid 5 (the bank shows it)", field="result")
        result = await handle.result()
        after = (await loop_state(handle)).receipts
    assert unknown.outcome == "unknown"
    assert shown.startswith(f"unknown pay · {unknown.call_id}")
    assert "a person must settle it" in shown
    assert classes == "receipt unknown unsettled" and border == "rgb(180, 35, 24)"  # --bad
    assert result.output == "settled"
    assert [(r.call_id, r.outcome) for r in after] == [
        (unknown.call_id, "unknown"),
        (unknown.call_id, "delivered"),
    ]


async def test_pause_a_tool_on_the_desk_resume_it_and_read_the_receipts(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """The Pauses panel pauses a tool, recorded by whoever runs the desk: a loop's call of it
    waits on the page with that reason (markup in it stays text); its Resume button lets it
    run, once. Then the receipts of that finished loop are read on the page, and a workflow
    that does not exist is said to be so."""
    name = f"refund_{uuid.uuid4().hex[:6]}"  # the pause is the store's: one tool per test
    target = f"tool:{name}"
    reason = "double refunds <b>again</b>"
    ran: list[int] = []

    @tool(name=name)
    def refund(amount: int) -> str:
        """Refund an amount.

        Args:
            amount: cents.
        """
        ran.append(amount)
        return f"refunded {amount}"

    model = harness.new_model([Turn(tool_calls=[(name, {"amount": 5})]), Turn(text="refunded")])
    async with harness.worker(tools=[refund]), desk_page(env, harness, "pat") as page:
        panel = page.locator("#pauses")
        await panel.wait_for(timeout=20_000)  # shown once the desk says it has the pauses
        await panel.locator('[data-field="pause-kind"]').select_option("tool")
        await panel.locator('[data-field="pause-name"]').fill(name)
        await panel.locator('[data-action="pause"]').click()  # no reason: nothing is sent
        refused = await panel.locator('[data-field="pause-outcome"]').inner_text()
        assert PauseBook(TEST_STORE).of(target) is None
        await panel.locator('[data-field="pause-reason"]').fill(reason)
        await panel.locator('[data-action="pause"]').click()
        listed = panel.locator(f'[data-pause="{target}"]')
        await listed.wait_for(timeout=20_000)
        listed_text = await listed.inner_text()
        held = PauseBook(TEST_STORE).of(target)

        handle = await harness.start(
            "Refund ann 5 cents.", model=model, tools=[name], pause_recheck=timedelta(seconds=1)
        )

        async def paused() -> LoopState | None:
            state = await loop_state(handle)
            return state if state.paused_calls else None

        [call_id] = (await eventually(paused, f"{handle.id} waiting for {name}")).paused_calls
        key = f"{handle.id}/{call_id}"
        card = page.locator(f'[data-item="{key}"]')
        await card.wait_for(timeout=20_000)  # the page polls the inbox every 3 s
        why = await card.locator('[data-field="paused"]').inner_text()
        markup = await page.locator("#inbox b, #pauses b").count()
        assert ran == []
        await click(page, key, "resume")
        done = await page.locator(f'[data-outcome="{key}"]').inner_text()
        result = await handle.result()

        lookup = page.locator("#lookup")
        await lookup.locator('[data-field="lookup-id"]').fill(handle.id)
        await lookup.locator('[data-action="lookup"]').click()
        receipt = lookup.locator(f'[data-receipt="{call_id}"]')
        await receipt.wait_for(timeout=20_000)
        receipt_text = await receipt.inner_text()
        of = await lookup.locator('[data-field="lookup-of"]').inner_text()
        missing = f"no-such-loop-{uuid.uuid4().hex[:8]}"
        await lookup.locator('[data-field="lookup-id"]').fill(missing)
        await lookup.locator('[data-action="lookup"]').click()
        error = lookup.locator('[data-field="lookup-error"]')
        await error.wait_for(timeout=20_000)
        error_text = await error.inner_text()
    assert "say why" in refused
    assert held is not None and (held.by, held.reason) == ("pat", reason)
    assert f"tool {name!r} is paused by pat since " in listed_text and reason in listed_text
    assert f"Resume tool {name} (every loop)" in listed_text
    assert f"tool {name!r} is paused by pat since " in why and reason in why
    assert markup == 0  # the reason's markup is text, never an element
    assert f"resumed tool {name}" in done and "every loop it held goes on" in done
    assert result.output == "refunded" and ran == [5]  # it ran once, after the resume
    assert PauseBook(TEST_STORE).of(target) is None
    assert receipt_text.startswith(f"delivered {name} · {call_id}")
    assert of == f"{handle.id} (loop) · completed"
    assert error_text == f"there is no workflow {missing!r} in namespace 'default'"


async def test_the_desk_pauses_only_plain_targets_behind_its_lock(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    """``/api/pause`` and ``/api/resume``: refused without the token or not as JSON; a target
    that is not ``tool|agent|loop:plain-name`` or a pause without a reason is a 400, nothing
    written; resuming what is not paused a 409 that says so. A desk built without the store
    has no pauses (404), and says it."""
    name = f"agent-{uuid.uuid4().hex[:8]}"
    target = f"agent:{name}"
    book = PauseBook(TEST_STORE)
    async with desk(env, harness, "pat") as url, httpx.AsyncClient(timeout=30) as http:
        base, token = url.split("/?token=")
        headers = {TOKEN_HEADER: token}
        wanted = {"target": target, "reason": "it loops"}
        anonymous = await http.post(f"{base}/api/pause", json=wanted)
        form = await http.post(
            f"{base}/api/pause",
            content=f"target={target}&reason=x",
            headers={**headers, "content-type": "application/x-www-form-urlencoded"},
        )
        assert book.of(target) is None  # refused: nothing written
        invalid = [
            await http.post(f"{base}/api/pause", json={**wanted, "target": bad}, headers=headers)
            for bad in ("agent:a b", "widget:x", f"agent:{name}\n", "agent:", name)
        ]
        no_reason = await http.post(
            f"{base}/api/pause", json={**wanted, "reason": "  "}, headers=headers
        )
        assert book.of(target) is None
        paused = await http.post(f"{base}/api/pause", json=wanted, headers=headers)
        listed = (await http.get(f"{base}/api/pauses", headers=headers)).json()["pauses"]
        resumed = await http.post(f"{base}/api/resume", json={"target": target}, headers=headers)
        again = await http.post(f"{base}/api/resume", json={"target": target}, headers=headers)
    assert anonymous.status_code == 401 and form.status_code == 415
    assert [r.status_code for r in invalid] == [400] * 5
    assert "is not a pause's target" in invalid[0].json()["error"]
    assert no_reason.status_code == 400 and "needs a reason" in no_reason.json()["error"]
    assert paused.status_code == 200 and (paused.json()["by"], paused.json()["target"]) == (
        "pat",
        target,
    )
    [mine] = [p for p in listed if p["target"] == target]
    assert mine["described"].startswith(f"agent {name!r} is paused by pat since ")
    assert resumed.status_code == 200 and resumed.json()["reason"] == "it loops"
    assert again.status_code == 409 and f"agent {name!r} is not paused" in again.json()["error"]
    assert book.of(target) is None

    bare = build_app(env.client, token="t", approver="pat", hosts={"127.0.0.1"})
    transport = httpx.ASGITransport(app=bare)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        listing = await http.get("/api/pauses", headers={TOKEN_HEADER: "t"})
        pausing = await http.post("/api/pause", json=wanted, headers={TOKEN_HEADER: "t"})
    assert listing.status_code == pausing.status_code == 404
    assert "pauses are not available" in pausing.json()["error"]
    assert book.of(target) is None
