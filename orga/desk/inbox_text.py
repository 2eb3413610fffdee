"""``orga pending`` as text: each waiting item as a block that fits ``PAGE_WIDTH`` columns, its
arguments one per line and never cut without a marker that says how much and where to see it.

A table with an ARGUMENTS column had to cut arguments to fit, and what it cut was the end:
``{"email": "<a long address>", "amount": 99999999}`` showed the address and hid the amount,
next to the ``orga approve`` command. Here each top-level argument has its own line, so a long
value can only hide its own end (counted: ``…[+1234 characters]``), never the arguments after
it; ``--full`` (or ``orga state``) shows everything.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from rich.cells import cell_len, chop_cells

from orga.contracts.messages import LOOP_WORKFLOW, TASK_WORKFLOW
from orga.core.judging import opinion_text
from orga.runtime.safe_text import one_line, printable

if TYPE_CHECKING:  # the inbox's reading code (its client, the store) is not needed to print it
    from orga.contracts.approvals import PendingApproval
    from orga.desk.inbox import InboxItem

__all__ = [
    "ARGUMENT_LIMIT",
    "PAGE_WIDTH",
    "TEXT_LIMIT",
    "argument_lines",
    "decided_by",
    "labelled",
    "render_inbox",
    "wrap",
]

PAGE_WIDTH = 100
"""Columns ``orga pending`` fills at most (fewer on a narrower terminal)."""
ARGUMENT_LIMIT = 200
"""Characters of one argument's value shown without ``--full``; the rest is counted."""
TEXT_LIMIT = 1000
"""Characters of arguments that are not a JSON object (an answer to review) shown without
``--full``."""
_KEYS_LIMIT = 50
"""Arguments (top-level keys) shown without ``--full``; the others are counted."""
_LABEL = 11
"""Width of the labels of an item's lines (``arguments``, ``act`` …)."""


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken after a space where one is near the
    end, else inside the word; joining the lines gives back the text's lines exactly."""
    lines: list[str] = []
    for line in text.split("\n"):
        while cell_len(line) > width:
            head = chop_cells(line, width)[0]
            space = head.rfind(" ")
            if space >= width // 2:
                head = head[: space + 1]
            lines.append(head)
            line = line[len(head) :]
        lines.append(line)
    return lines


def labelled(label: str, text: str, width: int, indent: int = 2) -> list[str]:
    """``label`` then ``text`` wrapped to ``width``; continuation lines start under the text, so
    a line inside ``text`` cannot pass for a line of its own."""
    lead = " " * indent
    head = f"{lead}{label:<{_LABEL}}" if label else lead + " " * _LABEL
    body = wrap(text, max(width - len(head), 20))
    return [head + body[0], *(" " * len(head) + line for line in body[1:])]


def _cut(text: str, limit: int, full: bool) -> tuple[str, int]:
    if full or len(text) <= limit:
        return text, 0
    hidden = len(text) - limit
    return f"{text[:limit]}…[+{hidden} characters]", hidden


def argument_lines(arguments: str, *, full: bool) -> tuple[list[str], int]:
    """Arguments as lines a person reads before approving: a JSON object one ``"key": value``
    per line, anything else as its text; unless ``full``, each value cut to ``ARGUMENT_LIMIT``
    characters (text to ``TEXT_LIMIT``) with a marker. Returns the lines and how many
    characters were left out (0: everything is shown)."""
    try:
        parsed: Any = json.loads(arguments)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        text, hidden = _cut(printable(arguments), TEXT_LIMIT, full)
        return text.split("\n"), hidden
    fields = cast(dict[str, Any], parsed)  # json.loads: an object's keys are strings
    lines: list[str] = []
    hidden = 0
    for number, (key, value) in enumerate(fields.items()):
        line = one_line(f"{json.dumps(key, ensure_ascii=False)}: ")
        shown = one_line(json.dumps(value, ensure_ascii=False))
        if not full and number >= _KEYS_LIMIT:
            hidden += len(line) + len(shown)
            continue
        text, cut = _cut(shown, ARGUMENT_LIMIT, full)
        lines.append(line + text)
        hidden += cut
    if not full and len(fields) > _KEYS_LIMIT:
        lines.append(f"…[+{len(fields) - _KEYS_LIMIT} more arguments]")
    return lines or ["{}"], hidden


def _state_command(item: InboxItem) -> str:
    verb = "orga task state" if item.workflow_type == TASK_WORKFLOW else "orga state"
    return f"{verb} {item.workflow_id}"


def _block(item: InboxItem, full: bool, width: int) -> list[str]:
    kind = {LOOP_WORKFLOW: "loop", TASK_WORKFLOW: "task"}.get(item.workflow_type, "?")
    head = "  ".join(one_line(part) for part in (item.kind, item.item_id or "-", item.tool or "-"))
    since = f" · waiting since {item.since.isoformat(timespec='seconds')}" if item.since else ""
    lines = [*wrap(head, width)]
    lines += labelled("workflow", one_line(f"{item.workflow_id} ({kind}){since}"), width)
    if item.principal:
        lines += labelled("for", one_line(item.principal), width)
    if item.kind == "unreadable":
        return lines + labelled("why", f"(state unreadable: {printable(item.error or '')})", width)
    lines += labelled(
        "error" if item.kind == "escalation" else "why", printable(item.reason or "-"), width
    )
    if item.decided_by:
        lines += labelled("decides", printable(item.decided_by), width)
    shown, hidden = argument_lines(item.arguments or "", full=full) if item.arguments else ([], 0)
    label = {"review": "answer", "message": "answered"}.get(item.kind, "arguments")
    for number, line in enumerate(shown):
        lines += labelled(label if number == 0 else "", line, width)
    if hidden:
        note = (
            f"{hidden} characters not shown: `orga pending --full` or "
            f"`{one_line(_state_command(item))}` shows them"
        )
        lines += labelled("cut", note, width)
    for number, command in enumerate(item.commands):  # never wrapped: copied as they are
        lines.append(f"  {'act' if number == 0 else '':<{_LABEL}}{one_line(command)}")
    return lines


def render_inbox(items: Sequence[InboxItem], *, full: bool = False, width: int = PAGE_WIDTH) -> str:
    """What waits for a person, oldest first: one block per item (kind, item, tool; workflow
    and since; why; arguments; the commands that act on it), blocks apart by a blank line."""
    return "\n\n".join("\n".join(_block(item, full, width)) for item in items)


def decided_by(approval: PendingApproval) -> str:
    """Who may decide on ``approval`` and what it still needs, for a person to read."""
    said = (
        "a decision signed by an enrolled approver (ORGA_APPROVER_KEY)"
        if approval.signatures_required
        else "unverified: no approvers are enrolled, so the name recorded is the caller's claim"
    )
    if approval.approvals_needed > 1:
        left = approval.approvals_needed - len(approval.approved_by)
        so_far = f" (approved by {', '.join(approval.approved_by)})" if approval.approved_by else ""
        said += f"; {left} more of {approval.approvals_needed} distinct approvers{so_far}"
    if approval.judge is not None:  # what it said, for the person who decides instead
        said += f"; {opinion_text(approval.judge)}"
    return said
