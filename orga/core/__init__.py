"""The deterministic decisions of the workflows, as pure functions and small state machines.

No clock, randomness, environment or I/O: time comes from the caller (``workflow.now()``), and
a lint rule (``orga/core/ruff.toml``) keeps it so. Passed through the workflow sandbox. Core
imports only ``orga.contracts`` and other core modules. Import from the modules::

    agents       a loop or task resolved against its agent (narrowed, never widened)
    arguments    a tool call's argument text as a JSON object, within bounds
    budget       what the next model call may spend of the tree's budget
    audit        the audit chain's arithmetic: canonical JSON, entry hashes, checks
    breaker      circuit breaker transitions (closed → open → half-open)
    carry        what a loop may carry into its next run, bounded
    context      fitting a conversation into the context budget
    decisions    a person's decision on a waiting call, checked: proof, four eyes, edits
    dispatch     which calls of a turn wait for which
    eager        whether an activity scheduled now may run on its own worker at once
    evidence     information-gain judging of evidence calls
    fork_points  whether a fork point is a state some loop could have recorded
    genai        the OpenTelemetry GenAI attributes of an agent invocation
    ids          a loop's own call ids, and idempotency keys across reused ids
    judging      a judge's answer read: only a clear, sure verdict may decide; the rest escalates
    knowledge    what the knowledge bridge searches for, and how it shows what was found
    metrics      which metrics a journal entry makes
    paths        file paths as the gate judges them
    phases       the ORGA cycle as typestate
    prehydration reference extraction and rendering
    principals   the principal a loop hands its children
    profile      tool profiles and globs
    speakers     orga's notices begin with a mark a person's message cannot carry
    signatures   signed decisions: what an approver signs, checked against an enrolled key
    progress     the step reattempt tracker (stuck detection)
    receipts     what became of a tool call, as its receipt says it
    routing      the routing table on stop_reason
    template     compensation arguments that refer to a step's result
    typed_answers what a typed loop's model is told of its answer's shape, and when it is held to it
    text         cutting text and estimating tokens
"""

__all__: list[str] = []
