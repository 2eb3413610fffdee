"""Long conversations with a stated bound: a ~200 000-token thread, then one turn of 100 tool calls.

    uv run --group peers python bench/long_conversation.py [--tokens 200000] [--calls 100]
        [--runs 3] [--call-bytes 1024] [--max-history-events 1000] [--turn-timeout 300]

Three variants take the same workload, one after the other, run by run, on the tuned embedded
dev server, their workers in this process, against a scripted model served over HTTP on
127.0.0.1 by a process of its own (this process's memory is the workers' and the client's):

* ``orga`` — a thread (``orga.start_thread``, a ``chat.send`` per message) whose context budget
  is above the conversation, so that every model call sends it whole, as the others do; it
  continues as new on its own (``--max-history-events``);
* ``minimal`` — the chat a Temporal user writes (``MinimalThreadWorkflow``: the loop of
  ``bench/minimal.py`` in an update handler), plain dicts, the whole conversation passed to
  every model-call activity;
* ``agents`` — the OpenAI Agents SDK on Temporal's plugin (``temporalio.openai_agents``, the
  ``peers`` dependency group): ``Runner.run`` per message over ``result.to_input_list()``, the
  model an ``OpenAIChatCompletionsModel`` on ``AsyncOpenAI(base_url=<the scripted model>)``,
  the tool an activity (``activity_as_tool``). Without the group it is left out, and said so.

The workload: turns of four tool calls, each result 8-16 KB of text, until the conversation
holds ``--tokens`` tokens (bytes/4, as ``orga.core.text.estimate_tokens`` counts); then one
turn in which the model asks for one tool call per model call, ``--calls`` times (results of
``--call-bytes``), then answers. Per variant, medians over ``--runs`` runs: whether it
completed, or where and why it stopped (Temporal's limits: 2 MiB per payload, 50 MiB or 51 200
events of history); the conversation's tokens when the long turn began (as the model received
it); the workflow's runs, events and history bytes, every run counted; over the long turn's
first ten and last ten tool calls, the history bytes each added (from its model call's
scheduling to the next one's: the model call, the tool call, the workflow tasks) and its time
(the same span, by the server's clock; the model call's share beside it: it grows with what
the model is sent), with their ratios and the slowest call; this process's resident memory
when the tool ran at the first call and the last. Not a test: times move by
±20 % on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import queue
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from statistics import mean, median
from typing import Any

from temporalio import workflow

if __name__ == "__main__":  # not in the sandbox, which runs this module for every workflow
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with workflow.unsafe.imports_passed_through():
    from pydantic import SecretStr
    from temporalio.client import Client
    from temporalio.worker import Worker

    import orga
    from bench.chat_history import Measured, history_of, measure
    from bench.chat_workloads import (
        ASK,
        CALLS,
        PAGES_PER_TURN,
        MinimalActivities,
        MinimalThreadWorkflow,
        agents_parts,
        page_size,
        read_page,
    )
    from bench.setup import _free_port as free_port
    from orga.cli.worker import build_workers
    from orga.contracts.config import LoopConfig
    from orga.contracts.threads import ThreadConfig
    from orga.core.text import estimate_tokens
    from orga.plugin import OrgaPlugin, http_client
    from orga.runtime.connect import connect, ensure_search_attributes
    from orga.runtime.settings import ProviderSettings, Settings
    from orga.scripted.server import RecordedRequest, ScriptedModelServer, Turn
    from orga.server.devserver import DevServer

# ---- the scripted model, in a process of its own ----------------------------------------------


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        parts: list[Any] = content
        content = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    calls = json.dumps(message.get("tool_calls")) if message.get("tool_calls") else ""
    return str(content or "") + calls


def respond(request: RecordedRequest, marks: Queue[tuple[str, int]]) -> Turn:
    """Read the pages the person's last request asks for, one tool call per model call, then
    answer. Marks the conversation's size when a turn of ``--calls`` begins."""
    messages: list[dict[str, Any]] = request.body.get("messages", [])
    tokens = sum(estimate_tokens(_text(m)) for m in messages)
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index].get("content")
        found = ASK.search(content) if isinstance(content, str) else None
        if messages[index].get("role") == "user" and found:
            break
    else:
        return Turn(text="Nothing to read.", input_tokens=tokens)
    pages, first, size = int(found[1]), int(found[2]), found[3]
    done = sum(1 for m in messages[index + 1 :] if m.get("role") == "tool")
    if done == 0 and size:
        marks.put((request.model, tokens))
    if done < pages:
        name = request.body["tools"][0]["function"]["name"]  # each variant names it its way
        page = first + done
        arguments = {"page": page, "size": int(size) if size else page_size(page)}
        return Turn(tool_calls=[(name, arguments)], input_tokens=tokens)
    return Turn(text=f"Read pages {first} to {first + pages - 1}.", input_tokens=tokens)


