"""Worker and client settings, read from the environment: the one place orga reads ``ORGA_*``.

API keys live here and only here: in the worker's process, as ``SecretStr`` (whose ``repr``
hides the value). They never enter workflow input, history, queries, the journal or logs.

Each field says where it comes from (an ``Env`` in its annotation: the variable, how the docs
show its default, whether the ``orga`` CLI reads it) and what it means (the docstring under
it). From them ``python -m orga.runtime.settings_docs`` writes the docs' environment table and
the list below, and ``orga --help`` lists the CLI's variables; ``tests/test_settings_docs.py``
fails when a written copy differs from what the fields say.

Over 400 lines: one field per variable, each with the docstring that documents it, and the list
of them below; how a variable is read and shown lives in ``orga.runtime.variables``.

Variables (generated from the fields; do not edit by hand):

<!-- variables -->
* ``TEMPORAL_ADDRESS`` — The Temporal frontend, ``host:port``. (default: ``localhost:7233``)
* ``TEMPORAL_NAMESPACE`` — The Temporal namespace. (default: ``default``)
* ``TEMPORAL_API_KEY`` — A Temporal Cloud API key; it implies TLS. (default: unset)
* ``TEMPORAL_TLS`` — Connect to Temporal over TLS without an API key. (default: off)
* ``ORGA_TASK_QUEUE`` — The task queue of loops, tasks and their activities. (default: ``orga``)
* ``ORGA_PROVIDER`` — The provider of loops whose config names none. (default: the first
  provider with a key)
* ``OPENROUTER_API_KEY`` / ``OPENROUTER_MODEL`` / ``OPENROUTER_BASE_URL`` — OpenRouter (the
  default provider): its API key, default model and base URL. (default: model
  ``openai/gpt-4o-mini``, ``https://openrouter.ai/api/v1``)
* ``OPENAI_API_KEY`` / ``OPENAI_MODEL`` / ``OPENAI_BASE_URL`` — OpenAI, or any compatible server
  (vLLM, Ollama, llama.cpp: set the base URL; no key needed): its API key, default model and
  base URL. (default: model ``gpt-4o-mini``, ``https://api.openai.com/v1``)
* ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_MODEL`` / ``ANTHROPIC_BASE_URL`` — The Anthropic Messages
  API: its API key, default model and base URL. (default: model ``claude-sonnet-4-5``,
  ``https://api.anthropic.com``)
* ``ORGA_MODEL_PRICES`` — Prices of models the price table (genai-prices) does not know, or that
  a deal changes: JSON, ``{"my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05,
  "cache_write": 0.6}}``, USD per million tokens. (default: none)
* ``ORGA_TOOL_MODULES`` — Modules whose ``@tool`` functions the worker registers. (default:
  none)
* ``ORGA_EMBEDDINGS`` — The provider and model whose ``/embeddings`` make knowledge search
  hybrid (SQLite), e.g. ``openai:text-embedding-3-small``; read by the worker and by ``orga
  knowledge``. (default: unset: full-text search alone)
* ``ORGA_AGENTS`` — A TOML file of the worker's agents (``examples/agents.toml``). (default:
  unset: one implicit agent)
* ``ORGA_APPROVERS`` — A TOML file of the people who may decide, as ``[approvers.<name>]``
  tables with ``key`` (an Ed25519 public key) and ``groups`` (``orga approver keygen`` adds
  one); the agents file may hold them too. (default: ``<ORGA_DATA_DIR>/approvers.toml``, if it
  exists)
* ``ORGA_PRINCIPALS`` — A TOML file of the operator's principals: ``[principals]`` (``claims``,
  ``required``), the issuers that may bind a user to a loop (``[issuers.<name>] key``), and the
  users' and tenants' spend limits and fairness weights (``[users.<name>]``,
  ``[tenants.<name>]``, ``"*"`` for every one not listed); the agents file may hold these tables
  instead. (default: unset: the agents file's tables, if any)
* ``ORGA_MCP_SERVERS`` — A TOML file of MCP servers whose tools the worker offers
  (``examples/mcp.toml``). (default: unset: no MCP tools)
* ``ORGA_METRICS_ADDRESS`` — ``host:port`` (``0.0.0.0:9464``) where the worker serves Prometheus
  metrics at ``/metrics``: the Temporal SDK's and orga's. (default: unset: no metrics served)
* ``ORGA_MODEL_TASK_QUEUE`` — A task queue of their own for model calls — the loop's, its
  critic's, its summariser's and a model judge's (a worker polls it next to the loop's).
  (default: unset: the loop's queue)
* ``ORGA_MODEL_RPS`` — At most this many model calls per second over every worker of the model
  task queue together: the Temporal server holds the rate (a short burst, then the rate), so a
  provider's rate limit is shared by any number of workers instead of answered with 429s.
  (default: unset: no limit)
* ``ORGA_WORKER_TUNER`` — How many tasks a worker takes at once: ``fixed``, the SDK's slot
  counts; ``resource``, only while its machine's CPU and memory are under ``ORGA_TARGET_CPU`` /
  ``ORGA_TARGET_MEMORY`` (Temporal's resource-based tuner: backpressure at the task queue, for
  workers that share a cluster; on a machine that also runs the server and the model it leaves
  CPU unused). (default: ``fixed``)
* ``ORGA_TARGET_CPU`` — The resource tuner's CPU target: the share of the machine's CPU above
  which the worker takes no more tasks. (default: 0.8)
* ``ORGA_TARGET_MEMORY`` — The resource tuner's memory target: the share of the machine's memory
  above which the worker takes no more tasks. (default: 0.8)
* ``ORGA_POLICY`` — The policy floor of the implicit agent (no ``ORGA_AGENTS``): no loop runs
  under a weaker gate. (default: ``default``)
* ``ORGA_ALLOW_PERMISSIVE`` — Loops may ask for the permissive gate (development only).
  (default: off: refused)
* ``ORGA_POLICY_DIR`` — Cedar policies (``*.cedar``) and their schema
  (``schema.cedarschema.json``), parsed and validated once at worker start. (default: unset: no
  cedar gate)
* ``ORGA_OPA_URL`` — The OPA decision endpoint, ``http://host:8181/v1/data/<package>``.
  (default: unset: no opa gate)
* ``ORGA_FILE_ROOT`` — The only directory ``file_read`` reads; unset, the worker has no
  ``file_read``. (default: unset: no file_read)
* ``ORGA_FILE_READ_HIDDEN`` — ``file_read`` may read dot-files and dot-directories. (default:
  off: refused)
* ``ORGA_EGRESS_ALLOW`` — Hosts and CIDRs that ``web_fetch`` may reach although they are not
  public addresses (``10.0.0.0/8,intranet.example``). (default: none: public addresses only)
* ``ORGA_RUN_PYTHON`` — The worker offers ``run_python``: code the model writes, run behind
  walls (a worker that cannot raise them refuses to start). (default: off: no run_python)
* ``ORGA_RUN_PYTHON_VIEW`` — Files and directories ``run_python``'s code may read (read-only, at
  the same paths). (default: none: the standard library only)
* ``ORGA_DATA_DIR`` — The embedded server's directory (``orga server``, ``orga demo``):
  ``temporal.db`` and the default store's ``store.db``. (default: ``.orga``)
* ``ORGA_STORE_URL`` — orga's store, shared by every worker and client: payloads kept out of
  history, cut texts, the effect ledger, knowledge. (default: ``<ORGA_DATA_DIR>/store.db``)
* ``ORGA_STORE_RETENTION`` — Days the store keeps payloads and cut texts; workers prune older
  ones hourly. (default: unset: kept)
* ``ORGA_DEPLOYMENT_NAME`` — The Worker Deployment this worker belongs to: loops stay pinned to
  the build they started on, while new ones go to the current build. (default: unset: no
  versioning)
* ``ORGA_BUILD_ID`` — This worker's build (a git commit, an image tag): its build within its
  deployment, required with ``ORGA_DEPLOYMENT_NAME``; without, what its tasks are marked with in
  histories (default ``orga-<version>``). (default: unset)
* ``ORGA_STICKY_TIMEOUT`` — How long a workflow task waits for the worker that has the loop
  cached before any worker may take it (and replays the loop from its history). (default: 10 s)
* ``ORGA_GRACEFUL_SHUTDOWN`` — How long a stopping worker lets running activities finish before
  cancelling them. (default: 30 s)
* ``ORGA_APPROVER`` — Who approves, denies, resolves and reviews (``orga approve`` …, ``orga
  desk``, ``orga mcp``) when ``--approver`` / ``--operator`` names nobody. (default: the
  operating-system user)
* ``ORGA_APPROVER_KEY`` — The approver's Ed25519 private key (PEM, from ``orga approver
  keygen``): ``orga approve``, ``orga desk``, ``orga mcp`` and ``LoopHandle.approve`` sign each
  decision with it. (default: ``<ORGA_DATA_DIR>/approver.pem``, if it exists (else unsigned))
* ``ORGA_ISSUER`` — The issuer this client signs principals as (``orga run --principal``, the
  web endpoint): the name the worker's operator enrolled as ``[issuers.<name>]``. (default:
  unset)
* ``ORGA_ISSUER_KEY`` — The issuer's Ed25519 private key (PEM, ``orga approver keygen`` writes
  one): the principal of each loop this client starts is signed with it, for that loop.
  (default: unset)
* ``ORGA_UI_URL`` — The Temporal Web UI that the CLI's links point at. (default:
  ``http://localhost:8233``)
* ``ORGA_DEBUG`` — The CLI shows the traceback of an unexpected error. (default: off)
<!-- /variables -->
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo

from orga.contracts.agents import PolicyFloor
from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import PROVIDERS, SCRIPTED, ProviderName
from orga.runtime import setting_values as parsed
from orga.runtime.setting_values import ModelPrice, ProviderSettings
from orga.runtime.variables import (
    Env,
    Variable,
    attribute_docstrings,
    bounds,
    default_text,
    env_of,
    parser,
    shape,
)

if TYPE_CHECKING:  # SQLAlchemy is imported when a store is opened, not by every CLI verb
    from orga.runtime.store import Store

__all__ = ["ModelPrice", "ProviderSettings", "Settings"]


class Settings(BaseModel):
    """Everything a worker or the CLI reads from its environment (one field per variable)."""

    model_config = ConfigDict(frozen=True)

    temporal_address: Annotated[str, Env("TEMPORAL_ADDRESS", cli=True)] = "localhost:7233"
    """The Temporal frontend, ``host:port``."""
    temporal_namespace: Annotated[str, Env("TEMPORAL_NAMESPACE", cli=True)] = "default"
    """The Temporal namespace."""
    temporal_api_key: Annotated[SecretStr | None, Env("TEMPORAL_API_KEY", cli=True)] = None
    """A Temporal Cloud API key; it implies TLS."""
    temporal_tls: Annotated[bool, Env("TEMPORAL_TLS", cli=True)] = False
    """Connect to Temporal over TLS without an API key."""
    task_queue: Annotated[str, Env("ORGA_TASK_QUEUE", cli=True)] = "orga"
    """The task queue of loops, tasks and their activities."""
    default_provider: Annotated[
        ProviderName | None,
        Env("ORGA_PROVIDER", default="the first provider with a key", parse=parsed.provider),
    ] = None
    """The provider of loops whose config names none. ``scripted``: the worker serves the
    offline scripted model (like ``worker.py --scripted``)."""
    providers: dict[ProviderName, ProviderSettings] = Field(
        default_factory=dict[ProviderName, ProviderSettings]
    )
    """Each provider's key, default model and base URL (``OPENROUTER_*``, ``OPENAI_*``,
    ``ANTHROPIC_*``: ``_API_KEY``, ``_MODEL``, ``_BASE_URL``)."""
    model_prices: Annotated[
        dict[str, ModelPrice],
        Env("ORGA_MODEL_PRICES", default="none", parse=parsed.model_prices),
    ] = Field(default_factory=dict[str, ModelPrice])
    """Prices of models the price table (genai-prices) does not know, or that a deal changes:
    JSON, ``{"my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05, "cache_write":
    0.6}}``, USD per million tokens. A loop's ``max_cost`` is counted with them."""
    tool_modules: Annotated[list[str], Env("ORGA_TOOL_MODULES", default="none")] = Field(
        default_factory=list[str]
    )
    """Modules whose ``@tool`` functions the worker registers."""
    embeddings: Annotated[
        tuple[ProviderName, str] | None,
        Env(
            "ORGA_EMBEDDINGS",
            default="unset: full-text search alone",
            shape="``<provider>:<model>``",
            cli=True,
            parse=parsed.embeddings,
        ),
    ] = None
    """The provider and model whose ``/embeddings`` make knowledge search hybrid (SQLite), e.g.
    ``openai:text-embedding-3-small``; read by the worker and by ``orga knowledge``."""
    agents_file: Annotated[Path | None, Env("ORGA_AGENTS", default="unset: one implicit agent")] = (
        None
    )
    """A TOML file of the worker's agents (``examples/agents.toml``)."""
    approvers_file: Annotated[
        Path | None,
        Env("ORGA_APPROVERS", default="``<ORGA_DATA_DIR>/approvers.toml``, if it exists"),
    ] = None
    """A TOML file of the people who may decide, as ``[approvers.<name>]`` tables with ``key``
    (an Ed25519 public key) and ``groups`` (``orga approver keygen`` adds one); the agents file
    may hold them too. Read again when it changes, for loops that start after. With any
    enrolled, only decisions they sign are recorded; with none, decisions are unverified."""
    principals_file: Annotated[
        Path | None,
        Env("ORGA_PRINCIPALS", default="unset: the agents file's tables, if any"),
    ] = None
    """A TOML file of the operator's principals: ``[principals]`` (``claims``, ``required``),
    the issuers that may bind a user to a loop (``[issuers.<name>] key``), and the users' and
    tenants' spend limits and fairness weights (``[users.<name>]``, ``[tenants.<name>]``,
    ``"*"`` for every one not listed); the agents file may hold these tables instead."""
    mcp_servers_file: Annotated[
        Path | None, Env("ORGA_MCP_SERVERS", default="unset: no MCP tools")
    ] = None
    """A TOML file of MCP servers whose tools the worker offers (``examples/mcp.toml``)."""
    metrics_address: Annotated[
        str | None, Env("ORGA_METRICS_ADDRESS", default="unset: no metrics served")
    ] = None
    """``host:port`` (``0.0.0.0:9464``) where the worker serves Prometheus metrics at
    ``/metrics``: the Temporal SDK's and orga's."""
    model_task_queue: Annotated[
        str | None, Env("ORGA_MODEL_TASK_QUEUE", default="unset: the loop's queue")
    ] = None
    """A task queue of their own for model calls — the loop's, its critic's, its summariser's
    and a model judge's (a worker polls it next to the loop's)."""
    model_rps: Annotated[float | None, Env("ORGA_MODEL_RPS", default="unset: no limit")] = Field(
        default=None, gt=0
    )
    """At most this many model calls per second over every worker of the model task queue
    together: the Temporal server holds the rate (a short burst, then the rate), so a
    provider's rate limit is shared by any number of workers instead of answered with 429s."""
    tuner: Annotated[Literal["resource", "fixed"], Env("ORGA_WORKER_TUNER", parse=parsed.tuner)] = (
        "fixed"
    )
    """How many tasks a worker takes at once: ``fixed``, the SDK's slot counts; ``resource``,
    only while its machine's CPU and memory are under ``ORGA_TARGET_CPU`` /
    ``ORGA_TARGET_MEMORY`` (Temporal's resource-based tuner: backpressure at the task queue,
    for workers that share a cluster; on a machine that also runs the server and the model it
    leaves CPU unused)."""
    target_cpu: Annotated[float, Env("ORGA_TARGET_CPU")] = Field(default=0.8, gt=0, le=1)
    """The resource tuner's CPU target: the share of the machine's CPU above which the worker
    takes no more tasks."""
    target_memory: Annotated[float, Env("ORGA_TARGET_MEMORY")] = Field(default=0.8, gt=0, le=1)
    """The resource tuner's memory target: the share of the machine's memory above which the
    worker takes no more tasks."""
    policy_floor: Annotated[PolicyFloor, Env("ORGA_POLICY", parse=parsed.policy_floor)] = "default"
    """The policy floor of the implicit agent (no ``ORGA_AGENTS``): no loop runs under a
    weaker gate."""
    allow_permissive: Annotated[bool, Env("ORGA_ALLOW_PERMISSIVE", default="off: refused")] = False
    """Loops may ask for the permissive gate (development only)."""
    policy_dir: Annotated[Path | None, Env("ORGA_POLICY_DIR", default="unset: no cedar gate")] = (
        None
    )
    """Cedar policies (``*.cedar``) and their schema (``schema.cedarschema.json``), parsed and
    validated once at worker start."""
    opa_url: Annotated[str | None, Env("ORGA_OPA_URL", default="unset: no opa gate")] = None
    """The OPA decision endpoint, ``http://host:8181/v1/data/<package>``."""
    file_root: Annotated[Path | None, Env("ORGA_FILE_ROOT", default="unset: no file_read")] = None
    """The only directory ``file_read`` reads; unset, the worker has no ``file_read``."""
    file_read_hidden: Annotated[bool, Env("ORGA_FILE_READ_HIDDEN", default="off: refused")] = False
    """``file_read`` may read dot-files and dot-directories."""
    egress_allow: Annotated[
        list[str], Env("ORGA_EGRESS_ALLOW", default="none: public addresses only")
    ] = Field(default_factory=list[str])
    """Hosts and CIDRs that ``web_fetch`` may reach although they are not public addresses
    (``10.0.0.0/8,intranet.example``)."""
    run_python: Annotated[bool, Env("ORGA_RUN_PYTHON", default="off: no run_python")] = False
    """The worker offers ``run_python``: code the model writes, run behind walls (a worker
    that cannot raise them refuses to start)."""
    run_python_view: Annotated[
        list[str], Env("ORGA_RUN_PYTHON_VIEW", default="none: the standard library only")
    ] = Field(default_factory=list[str])
    """Files and directories ``run_python``'s code may read (read-only, at the same paths)."""
    data_dir: Annotated[Path, Env("ORGA_DATA_DIR", default="``.orga``", cli=True)] = Field(
        default_factory=lambda: Path(".orga").resolve()
    )
    """The embedded server's directory (``orga server``, ``orga demo``): ``temporal.db`` and
    the default store's ``store.db``."""
    store_url: Annotated[
        str | None, Env("ORGA_STORE_URL", default="``<ORGA_DATA_DIR>/store.db``", cli=True)
    ] = None
    """orga's store, shared by every worker and client: payloads kept out of history, cut
    texts, the effect ledger, knowledge. ``sqlite:////abs/path/store.db`` (one machine) or
    ``postgresql://user:password@host:5432/orga`` (a cluster)."""
    store_retention_days: Annotated[
        float | None, Env("ORGA_STORE_RETENTION", default="unset: kept", unit="days")
    ] = None
    """Days the store keeps payloads and cut texts; workers prune older ones hourly. Keep
    them longer than the namespace keeps histories."""
    deployment_name: Annotated[
        str | None, Env("ORGA_DEPLOYMENT_NAME", default="unset: no versioning")
    ] = None
    """The Worker Deployment this worker belongs to: loops stay pinned to the build they
    started on, while new ones go to the current build."""
    build_id: Annotated[str | None, Env("ORGA_BUILD_ID")] = None
    """This worker's build (a git commit, an image tag): its build within its deployment,
    required with ``ORGA_DEPLOYMENT_NAME``; without, what its tasks are marked with in histories
    (default ``orga-<version>``)."""
    sticky_timeout: Annotated[float, Env("ORGA_STICKY_TIMEOUT", unit="s")] = Field(
        default=10.0, gt=0
    )
    """How long a workflow task waits for the worker that has the loop cached before any
    worker may take it (and replays the loop from its history). Temporal's default: a dead
    worker is routed around anyway once it has not polled for 10 s, while a shorter timeout
    makes a busy worker replay loops it still holds (3 s: half of 300 loops approved at
    once)."""
    graceful_shutdown: Annotated[float, Env("ORGA_GRACEFUL_SHUTDOWN", unit="s")] = Field(
        default=30.0, ge=0
    )
    """How long a stopping worker lets running activities finish before cancelling them."""
    approver: Annotated[
        str | None, Env("ORGA_APPROVER", default="the operating-system user", cli=True)
    ] = None
    """Who approves, denies, resolves and reviews (``orga approve`` …, ``orga desk``,
    ``orga mcp``) when ``--approver`` / ``--operator`` names nobody."""
    approver_key: Annotated[
        Path | None,
        Env(
            "ORGA_APPROVER_KEY",
            default="``<ORGA_DATA_DIR>/approver.pem``, if it exists (else unsigned)",
            cli=True,
        ),
    ] = None
    """The approver's Ed25519 private key (PEM, from ``orga approver keygen``): ``orga
    approve``, ``orga desk``, ``orga mcp`` and ``LoopHandle.approve`` sign each decision with
    it. Needed where the worker enrolled approvers."""
    issuer: Annotated[str | None, Env("ORGA_ISSUER", cli=True)] = None
    """The issuer this client signs principals as (``orga run --principal``, the web
    endpoint): the name the worker's operator enrolled as ``[issuers.<name>]``. Without it (or
    without ``ORGA_ISSUER_KEY``) a principal is sent as a claim."""
    issuer_key: Annotated[Path | None, Env("ORGA_ISSUER_KEY", cli=True)] = None
    """The issuer's Ed25519 private key (PEM, ``orga approver keygen`` writes one): the
    principal of each loop this client starts is signed with it, for that loop."""
    ui_url: Annotated[str, Env("ORGA_UI_URL", cli=True)] = "http://localhost:8233"
    """The Temporal Web UI that the CLI's links point at."""
    debug: Annotated[bool, Env("ORGA_DEBUG", cli=True)] = False
    """The CLI shows the traceback of an unexpected error."""
    web_fetch_max_bytes: int = 1_000_000
    """The largest body ``web_fetch`` reads (not from the environment)."""
    web_fetch_timeout: float = 20.0
    """Seconds ``web_fetch`` waits for an answer (not from the environment)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``env`` (the process environment by default).

        Raises:
            InvalidConfig: a variable's value is not one its field takes (the message names
                the variable and what it takes).
        """
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        values: dict[str, Any] = {"providers": parsed.providers(get)}
        read: dict[str, tuple[str, str]] = {}  # field -> (variable, its text)
        for field, info, variable in _fields():
            text = get(variable.name)
            if text is None:
                continue
            read[field] = (variable.name, text)
            values[field] = (variable.parse or parser(info))(text)
        try:
            return cls(**values)
        except ValidationError as error:
            first = error.errors()[0]
            name, text = read[str(first["loc"][0])]
            raise InvalidConfig(f"{name}={text!r}: {first['msg'].lower()}") from None

    @classmethod
    def variables(cls) -> list[Variable]:
        """Every variable the settings read, in field order, as the docs show them."""
        found: list[Variable] = []
        meanings = attribute_docstrings(cls)  # read here: pydantic's reading costs every import
        for field, info in cls.model_fields.items():
            if field == "providers":
                found += parsed.provider_variables()
                continue
            variable = env_of(info)
            if variable is not None:
                found.append(
                    Variable(
                        names=(variable.name,),
                        shape=variable.shape or shape(info.annotation),
                        default=variable.default or default_text(info, variable.unit),
                        bounds=bounds(info),
                        meaning=meanings.get(field, ""),
                        cli=variable.cli,
                    )
                )
        return found

    def provider(self, name: ProviderName | None) -> ProviderSettings:
        """The settings of ``name``, or of the worker's default provider."""
        chosen = name or self.default_provider_name()
        found = self.providers.get(chosen)
        if found is None and chosen == SCRIPTED:
            raise InvalidConfig(
                "this worker serves no offline scripted model: start it with "
                "`uv run worker.py --scripted`, or with ORGA_PROVIDER=scripted in the "
                "environment of the worker (worker.py or a worker with OrgaPlugin), or name a "
                "real provider in the loop's config"
            )
        if found is None:
            url, model = parsed.PROVIDER_DEFAULTS[chosen]
            found = ProviderSettings(
                name=chosen,
                base_url=url,
                api_key_env=f"{chosen.upper()}_API_KEY",
                default_model=model,
            )
        return found

    def approvers_path(self) -> Path:
        """Where the worker reads its enrolled approvers (``ORGA_APPROVERS``, else the data
        directory's ``approvers.toml``)."""
        return self.approvers_file or self.data_dir / "approvers.toml"

    def approver_key_path(self) -> Path | None:
        """The key decisions are signed with: ``ORGA_APPROVER_KEY``, else the data directory's
        ``approver.pem`` when there is one."""
        if self.approver_key is not None:
            return self.approver_key
        found = self.data_dir / "approver.pem"
        return found if found.is_file() else None

    def store(self) -> Store:
        """The store these settings name (``ORGA_STORE_URL``, else the embedded default)."""
        from orga.runtime.store import Store

        return Store(self.store_url or f"sqlite:///{self.data_dir / 'store.db'}")

    @property
    def scripted(self) -> bool:
        """Whether this worker serves the offline scripted model (``ORGA_PROVIDER=scripted``)."""
        return self.default_provider == SCRIPTED

    def has_a_model(self) -> bool:
        """Whether any provider can be called: a key, a local base URL, or the offline model."""
        return any(p.api_key is not None or not p.official for p in self.providers.values())

    def default_provider_name(self) -> ProviderName:
        """``ORGA_PROVIDER``, else the first provider with a key or a local base URL."""
        if self.default_provider is not None:
            return self.default_provider
        for name in PROVIDERS:
            found = self.providers.get(name)
            if found is not None and (found.api_key is not None or not found.official):
                return name
        return "openrouter"


def _fields() -> Iterator[tuple[str, FieldInfo, Env]]:
    for field, info in Settings.model_fields.items():
        variable = env_of(info)
        if variable is not None:
            yield field, info, variable
