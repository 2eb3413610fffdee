"""Every ``workflow.patched`` id in orga's workflows, and what it guards — none since 1.0.

From 1.0, a change to a workflow that alters the commands it issues (an activity, timer, child
or marker added, removed or reordered) replays older histories only behind a patch:

1. guard it: ``if workflow.patched(ID): <new> else: <old>``, with ``ID`` and what it guards
   listed here, and record a scenario that reaches it (``tests/scenarios.py``) while keeping the
   older recordings (``tests/histories/``), which must go on replaying;
2. deprecate it (``workflow.deprecate_patch(ID)``, the old branch deleted) once no open
   execution started before the change — retention of the namespace tells when;
3. remove it in the next release after that.

The history of patches before 1.0 is in ``CHANGELOG.md``.
"""

from __future__ import annotations

__all__: list[str] = []
