"""What clients and workers share: settings, the connection, the store and the converter.

I/O, never imported by workflow code. Modules:

* ``settings`` — settings from the environment (the one reader of ``ORGA_*``)
* ``variables`` — what a ``Settings`` field read from the environment is, and how it shows
* ``setting_values`` — what settings are read into: providers, model prices, checked values
* ``settings_docs`` — the environment and loop config reference, written from the fields
* ``connect`` — connecting to Temporal with orga's data converter; search attributes
* ``converter`` — orga's data converter: payloads out of history (External Storage) on the store
* ``store`` — the store every worker and client of one deployment shares (SQLite/PostgreSQL)
* ``spend`` — the spend ledger: each user's and tenant's spend per UTC day and month, held and
  settled per model call, in the store
* ``approver_keys`` — an approver's Ed25519 key: writing, reading, signing decisions
* ``binding`` — binding a loop to its principal: signed by an issuer, or a claim
* ``files`` — 0700 directories, 0600 files, and refusing files others prepared
* ``tls`` — the one TLS context of a process's HTTP clients
* ``safe_text`` — what a terminal or a page may be shown of text from models, tools, clients
* ``tracing`` — OpenTelemetry through Temporal's integration
* ``loop_traces`` — one trace per loop, whoever started it (clients and workers carry it)
* ``presence`` — is a worker there? (heartbeats and pollers of a task queue)
* ``pause_targets`` — what a pause names and its text read back (pure: no store)
* ``pauses`` — a tool, an agent or a loop paused (``orga pause``), in the shared store
* ``schemas`` — JSON Schemas of a loop's input and a task file
* ``json_schema`` — a JSON Schema validator whose regexes run in RE2 and whose work is bounded
  (a loop's ``output_schema``, an MCP tool's input schema)
* ``forks`` — reading a loop's state after one of its turns (a fork point)

The worker's own infrastructure is ``orga.worker``; the embedded Temporal dev server is
``orga.server``; the operator's desk is ``orga.desk``.
"""

__all__: list[str] = []
