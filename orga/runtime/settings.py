"""Worker and client settings, read from the environment.

API keys live here and only here: in the worker's process, as ``SecretStr`` (whose ``repr``
hides the value). They never enter workflow input, history, queries, the journal or logs.

==========================  ===================================  ==========================
variable                    meaning                              default
==========================  ===================================  ==========================
TEMPORAL_ADDRESS            Temporal frontend                    localhost:7233
TEMPORAL_NAMESPACE          namespace                            default
TEMPORAL_API_KEY            Temporal Cloud API key (implies TLS) unset
TEMPORAL_TLS                ``1`` to use TLS without an API key  unset
ORGA_TASK_QUEUE             task queue of loops and activities   orga
ORGA_PROVIDER               default provider of loops            first one with a key
                            (``scripted``: the offline scripted model, served by the worker)
OPENROUTER_API_KEY / _MODEL / _BASE_URL                          openai/gpt-4o-mini
OPENAI_API_KEY / _MODEL / _BASE_URL (vLLM, Ollama, llama.cpp)    gpt-4o-mini
ANTHROPIC_API_KEY / _MODEL / _BASE_URL                           claude-sonnet-4-5
ORGA_TOOL_MODULES           comma-separated modules with @tools  unset
ORGA_EMBEDDINGS             ``<provider>:<model>`` whose          unset (full-text search)
                            /embeddings make knowledge search hybrid
ORGA_MCP_SERVERS            TOML file of MCP servers (tools)     unset (no MCP tools)
ORGA_METRICS_ADDRESS        worker's Prometheus endpoint         unset (no metrics served)
ORGA_MODEL_TASK_QUEUE       task queue of model calls            unset (the loop's queue)
ORGA_MODEL_RPS              model calls per second, all workers  unset (no limit)
                            (``0.0.0.0:9464``: /metrics)
ORGA_WORKER_TUNER           ``fixed``: the SDK's slot counts;     fixed
                            ``resource``: while CPU/memory allow
ORGA_TARGET_CPU / _MEMORY   the resource tuner's targets (0-1)   0.8 / 0.8
ORGA_AGENTS                 TOML file of the worker's agents     unset (one implicit agent)
ORGA_POLICY                 policy floor of the implicit agent   default
ORGA_ALLOW_PERMISSIVE       ``1``: loops may ask for permissive   unset (refused)
ORGA_FILE_ROOT              the only directory file_read reads   unset (no file_read)
ORGA_FILE_READ_HIDDEN       ``1``: file_read reads dot-files     unset (refused)
ORGA_DATA_DIR               the embedded default's directory     .orga
ORGA_STORE_URL              shared store: sqlite:////abs/p.db    <ORGA_DATA_DIR>/store.db
                            or postgresql://user:pw@host/db
ORGA_STORE_RETENTION        days stored payloads/blobs are kept  unset (kept)
ORGA_DEPLOYMENT_NAME        Worker Deployment (pinned versions)  unset (no versioning)
ORGA_BUILD_ID               this worker's build id (git commit)  required with the above
ORGA_EGRESS_ALLOW           hosts/CIDRs web_fetch may reach      unset (public only)
                            although not public (``10.0.0.0/8``)
ORGA_POLICY_DIR             Cedar policies + schema              unset (no cedar gate)
ORGA_OPA_URL                OPA decision URL (/v1/data/<pkg>)    unset (no opa gate)
==========================  ===================================  ==========================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from orga.contracts.agents import PolicyFloor
from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import PROVIDERS, SCRIPTED, ProviderName
from orga.runtime.store import Store

__all__ = ["ProviderSettings", "Settings"]


def _flag(value: str | None) -> bool:
    return (value or "").lower() in {"1", "true", "yes"}


class ProviderSettings(BaseModel):
    """Where one provider lives and the key the worker uses for it."""

    model_config = ConfigDict(frozen=True)

    name: ProviderName
    base_url: str
    api_key: SecretStr | None = None
    api_key_env: str
    """The variable the key comes from; error messages name it, never the key."""
    default_model: str
    official: bool = True
    """True when ``base_url`` is the provider's own service, which always needs a key."""


