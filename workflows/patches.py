"""Every ``workflow.patched`` id in orga's workflows, and what it guards.

A patch lets a changed workflow replay histories recorded before the change: the new code runs
only in executions that reached the patch point after the change shipped (they carry a marker);
older histories take the old branch. A patch can be retired (its old branch deleted, the
``deprecate_patch`` step skipped) once no execution that started before it is still open and
no committed history under ``tests/histories/`` predates it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["APPROVER_REQUIRED", "RESOLVE_LOOP", "VALIDATE_TASK"]

RESOLVE_LOOP: Final = "orga-resolve-loop"
"""Loops resolve their setup (tools, effective provider and model) with ``resolve_loop``;
before, they only described their tools with ``describe_tools``."""

APPROVER_REQUIRED: Final = "orga-approver-required"
"""The ``approval`` and ``resolve_escalation`` signals are ignored when they name nobody (the
updates' validators refuse them); before, a decision could be recorded with no approver."""

VALIDATE_TASK: Final = "orga-validate-task"
"""Tasks check that the worker has every tool their steps and compensations name before the
first step runs; before, a missing tool failed the step that named it."""
