"""The parts of the ``Task`` workflow (``orga/workflows/task.py``): workflow code only.

Modules:

* ``setup`` — the task's agent, tools and gate, resolved on the worker before any step runs
* ``attempts`` — a step attempted until it completes, is skipped, or stops the task
* ``steps`` — one attempt of a step: through the gate, then a tool activity or a child loop
* ``holds`` — a step's call that a pause holds waits for the pause to end, then runs once
* ``compensation`` — the saga: undo every attempted step, newest first, until it is undone
"""

__all__: list[str] = []
