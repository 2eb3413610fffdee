"""The docs pages' Python, run offline as a reader pastes it, and the conversations guide's
``orga chat`` (issue 51, point 7).

``tests/test_readme.py`` walks every page's shell commands with the offline worker, and runs
the files a page asks the reader to write (``# NAME.py`` blocks); the other Python blocks are
fragments it leaves alone, and so is the Python written inline in the prose
(`` `await orga.loop(client, id).fork(…)` ``). Here the fragments of the pages in ``PAGES`` run
in order in one namespace per page, as ``python -m asyncio`` runs what a reader pastes
(top-level ``await``; a block's last expression is kept as ``_``), against the offline worker
the page starts (``uv run worker.py --scripted``), with ``TEMPORAL_ADDRESS`` and
``ORGA_TASK_QUEUE`` as the reader's shell has them. A name a page uses without defining it is
given just before the block that needs it (``GIVEN``); what is not run is in ``SKIPPED`` with
the reason; ``CHECKS`` says what a block must leave behind.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import jsonschema
import pytest
from temporalio.testing import WorkflowEnvironment

import orga
from orga.contracts.journal import Forked
from orga.scripted.offline import LABEL
from tests.harness import replay
from tests.helpers import (
    ORGA,
    ROOT,
    calls_of,
    eventually,
    offline_env,
    offline_worker,
    parse_python,
    terminal,
)
from tests.helpers import (
    orga as orga_cli,
)

GUIDES: Final = ROOT / "docs" / "guides"
_FENCE: Final = re.compile(r"^```(\w*)\s*$")
_INLINE: Final = re.compile(r"`(await orga\.[^`]+)`")

Namespace = dict[str, Any]


def python_steps(page: Path) -> list[tuple[str, str]]:
    """The Python ``page`` gives to run, in order: its ```` ```python ```` blocks, and the
    statements it writes inline in the prose (`` `await orga.…` ``): ``(page.md:LINE, code)``."""
    lines = page.read_text().splitlines()
    found: list[tuple[str, str]] = []
    number = 0
    while number < len(lines):
        fence = _FENCE.match(lines[number])
        number += 1
        if fence is None:
            found += [(f"{page.name}:{number}", m) for m in _INLINE.findall(lines[number - 1])]
            continue
        end = number
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if fence.group(1) == "python":
            found.append((f"{page.name}:{number + 1}", "\n".join(lines[number:end]) + "\n"))
        number = end + 1
    return found


async def run_block(code: str, where: str, namespace: Namespace) -> None:
    """``code`` as the asyncio REPL runs it: top-level ``await``, the last expression's value
    kept as ``_``."""
    tree = parse_python(code, where)
    if tree.body and isinstance(last := tree.body[-1], ast.Expr):
        tree.body[-1] = ast.Assign(targets=[ast.Name("_", ast.Store())], value=last.value)
        ast.fix_missing_locations(tree)
    compiled = compile(tree, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    ran = eval(compiled, namespace)  # what a reader pastes into the REPL runs as theirs does
    if inspect.iscoroutine(ran):
        await ran


# ---- what the page leaves to the reader, and what each block must do -------------------------


async def _a_loop_that_answered(namespace: Namespace) -> None:
    """The loop of the Forks section's shell example (`orga run "What is 2+3?" --tool add`):
    it called add at turn 1 and answered at turn 2."""
    loop = await orga.start_loop(
        namespace["client"], "What is 2+3?", orga.LoopConfig(tools=["add"])
    )
    await loop.result()
    namespace["id"] = loop.id


async def _a_config(namespace: Namespace) -> None:
    namespace["config"] = orga.LoopConfig()  # as Running loops writes it for the same example


GIVEN: list[tuple[str, Callable[[Namespace], Awaitable[None]]]] = [
    (r"output_type=Refund", _a_config),
    (r"\.fork\(", _a_loop_that_answered),
]
"""``(pattern, setup)``: what a block that matches ``pattern`` uses and the page never defines."""

SKIPPED: list[tuple[str, str]] = [
    (
        r"await loop\.say\(",
        "a loop the offline model answers at once has ended before the message, which is then "
        "refused (and running-loops.md names an example loop id): tests/test_steering.py steers "
        "a loop that is still working",
    ),
    (r"\A# \w+\.py\n", "a file the page writes and runs: tests/test_readme.py walks it"),
]


async def _the_thread_answered_both_turns(namespace: Namespace, env: WorkflowEnvironment) -> None:
    first, second = namespace["first"], namespace["second"]
    assert first.output == f"{LABEL} 2 + 3 = 5 (by the add tool).", first
    assert second.output == f"{LABEL} 5 + 8 = 13 (by the add tool).", second  # "that" is 5
    assert second.thread_usage.total_tokens > second.usage.total_tokens > 0
    calls = await calls_of(env, namespace["chat"].id)
    assert calls == [("add", {"a": 2, "b": 3}), ("add", {"a": 5, "b": 8})]


async def _the_loop_answered(namespace: Namespace, env: WorkflowEnvironment) -> None:
    result = namespace["result"]
    assert result.output == f"{LABEL} 2 + 3 = 5 (by the add tool).", result
    assert await calls_of(env, namespace["loop"].id) == [("add", {"a": 2, "b": 3})]


async def _the_refund_is_typed(namespace: Namespace, env: WorkflowEnvironment) -> None:
    loop, model = namespace["loop"], namespace["Refund"]
    result = await loop.result()
    assert isinstance(result.value, model) and result.value == namespace["refund"], result
    jsonschema.validate(json.loads(result.output), model.model_json_schema())
    assert result.value.amount == 7  # the task's number
    assert (await loop.state()).model_calls == 1  # valid at once: no retry
    await replay(loop.handle, env.client)


async def _the_fork_answered(namespace: Namespace, env: WorkflowEnvironment) -> None:
    fork = namespace["_"]
    assert isinstance(fork, orga.LoopHandle) and fork.id != namespace["id"]
    result = await fork.result()
    assert result.output.startswith(LABEL)
    assert "The task was: …" in result.output  # the fork's own message, "…" as written
    forked = (await fork.journal()).entries[0]
    assert isinstance(forked, Forked) and (forked.turn, forked.said) == (2, "…")
    await replay(fork.handle, env.client)


CHECKS: list[tuple[str, Callable[[Namespace, WorkflowEnvironment], Awaitable[None]]]] = [
    (r"orga\.start_thread\(", _the_thread_answered_both_turns),
    (r'start_loop\(client, "What is 2\+3\?"', _the_loop_answered),
    (r"output_type=Refund", _the_refund_is_typed),
    (r"\.fork\(", _the_fork_answered),
]

PAGES: Final = {
    GUIDES / "conversations.md": ["ran", "skipped", "ran", "ran"],
    GUIDES / "running-loops.md": ["ran", "skipped", "skipped", "ran"],
}
"""The pages whose Python is run here, and how each of their steps goes (run or skipped)."""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", list(PAGES), ids=lambda page: page.name)
async def test_the_page_s_python_runs_offline_as_written(
    env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: Path
) -> None:
    settings = offline_env(env, tmp_path)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)  # the reader's shell: orga.connect() and the task queue
    namespace: Namespace = {"__name__": "__main__"}
    ran: list[str] = []
    async with offline_worker(settings, "--scripted"):
        for where, code in python_steps(page):
            if any(re.search(pattern, code) for pattern, _ in SKIPPED):
                ran.append(f"{where} skipped")
                continue
            for pattern, setup in GIVEN:
                if re.search(pattern, code):
                    await setup(namespace)
            await run_block(code, where, namespace)
            for pattern, check in CHECKS:
                if re.search(pattern, code):
                    await check(namespace, env)
            ran.append(f"{where} ran")
    assert [line.split()[-1] for line in ran] == PAGES[page], ran


async def test_orga_chat_talks_with_a_thread_offline(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The page's ``orga chat``: with no id it starts a thread, each line typed is the next
    message, and one that refers back is answered with the number before it; ``orga chat ID``
    picks the thread up again."""
    settings = offline_env(env, tmp_path)
    async with offline_worker(settings, "--scripted"):
        with terminal([ORGA, "chat", "--tool", "add"], settings) as term:
            await term.shows("you>")
            term.type("What is 2+3?")
            screen = await term.shows(f"orga> {LABEL} 2 + 3 = 5 (by the add tool).")
            mark = screen.index("2 + 3 = 5")
            await term.shows("you>", after=mark)
            term.type("Now add 8 to that")
            screen = await term.shows(f"orga> {LABEL} 5 + 8 = 13 (by the add tool).", after=mark)
            term.press("C-d")  # leaves; the thread goes on waiting
            screen = await term.shows("[exited 0]")
        [thread_id] = re.findall(r"started (thread-[0-9a-f]{12})", screen)
        with terminal([ORGA, "chat", thread_id], settings) as term:
            await term.shows(f"turn 2: {LABEL} 5 + 8 = 13")
            term.type("/close")
            await term.shows("[exited 0]")
        assert await calls_of(env, thread_id) == [
            ("add", {"a": 2, "b": 3}),
            ("add", {"a": 5, "b": 8}),
        ]


async def test_orga_chat_picks_up_a_thread_orga_run_started(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The page: `uv run orga chat <workflow-id>` is the same thread (the one `orga run
    --thread` started just above it, which has no stream) in your terminal."""
    settings = offline_env(env, tmp_path)
    async with offline_worker(settings, "--scripted"):
        code, out, err = await orga_cli(
            "run", "What is 2+3?", "--tool", "add", "--thread", env=settings
        )
        assert code == 0, err
        [thread_id] = re.findall(r"thread (thread-[0-9a-f]{12}) waits", out + err)
        with terminal([ORGA, "chat", thread_id], settings) as term:
            await term.shows("you>")
            term.type("Now add 8 to that")

            def answered_or_ended() -> str | None:
                screen = term.screen()
                return screen if "5 + 8 = 13" in screen or "[exited" in screen else None

            screen = await eventually(answered_or_ended, "an answer, or orga chat ending")
            assert f"{LABEL} 5 + 8 = 13" in screen and "unexpected error" not in screen, screen
            term.type("/close")
            await term.shows("[exited 0]")
        assert await calls_of(env, thread_id) == [
            ("add", {"a": 2, "b": 3}),
            ("add", {"a": 5, "b": 8}),
        ]
