"""What a model call cost, in USD: from the price table ``genai-prices`` maintains (the major
providers and models, cache reads and writes at their own prices), or from the worker's
``ORGA_MODEL_PRICES`` for a model it does not know (which also overrides it).

Worker-side: the inference, critic and summary activities price what was served
(``priced``), and the ``Usage`` they return carries the cost to the loop, which adds it up as
it adds up tokens (a child's and a critic's included) and ends at ``LoopConfig.max_cost``. A
model whose price is unknown is counted as an unpriced call, never as free — but orga's own
offline scripted model, which runs in the worker, is free (so ``max_cost`` works offline).

A price is never below zero and never fails a call whose tokens were served: the usage was
checked before (``orga.providers.usage``: cached tokens within the input), and should the table
still refuse it (genai-prices raises ``ValueError`` on usage it finds inconsistent) or a price
come out negative, the call is charged conservatively: every input token at the uncached
input price.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Final

import genai_prices

from orga.contracts.inference import Usage
from orga.contracts.vocabulary import SCRIPTED
from orga.runtime.settings import ModelPrice

__all__ = ["price_of", "priced"]

_TABLE_PROVIDERS: Final = {"openai": "openai", "anthropic": "anthropic", "openrouter": "openrouter"}
"""orga's provider names as the price table names them (a local Ollama model has no price)."""
_MILLION: Final = 1_000_000
_MISSES: Final[set[tuple[str, str]]] = set()
"""Models the table does not know, per provider: the table remembers the ones it found, not
the ones it did not, and looking for one scans every model it has (~2 ms a call)."""
_MAX_MISSES: Final = 4096


def price_of(
    usage: Usage, provider: str, model: str, prices: Mapping[str, ModelPrice]
) -> float | None:
    """What ``usage`` of ``model`` at ``provider`` cost in USD (never below zero), or None when
    no price is known."""
    if provider == SCRIPTED:
        return 0.0  # orga's offline scripted model runs in the worker: it costs nothing
    cost = _price(usage, provider, model, prices)
    if cost is None or cost >= 0:
        return cost
    uncached = _price(_uncached(usage), provider, model, prices)
    return uncached if uncached is not None and uncached >= 0 else None


def _uncached(usage: Usage) -> Usage:
    """``usage`` as if nothing came from or went to the cache: no cache read discounts it."""
    return usage.model_copy(update={"cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})


def _price(
    usage: Usage, provider: str, model: str, prices: Mapping[str, ModelPrice]
) -> float | None:
    own = prices.get(model) or prices.get(f"{provider}:{model}")
    if own is not None:
        cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        total = (
            (usage.input_tokens - cached) * own.input
            + usage.cache_read_input_tokens
            * (own.cache_read if own.cache_read is not None else own.input)
            + usage.cache_creation_input_tokens
            * (own.cache_write if own.cache_write is not None else own.input)
            + usage.output_tokens * own.output
        )
        return total / _MILLION
    table = _TABLE_PROVIDERS.get(provider)
    if table is None or (table, model) in _MISSES:
        return None
    try:
        found = _table_price(usage, model, table)
    except LookupError:
        if len(_MISSES) < _MAX_MISSES:
            _MISSES.add((table, model))
        return None
    except ValueError:
        # The table finds the usage inconsistent; the tokens were served all the same.
        try:
            found = _table_price(_uncached(usage), model, table)
        except ValueError:
            return None  # counted as an unpriced call: never free
    return float(Decimal(found.total_price))


def _table_price(usage: Usage, model: str, table: str) -> genai_prices.types.PriceCalculation:
    return genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_input_tokens,
            cache_write_tokens=usage.cache_creation_input_tokens,
        ),
        model,
        provider_id=table,
    )


def priced(usage: Usage, provider: str, model: str, prices: Mapping[str, ModelPrice]) -> Usage:
    """``usage`` (one call's) with its cost, or counted as an unpriced call."""
    cost = price_of(usage, provider, model, prices)
    if cost is None:
        return usage.model_copy(update={"unpriced_calls": usage.unpriced_calls + 1})
    return usage.model_copy(update={"cost_usd": usage.cost_usd + cost})
