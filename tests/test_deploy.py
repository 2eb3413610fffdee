"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from orga.contracts import search_attributes as sa

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {
        "postgresql",
        "temporal",
        "register-search-attributes",
        "temporal-ui",
        "worker",
    }
    assert services["temporal"]["ports"] == ["7233:7233"]
    assert services["temporal-ui"]["ports"] == ["8080:8080"]
    assert services["postgresql"]["image"].startswith("postgres:")
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")


def test_temporal_uses_postgres(compose: dict[str, Any]) -> None:
    services = compose["services"]
    env = services["temporal"]["environment"]
    db = services["postgresql"]["environment"]
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgresql"
    assert (env["POSTGRES_USER"], env["POSTGRES_PWD"]) == (
        db["POSTGRES_USER"],
        db["POSTGRES_PASSWORD"],
    )
    config = env["DYNAMIC_CONFIG_FILE_PATH"].removeprefix("config/dynamicconfig/")
    mounted = services["temporal"]["volumes"][0].split(":")[0]
    assert (ROOT / mounted / config).is_file()
    yaml.safe_load((ROOT / mounted / config).read_text())
    assert services["temporal"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_search_attributes_are_registered(compose: dict[str, Any]) -> None:
    entrypoint = compose["services"]["register-search-attributes"]["entrypoint"]
    assert entrypoint[:2] == ["sh", "-c"]
    create, _, fallback = entrypoint[2].partition("||")
    words = create.split()
    assert words[:4] == ["temporal", "operator", "search-attribute", "create"]
    names = [words[i + 1] for i, w in enumerate(words) if w == "--name"]
    kinds = [words[i + 1] for i, w in enumerate(words) if w == "--type"]
    expected = {
        k.name: ("Keyword" if k.indexed_value_type.name == "KEYWORD" else "Int") for k in sa.ALL
    }
    assert dict(zip(names, kinds, strict=True)) == expected
    # A second `docker compose up` finds them registered already: that must count as success.
    assert "search-attribute list" in fallback and "OrgaTotalTokens" in fallback


def test_worker_is_configured_by_the_same_variables(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert worker["build"] == "."
    env = worker["environment"]
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    for variable in (
        "TEMPORAL_NAMESPACE",
        "ORGA_TASK_QUEUE",
        "ORGA_PROVIDER",
        "OPENROUTER_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ORGA_TOOL_MODULES",
        "ORGA_POLICY_DIR",
    ):
        assert variable in env, variable
    # Keys are passed through from the environment, never written into the file.
    for key in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert env[key] == f"${{{key}:-}}"
    condition = worker["depends_on"]["register-search-attributes"]["condition"]
    assert condition == "service_completed_successfully"


def test_dockerfile_runs_the_worker() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("# The orga worker image")
    assert "FROM python:3.11" in text
    assert "uv sync --locked --no-dev" in text
    assert 'CMD ["python", "worker.py"]' in text
    for path in ("orga", "workflows", "activities", "examples", "worker.py"):
        assert f"COPY {path}" in text
        assert (ROOT / path).exists()
