"""The values the settings are read into: providers, model prices, and the readers that check
the variables whose text is not simply a number, a flag or a path (pure of the environment:
``orga.runtime.settings`` reads it and hands each value here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import PROVIDERS, SCRIPTED, ProviderName
from orga.runtime.variables import Variable

__all__ = [
    "PROVIDER_DEFAULTS",
    "ModelPrice",
    "ProviderSettings",
    "embeddings",
    "model_prices",
    "policy_floor",
    "provider",
    "provider_variables",
    "providers",
    "tuner",
]


class ProviderSettings(BaseModel):
    """Where one provider lives and the key the worker uses for it."""

    model_config = ConfigDict(frozen=True)

    name: ProviderName
    base_url: str
    api_key: SecretStr | None = None
    api_key_env: str
    """The variable the key comes from; error messages name it, never the key."""
    default_model: str
    official: bool = True
    """True when ``base_url`` is the provider's own service, which always needs a key."""


PROVIDER_DEFAULTS: dict[ProviderName, tuple[str, str]] = {  # base URL, default model
    "openrouter": ("https://openrouter.ai/api/v1", "openai/gpt-4o-mini"),
    "openai": ("https://api.openai.com/v1", "gpt-4o-mini"),
    "anthropic": ("https://api.anthropic.com", "claude-sonnet-4-5"),
}
_PROVIDER_MEANING: dict[ProviderName, str] = {
    "openrouter": "OpenRouter (the default provider): its API key, default model and base URL.",
    "openai": "OpenAI, or any compatible server (vLLM, Ollama, llama.cpp: set the base URL; "
    "no key needed): its API key, default model and base URL.",
    "anthropic": "The Anthropic Messages API: its API key, default model and base URL.",
}


def provider(value: str) -> str:
    if value not in (*PROVIDERS, SCRIPTED):
        raise InvalidConfig(
            f"ORGA_PROVIDER={value!r} is not a provider; use one of {[*PROVIDERS, SCRIPTED]!r}"
        )
    return value


def policy_floor(value: str) -> str:
    if value not in ("default", "cedar", "opa"):
        raise InvalidConfig(
            f"ORGA_POLICY={value!r} is not a policy floor; use default, cedar or opa"
        )
    return value


def tuner(value: str) -> str:
    if value not in ("resource", "fixed"):
        raise InvalidConfig(
            f"ORGA_WORKER_TUNER={value!r}: use resource (as many tasks as CPU and memory "
            "allow) or fixed (the SDK's slot counts)"
        )
    return value


def embeddings(value: str) -> tuple[ProviderName, str]:
    provider, _, model = value.partition(":")
    if provider == "anthropic":
        raise InvalidConfig(
            f"ORGA_EMBEDDINGS={value!r}: Anthropic has no embeddings endpoint; use an "
            "OpenAI-compatible one (openai:<model>, with OPENAI_BASE_URL for Ollama or vLLM)"
        )
    if provider not in PROVIDERS or not model.strip():
        raise InvalidConfig(
            f"ORGA_EMBEDDINGS={value!r} is not <provider>:<model>; for example "
            "openai:text-embedding-3-small or openrouter:openai/text-embedding-3-small"
        )
    return provider, model.strip()


class ModelPrice(BaseModel):
    """What a model costs, in USD per million tokens (``ORGA_MODEL_PRICES``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    """Cached input tokens read (default: the input price)."""
    cache_write: float | None = Field(default=None, ge=0)
    """Input tokens written to the cache (default: the input price)."""


def model_prices(value: str) -> dict[str, ModelPrice]:
    try:
        raw = json.loads(value)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        return {str(k): ModelPrice.model_validate(v) for k, v in cast(dict[str, Any], raw).items()}
    except (ValueError, ValidationError) as error:
        raise InvalidConfig(
            f"ORGA_MODEL_PRICES is not a JSON object of model prices ({error}); for example "
            '{"my-model": {"input": 0.5, "output": 1.5}} (USD per million tokens)'
        ) from None


def providers(get: Callable[[str], str | None]) -> dict[ProviderName, ProviderSettings]:
    providers: dict[ProviderName, ProviderSettings] = {}
    for name in PROVIDERS:
        prefix = name.upper()
        default_url, default_model = PROVIDER_DEFAULTS[name]
        base_url = (get(f"{prefix}_BASE_URL") or default_url).rstrip("/")
        key = get(f"{prefix}_API_KEY")
        providers[name] = ProviderSettings(
            name=name,
            base_url=base_url,
            api_key=SecretStr(key) if key else None,
            api_key_env=f"{prefix}_API_KEY",
            default_model=get(f"{prefix}_MODEL") or default_model,
            official=base_url == default_url,
        )
    return providers


def provider_variables() -> list[Variable]:
    return [
        Variable(
            names=tuple(f"{name.upper()}_{part}" for part in ("API_KEY", "MODEL", "BASE_URL")),
            shape="secret, text, URL",
            default=f"model ``{model}``, ``{url}``",
            bounds="",
            meaning=_PROVIDER_MEANING[name],
            cli=False,
        )
        for name, (url, model) in PROVIDER_DEFAULTS.items()
    ]