def serve_model(port: int, marks: Queue[tuple[str, int]], ready: Event, stop: Event) -> None:
    """The model process: the scripted server on ``port`` until ``stop``."""
    with ScriptedModelServer(port=port, keep_requests=0) as server:
        server.fallback(lambda request: respond(request, marks))
        ready.set()
        stop.wait()


# ---- the environment --------------------------------------------------------------------------


@dataclass
class Env:
    client: Client
    """orga's client (orga's converter)."""
    plain: Client
    """Temporal's default converter: the minimal chat's."""
    agents: Client | str
    """The Agents plugin's client, or why it is left out."""
    marks: Queue[tuple[str, int]]
    """From the model process: a model's conversation size (tokens) when the long turn began."""
    tokens: dict[str, int] = field(default_factory=dict[str, int])

    def tokens_of(self, model: str) -> int | None:
        """``model``'s mark; ``None`` if it never began the long turn."""
        while model not in self.tokens:
            try:
                name, tokens = self.marks.get(timeout=2)
            except queue.Empty:
                return None
            self.tokens.setdefault(name, tokens)
        return self.tokens[model]


def settings_for(address: str, base_url: str, data: Path) -> Settings:
    """The orga worker's settings: every model call to the scripted model at ``base_url``."""
    provider = ProviderSettings(
        name="openai",
        base_url=base_url,
        api_key=SecretStr("bench"),
        api_key_env="OPENAI_API_KEY",
        default_model="bench",
        official=False,
    )
    return Settings(
        temporal_address=address,
        providers={"openai": provider},
        default_provider="openai",
        data_dir=data,
    )


@asynccontextmanager
async def environment() -> AsyncIterator[Env]:
    """The model process, the dev server, the three variants' workers; torn down afterwards."""
    spawn = multiprocessing.get_context("spawn")
    port, marks, ready, stop = free_port(), spawn.Queue(), spawn.Event(), spawn.Event()
    model = spawn.Process(target=serve_model, args=(port, marks, ready, stop), daemon=True)
    model.start()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as data:
        server = DevServer(Path(data), port=free_port(), headless=True)
        try:
            await server.start()
            while not ready.is_set():
                if not model.is_alive():
                    raise RuntimeError(f"the scripted model's process ended ({model.exitcode})")
                await asyncio.sleep(0.05)
            settings = settings_for(server.address, base_url, Path(data))
            client = await connect(settings)
            await ensure_search_attributes(client)
            async with http_client() as http, AsyncExitStack() as workers:
                plugin = OrgaPlugin(tools=[read_page], settings=settings, http=http, tracing=False)
                [orga_worker] = build_workers(client, settings, plugin, task_queue="long-orga")
                plain = await Client.connect(server.address)
                minimal = MinimalActivities(http, base_url)
                minimal_worker = Worker(
                    plain,
                    task_queue="long-minimal",
                    workflows=[MinimalThreadWorkflow],
                    activities=[minimal.call_model, minimal.run_tool],
                )
                agents = await agents_parts(server.address, base_url)
                for worker in (orga_worker, minimal_worker):
                    await workers.enter_async_context(worker)
                if not isinstance(agents, str):
                    await workers.enter_async_context(agents[1])
                yield Env(client, plain, agents if isinstance(agents, str) else agents[0], marks)
        finally:
            await server.stop()
            stop.set()
            model.join(10)
            if model.is_alive():
                model.terminate()


# ---- one conversation -------------------------------------------------------------------------


@dataclass
class Chat:
    """One variant's conversation: send a message and get the turn's answer; close it."""

    client: Client
    workflow_id: str
    send: Callable[[str], Awaitable[str]]
    close: Callable[[], Awaitable[object]]


CONTEXT_TOKENS = 4_000_000
"""orga's ``context_token_budget``: above any conversation here, so that every model call sends
the conversation whole, as the minimal chat and the Agents SDK do."""


async def orga_chat(env: Env, model: str, calls: int, max_history_events: int) -> Chat:
    config = LoopConfig(
        model=model,
        tools=["read_page"],
        max_iterations=calls + 10,
        max_total_tokens=10**12,  # the scripted model reports the tokens it was sent
        timeout=timedelta(hours=1),
        context_token_budget=CONTEXT_TOKENS,
        max_history_events=max_history_events,
        thread=ThreadConfig(max_turns=10_000),
    )
    chat = await orga.start_thread(env.client, config, task_queue="long-orga")

    async def send(text: str) -> str:
        answer = await chat.send(text)
        if answer.unanswered is not None:
            raise RuntimeError(f"turn {answer.turn} ended unanswered: {answer.unanswered}")
        return answer.output

    return Chat(env.client, chat.id, send, chat.close)


