"""Protocols at the edge: web apps drive orga's threads through standard protocols.

Thin, stateless translators over the same client API as the CLI (``orga.client``, the desk's
one sender of decisions): any number of processes serve the same threads. Modules:

* ``callers`` — who calls: a bearer token per user, or a header the operator's proxy sets;
  how many requests each has open
* ``agui`` — the AG-UI endpoint: who calls, what they send (bounded: ``AguiLimits``), whose
  thread it is; the uvicorn options that bound a request's time (``uvicorn_limits``)
* ``deadlines`` — the time a client may take to send a request, for uvicorn (it has none)
* ``agui_run`` — one AG-UI request: a thread's turn started, continued, resumed or reconnected
  to; an approval is an interrupt the caller answers on the next run
* ``a2a`` — the A2A endpoint: its agent card, callers and bounds
* ``a2a_store`` — its tasks in orga's store (they outlive the process), and the handler that
  picks a task up again after a restart
* ``a2a_threads`` — its executor: each A2A context a thread of the caller's, each message a
  turn; the model's text streamed, input-required while a call waits for a person
* ``agui_events`` — the AG-UI events of a thread's Workflow Stream, each with an id that never
  changes, and which of them a request sends (a reconnect: those after its last event id)
"""

__all__: list[str] = []
