"""Who speaks to the model: orga's notices begin with a mark a person's message cannot carry.

orga tells the model things in the user's turn — ``[orga] Your final answer must be JSON…``,
``[orga gate] …``, ``[orga critic] …``, ``[orga: 3 earlier message(s) were left out …]`` — and
injects context under its own headings (``[KNOWLEDGE_CONTEXT]``, ``[PRE_HYDRATED_CONTEXT]``,
``[CONTEXT_SUMMARY]``, which the context budget also keeps whatever else it drops). A message
from a person (the task, a steering message, a thread's next message, a fork's) that began
with one of these marks would reach the model exactly as orga's own words do, so it is refused
where it enters, saying why (pure).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from orga.contracts.conversation import Message
from orga.core.context import INJECTED_MARKERS

__all__ = ["ORGA_MARKS", "imitated_mark", "imitation_problem", "people_texts"]

ORGA_MARKS: Final = ("[orga", *INJECTED_MARKERS)
"""The marks orga's own notices and injected context begin with (compared case-blind)."""


def imitated_mark(text: str) -> str | None:
    """The mark of orga's that ``text`` begins with (spaces aside, in any case), or None."""
    opening = text.lstrip().casefold()
    return next((mark for mark in ORGA_MARKS if opening.startswith(mark.casefold())), None)


def imitation_problem(texts: Iterable[str]) -> str | None:
    """Why one of a person's ``texts`` cannot be sent to the model as it is, or None."""
    for text in texts:
        if (mark := imitated_mark(text)) is not None:
            return (
                f"a message may not begin with {mark!r}: orga's own notices to the model begin "
                "with it, and a message that did would pass for one. Begin it with your own "
                "words (quote or indent the text)."
            )
    return None


def people_texts(messages: Iterable[Message]) -> list[str]:
    """The texts of the user messages in ``messages`` (what people wrote)."""
    return [m.content for m in messages if m.role == "user"]
