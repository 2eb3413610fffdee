"""The worker's infrastructure: what a worker process holds besides its workflows and activities.

I/O, never imported by workflow code. Modules:

* ``serve`` — the worker process (``orga worker``, ``worker.py``)
* ``sandbox`` — the workflow sandbox and its passthrough list
* ``agent_registry`` — the worker's agents from ``ORGA_AGENTS``
* ``blobs`` — texts the payload guard cut
* ``conversation_cache`` — each loop's conversation on the worker, so model calls carry deltas
* ``heartbeat``, ``metrics`` — what activities share: heartbeating while waiting; histograms
"""

__all__: list[str] = []
