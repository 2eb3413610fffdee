"""Knowledge recall: latency at 10k and 100k facts on SQLite and PostgreSQL, and quality.

    uv run python bench/knowledge_recall.py [--sizes 10000 100000] [--queries 300]

For each store (SQLite FTS5 in a temp file; PostgreSQL started from the machine's binaries, as
the tests do) and each size, loads that many synthetic facts into one agent's knowledge (plus
as many for another agent), then times ``Knowledge.search`` — what the ``search_knowledge``
activity runs before each reasoning step — for generated queries: p50 and p99.

The baseline, measured in the same run: a bare Temporal activity round trip (a workflow that
runs one no-op activity, on the tuned embedded server), against the same workflow running the
search activity on SQLite at the largest size — what knowledge adds to a reasoning step.

Quality: a labelled set (``LABELLED``: 40 facts of a made-up company, 30 questions asked the way
people ask, each with the fact that answers it) is searched alone and hidden among 10 000
synthetic facts; it prints how many questions find their fact in the top 5 (hits@5) with
full-text search, and — on SQLite — with hybrid search (vectors fused with the full text), with
its latency at 10 000 facts. The vectors come from ``ORGA_EMBEDDINGS`` when it is set (a real
OpenAI-compatible endpoint: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``), else from the scripted
server's hashed word-and-trigram vectors, which are no language model: with them the hybrid
row measures the plumbing and typo tolerance, not understanding. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.providers.embeddings import embedder
from orga.contracts.knowledge import KnowledgeQuery, KnowledgeWrite
from orga.runtime.connect import connect
from orga.runtime.devserver import DevServer
from orga.runtime.knowledge import Knowledge, open_knowledge
from orga.runtime.scripted_model import ScriptedModelServer
from orga.runtime.settings import Settings
from orga.runtime.store import Store
from tests.postgres import postgres_server

SUBJECTS = [
    "billing", "invoice", "checkout", "search", "catalog", "payments", "ledger", "auth",
    "gateway", "mailer", "scheduler", "reports", "inventory", "shipping", "returns", "pricing",
    "analytics", "frontend", "mobile", "warehouse", "support", "identity", "audit", "backup",
]  # fmt: skip
PREDICATES = [
    "runs on", "is owned by", "depends on", "stores data in", "is deployed to", "logs to",
    "alerts", "is written in", "reads from", "is rate limited by", "caches in", "exports to",
]  # fmt: skip
OBJECTS = [
    "kubernetes", "postgres", "redis", "kafka", "team blue", "team green", "team red", "go",
    "python", "rust", "s3", "grafana", "pagerduty", "cluster east", "cluster west", "port 8443",
    "port 9090", "nginx", "envoy", "bigquery", "snowflake", "elasticsearch", "vault", "consul",
]  # fmt: skip

LABELLED: list[tuple[str, str]] = [
    ("the payroll service runs on the cluster named saturn", "where does payroll run"),
    ("refunds above 500 euros need approval from finance", "who approves a large refund"),
    ("the on-call rota is kept in the operations wiki", "where can I find the on-call rota"),
    ("customer data is deleted 30 days after account closure", "when is customer data deleted"),
    ("the mobile app is released every second tuesday", "how often is the mobile app released"),
    ("staging database host is pg-stage-3", "what is the staging database host"),
    ("the invoice generator is written in kotlin", "which language is the invoice generator in"),
    ("api tokens expire after 12 hours", "how long do api tokens last"),
    ("the warehouse in lyon ships orders to southern europe", "which warehouse ships to spain"),
    ("maria leads the identity team", "who is the lead of identity"),
    ("incidents are reviewed every friday at 10", "when are incident reviews"),
    ("feature flags are managed with unleash", "what tool manages feature flags"),
    ("the search index is rebuilt nightly at 2am", "when is the search index rebuilt"),
    ("vpn access requires a hardware key", "what do I need for vpn access"),
    ("backups are kept for 35 days in cold storage", "backup retention period"),
    ("the checkout page must load in under 800 ms", "checkout performance budget"),
    ("translations are handled by the localisation guild", "who translates the product"),
    ("the public status page is hosted on statuspage.io", "where is the status page hosted"),
    ("pull requests need two approvals before merging", "how many reviews does a PR need"),
    ("production deploys are frozen during black friday week", "deploy freeze black friday"),
    ("the data warehouse is snowflake in region eu-central", "which region is the warehouse in"),
    ("support tickets are answered within 4 business hours", "support response time target"),
    ("passwords are hashed with argon2id", "password hashing algorithm"),
    ("the analytics pipeline uses airflow for scheduling", "what schedules analytics jobs"),
    ("the design system lives in the figma library atlas", "where is the design system"),
    ("gdpr requests go to privacy@example.com", "where to send a gdpr request"),
    ("the legacy billing system is retired in march", "when is old billing switched off"),
    ("load tests run against the perf environment", "which environment for load testing"),
    ("the fraud model is retrained weekly", "how often is the fraud model trained"),
    ("laptops are encrypted with filevault or bitlocker", "disk encryption on laptops"),
]
EXTRA_FACTS = [
    "the careers page is maintained by people ops",
    "office wifi password rotates monthly",
    "the coffee machine on floor 3 is broken",
    "quarterly planning starts in the last week of the quarter",
    "the cdn is fastly with shield in frankfurt",
    "error budgets are 99.9 percent per quarter",
    "the sales team uses hubspot",
    "expense reports are due by the 5th",
    "the incident channel is named #inc-war-room",
    "ssl certificates renew through lets encrypt",
]


def synthetic(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    facts: list[str] = []
    for i in range(n):
        subject = f"{rng.choice(SUBJECTS)} {rng.choice(['api', 'worker', 'service', 'job'])} {i}"
        facts.append(f"the {subject} {rng.choice(PREDICATES)} {rng.choice(OBJECTS)}")
    return facts


def queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"which {rng.choice(SUBJECTS)} {rng.choice(PREDICATES).split()[0]} {rng.choice(OBJECTS)}"
        for _ in range(n)
    ]


def load(knowledge: Knowledge, namespace: str, facts: list[str], chunk: int = 5_000) -> float:
    started = time.perf_counter()
    for at in range(0, len(facts), chunk):
        knowledge.add_many(
            [
                KnowledgeWrite(namespace=namespace, kind="fact", content=f)
                for f in facts[at : at + chunk]
            ]
        )
    return time.perf_counter() - started


def searcher(knowledge: Knowledge, namespace: str, asked: list[str]) -> Callable[[], object]:
    """One search per call, cycling through ``asked``."""
    turn = iter(range(10**9))
    return lambda: knowledge.search(
        KnowledgeQuery(namespace=namespace, text=asked[next(turn) % len(asked)], limit=5)
    )


def percentiles(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    return statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]


def timed(fn: Callable[[], object], n: int) -> list[float]:
    for _ in range(min(20, n)):
        fn()
    samples: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def labelled(knowledge: Knowledge) -> tuple[tuple[str, dict[str, int]], tuple[str, dict[str, int]]]:
    """The labelled facts stored alone, and among 10 000 synthetic ones: (namespace, ids)."""
    clean, crowded = f"labelled-{uuid.uuid4().hex[:6]}", f"crowded-{uuid.uuid4().hex[:6]}"
    facts = [fact for fact, _ in LABELLED] + EXTRA_FACTS
    ids = {}
    for target in (clean, crowded):
        written = knowledge.add_many(
            [KnowledgeWrite(namespace=target, kind="fact", content=f) for f in facts]
        )
        ids[target] = {f: w.id for f, w in zip(facts, written, strict=True)}
    load(knowledge, crowded, synthetic(10_000, seed=99))
    return (clean, ids[clean]), (crowded, ids[crowded])


def quality(name: str, mode: str, knowledge: Knowledge) -> None:
    (clean, clean_ids), (crowded, crowded_ids) = labelled(knowledge)
    print(
        f"{name:<11} hits@5 {mode}: {hits_at_5(knowledge, clean, clean_ids)}/{len(LABELLED)} "
        f"alone, {hits_at_5(knowledge, crowded, crowded_ids)}/{len(LABELLED)} among 10 000 facts"
    )


def hybrid(n: int) -> None:
    """Hybrid search on SQLite: quality, and latency at 10 000 facts (embedding included)."""
    settings = Settings.from_env()
    with contextlib.ExitStack() as stack:
        if settings.embeddings is None:
            server = stack.enter_context(ScriptedModelServer())
            settings = Settings.from_env(
                {"OPENAI_BASE_URL": server.openai_base_url, "ORGA_EMBEDDINGS": "openai:hashed"}
            )
            label = "hybrid (scripted hashed vectors)"
        else:
            label = f"hybrid ({settings.embeddings[0]}:{settings.embeddings[1]})"
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        store = stack.enter_context(Store(f"sqlite:///{Path(directory) / 'store.db'}"))
        knowledge = open_knowledge(store, embedder(settings))
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        seconds = load(knowledge, namespace, synthetic(10_000, seed=10_000), chunk=1_000)
        p50, p99 = percentiles(timed(searcher(knowledge, namespace, queries(n, seed=7)), n))
        print(f"{'sqlite':<11} {10_000:>7} {seconds:>7.1f} {p50:>7.2f} {p99:>7.2f}  {label}")
        quality("sqlite", label, knowledge)


def hits_at_5(knowledge: Knowledge, namespace: str, ids: dict[str, int]) -> int:
    found = 0
    for fact, question in LABELLED:
        hits = knowledge.search(KnowledgeQuery(namespace=namespace, text=question, limit=5))
        found += ids[fact] in [i.id for i in hits.items]
    return found


def stores() -> Iterator[tuple[str, Store]]:
    with (
        tempfile.TemporaryDirectory() as directory,
        Store(f"sqlite:///{Path(directory) / 'store.db'}") as store,
    ):
        yield "sqlite", store
    with postgres_server() as url, Store(url) as store:
        yield "postgresql", store


# ---- the Temporal baseline ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@activity.defn(name="noop")
async def noop(text: str) -> int:
    return len(text)


@workflow.defn(name="OneActivity", sandboxed=False)
class OneActivity:
    @workflow.run
    async def run(self, name: str) -> int:
        return await workflow.execute_activity(
            name, "which billing runs on kubernetes", start_to_close_timeout=timedelta(seconds=30)
        )


async def temporal_baseline(knowledge: Knowledge, namespace: str, n: int) -> tuple[float, float]:
    """p50 of a workflow running one no-op activity, and of one running the search."""

    @activity.defn(name="search")
    async def search(text: str) -> int:
        query = KnowledgeQuery(namespace=namespace, text=text, limit=5)
        return len((await asyncio.to_thread(knowledge.search, query)).items)

    with tempfile.TemporaryDirectory() as data:
        server = DevServer(Path(data), port=_free_port(), headless=True, quiet=True)
        await server.start()
        try:
            client = await connect(Settings(temporal_address=server.address))
            async with Worker(
                client,
                task_queue="bench-knowledge",
                workflows=[OneActivity],
                activities=[noop, search],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ):
                results: dict[str, float] = {}
                for name in ("noop", "search", "noop", "search"):  # interleaved, twice
                    samples: list[float] = []
                    for _ in range(n):
                        started = time.perf_counter()
                        await client.execute_workflow(
                            OneActivity.run,
                            name,
                            id=f"bench-{uuid.uuid4().hex[:10]}",
                            task_queue="bench-knowledge",
                            request_eager_start=True,
                        )
                        samples.append(time.perf_counter() - started)
                    results[name] = percentiles(samples)[0]
                return results["noop"], results["search"]
        finally:
            await server.stop()


async def main(sizes: list[int], n: int) -> None:
    print(f"knowledge recall: {n} queries per size, top 5, full-text (ms)")
    print(f"{'store':<11} {'facts':>7} {'load s':>7} {'p50':>7} {'p99':>7}")
    for name, store in stores():
        knowledge = open_knowledge(store)
        loaded = 0
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        other = f"other-{uuid.uuid4().hex[:6]}"
        load_seconds = 0.0
        for size in sorted(sizes):
            load_seconds += load(knowledge, namespace, synthetic(size - loaded, seed=size))
            load_seconds += load(knowledge, other, synthetic(size - loaded, seed=size + 1))
            loaded = size
            p50, p99 = percentiles(timed(searcher(knowledge, namespace, queries(n, seed=7)), n))
            print(f"{name:<11} {size:>7} {load_seconds:>7.1f} {p50:>7.2f} {p99:>7.2f}")
        # Quality: alone, then among 10 000 synthetic facts (another namespace per setting).
        quality(name, "full-text", knowledge)
        if name == "sqlite":
            hybrid(n)
            bare, searched = await temporal_baseline(knowledge, namespace, 60)
            print(
                f"{'':<11} one-activity workflow p50: no-op {bare:.2f} ms, search "
                f"{searched:.2f} ms — ratio {searched / bare:.2f} (Temporal baseline)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.sizes, arguments.queries))
