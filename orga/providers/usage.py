"""Token usage as a provider reports it, checked before any budget counts it.

Budgets are kept in the provider's own counts (``orga.contracts.inference.Usage``), and the
provider may be a self-hosted server or a proxy. A count that is negative or not an integer
(``prompt_tokens: -1000000``) would credit the loop's budget, and more input than the request
could hold is a number no call was sent, and so are more cached (read or written) input tokens
than input tokens (``cached_tokens: 5000000`` of ``prompt_tokens: 900`` would price the call
below zero, a discount on every later call's budget); all are ``ImplausibleUsage``, a protocol
error the call fails with (never retried: every attempt would be served and none could be
charged). A count left out is zero, and the activity charges its estimate instead
(``orga.core.budget.served``).
"""

from __future__ import annotations

from typing import Any, Final

from orga.contracts.errors import ImplausibleUsage
from orga.contracts.inference import Usage

__all__ = ["PROMPT_SLACK_TOKENS", "check_usage", "token_count"]

PROMPT_SLACK_TOKENS: Final = 8_192
"""Input tokens a provider may count beyond the request's bytes: its chat template and the
prompts it adds itself (tool-use instructions: a few hundred tokens). A token of text is at
least one byte, so a request of ``n`` bytes holds at most about ``n`` tokens."""


def token_count(value: Any, field: str, provider: str) -> int:
    """A usage field as a count: ``None`` (left out) is 0.

    Raises:
        ImplausibleUsage: the value is negative or not an integer.
    """
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImplausibleUsage(
            f"{provider} reported usage {field}={value!r}: a token count is a non-negative "
            "integer, and budgets are kept in it. The server (or a proxy in front of it) does "
            "not follow the wire format; fix it or point the provider's base URL past it."
        )
    return value


def check_usage(usage: Usage, request_bytes: int, provider: str) -> None:
    """Refuse input counts more than a request of ``request_bytes`` bytes could hold, and
    cached input tokens beyond the input.

    Raises:
        ImplausibleUsage: ``usage.input_tokens`` exceeds the request's bytes by more than
            ``PROMPT_SLACK_TOKENS``, or the cache reads and writes exceed it.
    """
    cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    if cached > usage.input_tokens:
        raise ImplausibleUsage(
            f"{provider} reported {usage.cache_read_input_tokens} input tokens read from its "
            f"cache and {usage.cache_creation_input_tokens} written to it, of "
            f"{usage.input_tokens} input tokens in all: cached tokens are part of the input, "
            "and more of them than the input would price the call below zero. The server (or "
            "a proxy in front of it) does not follow the wire format; fix it or point the "
            "provider's base URL past it."
        )
    ceiling = request_bytes + PROMPT_SLACK_TOKENS
    if usage.input_tokens > ceiling:
        raise ImplausibleUsage(
            f"{provider} reported {usage.input_tokens} input tokens for a request of "
            f"{request_bytes} bytes, which holds at most about {ceiling}: the server (or a "
            "proxy in front of it) does not count what it was sent; fix it or point the "
            "provider's base URL past it."
        )
