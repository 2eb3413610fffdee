"""Fixed vocabularies shared by the contracts: provider names and policy modes."""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["PROVIDERS", "SCRIPTED", "PolicyMode", "ProviderName"]

ProviderName = Literal["openrouter", "openai", "anthropic", "scripted"]
"""``scripted`` is the offline scripted model a worker serves itself (``worker.py --scripted``):
no network, no key, deterministic answers; it is labelled as such wherever a model is named."""
PROVIDERS: tuple[ProviderName, ...] = ("openrouter", "openai", "anthropic")
"""The providers reached over the network, each configured by ``<NAME>_API_KEY`` & co."""
SCRIPTED: Final = "scripted"

PolicyMode = Literal["permissive", "default", "cedar", "opa"]
