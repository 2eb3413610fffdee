"""Fixed vocabularies shared by the contracts: provider names and policy modes."""

from __future__ import annotations

from typing import Literal

__all__ = ["PROVIDERS", "PolicyMode", "ProviderName"]

ProviderName = Literal["openrouter", "openai", "anthropic"]
PROVIDERS: tuple[ProviderName, ...] = ("openrouter", "openai", "anthropic")

PolicyMode = Literal["permissive", "default", "cedar", "opa"]
