"""HTTP error classification shared by every provider adapter.

Temporal owns retries, so the client retries nothing. This module turns a provider's HTTP
answer into the right error: 408/409/429/5xx and network failures are retryable and carry the
provider's ``Retry-After`` as Temporal's next retry delay; 401/403 fail at once naming the
environment variable whose key was refused; any other 4xx fails at once with the provider's
message. Error texts never contain the API key.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httpx

from orga.contracts.errors import (
    MalformedModelResponse,
    ProviderAuthError,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
)
from orga.runtime.settings import ProviderSettings

__all__ = [
    "RETRYABLE_STATUS",
    "error_text",
    "parse_json_body",
    "raise_for_provider_status",
    "retry_after",
    "transport_error",
]

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
MAX_RETRY_DELAY = timedelta(minutes=10)
"""A ``Retry-After`` beyond this is capped: a loop should not sleep for hours on one header."""

_KEYLIKE = re.compile(r"\b(sk|rk|pk|key)[-_][A-Za-z0-9*_\-]{6,}", re.IGNORECASE)


def retry_after(
    headers: httpx.Headers, body: Any = None, *, now: datetime | None = None
) -> timedelta | None:
    """The delay a provider asked for: ``retry-after-ms``, ``Retry-After`` (seconds or an HTTP
    date), or OpenRouter's ``error.availability.retry_after`` in the body."""
    candidates: list[float] = []
    if (ms := headers.get("retry-after-ms")) is not None:
        with contextlib.suppress(ValueError):
            candidates.append(float(ms) / 1000)
    if (value := headers.get("retry-after")) is not None:
        try:
            candidates.append(float(value))
        except ValueError:
            try:
                parsed = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                parsed = None  # neither seconds nor an HTTP date: ignore the header
            if parsed is not None:
                moment = now or datetime.now(UTC)
                if parsed.tzinfo is None:
                    parsed = parsed.replace(tzinfo=UTC)
                candidates.append((parsed - moment).total_seconds())
    if not candidates and isinstance(body, dict):
        error = cast(dict[str, Any], body).get("error")
        if isinstance(error, dict):
            availability = cast(dict[str, Any], error).get("availability")
            if isinstance(availability, dict):
                seconds = cast(dict[str, Any], availability).get("retry_after")
                if isinstance(seconds, int | float):
                    candidates.append(float(seconds))
    if not candidates:
        return None
    delay = timedelta(seconds=max(0.0, candidates[0]))
    return min(delay, MAX_RETRY_DELAY)


def scrub(text: str, provider: ProviderSettings) -> str:
    """Remove the provider's key (and anything shaped like a key) from a text."""
    if provider.api_key is not None:
        secret = provider.api_key.get_secret_value()
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEYLIKE.sub("[redacted]", text)


def error_text(body: Any) -> str:
    """The human part of a provider error body, whatever its dialect.

    Handles OpenAI (``error.message``, string ``code``), OpenRouter (numeric ``code``,
    ``metadata.raw`` holding the upstream error as a JSON string, availability errors) and
    Anthropic (``{"type": "error", "error": {"type", "message"}}``).
    """
    if not isinstance(body, dict):
        return str(body)[:500] if body else ""
    error = cast(dict[str, Any], body).get("error")
    if isinstance(error, str):
        return error[:500]
    if not isinstance(error, dict):
        return json.dumps(body)[:500]
    error = cast(dict[str, Any], error)
    parts: list[str] = []
    kind = error.get("type") or error.get("error_type")
    if isinstance(kind, str):
        parts.append(kind)
    code = error.get("code")
    if isinstance(code, str) and code != kind:
        parts.append(code)
    message = str(error.get("message") or "").strip()
    metadata = error.get("metadata")
    if isinstance(metadata, dict):
        raw = cast(dict[str, Any], metadata).get("raw")
        provider_name = cast(dict[str, Any], metadata).get("provider_name")
        if isinstance(raw, str) and raw:
            try:
                upstream = error_text(json.loads(raw))
            except (json.JSONDecodeError, RecursionError):
                upstream = raw[:300]
            message = f"{message} ({provider_name or 'upstream'}: {upstream})"
    prefix = f"[{'/'.join(parts)}] " if parts else ""
    return f"{prefix}{message}"[:1000]


def parse_json_body(response: httpx.Response, provider: ProviderSettings) -> dict[str, Any]:
    """Decode a 2xx body. Leading whitespace is allowed (OpenRouter pads its bodies)."""
    try:
        body = json.loads(response.content.decode("utf-8").strip())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        shown = scrub(response.text[:300], provider)
        raise MalformedModelResponse(
            f"{provider.name} answered HTTP {response.status_code} with a body that is not "
            f"JSON: {shown!r}"
        ) from error
    except RecursionError as error:
        # A model can nest an Anthropic tool input (an object in the body) deeper than the
        # decoder recurses: a typed, retried failure, never a crash of the activity.
        raise MalformedModelResponse(
            f"{provider.name} answered HTTP {response.status_code} with JSON nested too deeply "
            "to read"
        ) from error
    if not isinstance(body, dict):
        raise MalformedModelResponse(
            f"{provider.name} answered with a JSON {type(body).__name__}, not an object"
        )
    return cast(dict[str, Any], body)


def raise_for_provider_status(response: httpx.Response, provider: ProviderSettings) -> None:
    """Raise the orga error that an error status means; return on 2xx."""
    status = response.status_code
    if 200 <= status < 300:
        return
    try:
        body: Any = json.loads(response.content.decode("utf-8").strip() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        body = response.text[:500]
    where = f"{provider.name} ({provider.base_url})"
    if status in (401, 403):
        code = ""
        if isinstance(body, dict):
            error = cast(dict[str, Any], body).get("error")
            if isinstance(error, dict):
                found = cast(dict[str, Any], error).get("code") or cast(dict[str, Any], error).get(
                    "type"
                )
                code = f", {found}" if found else ""
        raise ProviderAuthError(
            f"{where} refused the API key from {provider.api_key_env} (HTTP {status}{code}). "
            f"Check {provider.api_key_env} in the worker's environment and restart the worker.",
            {"provider": provider.name, "status": status, "key_variable": provider.api_key_env},
        )
    text = scrub(error_text(body), provider)
    details = {"provider": provider.name, "status": status, "error": text}
    if status in RETRYABLE_STATUS:
        delay = retry_after(response.headers, body)
        raise ProviderUnavailable(
            f"{where} answered HTTP {status}: {text}"
            + (f" (retrying after {delay.total_seconds():g} s)" if delay is not None else ""),
            details,
            next_retry_delay=delay,
        )
    raise ProviderRejected(
        f"{where} rejected the request with HTTP {status}: {text}. Retrying the same request "
        "cannot succeed; check the model name, the loop config and the tools' schemas.",
        details,
    )


def transport_error(error: httpx.TransportError, provider: ProviderSettings) -> ProviderError:
    """A network failure (connect, read, timeout) as a retryable error."""
    return ProviderUnavailable(
        f"could not reach {provider.name} at {provider.base_url}: "
        f"{type(error).__name__}: {scrub(str(error), provider)}",
        {"provider": provider.name, "error": type(error).__name__},
    )
