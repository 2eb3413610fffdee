"""The offline scripted model: a stand-in for a real model, for trying orga without a key.

``uv run worker.py --scripted`` (or ``ORGA_PROVIDER=scripted``) starts a ``ScriptedModelServer``
on 127.0.0.1 in the worker's process and serves it as the provider ``scripted``, model
``orga-offline-scripted-model``; ``orga demo`` uses it when no key is configured. It is not a
language model and says so: every answer in prose starts with ``[offline scripted model]``
(a typed answer is JSON only; its free-text fields say it).

How it answers, deterministically:

* it calls each advertised tool at most once, one per turn, in the order advertised, with
  arguments a careful model would pass (``orga.scripted.arguments``: taken from the
  task by the tool's JSON schema, optional ones left out, bounds and enums kept);
* it does not call a tool whose required arguments the task does not give (no file for
  ``path``, no time zone for ``timezone``), ``store_knowledge`` unless the task asks to
  remember something ("Remember that ann prefers tea" → ``ann`` / ``prefers`` / ``tea``; then
  it does not ``recall_knowledge``), nor ``delegate`` unless the task names an agent it may
  hand work to;
* it answers the newest message a person wrote, with the calls made since
  (``orga.scripted.reading``): a thread's next message, a fork's (``--say``) after an answer
  or after a turn that called tools — never orga's own notices. A message that refers back
  ("now add 8 to that", "the result plus 10") is read with the newest number of the
  conversation before it, an answer's or a tool's. A message in the middle of a turn that
  gives the tools nothing (a steering message) lets the turn it joined go on;
* then it answers with what the tools returned: ``add`` as ``a + b = sum``, a JSON object as
  its fields, text by its first lines; a failed or denied call as the error it got. When it
  called nothing, it says why for each tool;
* a typed loop's answer (its schema shown by orga or asked of the provider) is only a JSON
  value built from that schema (``orga.scripted.answers``): the calls' arguments, the tools'
  results and the task's values where the names fit (``{"a": 17, "b": 25, "sum": 42}`` after
  ``add``), the prose answer above for free text. Tools are called first, as in any loop.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Generator
from typing import Any, Final, cast

from pydantic import SecretStr

from orga.contracts.delegation import DELEGATE_TOOL
from orga.contracts.knowledge import RECALL_TOOL, STORE_TOOL
from orga.contracts.vocabulary import SCRIPTED
from orga.runtime.settings import ProviderSettings, Settings
from orga.scripted.answers import typed_answer
from orga.scripted.arguments import Filling, fill_arguments
from orga.scripted.clues import fact_to_remember
from orga.scripted.reading import (
    ERROR,
    answer_schema,
    asked,
    calls_in,
    results_in,
    system_texts,
    tools_of,
    with_referent,
)
from orga.scripted.server import RecordedRequest, ScriptedModelServer, Turn

__all__ = [
    "LABEL",
    "OFFLINE_MODEL",
    "offline_model",
    "offline_settings",
    "serve_offline_model",
]

OFFLINE_MODEL: Final = "orga-offline-scripted-model"
LABEL: Final = "[offline scripted model]"

_AGENT_LINE: Final = re.compile(r"^- ([\w.-]+): ", re.MULTILINE)
_SHOWN_LINES: Final = 5
_LINE_CHARS: Final = 200


def _delegates(request: RecordedRequest) -> list[str]:
    """The agents the system messages say this loop may hand work to."""
    texts = system_texts(request)
    return [agent for text in texts if DELEGATE_TOOL in text for agent in _AGENT_LINE.findall(text)]


def _plan(name: str, schema: dict[str, Any], task: str, request: RecordedRequest) -> Filling:
    """The arguments to call ``name`` with, or why not to call it."""
    fact = fact_to_remember(task)
    if name == STORE_TOOL:
        if fact is None:
            return Filling(missing="the task does not ask me to remember anything")
        if isinstance(fact, str):
            return Filling(missing=f"I could not tell the subject, relation and value in {fact!r}")
        given: dict[str, Any] = dict(zip(("subject", "predicate", "object"), fact, strict=True))
        return fill_arguments(schema, task, tool=name, given=given)
    if name == RECALL_TOOL and fact is not None:
        return Filling(missing="the task asks me to remember something, not to recall")
    if name == DELEGATE_TOOL:
        agents = _delegates(request)
        named = [a for a in agents if re.search(rf"(?<![\w-]){re.escape(a)}(?![\w-])", task)]
        if not named:
            return Filling(
                missing="the task names none of the agents I may hand work to "
                f"({', '.join(agents) or 'none'})"
            )
        return fill_arguments(schema, task, tool=name, given={"agent": named[0]})
    return fill_arguments(schema, task, tool=name)


def offline_model(request: RecordedRequest) -> Turn:
    """The scripted model's next turn for ``request`` (see the module docstring)."""
    tools = tools_of(request)
    turns = asked(request)
    index = 0
    while True:
        turn = turns[index]
        calls = calls_in(turn.since)
        task = with_referent(turn.task, turn.earlier) or turn.task
        call, skipped = _next_call(turn.task, task, tools, {name for name, _ in calls}, request)
        if call is not None:
            return Turn(text=f"{LABEL} Calling {call[0]}.", tool_calls=[call])
        if calls or turn.after_answer or index == len(turns) - 1:
            break
        index += 1  # a message in the middle of a turn that gives the tools nothing (a
        # steering message): the turn it joined goes on
    results = results_in(turn.since)
    prose = _prose(turn.task, tools, skipped, calls, results)
    schema = answer_schema(request)
    if schema is None:
        return Turn(text=prose)
    return Turn(text=typed_answer(schema, task=task, prose=prose, calls=calls, results=results))


