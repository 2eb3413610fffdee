"""The phases are typestate: pyright rejects code that skips the gate."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = """
from orga.contracts.inference import InferenceResponse
from orga.core.phases import Observing, ToolDispatching, ToolPolicyCheck
from orga.contracts.policy import PolicyResult

USED = (ToolDispatching, ToolPolicyCheck)

def step(observing: Observing, response: InferenceResponse, verdict: PolicyResult) -> None:
"""

GOOD = """
    reasoning = observing.reason()
    check = reasoning.route(response)
    if isinstance(check, ToolPolicyCheck):
        dispatching: ToolDispatching = check.gate(verdict)
        dispatching.collect()
"""

SKIPS_THE_GATE = {
    "reportArgumentType: dispatch straight from reasoning": """
    reasoning = observing.reason()
    ToolDispatching(reasoning, verdict.decisions)
""",
    "reportAttributeAccessIssue: collect results of a policy check": """
    check = observing.reason().route(response)
    if isinstance(check, ToolPolicyCheck):
        check.collect()
""",
    "reportAttributeAccessIssue: route an observation": """
    observing.route(response)
""",
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """pyright's diagnostics for each snippet (the correct path and every case), by name: all
    snippets checked in one run of pyright, each in a file of its own."""
    folder = tmp_path_factory.mktemp("typestate")
    files: dict[str, Path] = {}
    for number, (name, body) in enumerate({"good": GOOD, **SKIPS_THE_GATE}.items()):
        files[name] = folder / f"snippet_{number}.py"
        files[name].write_text(
            textwrap.dedent(PRELUDE) + textwrap.indent(textwrap.dedent(body), "    ")
        )
    result = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable]
        + [str(f) for f in files.values()],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stdout + result.stderr
    diagnostics: list[dict[str, Any]] = json.loads(result.stdout)["generalDiagnostics"]
    return {
        name: [d for d in diagnostics if Path(d["file"]) == path and d["severity"] == "error"]
        for name, path in files.items()
    }


def test_the_correct_path_type_checks(checked: dict[str, list[dict[str, Any]]]) -> None:
    assert checked["good"] == []


@pytest.mark.parametrize("case", sorted(SKIPS_THE_GATE))
def test_skipping_a_phase_is_a_type_error(
    checked: dict[str, list[dict[str, Any]]], case: str
) -> None:
    errors = checked[case]
    rule = case.split(":")[0]
    assert rule in [e.get("rule") for e in errors], errors
