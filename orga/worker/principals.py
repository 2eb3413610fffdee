"""The operator's principals: rules for claims, enrolled issuers, users' and tenants' limits.

Read once when the worker starts, from the agents file (``ORGA_AGENTS``) or from a file of their
own (``ORGA_PRINCIPALS``); each table lives in one of them, never both:

.. code-block:: toml

    [principals]
    claims = "record"      # or "refuse": only loops an enrolled issuer bound may run
    required = false       # true: a loop that runs for nobody is refused

    [issuers.web]          # who may bind a user to a loop: an Ed25519 public key, base64
    key = "…"

    [tenants.acme]
    weight = 2.0           # the fairness weight of its calls (Temporal's default: 1.0)
    day_usd = 50.0         # and month_usd, day_tokens, month_tokens

    [tenants."*"]          # every tenant not listed
    day_usd = 10.0

    [users.ann]
    tenant = "acme"        # the operator's mapping: it wins over what a claim says
    day_usd = 5.0

    [users."*"]            # every user not listed
    day_usd = 1.0

A file that does not parse, an unknown key, a name that is not one (``NAME_PATTERN``) or a key
that is not an Ed25519 public key stops the worker with the file and the problem. Neither file
holding any of these tables: claims are recorded, no principal is required, nothing is limited.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Final, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from orga.contracts.errors import InvalidConfig, describe_validation_error
from orga.contracts.principals import (
    NAME_PATTERN,
    ClaimRule,
    Principal,
    PrincipalName,
    Scope,
    SpendLimits,
)
from orga.core.signatures import public_key_problem
from orga.runtime.settings import Settings
from orga.runtime.spend import Holder

__all__ = ["TABLES", "PrincipalRegistry"]

TABLES: Final = ("principals", "issuers", "tenants", "users")
"""The tables of this file (the agents file may hold them next to its own)."""

_LIMITS: Final = tuple(SpendLimits.model_fields)
_ANY: Final = "*"

_Entry = TypeVar("_Entry", bound=BaseModel)


class _Rules(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    claims: ClaimRule = "record"
    required: StrictBool = False


class _Tenant(SpendLimits):
    weight: float | None = Field(default=None, gt=0, le=1000)


class _User(SpendLimits):
    tenant: PrincipalName | None = None


class _Issuer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str


def _document(path: Path, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InvalidConfig(f"{origin}: cannot read the file ({error})") from error
    except tomllib.TOMLDecodeError as error:
        raise InvalidConfig(f"{origin}: the file is not TOML ({error})") from error


def _entries(
    table: Any, kind: str, model: type[_Entry], known: tuple[str, ...], origin: str
) -> dict[str, _Entry]:
    """The ``[<kind>s.<name>]`` tables of ``table``, each validated as ``model``."""
    if not isinstance(table, dict):
        raise InvalidConfig(f"{origin}: {kind}s must be [{kind}s.<name>] tables")
    found: dict[str, _Entry] = {}
    for name, body in cast(dict[str, Any], table).items():
        if name != _ANY and not re.fullmatch(NAME_PATTERN, name):
            raise InvalidConfig(
                f"{origin}: {kind} {name!r} is not a name: letters, digits and . _ @ + - "
                'only, starting with a letter or a digit (or "*": every one not listed)'
            )
        if not isinstance(body, dict):
            raise InvalidConfig(f"{origin}: {kind}s.{name} must be a table")
        fields = cast(dict[str, Any], body)
        unknown = sorted(set(fields) - set(known))
        if unknown:
            raise InvalidConfig(
                f"{origin}: {kind} {name!r} has unknown keys {unknown!r} (known: "
                f"{', '.join(known)})"
            )
        try:
            found[name] = model.model_validate(fields)
        except ValidationError as error:
            raise InvalidConfig(
                f"{origin}: {kind} {name!r} is invalid: {describe_validation_error(error)}"
            ) from error
    return found


def _issuers(table: Any, origin: str) -> dict[str, str]:
    entries = _entries(table, "issuer", _Issuer, ("key",), origin)
    for name, issuer in entries.items():
        if name == _ANY:
            raise InvalidConfig(f'{origin}: an issuer is named, never "*": name it')
        if problem := public_key_problem(issuer.key):
            raise InvalidConfig(f"{origin}: issuer {name!r}: the key is {problem}")
    return {name: issuer.key for name, issuer in entries.items()}


class PrincipalRegistry:
    """The operator's principals (see the module docstring); ``PrincipalRegistry()`` has
    none."""

    def __init__(
        self,
        *,
        claims: ClaimRule = "record",
        required: bool = False,
        issuers: dict[str, str] | None = None,
        tenants: dict[str, _Tenant] | None = None,
        users: dict[str, _User] | None = None,
        origin: str = "no principals file (ORGA_PRINCIPALS, or tables in ORGA_AGENTS)",
    ) -> None:
        self.claims: ClaimRule = claims
        """What the worker does with a principal no enrolled issuer signed."""
        self.required = required
        """Every loop must run for a principal."""
        self.origin = origin
        """Where the principals come from, for messages."""
        self._issuers = dict(issuers or {})
        self._tenants = dict(tenants or {})
        self._users = dict(users or {})

    @classmethod
    def load(cls, settings: Settings) -> PrincipalRegistry:
        """The principals of the agents file and ``ORGA_PRINCIPALS`` (either may hold each
        table; none: an empty registry).

        Raises:
            InvalidConfig: a file cannot be read or parsed, holds a table the other holds
                too, or a table is invalid.
        """
        tables: dict[str, tuple[Any, str]] = {}
        origins: list[str] = []
        if settings.agents_file is not None:
            origin = f"ORGA_AGENTS={settings.agents_file}"
            document = _document(settings.agents_file, origin)
            found = {k: (v, origin) for k, v in document.items() if k in TABLES}
            tables |= found
            origins += [origin] if found else []
        if settings.principals_file is not None:
            origin = f"ORGA_PRINCIPALS={settings.principals_file}"
            document = _document(settings.principals_file, origin)
            unknown = sorted(set(document) - set(TABLES))
            if unknown:
                raise InvalidConfig(
                    f"{origin}: the file holds [principals], [issuers.<name>], "
                    f"[tenants.<name>] and [users.<name>] tables only (unknown: {unknown!r})"
                )
            twice = sorted(set(document) & set(tables))
            if twice:
                raise InvalidConfig(
                    f"{origin}: the table(s) {twice!r} are in {tables[twice[0]][1]} too: keep "
                    "each in one place"
                )
            tables |= {k: (v, origin) for k, v in document.items()}
            origins.append(origin)
        if not tables:
            return cls()
        return cls._parse(tables, " and ".join(origins))

    @classmethod
    def _parse(cls, tables: dict[str, tuple[Any, str]], origin: str) -> PrincipalRegistry:
        rules = _Rules()
        if "principals" in tables:
            table, where = tables["principals"]
            if not isinstance(table, dict):
                raise InvalidConfig(f"{where}: [principals] must be a table")
            fields = cast(dict[str, Any], table)
            unknown = sorted(set(fields) - {"claims", "required"})
            if unknown:
                raise InvalidConfig(
                    f"{where}: [principals] has unknown keys {unknown!r} (known: claims, required)"
                )
            try:
                rules = _Rules.model_validate(fields)
            except ValidationError as error:
                raise InvalidConfig(
                    f"{where}: [principals] is invalid: {describe_validation_error(error)}"
                ) from error
        issuers = _issuers(*tables["issuers"]) if "issuers" in tables else {}
        tenants: dict[str, _Tenant] = {}
        if "tenants" in tables:
            table, where = tables["tenants"]
            tenants = _entries(table, "tenant", _Tenant, ("weight", *_LIMITS), where)
        users: dict[str, _User] = {}
        if "users" in tables:
            table, where = tables["users"]
            users = _entries(table, "user", _User, ("tenant", *_LIMITS), where)
            if _ANY in users and users[_ANY].tenant is not None:
                raise InvalidConfig(
                    f'{where}: [users."*"] cannot name a tenant: map each user to its '
                    "tenant in its own [users.<name>] table"
                )
        return cls(
            claims=rules.claims,
            required=rules.required,
            issuers=issuers,
            tenants=tenants,
            users=users,
            origin=origin,
        )

    def issuer_key(self, name: str) -> str | None:
        """The enrolled public key (base64) of the issuer ``name``, if it is enrolled."""
        return self._issuers.get(name)

    def tenant_of(self, user: str) -> str | None:
        """The tenant the operator maps ``user`` to (None: not mapped; the claim says)."""
        found = self._users.get(user) if user != _ANY else None
        return None if found is None else found.tenant

    def limits(self, scope: Scope, name: str) -> SpendLimits:
        """The limits of the user or tenant ``name``: its own, else ``"*"``'s, else none."""
        entries: dict[str, _Tenant] | dict[str, _User] = (
            self._users if scope == "user" else self._tenants
        )
        found = entries.get(name) or entries.get(_ANY)
        if found is None:
            return SpendLimits()
        return SpendLimits.model_validate(found.model_dump(include=set(_LIMITS)))

    def holders(self, principal: Principal) -> list[Holder]:
        """Whose ledgers a call of ``principal`` counts in: its user's, then its tenant's."""
        found = [Holder("user", principal.user, self.limits("user", principal.user))]
        if principal.tenant is not None:
            found.append(
                Holder("tenant", principal.tenant, self.limits("tenant", principal.tenant))
            )
        return found

    def weight(self, tenant: str | None) -> float | None:
        """The fairness weight of ``tenant``'s calls: its own, else ``"*"``'s (None: none
        configured; Temporal's default is 1.0)."""
        if tenant is None:
            return None
        own = self._tenants.get(tenant)
        if own is not None and own.weight is not None:
            return own.weight
        every = self._tenants.get(_ANY)
        return None if every is None else every.weight

    def tenants(self) -> list[str]:
        """The tenants the operator listed (a metric's bounded labels), sorted."""
        return sorted(name for name in self._tenants if name != _ANY)
