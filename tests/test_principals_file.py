"""The operator's principals file (``orga.worker.principals``): its tables in ``ORGA_PRINCIPALS``
or in the agents file, ``"*"`` for every one not listed, the user-to-tenant mapping, and a
worker stopped, naming the file and the problem, by anything it cannot take."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from orga.contracts.errors import InvalidConfig
from orga.contracts.principals import Principal, SpendLimits
from orga.runtime.settings import Settings
from orga.runtime.spend import Holder
from orga.worker.principals import PrincipalRegistry


def _public_key() -> str:
    # A fixed key: the parametrized ids name it, and every xdist worker must collect the same.
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


KEY = _public_key()

FULL = f"""
[principals]
claims = "refuse"
required = true

[issuers.web]
key = "{KEY}"

[tenants.acme]
weight = 2.0
day_usd = 50.0
month_usd = 500.0
day_tokens = 2_000_000
month_tokens = 10_000_000

[tenants."*"]
day_usd = 10.0
weight = 0.5

[users.ann]
tenant = "acme"
day_usd = 5.0

[users."*"]
day_usd = 1.0
"""

AGENTS = """
[agents.support]
tools = ["file_read"]
"""


def _file(tmp_path: Path, text: str, name: str = "principals.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _load(tmp_path: Path, text: str) -> PrincipalRegistry:
    return PrincipalRegistry.load(Settings(principals_file=_file(tmp_path, text)))


def _refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(InvalidConfig) as refused:
        _load(tmp_path, text)
    return refused.value.message


def test_the_file_is_read_with_its_defaults_for_everyone_not_listed(tmp_path: Path) -> None:
    registry = _load(tmp_path, FULL)
    assert (registry.claims, registry.required) == ("refuse", True)
    assert registry.issuer_key("web") == KEY and registry.issuer_key("desk") is None
    assert registry.limits("tenant", "acme") == SpendLimits(
        day_usd=50.0, month_usd=500.0, day_tokens=2_000_000, month_tokens=10_000_000
    )
    assert registry.limits("tenant", "globex") == SpendLimits(day_usd=10.0)
    assert registry.limits("user", "ann") == SpendLimits(day_usd=5.0)
    assert registry.limits("user", "bob") == SpendLimits(day_usd=1.0)
    assert (registry.tenant_of("ann"), registry.tenant_of("bob")) == ("acme", None)
    assert (registry.weight("acme"), registry.weight("globex"), registry.weight(None)) == (
        2.0,
        0.5,
        None,
    )
    assert registry.tenants() == ["acme"]  # "*" is not a tenant (a bounded metric label)
    assert registry.origin == f"ORGA_PRINCIPALS={tmp_path / 'principals.toml'}"


def test_holders_are_the_user_then_its_tenant(tmp_path: Path) -> None:
    registry = _load(tmp_path, FULL)
    assert registry.holders(Principal(user="ann", tenant="acme")) == [
        Holder("user", "ann", SpendLimits(day_usd=5.0)),
        Holder("tenant", "acme", registry.limits("tenant", "acme")),
    ]
    assert registry.holders(Principal(user="bob")) == [
        Holder("user", "bob", SpendLimits(day_usd=1.0))
    ]


def test_no_tables_is_an_empty_registry(tmp_path: Path) -> None:
    for registry in (
        PrincipalRegistry.load(Settings()),
        PrincipalRegistry.load(Settings(agents_file=_file(tmp_path, AGENTS, "agents.toml"))),
        _load(tmp_path, ""),
    ):
        assert (registry.claims, registry.required) == ("record", False)
        assert registry.limits("user", "ann") == SpendLimits()
        assert registry.weight("acme") is None and registry.tenants() == []
        assert registry.tenant_of("ann") is None and registry.issuer_key("web") is None


def test_the_agents_file_may_hold_the_tables_and_the_principals_file_others(
    tmp_path: Path,
) -> None:
    agents = _file(tmp_path, AGENTS + '\n[users.ann]\ntenant = "acme"\n', "agents.toml")
    principals = _file(tmp_path, '[tenants.acme]\nday_usd = 3.0\n[principals]\nclaims = "refuse"')
    registry = PrincipalRegistry.load(Settings(agents_file=agents, principals_file=principals))
    assert registry.tenant_of("ann") == "acme"
    assert registry.limits("tenant", "acme") == SpendLimits(day_usd=3.0)
    assert registry.claims == "refuse"
    assert registry.origin == f"ORGA_AGENTS={agents} and ORGA_PRINCIPALS={principals}"
    alone = PrincipalRegistry.load(Settings(agents_file=agents))
    assert alone.origin == f"ORGA_AGENTS={agents}" and alone.tenant_of("ann") == "acme"


def test_a_table_in_both_files_is_refused(tmp_path: Path) -> None:
    agents = _file(tmp_path, AGENTS + "\n[users.ann]\nday_usd = 1.0\n", "agents.toml")
    principals = _file(tmp_path, "[users.bob]\nday_usd = 2.0\n")
    with pytest.raises(InvalidConfig) as refused:
        PrincipalRegistry.load(Settings(agents_file=agents, principals_file=principals))
    assert refused.value.message == (
        f"ORGA_PRINCIPALS={principals}: the table(s) ['users'] are in ORGA_AGENTS={agents} "
        "too: keep each in one place"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[agents.x]\ntools = []\n", "tables only (unknown: ['agents'])"),
        ('[principals]\nclaims = "maybe"\n', "[principals] is invalid: claims:"),
        ('[principals]\nrequired = "yes"\n', "[principals] is invalid: required:"),
        ("[principals]\nstrict = true\n", "[principals] has unknown keys ['strict']"),
        ("principals = 1\n", "[principals] must be a table"),
        ("[users.ann]\nday_dollars = 1.0\n", "user 'ann' has unknown keys ['day_dollars']"),
        ("[users.ann]\nday_usd = -1.0\n", "user 'ann' is invalid: day_usd:"),
        ("[users.ann]\nday_tokens = 0\n", "user 'ann' is invalid: day_tokens:"),
        ('[users.ann]\ntenant = "a b"\n', "user 'ann' is invalid: tenant:"),
        ('[users."a b"]\nday_usd = 1.0\n', "user 'a b' is not a name"),
        ("[users]\nann = 1\n", "users.ann must be a table"),
        ("users = 1\n", "users must be [users.<name>] tables"),
        ('[users."*"]\ntenant = "acme"\n', '[users."*"] cannot name a tenant'),
        ("[tenants.acme]\nweight = 0\n", "tenant 'acme' is invalid: weight:"),
        ("[tenants.acme]\nweight = 1001\n", "tenant 'acme' is invalid: weight:"),
        ('[tenants.acme]\ntenant = "x"\n', "tenant 'acme' has unknown keys ['tenant']"),
        ('[issuers.web]\nkey = "bm90IGEga2V5"\n', "issuer 'web': the key is not an Ed25519"),
        ('[issuers.web]\nkey = "x"\ngroups = []\n', "issuer 'web' has unknown keys"),
        (f'[issuers."*"]\nkey = "{KEY}"\n', 'an issuer is named, never "*"'),
        ("[users.ann\n", "the file is not TOML"),
    ],
)
def test_what_the_file_cannot_take_stops_the_worker(
    tmp_path: Path, text: str, expected: str
) -> None:
    message = _refused(tmp_path, text)
    assert message.startswith(f"ORGA_PRINCIPALS={tmp_path / 'principals.toml'}: "), message
    assert expected in message, message


def test_a_principals_file_that_is_not_there_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(InvalidConfig) as refused:
        PrincipalRegistry.load(Settings(principals_file=missing))
    assert refused.value.message.startswith(f"ORGA_PRINCIPALS={missing}: cannot read the file")
