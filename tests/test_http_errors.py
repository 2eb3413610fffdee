"""HTTP error classification, over httpx.MockTransport with recorded real error bodies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from orga.contracts.conversation import Message
from orga.contracts.errors import (
    InvalidConfig,
    MalformedModelResponse,
    ProviderAuthError,
    ProviderRejected,
    ProviderUnavailable,
)
from orga.providers.client import complete
from orga.providers.http_errors import error_text, retry_after
from orga.runtime.settings import ProviderSettings
from tests.fixtures import body
from tests.helpers import PROVIDER_KEY, provider_settings


async def complete_with(
    handler: Any, settings: ProviderSettings | None = None, timeout: float = 5
) -> Any:
    """One model call through ``complete`` against a mock transport."""
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        return await complete(
            http,
            settings or provider_settings(),
            [Message(role="user", content="hi")],
            [],
            model="m",
            max_output_tokens=None,
            temperature=None,
            timeout=timeout,
        )


async def call(status: int, payload: Any, headers: dict[str, str] | None = None, **kw: Any) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=payload, headers=headers or {})

    return await complete_with(
        handler, kw.get("settings") or provider_settings(kw.get("name", "openai"))
    )


async def test_401_names_the_variable_not_the_key() -> None:
    payload = body("openai_13_error_401_invalid_api_key_THIRDPARTY_CAPTURE.json")
    payload["error"]["message"] += f" ({PROVIDER_KEY})"
    with pytest.raises(ProviderAuthError) as caught:
        await call(401, payload)
    assert caught.value.non_retryable
    assert "OPENAI_API_KEY" in caught.value.message
    assert PROVIDER_KEY not in caught.value.message and PROVIDER_KEY not in str(
        caught.value.details
    )


async def test_403_and_openrouter_401_are_auth_errors() -> None:
    with pytest.raises(ProviderAuthError, match="OPENROUTER_API_KEY"):
        await call(401, body("openrouter_15g_error_401_OPENAPI_EXAMPLE.json"), name="openrouter")
    with pytest.raises(ProviderAuthError):
        await call(403, {"error": {"message": "forbidden"}})


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 529])
async def test_retryable_statuses(status: int) -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        await call(status, body("openrouter_15_error_429_provider_DOCS.json"))
    assert not caught.value.non_retryable


async def test_429_retry_after_header_becomes_next_retry_delay() -> None:
    payload = body("anthropic_08_error_429_rate_limit.json")
    with pytest.raises(ProviderUnavailable) as caught:
        await call(429, payload, {"retry-after": "7"}, name="anthropic")
    assert caught.value.next_retry_delay == timedelta(seconds=7)
    assert "rate_limit_error" in caught.value.message


async def test_real_429_without_retry_after_leaves_the_delay_to_temporal() -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        await call(429, body("anthropic_08_error_429_rate_limit.json"), name="anthropic")
    assert caught.value.next_retry_delay is None


async def test_openrouter_availability_retry_after_in_body() -> None:
    payload = body("openrouter_15b_error_429_capacity_exhausted_availability_DOCS.json")
    with pytest.raises(ProviderUnavailable) as caught:
        await call(429, payload, name="openrouter")
    assert caught.value.next_retry_delay == timedelta(seconds=40)
    assert "at capacity" in caught.value.message


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("anthropic_08d_error_400_invalid_request.json", "tool_result"),
        ("openrouter_15c_error_400_provider_raw_LIVE.json", "media_type"),
        ("openrouter_15d_error_400_no_provider_LIVE.json", "at least 1 token"),
        ("anthropic_08b_error_404_not_found_DOCS.json", "not_found_error"),
    ],
)
async def test_other_4xx_are_rejected_with_the_provider_message(name: str, expected: str) -> None:
    status = 404 if "404" in name else 400
    with pytest.raises(ProviderRejected) as caught:
        await call(status, body(name))
    assert caught.value.non_retryable
    assert expected in caught.value.message


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after(httpx.Headers({"retry-after": date}), now=now) == timedelta(seconds=30)
    assert retry_after(httpx.Headers({"retry-after-ms": "1500"})) == timedelta(seconds=1.5)
    assert retry_after(httpx.Headers({"retry-after": "99999"})) == timedelta(minutes=10)
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


def test_error_text_dialects() -> None:
    assert error_text(body("openai_13b_error_429_rate_limit_THIRDPARTY_CAPTURE.json")).startswith(
        "[tokens/rate_limit_exceeded] Rate limit reached"
    )
    assert "Anthropic: [invalid_request_error]" in error_text(
        body("openrouter_15c_error_400_provider_raw_LIVE.json")
    )


async def test_network_errors_are_retryable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with pytest.raises(ProviderUnavailable, match="could not reach openai"):
        await complete_with(handler, timeout=1)


async def test_non_json_200_is_malformed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>bad gateway</html>")

    with pytest.raises(MalformedModelResponse):
        await complete_with(handler, timeout=1)


async def test_missing_key_for_an_official_endpoint_is_a_config_error() -> None:
    with pytest.raises(InvalidConfig, match="OPENAI_API_KEY is not set"):
        await call(200, {}, settings=provider_settings(official=True, key=None))