async def plain_chat(client: Client, workflow_name: str, task_queue: str, model: str) -> Chat:
    """A chat of ``MinimalThreadWorkflow`` or ``AgentsThreadWorkflow``."""
    handle = await client.start_workflow(
        workflow_name, model, id=f"{task_queue}-{uuid.uuid4().hex[:10]}", task_queue=task_queue
    )

    async def send(text: str) -> str:
        return await handle.execute_update("send", text, result_type=str)

    return Chat(client, handle.id, send, lambda: handle.signal("close"))


def why(error: BaseException) -> str:
    """An error and its causes, on one line."""
    parts: list[str] = []
    current: BaseException | None = error
    while current is not None and len(parts) < 4:
        text = str(current) or "no answer in time"
        parts.append(f"{type(current).__name__}: {text}")
        current = current.__cause__ or getattr(current, "cause", None)
    return " <- ".join(parts)


async def converse(
    chat: Chat, asks: list[str], last: str, timeout: float
) -> tuple[int, str] | None:
    """Every message in turn, the long turn last; ``None`` when all were answered, else the
    turn in which the conversation stopped and what its client saw (a workflow still running
    then is terminated, with that as the reason)."""
    CALLS.clear()
    for number, text in enumerate([*asks, last], start=1):
        if text is last:
            CALLS.clear()
        try:
            await asyncio.wait_for(chat.send(text), timeout)
        except Exception as error:
            handle = chat.client.get_workflow_handle(chat.workflow_id)
            with contextlib.suppress(Exception):  # Temporal may have ended it already
                await handle.terminate(f"the bench stopped it: {why(error)}")
            return number, why(error)
    await chat.close()
    return None


# ---- the report -------------------------------------------------------------------------------


def _number(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}".replace(",", " ")


def _median(values: list[float]) -> float | None:
    return median(values) if values else None


def _ratio(ratios: list[float]) -> str:
    return "—" if not ratios else f"{median(ratios):.2f}"


def _figure(
    some: list[Measured],
    done: list[Measured],
    at: Callable[[Measured, slice], float],
    n: int,
    digits: int = 1,
) -> list[str]:
    """A figure at the first ``n`` calls (every run that made them), at the last ``n`` (runs
    that completed), and the median of the completed runs' own ratios."""
    first, last = slice(None, n), slice(-n, None)
    return [
        _number(_median([at(r, first) for r in some]), digits),
        _number(_median([at(r, last) for r in done]), digits),
        _ratio([at(r, last) / at(r, first) for r in done]),
    ]


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [c.rjust(w) for c, w in zip(row, widths, strict=True)]
        print("  ".join([row[0].ljust(widths[0]), *cells[1:]]))


def report(results: dict[str, list[Measured]], calls: int, turns: int) -> None:
    """Two tables of medians over the runs, then where each run that stopped stopped. The last
    calls count only in runs that completed; a ratio is the median of the runs' own ratios
    (this process's memory at a run's start depends on the runs before it)."""
    n = min(10, calls)
    early, late = f"1-{n}", f"{calls - n + 1}-{calls}"

    def bytes_at(run: Measured, window: slice) -> float:
        return mean(run.call_bytes[window])

    def ms_at(run: Measured, window: slice) -> float:
        return 1000 * median(run.call_seconds[window])

    def model_ms_at(run: Measured, window: slice) -> float:
        return 1000 * median(run.model_seconds[window])

    def mib_at(run: Measured, window: slice) -> float:  # at the first call, or the last
        return run.rss_kib[window][0 if window.start is None else -1] / 1024

    sizes: list[list[str]] = []
    times: list[list[str]] = []
    for name, runs in results.items():
        done = [r for r in runs if r.stopped is None and len(r.call_bytes) == calls]
        some = [r for r in runs if len(r.call_bytes) >= n]
        sizes.append(
            [
                name,
                f"{len(done)}/{len(runs)}",
                _number(_median([r.tokens for r in runs if r.tokens is not None])),
                _number(_median([r.runs for r in runs])),
                _number(_median([r.runs_in_turn for r in runs])),
                _number(_median([r.events for r in runs])),
                _number(_median([r.history_bytes / 2**20 for r in runs]), 1),
                *_figure(some, done, bytes_at, n, digits=0),
            ]
        )
        slowest = _number(_median([1000 * max(r.call_seconds) for r in done]), 1)
        model = _figure(some, done, model_ms_at, n)[:2]
        memory = _figure(some, done, mib_at, n)
        times.append([name, *_figure(some, done, ms_at, n), *model, slowest, *memory])
    sizes_header = ["variant", "completed", "tokens", "runs", "in turn", "events", "history MiB"]
    _table([*sizes_header, f"B/call {early}", f"B/call {late}", "ratio"], sizes)
    print()
    times_header = ["variant", f"ms/call {early}", f"ms/call {late}", "ratio"]
    model_header = [f"model call {early}", f"model call {late}", "slowest ms"]
    _table([*times_header, *model_header, "RSS MiB call 1", f"call {calls}", "ratio"], times)
    for name, runs in results.items():
        for number, run in enumerate(runs, start=1):
            if run.stopped is None:
                continue
            at = (
                f"at call {run.reached} of {calls}"
                if run.reached
                else f"in turn {run.turn} of {turns}"
            )
            adding = (
                f", each of its last {len(run.call_bytes[-n:])} calls adding "
                f"{_number(mean(run.call_bytes[-n:]))} B"
                if run.call_bytes
                else ""
            )
            print(
                f"{name}, run {number}: stopped {at}, its history {run.history_bytes / 2**20:.1f} "
                f"MiB in {_number(run.events)} events{adding} — {run.stopped}"
            )


