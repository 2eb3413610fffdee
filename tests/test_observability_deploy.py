"""The observability profile (Prometheus, Grafana, orga's dashboard), checked without Docker:
the dashboard asks only for metrics orga emits, from the data source Grafana is given, and
Prometheus scrapes the port every worker replica serves them on."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from orga.core.metrics import METRICS
from orga.runtime.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "deploy" / "grafana"
PROFILE = "observability"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads((GRAFANA / "dashboards" / "orga.json").read_text())


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, and the panels a collapsed row keeps inside it."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' queries and the template variables'."""
    found = [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]
        found.append(query["query"] if isinstance(query, dict) else query)
    return found


def mounts(service: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """A service's volumes by target: ``(source, mode)``."""
    split = (volume.split(":") for volume in service.get("volumes", []))
    return {parts[1]: (parts[0], parts[2] if len(parts) > 2 else "rw") for parts in split}


def test_every_panel_says_what_it_shows(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "orga"
    assert dashboard["schemaVersion"] >= 39
    shown = list(panels(dashboard))
    ids = [p["id"] for p in shown]
    assert len(ids) == len(set(ids))
    for panel in shown:
        assert panel["title"], panel["id"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        description = panel.get("description", "")
        assert description and "\n" not in description, panel["title"]
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"agent", "task_queue"}
    for variable in variables.values():
        assert variable["definition"].startswith("label_values(")
        # "All" must match too before any series has the label (a fresh worker).
        assert variable["includeAll"] and variable["allValue"] == ".*"


def test_the_dashboard_asks_only_for_metrics_orga_emits(dashboard: dict[str, Any]) -> None:
    asked: set[str] = set()
    for expr in expressions(dashboard):
        for name in re.findall(r"\borga_[a-z_]+", expr):
            metric = re.sub(r"_(bucket|sum|count)$", "", name)
            assert metric in METRICS, f"{name!r} in {expr!r} is not in orga.core.metrics"
            if metric != name:  # the histogram's series
                assert METRICS[metric].kind == "histogram", name
            asked.add(metric)
    # And every metric orga emits has a panel: a new one needs a place on the dashboard.
    assert asked == set(METRICS)
    everything = " ".join(expressions(dashboard))
    for series in ("_bucket", "temporal_workflow_completed"):
        assert series in everything
    # Rates and increases over counters; quantiles over histogram buckets.
    assert "histogram_quantile(0.95, sum by (le, provider, model)" in everything
    assert "orga_approvals_requested" in everything and "orga_escalations_raised" in everything


def test_panels_use_the_provisioned_data_source(
    dashboard: dict[str, Any], compose: dict[str, Any]
) -> None:
    (source,) = load(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    assert "prometheus" in compose["services"]
    used = [p["datasource"] for p in panels(dashboard) if "datasource" in p]
    used += [t["datasource"] for p in panels(dashboard) for t in p.get("targets", [])]
    used += [v["datasource"] for v in dashboard["templating"]["list"]]
    assert used
    assert {(d["type"], d["uid"]) for d in used} == {("prometheus", source["uid"])}
    scraped = load(ROOT / "deploy" / "prometheus" / "prometheus.yml")["global"]
    assert source["jsonData"]["timeInterval"] == scraped["scrape_interval"]


def test_grafana_loads_the_mounted_dashboards(compose: dict[str, Any]) -> None:
    grafana = mounts(compose["services"]["grafana"])
    (provider,) = load(GRAFANA / "provisioning" / "dashboards" / "orga.yml")["providers"]
    assert provider["type"] == "file"
    folder, mode = grafana[provider["options"]["path"]]
    assert (ROOT / folder).resolve() == GRAFANA / "dashboards" and mode == "ro"
    provisioning, mode = grafana["/etc/grafana/provisioning"]
    assert (ROOT / provisioning).resolve() == GRAFANA / "provisioning" and mode == "ro"
    env = compose["services"]["grafana"]["environment"]
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(provider["options"]["path"] + "/")
    assert (GRAFANA / "dashboards" / Path(home).name).is_file()


def test_prometheus_and_grafana_come_only_with_the_profile(compose: dict[str, Any]) -> None:
    services = compose["services"]
    with_profile = {name for name, s in services.items() if "profiles" in s}
    assert with_profile == {"prometheus", "grafana"}  # a plain `up` starts neither
    for name in with_profile:
        service = services[name]
        assert service["profiles"] == [PROFILE]
        assert service["image"].startswith(("prom/prometheus:v3.", "grafana/grafana:12."))
        for source, mode in mounts(service).values():
            if source.startswith("./"):  # a file of this repository, not a named volume
                assert (ROOT / source).exists(), source
                assert mode == "ro", source
    assert services["grafana"]["ports"] == ["127.0.0.1:3000:3000"]
    assert services["prometheus"]["ports"] == ["127.0.0.1:9090:9090"]
    env = services["grafana"]["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"  # never more than looking
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "${GRAFANA_ADMIN_PASSWORD:-admin}"


def test_prometheus_scrapes_every_worker_replica(compose: dict[str, Any]) -> None:
    services = compose["services"]
    worker = services["worker"]
    address = worker["environment"]["ORGA_METRICS_ADDRESS"]
    assert Settings.from_env({"ORGA_METRICS_ADDRESS": address}).metrics_address == address
    host, _, port = address.rpartition(":")
    assert host == "0.0.0.0"  # reachable from the prometheus container
    assert worker["expose"] == [port]
    assert "ports" not in worker  # replicas would contend for one host port
    assert worker["deploy"]["replicas"] > 1
    configured, mode = mounts(services["prometheus"])["/etc/prometheus/prometheus.yml"]
    assert mode == "ro"
    config = load(ROOT / configured)
    assert config["global"]["scrape_interval"] == "15s"
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    # One A record per replica from compose's DNS; `tasks.worker` would be Swarm's.
    (discovery,) = job["dns_sd_configs"]
    assert discovery["names"] == ["worker"]
    assert (discovery["type"], discovery["port"]) == ("A", int(port))
