"""Tools: the ``@tool`` decorator, what a tool declares, and how its arguments are checked.

A tool is a plain function (sync or async). Its JSON schema comes from its type hints, its
description and parameter descriptions from its Google-style docstring. A parameter annotated
``ToolContext`` is filled by the runtime (call id, workflow id, idempotency key) and never
shown to the model:

    @tool(serial=True, resource_arg="path")
    def write_note(path: str, text: str, ctx: ToolContext) -> str:
        '''Write a note.

        Args:
            path: where to write it.
            text: what to write.
        '''

Worker-side code (never imported by workflows): the registry holds the functions the tool
activity runs. The gate and the tool activity use the same argument check
(``parse_arguments`` then ``Tool.validate``), so a call is judged the same way everywhere.

Over 400 lines: the decorator and the registry it fills are one idea (what a tool declares,
how it is called, how its arguments are checked).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Protocol, cast, get_args, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from orga.contracts.errors import InvalidConfig, ToolInputError, describe_validation_error
from orga.contracts.tools import LOCAL_TOOL_TIMEOUT, ToolDefinition
from orga.core.arguments import parse_arguments
from orga.tools.ledger import Ledger

__all__ = ["Tool", "ToolContext", "ToolRegistry", "ToolSource", "parse_arguments", "tool"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class ToolContext:
    """What the runtime tells a tool about the call it is serving."""

    call_id: str
    """The model's id for this call."""
    workflow_id: str
    """The loop's workflow id (stable across continue-as-new)."""
    idempotency_key: str
    """``<workflow id>/<first run id>/<call id>``: the same for every retry of this call, after
    continue-as-new and on any worker; never the same for two executions of one workflow id.
    Pass it to a remote API as its idempotency key (and record the answer) to make an external
    effect happen once."""
    attempt: int = 1
    """Temporal's attempt number of this call (1 on the first try)."""
    ledger: Ledger | None = None
    """The worker's idempotency ledger (``orga.tools.ledger``), in the store every worker
    shares: ``ctx.ledger.once(ctx.idempotency_key, effect)``."""
    knowledge_namespace: str | None = None
    """The loop's knowledge store (``config.knowledge``): what ``recall_knowledge`` and
    ``store_knowledge`` read and write."""
    knowledge_directory: str | None = None
    """The directory the loop works in (``config.knowledge.directory``; ``None``: the root):
    ``recall_knowledge`` brings no other directory's conventions."""
    step_key: str | None = None
    """For a task's compensation: the idempotency key of the step it undoes, so it can find
    what that step did (``ctx.ledger.recorded(ctx.step_key)``) and do nothing if it did
    nothing (the step may have failed, or been cancelled, before its effect)."""
    cancelled: threading.Event = field(default_factory=threading.Event)
    """Set when the call is cancelled (its task stopped; Temporal tells the worker through the
    call's heartbeats). An async tool is cancelled where it awaits; a sync tool runs in a thread
    that nothing can stop, so it should look (``ctx.cancelled.is_set()``, or wait on it instead
    of sleeping) and return early. One that does not is waited for: its effect lands, and then
    its compensation undoes it."""


RECONCILE_TIMEOUT: Final = timedelta(seconds=30)
"""How long a tool's ``reconcile`` may take by default (``tool(reconcile_timeout=...)``)."""

Reconcile = Callable[["ToolContext"], Any]
"""``reconcile(ctx)``: what became of a call whose attempt was lost (``tool(reconcile=...)``):
what it returned if its effect happened, else ``None``; sync or async."""


