"""Every ``workflow.patched`` id in orga's workflows, and what it guards — none since 1.0.

From 1.0, a change to a workflow that alters the commands it issues (an activity, timer, child
or marker added, removed or reordered) replays older histories only behind a patch:

1. guard it: ``if workflow.patched(ID): <new> else: <old>``, with ``ID`` and what it guards
   listed here, and record a scenario that reaches it (``tests/scenarios.py``) while keeping the
   older recordings (``tests/histories/``), which must go on replaying;
2. deprecate it (``workflow.deprecate_patch(ID)``, the old branch deleted) once no open
   execution started before the change — retention of the namespace tells when;
3. remove it in the next release after that.

The 1.0 baseline started afresh: the histories under ``tests/histories/`` were recorded anew
with this code, and the eleven patches of the releases before (``orga-resolve-loop``,
``orga-approver-required``, ``orga-resolve-task``, ``orga-saga-attempted``,
``orga-gate-in-model-call``, ``orga-no-cron``, ``orga-compensate-unfinished``,
``orga-child-waits-for-tools``, ``orga-gated-memory``, ``orga-tree-budget``,
``orga-context-summary``) were removed with their old branches; the baseline's last changes
before its release (search attributes upserted when a reader's filter would see a change, a
loop timeout that lapses instead of being cancelled) were recorded the same way. Executions
started before 1.0 do not replay on it: let them finish on their version (worker versioning,
"Rolling out a new build" in docs/guides/deploying.md) before moving their workers to 1.0.
"""

from __future__ import annotations

__all__: list[str] = []
