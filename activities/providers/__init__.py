"""Model provider adapters: OpenAI-compatible chat completions and the Anthropic Messages API."""

from activities.providers.client import complete

__all__ = ["complete"]
