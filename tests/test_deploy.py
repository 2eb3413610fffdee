"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from orga.contracts import search_attributes as sa
from orga.runtime.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def defaults(value: str) -> str:
    """``value`` as compose reads it with an empty environment (``${X:-d}`` → ``d``)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_services_and_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {
        "postgresql",
        "temporal-schema",
        "temporal",
        "create-namespace",
        "register-search-attributes",
        "temporal-ui",
        "codec",
        "worker",
        "prometheus",
        "grafana",
    }
    assert services["temporal"]["ports"] == ["7233:7233"]
    assert services["temporal-ui"]["ports"] == ["8080:8080"]
    # What only this machine's CLI needs stays on this machine.
    assert services["postgresql"]["ports"] == ["127.0.0.1:5432:5432"]
    assert services["codec"]["ports"] == ["127.0.0.1:8081:8081"]
    images = {name: s["image"] for name, s in services.items() if "image" in s}
    assert images["postgresql"].startswith("postgres:")
    # The server image runs Temporal; the schema is set up by its admin tools of the same
    # release (auto-setup, which did both, is deprecated).
    server_version = images["temporal"].removeprefix("temporalio/server:")
    assert server_version != images["temporal"]
    assert images["temporal-schema"] == f"temporalio/admin-tools:{server_version}"
    assert images["register-search-attributes"] == images["temporal-schema"]
    assert images["create-namespace"] == images["temporal-schema"]
    assert images["temporal-ui"].startswith("temporalio/ui:")
    for image in images.values():  # pinned: an `up` next year starts the same cluster
        tag = image.partition(":")[2]
        assert tag and tag != "latest" and re.fullmatch(r"v?[0-9.]+", tag), image
    assert not any("auto-setup" in image for image in images.values())


def test_temporal_uses_postgres(compose: dict[str, Any]) -> None:
    services = compose["services"]
    env = services["temporal"]["environment"]
    db = services["postgresql"]["environment"]
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgresql"
    assert (env["POSTGRES_USER"], defaults(env["POSTGRES_PWD"])) == (
        db["POSTGRES_USER"],
        defaults(db["POSTGRES_PASSWORD"]),
    )
    config = env["DYNAMIC_CONFIG_FILE_PATH"].removeprefix("config/dynamicconfig/")
    mounted = services["temporal"]["volumes"][0].split(":")[0]
    assert (ROOT / mounted / config).is_file()
    dynamic = yaml.safe_load((ROOT / mounted / config).read_text())
    assert dynamic["system.enableDeploymentVersions"] == [{"value": True}]
    assert services["temporal"]["depends_on"] == {
        "temporal-schema": {"condition": "service_completed_successfully"}
    }
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_the_schema_is_set_up_by_a_one_shot_service(compose: dict[str, Any]) -> None:
    setup = compose["services"]["temporal-schema"]
    assert setup["depends_on"]["postgresql"]["condition"] == "service_healthy"
    env = setup["environment"]
    assert env["POSTGRES_SEEDS"] == "postgresql"
    db = compose["services"]["postgresql"]["environment"]
    assert defaults(env["SQL_PASSWORD"]) == defaults(db["POSTGRES_PASSWORD"])
    mount, target, _ = setup["volumes"][0].split(":")
    script_in_container = setup["entrypoint"][-1]
    script = ROOT / mount / script_in_container.removeprefix(target + "/")
    assert script.is_file()
    check = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    text = script.read_text()
    for database in ("temporal", "temporal_visibility"):
        assert f"--db {database} update-schema" in text
    assert "schemas=/etc/temporal/schema/postgresql/v12" in text
    assert '"$schemas/temporal/versioned"' in text and '"$schemas/visibility/versioned"' in text
    # A second `up` finds the databases: that is not an error (the script says so).
    assert "already exists" in text
    assert 'create "${ORGA_STORE_DATABASE:-orga}"' in text


def test_workers_and_codec_share_orgas_store(compose: dict[str, Any]) -> None:
    services = compose["services"]
    worker, codec = services["worker"]["environment"], services["codec"]["environment"]
    url = defaults(worker["ORGA_STORE_URL"])
    assert url == defaults(codec["ORGA_STORE_URL"])
    assert url == "postgresql://temporal:temporal@postgresql:5432/orga"
    assert (
        url.rsplit("/", 1)[1] == services["temporal-schema"]["environment"]["ORGA_STORE_DATABASE"]
    )
    assert Settings.from_env({"ORGA_STORE_URL": url}).store_url == url
    assert services["codec"]["depends_on"]["temporal-schema"]["condition"] == (
        "service_completed_successfully"
    )
    # The browser reaches the codec at the published port, from the UI's origin.
    command = services["codec"]["command"]
    assert command[:2] == ["orga", "codec"]
    assert command[command.index("--ui-origin") + 1] == "http://localhost:8080"
    published = services["codec"]["ports"][0].rsplit(":", 1)[1]
    assert command[command.index("--port") + 1] == published
    ui = services["temporal-ui"]["environment"]
    assert ui["TEMPORAL_CODEC_ENDPOINT"] == f"http://localhost:{published}"
    # Worker data survives a `down`/`up`: a named volume at the worker's data directory.
    mounts = dict(v.split(":")[:2] for v in services["worker"]["volumes"])
    assert mounts["worker-data"] == worker["ORGA_DATA_DIR"]
    assert "worker-data" in compose["volumes"]
    for variable in ("ORGA_DEPLOYMENT_NAME", "ORGA_BUILD_ID", "ORGA_STORE_RETENTION"):
        assert worker[variable] == f"${{{variable}:-}}"


def test_the_namespace_exists_before_anything_uses_it(compose: dict[str, Any]) -> None:
    """The server image creates no namespace: a one-shot service creates `default` (or finds
    it), and the search attributes — then the workers — wait for it."""
    services = compose["services"]
    creating = services["create-namespace"]
    assert creating["depends_on"] == {"temporal": {"condition": "service_healthy"}}
    wait, _, create = creating["entrypoint"][2].partition("done;")
    assert "temporal operator cluster health" in wait
    found, _, made = create.partition("||")
    assert found.split()[:4] == ["temporal", "operator", "namespace", "describe"]
    assert made.split()[:4] == ["temporal", "operator", "namespace", "create"]
    assert "--namespace default" in found and "--namespace default" in made
    assert services["register-search-attributes"]["depends_on"] == {
        "create-namespace": {"condition": "service_completed_successfully"}
    }
    assert "--namespace default" in services["register-search-attributes"]["entrypoint"][2]
    assert services["worker"]["environment"]["TEMPORAL_NAMESPACE"] == "default"


_FAKE_TEMPORAL = """#!/bin/sh
# `temporal operator …` as the register service calls it: attributes in $STATE, one per line.
case "$2 $3" in
  "cluster health") exit 0 ;;
  "search-attribute create")
    name=$7
    if grep -qx "$name" "$STATE" || [ -n "$REFUSE" ]; then echo "exists" >&2; exit 1; fi
    echo "$name" >> "$STATE" ;;
  "search-attribute list") cat "$STATE" ;;
