"""What the offline scripted model reads in a request, in either wire format.

* The tools it is offered, the system messages, the calls made and what they returned.
* The turn it answers (``Asked``): it begins at a message a person wrote — the task, a
  thread's next message, a fork's ``--say``, a steering message — never at orga's own notices
  (``[orga …]``, injected context: ``orga.core.speakers``). ``asked`` lists the newest such
  turn first, then the ones before it.
* The number a follow-up refers back to: "now add 8 to that" after an answer of 5 is "add 5
  and 8" (``with_referent``); the number is the newest one in the conversation before the
  message — an answer's result (``2 + 3 = 5``, a typed answer's ``sum``) or a tool's.
* The JSON Schema its answer must match (``answer_schema``): the provider's structured output
  (``response_format``, ``output_config.format``), else the schema orga shows the model in a
  system message (``orga.core.typed_answers``) or in the message that sends a non-matching
  answer back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, cast

from orga.core.speakers import imitated_mark
from orga.core.typed_answers import schema_text, with_schema
from orga.scripted.clues import NUMBER
from orga.scripted.server import RecordedRequest

__all__ = [
    "ERROR",
    "Asked",
    "answer_schema",
    "asked",
    "calls_in",
    "messages_of",
    "number_in",
    "results_in",
    "system_texts",
    "text_of",
    "tools_of",
    "with_referent",
]

ERROR: Final = "ERROR: "
"""How an OpenAI-wire tool result says it is an error (``orga.core.tool_results``)."""
_RESULT_KEYS: Final = ("result", "sum", "total", "answer", "value", "amount", "count", "output")
"""The field of a JSON answer or result that holds its number, in order of preference."""
_REFERENCE: Final = (
    r"(?:the|that|this)\s+(?:last\s+|previous\s+)?(?:result|sum|total|answer|number|value)"
    r"|that|this|it"
)
_ADD_TO: Final = re.compile(
    rf"\b(add|adding)\s+({NUMBER.pattern})\s+to\s+(?:{_REFERENCE})\b", re.IGNORECASE
)
_REFERS: Final = re.compile(rf"\b(?:{_REFERENCE})\b", re.IGNORECASE)
_NOTICE: Final = with_schema([], {})[0].content.removesuffix(schema_text({}))
"""How orga shows a typed loop's schema in a system message (the schema follows it)."""
_RETRY: Final = "The schema: "
"""Where the schema follows in the message that sends a non-matching answer back."""


def messages_of(request: RecordedRequest) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], request.body.get("messages") or [])


def tools_of(request: RecordedRequest) -> list[tuple[str, dict[str, Any]]]:
    """The advertised tools as ``(name, JSON schema)``, in either wire format."""
    found: list[tuple[str, dict[str, Any]]] = []
    for item in cast(list[dict[str, Any]], request.body.get("tools") or []):
        function = cast(dict[str, Any], item.get("function") or item)
        schema = cast(dict[str, Any], function.get("parameters") or function.get("input_schema"))
        found.append((str(function.get("name", "")), schema or {}))
    return found


def system_texts(request: RecordedRequest) -> list[str]:
    """The system messages' texts (Anthropic's ``system`` field first)."""
    system = request.body.get("system")
    texts = [text_of(system)] if system is not None else []
    for message in messages_of(request):
        if message.get("role") == "system":
            texts.append(text_of(message.get("content")))
    return texts


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or its text blocks joined."""
    if isinstance(content, list):
        blocks = cast(list[Any], content)
        return "\n".join(
            str(_object(b).get("text", "")) for b in blocks if _object(b).get("type") == "text"
        )
    return "" if content is None else str(content)


def _object(value: Any) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def calls_in(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls made in ``messages``, ``(name, arguments)``, in order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    for message in messages:
        for call in cast(list[dict[str, Any]], message.get("tool_calls") or []):
            function = _object(call.get("function"))
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


def results_in(messages: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The tool results in ``messages``, ``(text, is_error)``, in order."""
    found: list[tuple[str, bool]] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool":
            text = text_of(content)
            found.append((text.removeprefix(ERROR), text.startswith(ERROR)))
        elif isinstance(content, list):
            for block in cast(list[dict[str, Any]], content):
                if block.get("type") == "tool_result":
                    result = block.get("content")
                    text = result if isinstance(result, str) else text_of(result)
                    found.append((text, bool(block.get("is_error"))))
    return found