def _next_call(
    task: str,
    resolved: str,
    tools: list[tuple[str, dict[str, Any]]],
    called: set[str],
    request: RecordedRequest,
) -> tuple[tuple[str, dict[str, Any]] | None, list[tuple[str, str]]]:
    """The next call to make for ``task`` (``resolved``: with what it refers back to), or
    none and why each tool not called yet was left alone."""
    skipped: list[tuple[str, str]] = []
    for name, schema in tools:
        if name in called:
            continue
        filling = _plan(name, schema, task, request)
        if filling.missing is not None and resolved != task:
            filling = _plan(name, schema, resolved, request)  # "add 8 to that": that is 5
        if filling.missing is None:
            return (name, filling.arguments), skipped
        skipped.append((name, filling.missing))
    return None, skipped


def _prose(
    task: str,
    tools: list[tuple[str, dict[str, Any]]],
    skipped: list[tuple[str, str]],
    calls: list[tuple[str, dict[str, Any]]],
    results: list[tuple[str, bool]],
) -> str:
    """The answer in words: what the tools returned, or why none was called."""
    if not tools:
        return f"{LABEL} No tools were given to me; the task was: {task}"
    if not calls:
        lines = [f"{LABEL} I called no tool, as I could not tell what to pass:"]
        lines += [f"- {name}: {why}." for name, why in skipped]
        return "\n".join([*lines, f"The task was: {task}"])
    if len(calls) == 1 and calls[0][0] == "add" and results and not results[0][1]:
        return f"{LABEL} {_shown(calls[0], results[0])} (by the add tool)."
    lines = [f"{LABEL} What the tools returned:"]
    for call, result in zip(calls, results, strict=False):
        lines.append(f"- {call[0]}: {_shown(call, result)}")
    return "\n".join(lines)


def _shown(call: tuple[str, dict[str, Any]], result: tuple[str, bool]) -> str:
    """What a call returned, as the answer reports it."""
    (name, arguments), (text, failed) = call, result
    if failed:
        return f"{ERROR}{_lines(text)}"
    if name == "add" and {"a", "b"} <= arguments.keys():
        return f"{arguments['a']} + {arguments['b']} = {text.strip()}"
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict) and value:
        fields = cast(dict[str, Any], value)
        if all(not isinstance(v, dict | list) for v in fields.values()):
            return ", ".join(f"{k}: {v}" for k, v in fields.items())
    return _lines(text)


def _lines(text: str) -> str:
    """The first non-empty lines of ``text``, each on one line and cut, with how many more."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    shown = [
        line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…"
        for line in lines[:_SHOWN_LINES]
    ]
    if len(lines) > _SHOWN_LINES:
        shown.append(f"… ({len(lines) - _SHOWN_LINES} more lines)")
    return "\n  ".join(shown)


def offline_settings(settings: Settings, server: ScriptedModelServer) -> Settings:
    """``settings`` with the ``scripted`` provider served by ``server`` as the default."""
    provider = ProviderSettings(
        name=SCRIPTED,
        base_url=server.openai_base_url,
        api_key=SecretStr("offline"),
        api_key_env="(none: the offline scripted model needs no key)",
        default_model=OFFLINE_MODEL,
        official=False,
    )
    providers = {**settings.providers, SCRIPTED: provider}
    return settings.model_copy(update={"providers": providers, "default_provider": SCRIPTED})


@contextlib.contextmanager
def serve_offline_model(settings: Settings) -> Generator[Settings]:
    """Run the offline scripted model on 127.0.0.1; yield settings that use it by default."""
    with ScriptedModelServer(keep_requests=100) as server:
        server.fallback(offline_model)
        yield offline_settings(settings, server)
