"""The one TLS context of a process's HTTP clients: the model providers, ``web_fetch``, the
embedder."""

from __future__ import annotations

import functools
import ssl

import httpx

__all__ = ["tls"]


@functools.cache
def tls() -> ssl.SSLContext:
    """The TLS context every HTTP client of the process verifies servers with (the system's
    CAs, as httpx's default): made on first use, then shared — making one reads the whole CA
    bundle (tens of milliseconds), which every worker's start and every client paid."""
    return httpx.create_ssl_context()