_DEFAULTS: dict[ProviderName, tuple[str, str]] = {
    "openrouter": ("https://openrouter.ai/api/v1", "openai/gpt-4o-mini"),
    "openai": ("https://api.openai.com/v1", "gpt-4o-mini"),
    "anthropic": ("https://api.anthropic.com", "claude-sonnet-4-5"),
}


def _embeddings(value: str | None) -> tuple[ProviderName, str] | None:
    if value is None:
        return None
    provider, _, model = value.partition(":")
    if provider == "anthropic":
        raise InvalidConfig(
            f"ORGA_EMBEDDINGS={value!r}: Anthropic has no embeddings endpoint; use an "
            "OpenAI-compatible one (openai:<model>, with OPENAI_BASE_URL for Ollama or vLLM)"
        )
    if provider not in PROVIDERS or not model.strip():
        raise InvalidConfig(
            f"ORGA_EMBEDDINGS={value!r} is not <provider>:<model>; for example "
            "openai:text-embedding-3-small or openrouter:openai/text-embedding-3-small"
        )
    return provider, model.strip()


class Settings(BaseModel):
    """Everything a worker or the CLI reads from its environment."""

    model_config = ConfigDict(frozen=True)

    temporal_address: str = "localhost:7233"
    temporal_namespace: str = "default"
    temporal_api_key: SecretStr | None = None
    temporal_tls: bool = False
    task_queue: str = "orga"
    default_provider: ProviderName | None = None
    providers: dict[ProviderName, ProviderSettings] = Field(
        default_factory=dict[ProviderName, ProviderSettings]
    )
    tool_modules: list[str] = Field(default_factory=list[str])
    embeddings: tuple[ProviderName, str] | None = None
    """The provider and model whose ``/embeddings`` make knowledge search hybrid
    (``ORGA_EMBEDDINGS=openai:text-embedding-3-small``); unset: full-text search alone."""
    agents_file: Path | None = None
    """The worker's agents (``ORGA_AGENTS``); without it, one implicit agent."""
    mcp_servers_file: Path | None = None
    """The MCP servers whose tools the worker offers (``ORGA_MCP_SERVERS``)."""
    metrics_address: str | None = None
    """``host:port`` where the worker serves Prometheus metrics (``ORGA_METRICS_ADDRESS``)."""
    model_task_queue: str | None = None
    """A task queue of their own for model calls (``ORGA_MODEL_TASK_QUEUE``)."""
    model_rps: float | None = Field(default=None, gt=0)
    """Model calls per second over every worker of the model task queue (``ORGA_MODEL_RPS``;
    the Temporal server enforces it)."""
    tuner: Literal["resource", "fixed"] = "fixed"
    """How many tasks a worker takes at once (``ORGA_WORKER_TUNER``): ``fixed`` — the SDK's slot
    counts (measured: one worker ran 500 loops started at once with nothing run twice);
    ``resource`` — only while its machine's CPU and memory are under their targets (Temporal's
    resource-based tuner: backpressure at the task queue, for workers that share a cluster;
    it leaves CPU unused on a machine that also runs the server — measured 2.3 against 3.4
    loops/s in ``bench/loop_vs_bare.py``)."""
    target_cpu: float = Field(default=0.8, gt=0, le=1)
    """The resource tuner's CPU target (``ORGA_TARGET_CPU``): the share of the machine's CPU
    above which the worker takes no more tasks."""
    target_memory: float = Field(default=0.8, gt=0, le=1)
    """The resource tuner's memory target (``ORGA_TARGET_MEMORY``)."""
    policy_floor: PolicyFloor = "default"
    """The implicit agent's policy floor (``ORGA_POLICY``)."""
    allow_permissive: bool = False
    """Loops may ask for the permissive gate (``ORGA_ALLOW_PERMISSIVE=1``; development only)."""
    policy_dir: Path | None = None
    """Cedar policies and schema (``ORGA_POLICY_DIR``), parsed once at worker start."""
    opa_url: str | None = None
    """OPA decision endpoint, ``http://host:8181/v1/data/<package>`` (``ORGA_OPA_URL``)."""
    file_root: Path | None = None
    """The only directory ``file_read`` reads (``ORGA_FILE_ROOT``); unset: no ``file_read``."""
    file_read_hidden: bool = False
    """``file_read`` may read dot-files and dot-directories (``ORGA_FILE_READ_HIDDEN=1``)."""
    egress_allow: list[str] = Field(default_factory=list[str])
    """Hosts and CIDRs that ``web_fetch`` may reach although they are not public addresses
    (``ORGA_EGRESS_ALLOW``, comma-separated)."""
    data_dir: Path = Field(default_factory=lambda: Path(".orga").resolve())
    """The embedded default's directory (``ORGA_DATA_DIR``): ``temporal.db``, ``store.db``."""
    store_url: str | None = None
    """The store every worker and client shares (``ORGA_STORE_URL``): ``sqlite:////abs/path``
    or ``postgresql://…``; unset, ``<data_dir>/store.db``."""
    deployment_name: str | None = None
    """Worker Deployment this worker belongs to (``ORGA_DEPLOYMENT_NAME``): with it, workflows
    are pinned to the version (build) they started on while new ones go to the current one."""
    build_id: str | None = None
    """This worker's build id within its deployment (``ORGA_BUILD_ID``: the git commit, an image
    tag); required with ``ORGA_DEPLOYMENT_NAME``."""
    store_retention_days: float | None = None
    """Forget stored payloads and blobs older than this (``ORGA_STORE_RETENTION``, days);
    unset: keep them. Keep them longer than the namespace keeps histories."""
    sticky_timeout: float = 3.0
    """Seconds a workflow task waits for the worker that has the loop cached before any worker
    may take it (``ORGA_STICKY_TIMEOUT``). Short, so a dead worker costs seconds, not ten."""
    graceful_shutdown: float = 30.0
    """Seconds a stopping worker lets running activities finish before cancelling them
    (``ORGA_GRACEFUL_SHUTDOWN``)."""
    web_fetch_max_bytes: int = 1_000_000
    web_fetch_timeout: float = 20.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``env`` (the process environment by default)."""
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        providers: dict[ProviderName, ProviderSettings] = {}
        for name in PROVIDERS:
            prefix = name.upper()
            default_url, default_model = _DEFAULTS[name]
            base_url = (get(f"{prefix}_BASE_URL") or default_url).rstrip("/")
            key = get(f"{prefix}_API_KEY")
            providers[name] = ProviderSettings(
                name=name,
                base_url=base_url,
                api_key=SecretStr(key) if key else None,
                api_key_env=f"{prefix}_API_KEY",
                default_model=get(f"{prefix}_MODEL") or default_model,
                official=base_url == default_url,
            )
        default = get("ORGA_PROVIDER")
        if default is not None and default not in (*PROVIDERS, SCRIPTED):
            raise InvalidConfig(
                f"ORGA_PROVIDER={default!r} is not a provider; use one of "
                f"{[*PROVIDERS, SCRIPTED]!r}"
            )
        modules = [m.strip() for m in (get("ORGA_TOOL_MODULES") or "").split(",") if m.strip()]
        floor = get("ORGA_POLICY") or "default"
        if floor not in ("default", "cedar", "opa"):
            raise InvalidConfig(
                f"ORGA_POLICY={floor!r} is not a policy floor; use default, cedar or opa"
            )
        file_root = get("ORGA_FILE_ROOT")
        tuner = get("ORGA_WORKER_TUNER") or "fixed"
        if tuner not in ("resource", "fixed"):
            raise InvalidConfig(
                f"ORGA_WORKER_TUNER={tuner!r}: use resource (as many tasks as CPU and memory "
                "allow) or fixed (the SDK's slot counts)"
            )
        embeddings = _embeddings(get("ORGA_EMBEDDINGS"))
        temporal_key = get("TEMPORAL_API_KEY")
        return cls(
            temporal_address=get("TEMPORAL_ADDRESS") or "localhost:7233",
            temporal_namespace=get("TEMPORAL_NAMESPACE") or "default",
            temporal_api_key=SecretStr(temporal_key) if temporal_key else None,
            temporal_tls=_flag(get("TEMPORAL_TLS")),
            task_queue=get("ORGA_TASK_QUEUE") or "orga",
            default_provider=default,
            providers=providers,
            tool_modules=modules,
            embeddings=embeddings,
            agents_file=Path(agents).resolve() if (agents := get("ORGA_AGENTS")) else None,
            mcp_servers_file=Path(mcp).resolve() if (mcp := get("ORGA_MCP_SERVERS")) else None,
            metrics_address=get("ORGA_METRICS_ADDRESS"),
            model_task_queue=get("ORGA_MODEL_TASK_QUEUE"),
            model_rps=float(rps) if (rps := get("ORGA_MODEL_RPS")) else None,
            policy_floor=floor,
            tuner=tuner,
            target_cpu=float(get("ORGA_TARGET_CPU") or 0.8),
            target_memory=float(get("ORGA_TARGET_MEMORY") or 0.8),
            allow_permissive=_flag(get("ORGA_ALLOW_PERMISSIVE")),
            file_root=Path(file_root).resolve() if file_root else None,
            file_read_hidden=_flag(get("ORGA_FILE_READ_HIDDEN")),
            egress_allow=[
                h.strip() for h in (get("ORGA_EGRESS_ALLOW") or "").split(",") if h.strip()
            ],
            policy_dir=Path(policy_dir).resolve()
            if (policy_dir := get("ORGA_POLICY_DIR"))
            else None,
            opa_url=get("ORGA_OPA_URL"),
            sticky_timeout=float(get("ORGA_STICKY_TIMEOUT") or 3.0),
            data_dir=Path(get("ORGA_DATA_DIR") or ".orga").resolve(),
            store_url=get("ORGA_STORE_URL"),
            deployment_name=get("ORGA_DEPLOYMENT_NAME"),
            build_id=get("ORGA_BUILD_ID"),
            store_retention_days=float(days) if (days := get("ORGA_STORE_RETENTION")) else None,
            graceful_shutdown=float(get("ORGA_GRACEFUL_SHUTDOWN") or 30.0),
        )

    def provider(self, name: ProviderName | None) -> ProviderSettings:
        """The settings of ``name``, or of the worker's default provider."""
        chosen = name or self.default_provider_name()
        found = self.providers.get(chosen)
        if found is None and chosen == SCRIPTED:
            raise InvalidConfig(
                "this worker serves no offline scripted model: start it with "
                "`uv run worker.py --scripted` (or ORGA_PROVIDER=scripted), or name a real "
                "provider in the loop's config"
            )
        if found is None:
            url, model = _DEFAULTS[chosen]
            found = ProviderSettings(
                name=chosen,
                base_url=url,
                api_key_env=f"{chosen.upper()}_API_KEY",
                default_model=model,
            )
        return found

    def store(self) -> Store:
        """The store these settings name (``ORGA_STORE_URL``, else the embedded default)."""
        return Store(self.store_url or f"sqlite:///{self.data_dir / 'store.db'}")

    @property
    def scripted(self) -> bool:
        """Whether this worker serves the offline scripted model (``ORGA_PROVIDER=scripted``)."""
        return self.default_provider == SCRIPTED

    def default_provider_name(self) -> ProviderName:
        """``ORGA_PROVIDER``, else the first provider with a key or a local base URL."""
        if self.default_provider is not None:
            return self.default_provider
        for name in PROVIDERS:
            found = self.providers.get(name)
            if found is not None and (found.api_key is not None or not found.official):
                return name
        return "openrouter"
