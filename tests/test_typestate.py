"""The phases are typestate: pyright rejects code that skips the gate."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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


def pyright(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(PRELUDE) + textwrap.indent(textwrap.dedent(body), "    "))
    return subprocess.run(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable, str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_the_correct_path_type_checks(tmp_path: Path) -> None:
    result = pyright(tmp_path, GOOD)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("case", sorted(SKIPS_THE_GATE))
def test_skipping_a_phase_is_a_type_error(tmp_path: Path, case: str) -> None:
    result = pyright(tmp_path, SKIPS_THE_GATE[case])
    assert result.returncode == 1, result.stdout
    rule = case.split(":")[0]
    assert f"({rule})" in result.stdout, result.stdout
