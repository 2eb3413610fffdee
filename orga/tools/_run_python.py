"""``run_python``: code the model writes, run behind walls (issue 69, first part).

A worker offers it only where its operator turns it on (``ORGA_RUN_PYTHON=on``, the paths its
code may read in ``ORGA_RUN_PYTHON_VIEW``), and only where the walls can be raised: the worker
raises them once as it starts (``Sandbox.check``) and refuses to start, saying why, where it
cannot — code never runs without them. A loop uses it only where its agent lists it (or a
client names it); each call passes the gate like any (the code is its ``code`` argument, so a
Cedar policy can forbid by pattern or size, and a person can be asked — and edit the code —
before it runs). The result begins with the code's SHA-256 (in the journal and the receipt),
then how it ended, what it printed and the files it wrote, each bounded, what was cut said. It
has no effect outside its scratch directory, so a worker lost mid-run runs it again
(``idempotent``); a cancel kills the sandbox before the call ends.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from orga.tools._sandbox import Ran, Sandbox
from orga.tools.sdk import Tool, tool

__all__ = ["run_python_tool"]


def run_python_tool(sandbox: Sandbox) -> Tool:
    """The ``run_python`` tool over ``sandbox`` (its walls already checked)."""
    bounds = sandbox.bounds
    view = ", ".join(str(p) for p in sandbox.view) or "nothing but the standard library"
    description = (
        "Run a short Python 3 program (standard library only) in a sandbox: no network; it "
        f"may read {view}; it may write only its working directory, empty at each run; it is "
        f"stopped after {bounds.cpu_seconds} s of CPU or {bounds.wall_seconds:g} s, past "
        f"{bounds.memory_bytes // 2**20} MiB of memory or {bounds.output_bytes} bytes of "
        "output. Print what you need: you get its output, exit status and the files it wrote."
    )

    async def run_python(code: str) -> str:
        """Run a Python program.

        Args:
            code: the program's source.
        """
        return rendered(code, await sandbox.run(code))

    # Its own bound is the sandbox's; the call's is that and room to read what it wrote.
    return tool(
        name="run_python",
        description=description,
        idempotent=True,
        timeout=timedelta(seconds=bounds.wall_seconds + 30),
    )(run_python)


def rendered(code: str, ran: Ran) -> str:
    """What the model reads of a run."""
    digest = hashlib.sha256(code.encode("utf-8")).hexdigest()
    ended = f"exit status {ran.exit_status}" if ran.stopped is None else f"stopped: {ran.stopped}"
    lines = [f"code sha256 {digest}", ended, "--- stdout ---", ran.stdout]
    if ran.stderr:
        lines += ["--- stderr ---", ran.stderr]
    for name, text in ran.files.items():
        lines += [f"--- file {name} ---", text]
    if ran.cut:
        lines.append(f"[cut: {'; '.join(ran.cut)}]")
    return "\n".join(lines)
