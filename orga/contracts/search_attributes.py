"""The search attributes every loop keeps current, for listing and filtering loops.

``temporal workflow list --query "OrgaStatus='awaiting_approval'"`` is an inbox of loops
waiting for a person; the Web UI filters on the same attributes. They must be registered on
the namespace before a worker runs loops (``orga server`` and the worker register them on a
dev server; on a cluster, ``temporal operator search-attribute create``). Clients made by
``orga.runtime.connect.connect`` or with ``OrgaPlugin`` start loops with them set
(``StartAttributes``), which saves each loop its first upsert.
"""

from __future__ import annotations

from typing import Final

from temporalio.common import SearchAttributeKey

__all__ = [
    "AGENT_ID",
    "ALL",
    "FORKED_FROM",
    "ITERATION",
    "NO_SEARCH_ATTRIBUTES_MEMO",
    "PRINCIPAL",
    "STATUS",
    "TENANT",
    "TOTAL_TOKENS",
]

AGENT_ID: Final = SearchAttributeKey.for_keyword("OrgaAgentId")
STATUS: Final = SearchAttributeKey.for_keyword("OrgaStatus")
"""``running`` | ``awaiting_approval`` (a loop's call, or a task's escalation) |
``awaiting_review`` (a loop's answer) | ``awaiting_message`` (a thread between turns) |
``awaiting_worker`` (a tool call, for a worker that registers its tool) | ``paused`` (a
tool call whose tool is paused) |
``completed`` | ``failed`` (a task that was aborted,
cancelled or failed: ``orga task state`` tells which)."""
ITERATION: Final = SearchAttributeKey.for_int("OrgaIteration")
TOTAL_TOKENS: Final = SearchAttributeKey.for_int("OrgaTotalTokens")

FORKED_FROM: Final = SearchAttributeKey.for_keyword("OrgaForkedFrom")
"""A fork's source workflow id (set when the fork starts): ``OrgaForkedFrom = 'loop-…'``."""

PRINCIPAL: Final = SearchAttributeKey.for_keyword("OrgaPrincipal")
"""The user the loop runs for, as its worker resolved it (``orga list --principal ann``); a
claim is listed too: ``orga state`` says whether it is verified."""
TENANT: Final = SearchAttributeKey.for_keyword("OrgaTenant")
"""The user's tenant (the operator's mapping, else the claim's)."""

ALL: Final = (AGENT_ID, STATUS, ITERATION, TOTAL_TOKENS, FORKED_FROM, PRINCIPAL, TENANT)

NO_SEARCH_ATTRIBUTES_MEMO: Final = "orga_search_attributes"
"""Start a loop with this memo key set to ``false`` where the namespace cannot register the
attributes (the time-skipping test server): the loop then keeps them in its state only."""
