"""Text from models, tools and clients made safe to show a person: one function, ``printable``.

A model's answer, a tool's error, a client's workflow id or a knowledge item can hold
characters that steer the terminal instead of being read: ESC starts escape sequences (``ESC[2K``
erases a line, ``ESC[1A`` moves up, ``ESC]0;…BEL`` retitles the window, ``ESC[31m`` colours),
C1 controls (U+0080 to U+009F) do the same in one character on some terminals, a carriage return
or backspace overwrites what was printed, and bidirectional overrides and isolates (U+202A to
U+202E, U+2066 to U+2069) reorder what a reader sees (``approve 5`` shown for ``5 evorppa``).
Printed raw, they let the text rewrite the row an operator acts on.

``printable`` replaces each such character with a visible stand-in, so a reviewer sees that
something was there: C0 controls with their Unicode control pictures (ESC → ``␛``, BEL → ``␇``,
CR → ``␍``), the others as ``<U+202E>``. Newlines and tabs stay (``one_line`` shows newlines as
``␤``, for text that must stay on its line). ``SafeConsole`` applies it to every string rich
turns into text (``console.print``, table cells, measurements), and never reads rich markup from
it, so a new verb cannot forget; ``json_text`` keeps ``--json`` exact but terminal-safe.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console, HighlighterType, JustifyMethod, OverflowMethod
from rich.style import Style
from rich.text import Text

__all__ = ["SafeConsole", "json_text", "one_line", "printable", "printable_data"]

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Arabic letter mark, LRM/RLM, the embeddings and overrides, the isolates."""
_OTHER = "\u007f-\u009f\u2028\u2029\ud800-\udfff"
"""DEL, the C1 controls, the line and paragraph separators (line breaks to some readers and
not to others), and lone surrogates (which cannot even be encoded for output)."""
_UNSAFE = re.compile(f"[\u0000-\u0008\u000b-\u001f{_OTHER}{_BIDI}]")
"""Everything ``printable`` replaces: every control character but tab and newline."""
_UNSAFE_ON_ONE_LINE = re.compile(f"[\u0000-\u0008\u000a-\u001f{_OTHER}{_BIDI}]")
"""The same and newline, for text that must stay on its line."""
_UNSAFE_IN_JSON = re.compile(f"[{_OTHER}{_BIDI}]")
"""What JSON may carry raw but a terminal must not see (JSON escapes C0 controls itself)."""


def _stand_in(found: re.Match[str]) -> str:
    char = found.group()
    code = ord(char)
    if code == 0x0A:
        return "\u2424"  # ␤, the symbol for newline
    if code < 0x20:
        return chr(0x2400 + code)  # the control pictures: ␀ … ␟ (ESC → ␛, CR → ␍)
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def printable(text: str, *, newlines: bool = True) -> str:
    """``text`` with every character that could steer a terminal or reorder what a reader sees
    replaced by a visible stand-in (see the module docstring); the rest, tabs and (with
    ``newlines``) line feeds stay as they are. A CR LF pair counts as one newline.
    """
    unsafe = _UNSAFE if newlines else _UNSAFE_ON_ONE_LINE
    return unsafe.sub(_stand_in, text.replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """``printable`` for text that must stay on its line: a newline shows as ``␤``."""
    return printable(text, newlines=False)


def printable_data(value: Any) -> Any:
    """A JSON-like value with ``printable`` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        items: dict[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]  # any JSON
        return {printable_data(k): printable_data(v) for k, v in items.items()}
    if isinstance(value, list | tuple):
        return [printable_data(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def json_text(text: str) -> str:
    """JSON text with the characters a terminal must not see written as ``\\uXXXX`` escapes:
    the same JSON value (they can only occur inside strings), safe to print."""
    return _UNSAFE_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


class SafeConsole(Console):
    """A rich console that shows every string it is given as ``printable`` plain text.

    rich turns each string it prints — ``print`` arguments, table cells, titles — into text
    through ``render_str``; here that never reads markup (a model's ``[red]`` prints as
    written) or emoji codes, and replaces control and bidi characters first. Styles come only
    from ``Style`` objects the code sets (a table's header style).
    """

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: HighlighterType | None = None,
    ) -> Text:
        return super().render_str(
            printable(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=False,
            markup=False,
            highlight=highlight,
            highlighter=highlighter,
        )