# ---- the turn being answered -------------------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """A turn: the message a person wrote that begins it, and what came before and after."""

    task: str
    """What the person wrote."""
    earlier: list[dict[str, Any]]
    """The conversation before it (tool results that share its message included)."""
    since: list[dict[str, Any]]
    """The messages after it: the calls made for it, their results, orga's notices."""
    after_answer: bool
    """It follows an answer (a thread's next turn, a fork after an answer), not a turn that is
    still calling tools (a steering message, a fork after a tool call)."""


def _spoken(message: dict[str, Any]) -> str | None:
    """What a person wrote in ``message``, or ``None`` (not a user's, or orga's own words)."""
    if message.get("role") != "user":
        return None
    text = text_of(message.get("content")).strip()
    return text if text and imitated_mark(text) is None else None


def _answer(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and not calls_in([message])


def _turn_part(message: dict[str, Any]) -> bool:
    """Whether ``message`` is the model's or a person's, or carries tool results (not a system
    message, not a notice of orga's)."""
    if message.get("role") in ("assistant", "tool"):
        return True
    return message.get("role") == "user" and bool(results_in([message]) or _spoken(message))


def asked(request: RecordedRequest) -> list[Asked]:
    """The turns of the conversation, the newest first (see the module docstring); when no
    message is a person's, the whole conversation under the first user text."""
    messages = messages_of(request)
    found: list[Asked] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        task = _spoken(message)
        if task is None:
            continue
        before = messages[:index]
        previous = next((m for m in reversed(before) if _turn_part(m)), None)
        content = message.get("content")
        if isinstance(content, list):  # Anthropic: results of earlier calls share the message
            blocks = cast(list[dict[str, Any]], content)
            shared = [b for b in blocks if b.get("type") == "tool_result"]
            if shared:
                before = [*before, {"role": "user", "content": shared}]
                previous = before[-1]
        after_answer = previous is not None and _answer(previous)
        found.append(Asked(task, before, messages[index + 1 :], after_answer))
    return found or [Asked(request.first_user_text(), [], messages, after_answer=False)]


# ---- what a follow-up refers back to ----------------------------------------------------------


def with_referent(task: str, earlier: list[dict[str, Any]]) -> str | None:
    """``task`` with the first "that", "it" or "the result" replaced by the number it refers
    back to (the newest in ``earlier``), or ``None`` when it refers to none or there is none."""
    if _REFERS.search(task) is None:
        return None
    number = _last_number(earlier)
    if number is None:
        return None
    moved = _ADD_TO.sub(lambda m: f"{m.group(1)} {number} and {m.group(2)}", task, count=1)
    if moved != task:  # "add 8 to that" is "that + 8"
        return moved
    return _REFERS.sub(number, task, count=1)


def _last_number(earlier: list[dict[str, Any]]) -> str | None:
    """The newest number of an answer or a tool's result in ``earlier``."""
    for message in reversed(earlier):
        if _answer(message):
            texts = [text_of(message.get("content"))]
        else:
            texts = [text for text, failed in reversed(results_in([message])) if not failed]
        for text in texts:
            if (number := number_in(text)) is not None:
                return number
    return None


def number_in(text: str) -> str | None:
    """A JSON value's number (its result field's, for an object), else the text's last one."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        fields = cast(dict[str, Any], value)
        for key in (*_RESULT_KEYS, *fields):
            found = fields.get(key)
            if isinstance(found, int | float) and not isinstance(found, bool):
                return json.dumps(found)
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else None


# ---- the answer's schema -----------------------------------------------------------------------


def answer_schema(request: RecordedRequest) -> dict[str, Any] | None:
    """The JSON Schema the answer must match, if the request shows one."""
    body = request.body
    constrained = _object(_object(body.get("response_format")).get("json_schema")).get("schema")
    if isinstance(constrained, dict):
        return cast(dict[str, Any], constrained)
    anthropic = _object(_object(body.get("output_config")).get("format")).get("schema")
    if isinstance(anthropic, dict):
        return cast(dict[str, Any], anthropic)
    shown = [(text, _NOTICE) for text in system_texts(request)]
    shown += [
        (text_of(m.get("content")), _RETRY)
        for m in messages_of(request)
        if m.get("role") == "user" and text_of(m.get("content")).startswith("[orga]")
    ]
    for text, marker in reversed(shown):
        at = text.find(marker)
        if at < 0:
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(text, at + len(marker))
        except ValueError:
            continue
        if isinstance(value, dict):
            return cast(dict[str, Any], value)
    return None
