"""Time per Cedar decision: orga's gate (parsed handles) against re-parsing per call.

    uv run python bench/cedar_decision.py [--n 20000]

Prints mean, p50 and p99 per decision for: orga's ``CedarGate.decide`` on one action (request
building, argument projection, evaluation with the schema, annotations), the same through a
6-action batch (per action), and cedarpy with policies and schema passed as strings (what a
gate that parses on every call would pay). Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import cedarpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orga.contracts.inference import Usage
from orga.contracts.policy import PolicyAction, PolicyRequest
from orga.gates.cedar import SCHEMA_FILE, CedarGate

POLICIES = Path(__file__).resolve().parent.parent / "examples" / "policies"


def timings(fn: Callable[[], object], n: int) -> list[float]:
    for _ in range(200):
        fn()
    samples: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def report(name: str, samples: list[float], per: int = 1) -> None:
    ms = sorted(s * 1000 / per for s in samples)
    p99 = ms[int(len(ms) * 0.99)]
    mean, p50 = statistics.mean(ms), ms[len(ms) // 2]
    print(f"{name:<46} mean {mean:.4f} ms  p50 {p50:.4f} ms  p99 {p99:.4f} ms")


def main(n: int) -> None:
    gate = CedarGate(POLICIES)
    action = PolicyAction(
        kind="call_tool", call_id="c", tool="file_read", arguments='{"path": "docs/a.md"}'
    )
    batch = [action] * 5 + [PolicyAction(kind="respond")]
    request = PolicyRequest(
        mode="cedar",
        agent_id="bench",
        workflow_id="w",
        iteration=3,
        usage=Usage(total_tokens=100),
        advertised=["file_read"],
        actions=batch,
    )
    report("orga CedarGate.decide, 1 action", timings(lambda: gate.decide([action], request), n))
    report(
        "orga CedarGate.decide, 6 actions (per action)",
        timings(lambda: gate.decide(batch, request), n // 6),
        6,
    )
    texts = "\n".join(p.read_text() for p in sorted(POLICIES.glob("*.cedar")))
    schema = (POLICIES / SCHEMA_FILE).read_text()
    raw = {
        "principal": 'Agent::"bench"',
        "action": 'Action::"call_tool"',
        "resource": 'Tool::"file_read"',
        "context": {"arguments": {"path": "docs/a.md"}, "iteration": 3, "tokens_used": 100},
    }
    report(
        "cedarpy, strings re-parsed on every call",
        timings(
            lambda: cedarpy.is_authorized(raw, texts, "[]", schema=json.loads(schema)),
            max(n // 10, 100),
        ),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="time per Cedar decision")
    parser.add_argument("--n", type=int, default=20_000)
    main(parser.parse_args().n)
