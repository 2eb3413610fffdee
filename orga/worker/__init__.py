"""The worker's infrastructure: what a worker process holds besides its workflows and activities
(the process itself, ``orga worker`` / ``worker.py``, is ``orga.cli.worker``).

I/O, never imported by workflow code. Modules:

* ``sandbox`` — the workflow sandbox and its passthrough list
* ``agent_registry`` — the worker's agents from ``ORGA_AGENTS``
* ``principals`` — the operator's principals: claim rules, issuers, users' and tenants' limits
  and weights (``ORGA_PRINCIPALS`` or the agents file)
* ``blobs`` — texts the payload guard cut
* ``conversation_cache`` — each loop's conversation on the worker, so model calls carry deltas
* ``provider_health`` — a breaker per (provider, model): a model down for one loop is down for
  every loop on the worker, which then asks its fallback at once
* ``callers`` — orga's activities serve only orga's loops and tasks of the worker's queues, as
  the server names the workflow that scheduled each
* ``eager`` — an activity scheduled ``not_eager`` is never dispatched eagerly to this worker
* ``heartbeat``, ``metrics`` — what activities share: heartbeating while waiting; histograms
"""

__all__: list[str] = []