# ---- main -------------------------------------------------------------------------------------


def plan(tokens: int) -> list[tuple[int, int]]:
    """``(first page, pages)`` of each turn that grows the conversation to ``tokens``."""
    turns: list[tuple[int, int]] = []
    page = size = 0
    while size / 4 < tokens:
        turns.append((page, PAGES_PER_TURN))
        size += sum(page_size(p) for p in range(page, page + PAGES_PER_TURN))
        page += PAGES_PER_TURN
    return turns


async def main(arguments: argparse.Namespace) -> None:
    calls: int = arguments.calls
    turns = plan(arguments.tokens)
    asks = [f"Read {pages} pages from page {first}." for first, pages in turns]
    after = sum(pages for _, pages in turns)
    last = f"Read {calls} pages from page {after}, {arguments.call_bytes} bytes each."
    build_calls = sum(pages + 1 for _, pages in turns)
    async with environment() as env:
        starters: dict[str, Callable[[str], Awaitable[Chat]]] = {
            "orga": lambda model: orga_chat(env, model, calls, arguments.max_history_events),
            "minimal": lambda model: plain_chat(
                env.plain, "LongMinimalThread", "long-minimal", model
            ),
        }
        if isinstance(env.agents, str):
            print(f"agents: left out — {env.agents}")
        else:
            agents = env.agents
            starters["agents"] = lambda model: plain_chat(
                agents, "LongAgentsThread", "long-agents", model
            )
        results: dict[str, list[Measured]] = {name: [] for name in starters}
        for run in range(1, arguments.runs + 1):
            for name, start in starters.items():
                model = f"{name}-{run}-{uuid.uuid4().hex[:6]}"
                chat = await start(model)
                stop = await converse(chat, asks, last, arguments.turn_timeout)
                events = await history_of(chat.client, chat.workflow_id)
                found = measure(events, build_calls, stop, env.tokens_of(model))
                results[name].append(found)
                times = [1000 * s for s in found.call_seconds]
                print(
                    f"run {run}, {name}: {'completed' if stop is None else 'stopped'}; "
                    f"{found.reached} model calls in the long turn, "
                    f"{found.history_bytes / 2**20:.1f} MiB of history"
                    + (f"; ms/call {median(times[:10]):.1f} (first 10)" if times else "")
                    + (f", {median(times[-10:]):.1f} (last 10)" if stop is None else ""),
                    flush=True,
                )
        print(
            f"\n{len(turns)} turns of {PAGES_PER_TURN} tool calls (results of 8-16 KB) to "
            f"~{arguments.tokens} tokens, then one turn of {calls} tool calls (results of "
            f"{arguments.call_bytes} B); medians of {arguments.runs} run(s); tokens: the "
            "conversation when that turn began"
        )
        report(results, calls, len(turns) + 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a long conversation, three ways")
    parser.add_argument("--tokens", type=int, default=200_000, help="the conversation's size")
    parser.add_argument("--calls", type=int, default=100, help="tool calls of the long turn")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--call-bytes", type=int, default=1024, help="each result of the turn")
    parser.add_argument("--max-history-events", type=int, default=1000, help="orga's")
    parser.add_argument("--turn-timeout", type=float, default=300, help="seconds per turn")
    # The workflows' module must be ``bench.long_conversation`` (the sandbox imports it by
    # name), not ``__main__``.
    from bench.long_conversation import main as run_main

    asyncio.run(run_main(parser.parse_args()))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash the interpreter at exit (sdk-python#300)
