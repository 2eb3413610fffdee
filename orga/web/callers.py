"""Who calls a web endpoint: a bearer token per user, or a header the operator's proxy sets.

The operator writes the tokens file (TOML; the endpoint keeps only each token's SHA-256):

    [users.ann]
    token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

``orga api token ann`` prints a new token and the line to add. Behind a reverse proxy that
authenticates people itself, the endpoint may instead take the user from a header the proxy
sets (``--trust-header X-Forwarded-User``): only where nothing else can reach the endpoint.
A caller is a plain name (``orga.contracts.principals.NAME_PATTERN``): it becomes the loop's
principal and the approver of its decisions. ``OpenRequests`` bounds how many requests each
caller has open at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
import secrets
import tomllib
from collections import Counter
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any, cast

from orga.contracts.errors import InvalidConfig
from orga.contracts.principals import NAME_PATTERN
from orga.web.agui_run import Refused

__all__ = ["Callers", "OpenRequests", "new_token"]

_HEX = re.compile(r"^[0-9a-f]{64}$")


def new_token() -> tuple[str, str]:
    """A new bearer token and its SHA-256 (hex), as the tokens file keeps it."""
    token = secrets.token_urlsafe(32)
    return token, hashlib.sha256(token.encode()).hexdigest()


class Callers:
    """Who a request comes from (see the module docstring)."""

    def __init__(self, tokens: Mapping[str, str], *, header: str | None = None) -> None:
        self._tokens = dict(tokens)
        """SHA-256 (hex) of each token -> its user."""
        self._header = header.lower() if header else None

    @classmethod
    def from_file(cls, path: Path, *, header: str | None = None) -> Callers:
        """The callers of the tokens file at ``path``.

        Raises:
            InvalidConfig: the file cannot be read, is not TOML, or holds an entry that is not
                a user with a token's SHA-256 (one token, one user).
        """
        origin = f"--tokens {path}"
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise InvalidConfig(f"{origin}: cannot read the tokens file ({error})") from error
        except tomllib.TOMLDecodeError as error:
            raise InvalidConfig(f"{origin}: not TOML ({error})") from error
        users = document.get("users")
        if set(document) - {"users"} or not isinstance(users, dict):
            raise InvalidConfig(f"{origin}: the file holds [users.<name>] tables, and only them")
        tokens: dict[str, str] = {}
        for name, body in cast(dict[str, Any], users).items():
            fields = cast(dict[str, Any], body) if isinstance(body, dict) else {}
            digest = fields.get("token_sha256")
            if not re.fullmatch(NAME_PATTERN, name):
                raise InvalidConfig(f"{origin}: {name!r} is not a plain user name")
            if not isinstance(digest, str) or not _HEX.match(digest):
                raise InvalidConfig(
                    f"{origin}: users.{name} needs token_sha256, the SHA-256 of its token in "
                    "hex (`orga api-token NAME` makes one)"
                )
            if digest in tokens:
                raise InvalidConfig(f"{origin}: {tokens[digest]!r} and {name!r} share a token")
            tokens[digest] = name
        return cls(tokens, header=header)

    def admit(self, user: str) -> str:
        """A new token for ``user``, good for as long as these callers are (one process).

        Raises:
            InvalidConfig: ``user`` is not a plain user name.
        """
        if not re.fullmatch(NAME_PATTERN, user):
            raise InvalidConfig(f"--user {user!r}: not a plain user name")
        token, digest = new_token()
        self._tokens[digest] = user
        return token

    def who(self, headers: Mapping[str, str]) -> str | None:
        """The user a request's headers authenticate, or None."""
        if self._header is not None:
            given = headers.get(self._header, "").strip()
            return given if re.fullmatch(NAME_PATTERN, given) else None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        for known, user in self._tokens.items():  # compared in constant time, each
            if hmac.compare_digest(known, digest):
                return user
        return None


class OpenRequests:
    """The requests each caller has open at this process (a stream: until its run ends or
    its client leaves): at most ``most`` at once."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._open: Counter[str] = Counter()

    def count(self, user: str) -> int:
        """How many requests ``user`` has open now."""
        return self._open[user]

    @contextlib.contextmanager
    def held(self, user: str) -> Generator[None]:
        """One of ``user``'s requests, open until the block ends.

        Raises:
            Refused: 429, ``user`` has ``most`` open already.
        """
        if self._open[user] >= self._most:
            raise Refused(
                429,
                f"{user!r} has {self._most} requests open at this endpoint, the most one caller "
                "may (AguiLimits.streams_per_caller): end one, or wait for its run to end",
            )
        self._open[user] += 1
        try:
            yield
        finally:
            self._open[user] -= 1
            if not self._open[user]:
                del self._open[user]
