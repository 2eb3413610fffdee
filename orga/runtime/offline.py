"""The offline scripted model: a stand-in for a real model, for trying orga without a key.

``uv run worker.py --scripted`` (or ``ORGA_PROVIDER=scripted``) starts a ``ScriptedModelServer``
on 127.0.0.1 in the worker's process and serves it as the provider ``scripted``, model
``orga-offline-scripted-model``; ``orga demo`` uses it when no key is configured. It is not a
language model and says so: every answer starts with ``[offline scripted model]``.

How it answers, deterministically:

* while an advertised tool has not been called yet, it calls the first such tool, with
  arguments taken from the task's text by their schema: numbers for number parameters (in
  order), the first URL for ``url``-like parameters, the first email address for
  ``email``-like ones, the first file path for ``path``-like ones, the task's text for any
  other required string;
* then it answers with what the tools returned (``add`` as ``a + b = sum``); a denied or failed
  call is reported as such.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator
from typing import Any, Final, cast

from pydantic import SecretStr

from orga.contracts.vocabulary import SCRIPTED
from orga.runtime.scripted_model import RecordedRequest, ScriptedModelServer, Turn
from orga.runtime.settings import ProviderSettings, Settings

__all__ = ["LABEL", "OFFLINE_MODEL", "offline_model", "offline_settings", "serve_offline_model"]

OFFLINE_MODEL: Final = "orga-offline-scripted-model"
LABEL: Final = "[offline scripted model]"

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_URL = re.compile(r"https?://[^\s<>\"'`]+")
_PATH = re.compile(r"(?<![\w/.:@-])(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL_NAMES = ("url", "uri", "link", "href")
_PATH_NAMES = ("path", "file", "filename")


def _tools(request: RecordedRequest) -> list[tuple[str, dict[str, Any]]]:
    """The advertised tools as ``(name, JSON schema)``, in either wire format."""
    found: list[tuple[str, dict[str, Any]]] = []
    for item in cast(list[dict[str, Any]], request.body.get("tools") or []):
        function = cast(dict[str, Any], item.get("function") or item)
        schema = cast(dict[str, Any], function.get("parameters") or function.get("input_schema"))
        found.append((str(function.get("name", "")), schema or {}))
    return found


def _called(request: RecordedRequest) -> list[str]:
    """Names of the tools already called in the conversation, in order."""
    names: list[str] = []
    for message in cast(list[dict[str, Any]], request.body.get("messages") or []):
        for call in cast(list[dict[str, Any]], message.get("tool_calls") or []):
            names.append(str(cast(dict[str, Any], call.get("function") or {}).get("name", "")))
        content = message.get("content")
        if isinstance(content, list):
            for block in cast(list[dict[str, Any]], content):
                if block.get("type") == "tool_use":
                    names.append(str(block.get("name", "")))
    return names


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _arguments(schema: dict[str, Any], task: str) -> dict[str, Any]:
    properties = cast(dict[str, dict[str, Any]], schema.get("properties") or {})
    required = set(cast(list[str], schema.get("required") or []))
    numbers = iter(_NUMBER.findall(task))
    url = next(iter(_URL.findall(task)), None)
    email = next(iter(_EMAIL.findall(task)), None)
    path = next(iter(p for p in _PATH.findall(task) if not p.startswith("http")), None)
    arguments: dict[str, Any] = {}
    for name, spec in properties.items():
        kinds = {spec.get("type")} | {
            str(s.get("type")) for s in cast(list[dict[str, Any]], spec.get("anyOf") or [])
        }
        lowered = name.lower()
        if kinds & {"number", "integer"}:
            arguments[name] = _number(next(numbers, "0"))
        elif "string" in kinds and any(n in lowered for n in _URL_NAMES) and url:
            arguments[name] = url
        elif "string" in kinds and "mail" in lowered and email:
            arguments[name] = email
        elif "string" in kinds and any(n in lowered for n in _PATH_NAMES) and path:
            arguments[name] = path
        elif "string" in kinds and name in required:
            arguments[name] = task
        elif "boolean" in kinds and name in required:
            arguments[name] = False
    return arguments


def offline_model(request: RecordedRequest) -> Turn:
    """The scripted model's next turn for ``request`` (see the module docstring)."""
    task = request.first_user_text()
    called = _called(request)
    for name, schema in _tools(request):
        if name not in called:
            arguments = _arguments(schema, task)
            return Turn(
                text=f"{LABEL} Calling {name}.",
                tool_calls=[(name, arguments)],
            )
    results = request.tool_result_texts()
    if not results:
        return Turn(text=f"{LABEL} No tools were given to me; the task was: {task}")
    if called and called[-1] == "add" and not results[-1].startswith("ERROR"):
        numbers = [_number(n) for n in _NUMBER.findall(task)][:2]
        while len(numbers) < 2:
            numbers.append(0)
        return Turn(text=f"{LABEL} {numbers[0]} + {numbers[1]} = {results[-1]} (by the add tool).")
    lines = [f"{LABEL} What the tools returned:"]
    for name, result in zip(called, results, strict=False):
        shown = " ".join(result.split())
        lines.append(f"- {name}: {shown[:500]}{'…' if len(shown) > 500 else ''}")
    return Turn(text="\n".join(lines))


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
