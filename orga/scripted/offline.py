"""The offline scripted model: a stand-in for a real model, for trying orga without a key.

``uv run worker.py --scripted`` (or ``ORGA_PROVIDER=scripted``) starts a ``ScriptedModelServer``
on 127.0.0.1 in the worker's process and serves it as the provider ``scripted``, model
``orga-offline-scripted-model``; ``orga demo`` uses it when no key is configured. It is not a
language model and says so: every answer starts with ``[offline scripted model]``.

How it answers, deterministically:

* it calls each advertised tool at most once, one per turn, in the order advertised, with
  arguments a careful model would pass (``orga.scripted.arguments``: taken from the
  task by the tool's JSON schema, optional ones left out, bounds and enums kept);
* it does not call a tool whose required arguments the task does not give (no file for
  ``path``, no time zone for ``timezone``), ``store_knowledge`` unless the task asks to
  remember something ("Remember that ann prefers tea" → ``ann`` / ``prefers`` / ``tea``; then
  it does not ``recall_knowledge``), nor ``delegate`` unless the task names an agent it may
  hand work to;
* in a thread (a conversation of several turns) each turn is a task of its own: the newest
  user message that follows an answer, with the calls made since;
* then it answers with what the tools returned: ``add`` as ``a + b = sum``, a JSON object as
  its fields, text by its first lines; a failed or denied call as the error it got. When it
  called nothing, it says why for each tool.
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
from orga.scripted.arguments import Filling, fill_arguments
from orga.scripted.clues import fact_to_remember
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
_ERROR: Final = "ERROR: "
_SHOWN_LINES: Final = 5
_LINE_CHARS: Final = 200


def _tools(request: RecordedRequest) -> list[tuple[str, dict[str, Any]]]:
    """The advertised tools as ``(name, JSON schema)``, in either wire format."""
    found: list[tuple[str, dict[str, Any]]] = []
    for item in cast(list[dict[str, Any]], request.body.get("tools") or []):
        function = cast(dict[str, Any], item.get("function") or item)
        schema = cast(dict[str, Any], function.get("parameters") or function.get("input_schema"))
        found.append((str(function.get("name", "")), schema or {}))
    return found


def _this_turn(request: RecordedRequest) -> list[dict[str, Any]]:
    """The messages of the turn being answered: from the newest user message that follows an
    answer (a thread's next message; not orga's own feedback, ``[orga …]``), else all of them
    (the task is then the first user message)."""
    messages = cast(list[dict[str, Any]], request.body.get("messages") or [])
    start = None
    for index in range(1, len(messages)):
        before, message = messages[index - 1], messages[index]
        answered = before.get("role") == "assistant" and not _calls([before])
        text = message.get("content")
        spoken = isinstance(text, str) and not text.startswith("[orga")
        if answered and message.get("role") == "user" and spoken:
            start = index
    return messages if start is None else messages[start:]


def _calls(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls made in ``messages``, ``(name, arguments)``, in order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for message in messages:
        for call in cast(list[dict[str, Any]], message.get("tool_calls") or []):
            function = cast(dict[str, Any], call.get("function") or {})
            try:
                arguments: Any = json.loads(str(function.get("arguments") or "{}"))
            except json.JSONDecodeError:
                arguments = {}
            calls.append((str(function.get("name", "")), _object(arguments)))
        content = message.get("content")
        if isinstance(content, list):
            for block in cast(list[dict[str, Any]], content):
                if block.get("type") == "tool_use":
                    calls.append((str(block.get("name", "")), _object(block.get("input"))))
    return calls


def _object(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _results(messages: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The tool results in ``messages``, ``(text, is_error)``, in order."""
    found: list[tuple[str, bool]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool":
            text = _text(content)
            found.append((text.removeprefix(_ERROR), text.startswith(_ERROR)))
        elif isinstance(content, list):
            for block in cast(list[dict[str, Any]], content):
                if block.get("type") == "tool_result":
                    found.append((_text(block.get("content")), bool(block.get("is_error"))))
    return found


def _text(content: Any) -> str:
    if isinstance(content, list):
        blocks = cast(list[Any], content)
        return "\n".join(str(_object(b).get("text", "")) for b in blocks)
    return "" if content is None else str(content)


def _delegates(request: RecordedRequest) -> list[str]:
    """The agents the system messages say this loop may hand work to."""
    system = request.body.get("system")
    texts = [_text(system)] if system is not None else []
    for message in cast(list[dict[str, Any]], request.body.get("messages") or []):
        if message.get("role") == "system":
            texts.append(_text(message.get("content")))
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
    messages = _this_turn(request)
    turn = messages[0] if messages and messages[0].get("role") == "user" else None
    task = _text(turn.get("content")) if turn is not None else request.first_user_text()
    calls = _calls(messages)
    called = {name for name, _ in calls}
    tools = _tools(request)
    skipped: list[tuple[str, str]] = []
    for name, schema in tools:
        if name in called:
            continue
        filling = _plan(name, schema, task, request)
        if filling.missing is None:
            return Turn(text=f"{LABEL} Calling {name}.", tool_calls=[(name, filling.arguments)])
        skipped.append((name, filling.missing))
    if not tools:
        return Turn(text=f"{LABEL} No tools were given to me; the task was: {task}")
    if not calls:
        lines = [f"{LABEL} I called no tool, as I could not tell what to pass:"]
        lines += [f"- {name}: {why}." for name, why in skipped]
        return Turn(text="\n".join([*lines, f"The task was: {task}"]))
    results = _results(messages)
    if len(calls) == 1 and calls[0][0] == "add" and results and not results[0][1]:
        return Turn(text=f"{LABEL} {_shown(calls[0], results[0])} (by the add tool).")
    lines = [f"{LABEL} What the tools returned:"]
    for call, result in zip(calls, results, strict=False):
        lines.append(f"- {call[0]}: {_shown(call, result)}")
    return Turn(text="\n".join(lines))


def _shown(call: tuple[str, dict[str, Any]], result: tuple[str, bool]) -> str:
    """What a call returned, as the answer reports it."""
    (name, arguments), (text, failed) = call, result
    if failed:
        return f"{_ERROR}{_lines(text)}"
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