esac
"""


def _register(compose: dict[str, Any], tmp_path: Path, existing: list[str], refuse: bool) -> int:
    """Run the register service's script against a fake ``temporal``; its exit code."""
    script = compose["services"]["register-search-attributes"]["entrypoint"][2]
    fake = tmp_path / "bin" / "temporal"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(_FAKE_TEMPORAL)
    fake.chmod(0o755)
    (tmp_path / "state").write_text("".join(f"{name}\n" for name in existing))
    env = {
        "PATH": f"{fake.parent}:/usr/bin:/bin",
        "STATE": str(tmp_path / "state"),
        "REFUSE": "1" if refuse else "",
    }
    # compose turns `$$` into `$` before the shell sees the script
    done = subprocess.run(["sh", "-c", script.replace("$$", "$")], env=env, check=False)
    return done.returncode


def test_search_attributes_are_registered(compose: dict[str, Any], tmp_path: Path) -> None:
    script = compose["services"]["register-search-attributes"]["entrypoint"]
    assert script[:2] == ["sh", "-c"]
    wait, _, register = script[2].partition("done;")
    assert "temporal operator cluster health" in wait  # the frontend may answer before it serves
    words = register.partition("; do")[0].split()
    assert words[:3] == ["for", "attribute", "in"]
    expected = {
        k.name: ("Keyword" if k.indexed_value_type.name == "KEYWORD" else "Int") for k in sa.ALL
    }
    assert dict(word.split(":") for word in words[3:]) == expected
    state = tmp_path / "state"
    # a fresh namespace: every attribute is created
    assert _register(compose, tmp_path, [], refuse=False) == 0
    assert sorted(state.read_text().split()) == sorted(expected)
    # an upgrade (all but one exist) and a second `up` (all exist): success, nothing lost
    assert _register(compose, tmp_path, sorted(expected)[1:], refuse=False) == 0
    assert sorted(state.read_text().split()) == sorted(expected)
    assert _register(compose, tmp_path, sorted(expected), refuse=False) == 0
    # one that cannot be created and is not there fails the service (compose restarts it)
    assert _register(compose, tmp_path, sorted(expected)[1:], refuse=True) == 1


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
    # The workflow sandbox re-imports orga/workflows/ for every loop: bytecode is compiled at build.
    assert "python -m compileall -q orga worker.py" in text
    for path in ("orga", "examples", "worker.py"):
        assert f"COPY {path}" in text
        assert (ROOT / path).exists()
