"""The deterministic decisions of the workflows, as pure functions and small state machines.

No clock, randomness, environment or I/O: time comes from the caller (``workflow.now()``), and
a lint rule (``orga/core/ruff.toml``) keeps it so. Passed through the workflow sandbox. Core
imports only ``orga.contracts`` and other core modules. Import from the modules::

    breaker      circuit breaker transitions (closed → open → half-open)
    context      fitting a conversation into the context budget
    dispatch     which calls of a turn wait for which
    evidence     information-gain judging of evidence calls
    phases       the ORGA cycle as typestate
    prehydration reference extraction and rendering
    profile      tool profiles and globs
    progress     the step reattempt tracker (stuck detection)
    routing      the routing table on stop_reason
    template     compensation arguments that refer to a step's result
    text         cutting text and estimating tokens
"""

__all__: list[str] = []
