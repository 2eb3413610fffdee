"""``config.pre_hydration``: which references a loop resolves before its first model call.

References are URLs, file paths, issue and PR references and custom patterns found in the
task's text (``orga.core.prehydration`` extracts them); each reference type maps to the tool
that resolves it, and every resolution is a tool call through the gate.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PreHydrationConfig", "ReferencePattern", "Resolver"]


class ReferencePattern(BaseModel):
    """A custom reference type: a regex whose first group (or whole match) is the value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ref_type: str = Field(min_length=1)
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"pattern {pattern!r} is not a valid regex: {error}") from error
        return pattern


class Resolver(BaseModel):
    """Which tool resolves a reference type, and which argument takes the reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    argument: str


class PreHydrationConfig(BaseModel):
    """``config.pre_hydration``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    patterns: list[ReferencePattern] = Field(default_factory=list[ReferencePattern])
    """Custom reference types, extracted after the built-in ones."""
    max_references: int = Field(default=10, ge=1, le=100)
    resolvers: dict[str, Resolver] = Field(
        default_factory=lambda: {
            "url": Resolver(tool="web_fetch", argument="url"),
            "file": Resolver(tool="file_read", argument="path"),
        }
    )
    """Reference type → tool. Types without a resolver are found but not resolved."""
    max_context_tokens: int = Field(default=4_000, ge=100)
    """The injected context is cut to this many tokens (about four UTF-8 bytes each)."""