class Tool:
    """A registered tool: its definition plus the function that runs it."""

    def __init__(
        self,
        fn: Callable[..., Any],
        definition: ToolDefinition,
        arguments_model: type[BaseModel],
        context_param: str | None,
        *,
        idempotent: bool = False,
        reconcile: Reconcile | None = None,
    ) -> None:
        self.fn = fn
        self.definition = definition
        self.arguments_model = arguments_model
        self.context_param = context_param
        self.idempotent = idempotent
        """Safe to run again with the same ``ctx.idempotency_key``: an attempt whose outcome
        is unknown is run again (``orga.tools._outcomes``)."""
        self.reconcile = reconcile
        """Asks the outside world what became of a call whose outcome is unknown."""
        self.reconcile_timeout = RECONCILE_TIMEOUT
        """How long ``reconcile`` may take to answer (past it, the outcome is unknown)."""

    @property
    def name(self) -> str:
        return self.definition.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the undecorated function (tools stay usable as plain functions)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name!r}>"

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check arguments against the schema; return them with pydantic's coercions applied.

        Raises:
            ToolInputError: naming each invalid field and why.
        """
        try:
            model = self.arguments_model.model_validate(arguments)
        except ValidationError as error:
            problems = describe_validation_error(error, "arguments")
            raise ToolInputError(
                f"arguments for tool {self.name!r} do not match its schema: {problems}. "
                "Call it again with arguments that match the schema."
            ) from error
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Run the function with validated arguments (sync functions run in a thread)."""
        kwargs = dict(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = context
        if inspect.iscoroutinefunction(self.fn):
            try:
                return await cast(Callable[..., Awaitable[Any]], self.fn)(**kwargs)
            except asyncio.CancelledError:
                context.cancelled.set()
                raise
        running = asyncio.ensure_future(asyncio.to_thread(self.fn, **kwargs))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            # The thread cannot be stopped: tell the tool, wait for it to return (its effect,
            # if any, has then landed), and only then report the cancellation.
            context.cancelled.set()
            while not running.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([running])
            raise


def _docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the description and per-argument descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        if re.fullmatch(r"[A-Z][A-Za-z ]*:", stripped) and not line.startswith(" "):
            section = stripped[:-1].lower()
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in {"args", "arguments", "parameters"} and stripped:
            match = re.match(r"^(\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$", stripped)
            if match and line.startswith("    ") and not line.startswith("     "):
                current = str(match.group(1))
                params[current] = str(match.group(2))
            elif current is not None:
                params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(description).strip(), params


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys: noise in a prompt."""
    if isinstance(schema, dict):
        items = cast(dict[str, Any], schema).items()
        return {k: _strip_titles(v) for k, v in items if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in cast(list[Any], schema)]
    return schema


def _seconds(value: timedelta | float | None) -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        return value
    return timedelta(seconds=value)


def _make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    timeout: timedelta | float | None,
    serial: bool,
    requires_approval: bool,
    resource_arg: str | None,
    evidence: bool,
    path_arguments: Sequence[str],
    local: bool = False,
) -> Tool:
    tool_name = name or fn.__name__
    if not _NAME.fullmatch(tool_name):
        raise InvalidConfig(
            f"tool name {tool_name!r} is not allowed: use letters, digits, '_' or '-', "
            "starting with a letter, at most 64 characters"
        )
    summary, param_docs = _docstring_parts(fn.__doc__)
    try:
        hints = get_type_hints(fn)
    except NameError as error:
        raise InvalidConfig(
            f"tool {tool_name!r}: its type hints cannot be resolved ({error}); import the "
            "types it names at module level"
        ) from error
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext or ToolContext in get_args(annotation):
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidConfig(f"tool {tool_name!r}: *args and **kwargs cannot be described")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            annotation,
            Field(default=default, description=param_docs.get(param.name)),
        )
    unknown = [name for name in path_arguments if name not in fields]
    if unknown:
        raise InvalidConfig(
            f"tool {tool_name!r}: path_arguments {unknown!r} are not among its parameters "
            f"{sorted(fields)!r}"
        )
    if resource_arg is not None and resource_arg not in fields:
        raise InvalidConfig(
            f"tool {tool_name!r}: resource_arg {resource_arg!r} is not one of its parameters "
            f"{sorted(fields)!r}"
        )
    if local:
        limit = LOCAL_TOOL_TIMEOUT
        chosen = _seconds(timeout)
        if chosen is not None and chosen > limit:
            raise InvalidConfig(
                f"tool {tool_name!r}: local=True allows a timeout of at most "
                f"{limit.total_seconds():g} s (a local activity holds the loop's workflow task "
                f"while it runs), not {chosen.total_seconds():g} s; make it a regular tool"
            )
        timeout = chosen or limit
    model = create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    definition = ToolDefinition(
        name=tool_name,
        description=(description or summary or tool_name).strip(),
        parameters=_strip_titles(model.model_json_schema()),
        serial=serial,
        timeout=_seconds(timeout),
        requires_approval=requires_approval,
        resource_arg=resource_arg,
        evidence=evidence,
        path_arguments=list(path_arguments),
        local=local,
    )
    return Tool(fn, definition, model, context_param)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: timedelta | float | None = None,
    serial: bool = False,
    requires_approval: bool = False,
    resource_arg: str | None = None,
    evidence: bool = False,
    path_arguments: Sequence[str] = (),
    local: bool = False,
    idempotent: bool = False,
    reconcile: Reconcile | None = None,
    reconcile_timeout: timedelta | float = RECONCILE_TIMEOUT,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: timedelta | float | None = None,
    serial: bool = False,
    requires_approval: bool = False,
    resource_arg: str | None = None,
    evidence: bool = False,
    path_arguments: Sequence[str] = (),
    local: bool = False,
    idempotent: bool = False,
    reconcile: Reconcile | None = None,
    reconcile_timeout: timedelta | float = RECONCILE_TIMEOUT,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool, with or without options.

    Args:
        fn: the function (when used as ``@tool`` without parentheses).
        name: the name the model sees; the function's name by default.
        description: what the model reads; the docstring's summary by default.
        timeout: start-to-close timeout of one attempt (seconds or ``timedelta``).
        serial: the tool has side effects; its calls run one at a time, in order.
        requires_approval: under the default gate, each call waits for a human decision.
        resource_arg: the argument that names the resource a call touches.
        evidence: the tool gathers evidence; loops track how much each call adds.
        path_arguments: arguments naming a file under a root, normalised before the gate.
        local: a short pure tool, run as a local activity (no server round trip): still gated,
            retried and journaled; its attempts may take at most 10 s (its default timeout),
            and it cannot heartbeat, so ``ctx.cancelled`` is only set if it is async.
        idempotent: running a call again with the same ``ctx.idempotency_key`` does no harm
            (the tool passes the key on, or uses ``ctx.ledger``): a call whose attempt was lost
            after it began (its worker died, it timed out) simply runs again.
        reconcile: ``reconcile(ctx)`` asks the outside world, by ``ctx.idempotency_key``, what
            became of a call whose attempt was lost after it began: what the call returned
            if its effect happened (the call is then delivered, not run again), ``None`` if it
            did not (it runs again). A tool with effects (``serial`` or ``requires_approval``)
            and neither: a person settles such a call on the desk (confirm what happened, run
            it again, or skip it). A tool without effects runs again.
        reconcile_timeout: how long ``reconcile`` may take (seconds or ``timedelta``; 30 s):
            one that runs past it, raises or answers neither a result nor ``None`` settles
            nothing — the outcome is unknown and a person decides.
    """

    def decorate(function: Callable[..., Any]) -> Tool:
        made = _make_tool(
            function,
            name=name,
            description=description,
            timeout=timeout,
            serial=serial,
            requires_approval=requires_approval,
            resource_arg=resource_arg,
            evidence=evidence,
            path_arguments=path_arguments,
            local=local,
        )
        made.idempotent, made.reconcile = idempotent, reconcile
        made.reconcile_timeout = (
            reconcile_timeout
            if isinstance(reconcile_timeout, timedelta)
            else timedelta(seconds=reconcile_timeout)
        )
        return made

    if fn is not None:
        return decorate(fn)
    return decorate


class ToolSource(Protocol):
    """Tools that come and go while the worker runs (an MCP server's)."""

    def current(self) -> Mapping[str, Tool]:
        """The tools offered now, by name."""
        ...

    def absent(self, name: str) -> str | None:
        """Why there is no tool ``name`` now, if this source can tell (it was removed, or its
        server has not connected); ``None`` when the name means nothing to it."""
        ...


class ToolRegistry:
    """The tools one worker can run, by name: its own, then those of its sources."""

    def __init__(self, tools: Iterable[Tool] = (), sources: Iterable[ToolSource] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._sources = list(sources)
        for item in tools:
            self.add(item)

    def add(self, item: Tool) -> None:
        """Register a tool. Two tools with one name are a configuration error."""
        existing = self._tools.get(item.name)
        if existing is not None and existing is not item:
            raise InvalidConfig(
                f"two tools are named {item.name!r} ({existing.fn!r} and {item.fn!r}); "
                "give one of them another name with @tool(name=...)"
            )
        self._tools[item.name] = item

    def get(self, name: str) -> Tool | None:
        found = self._tools.get(name)
        if found is not None:
            return found
        for source in self._sources:
            found = source.current().get(name)
            if found is not None:
                return found
        return None

    def absent(self, name: str) -> str | None:
        """Why there is no tool ``name`` now, when a source can tell (an MCP tool that its
        server withdrew, or whose server has not connected); ``None`` otherwise."""
        for source in self._sources:
            why = source.absent(name)
            if why is not None:
                return why
        return None

    def definitions(self, names: Iterable[str], *, named_by: str) -> list[ToolDefinition]:
        """The definitions of ``names``, in order.

        Raises:
            InvalidConfig: a name is not registered here (``named_by`` says where it came from).
        """
        wanted = list(names)
        found = {name: self.get(name) for name in wanted}
        missing = [name for name, item in found.items() if item is None]
        if missing:
            reasons = [why for name in missing if (why := self.absent(name)) is not None]
            raise InvalidConfig(
                f"{named_by} names tools this worker does not have: {missing!r}"
                + (f" ({'; '.join(reasons)})" if reasons else "")
                + f". Registered tools: {self.names()!r}. Fix {named_by}, or add the module "
                "that defines them to ORGA_TOOL_MODULES (or the MCP server to ORGA_MCP_SERVERS)."
            )
        return [item.definition for item in found.values() if item is not None]

    def names(self) -> list[str]:
        names = set(self._tools)
        for source in self._sources:
            names.update(source.current())
        return sorted(names)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self.names())
