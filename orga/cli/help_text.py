"""Written by ``uv run python -m orga.cli.verbs`` from the verbs and ``Settings``: do not edit."""

from __future__ import annotations

from typing import Final

__all__ = ["VARIABLES", "VERBS"]

VARIABLES: Final = "* **TEMPORAL_ADDRESS**: The Temporal frontend, `host:port`. (default: `localhost:7233`)\n* **TEMPORAL_NAMESPACE**: The Temporal namespace. (default: `default`)\n* **TEMPORAL_API_KEY**: A Temporal Cloud API key; it implies TLS. (default: unset)\n* **TEMPORAL_TLS**: Connect to Temporal over TLS without an API key. (default: off)\n* **ORGA_TASK_QUEUE**: The task queue of loops, tasks and their activities. (default: `orga`)\n* **ORGA_EMBEDDINGS**: The provider and model whose `/embeddings` make knowledge search hybrid (SQLite), e.g. `openai:text-embedding-3-small`; read by the worker and by `orga knowledge`. (default: unset: full-text search alone)\n* **ORGA_DATA_DIR**: The embedded server's directory (`orga server`, `orga demo`): `temporal.db` and the default store's `store.db`. (default: `.orga`)\n* **ORGA_STORE_URL**: orga's store, shared by every worker and client: payloads kept out of history, cut texts, the effect ledger, knowledge. (default: `<ORGA_DATA_DIR>/store.db`)\n* **ORGA_APPROVER**: Who approves, denies, resolves and reviews (`orga approve` …, `orga desk`, `orga mcp`) when `--approver` / `--operator` names nobody. (default: the operating-system user)\n* **ORGA_APPROVER_KEY**: The approver's Ed25519 private key (PEM, from `orga approver keygen`): `orga approve`, `orga desk`, `orga mcp` and `LoopHandle.approve` sign each decision with it. (default: `<ORGA_DATA_DIR>/approver.pem`, if it exists (else unsigned))\n* **ORGA_ISSUER**: The issuer this client signs principals as (`orga run --principal`, the web endpoint): the name the worker's operator enrolled as `[issuers.<name>]`. (default: unset)\n* **ORGA_ISSUER_KEY**: The issuer's Ed25519 private key (PEM, `orga approver keygen` writes one): the principal of each loop this client starts is signed with it, for that loop. (default: unset)\n* **ORGA_UI_URL**: The Temporal Web UI that the CLI's links point at. (default: `http://localhost:8233`)\n* **ORGA_DEBUG**: The CLI shows the traceback of an unexpected error. (default: off)"
"""The variables the ``orga`` command reads (Markdown)."""

VERBS: Final[tuple[tuple[str, str, str], ...]] = (
    ('demo', 'server', 'Run a demo loop end to end: an embedded server (if none answers), a worker, a loop that calls a tool; the offline scripted model when no API key is set. Stops all it started.'),
    ('server', 'server', "Run the embedded Temporal dev server on a SQLite file (TEMPORAL_ADDRESS says where), with orga's search attributes registered. Ctrl-C stops it cleanly."),
    ('worker', 'server', "Run a worker: orga's workflows and activities on ORGA_TASK_QUEUE, configured from the environment (the same as `uv run worker.py`). Ctrl-C stops it gracefully."),
    ('run', 'run', "Start a reasoning loop on the worker's task queue and print its answer."),
    ('api', 'api', 'Serve the AG-UI endpoint (POST /agui): web apps run threads, stream them and answer their approvals, each caller as the principal and approver of its own threads.'),
    ('api-token', 'api', 'A new bearer token for ``user``: give the token to the user, the lines to the file.'),
    ('state', 'loops', "A loop's state: status, model, budgets spent, what it waits for, how it ended."),
    ('journal', 'loops', 'The typed journal: every model call, decision, tool run, approval and recovery.'),
    ('list', 'loops', "Recent loops and tasks, from Temporal's visibility (no worker needed)."),
    ('pending', 'decisions', 'The inbox: every approval, review and escalation waiting for a person, in loops and tasks, oldest first (threads idle for their next message after them): the arguments one per line, and the commands that answer each.'),
    ('approve', 'decisions', 'Approve a call that waits for approval: it runs (with --arguments, as edited).'),
    ('deny', 'decisions', 'Deny a call that waits for approval: the model is told why, and goes on.'),
    ('review', 'decisions', "Review a loop's final answer that waits for a person (config.critic, kind human)."),
    ('resolve', 'decisions', 'Resolve an escalation: a failing step parked for an operator.'),
    ('say', 'conversations', 'Send a loop a message: the model reads it before its next call; a thread answers it.'),
    ('cancel', 'conversations', 'Cancel a running loop or task: its running tool is stopped, a task compensates.'),
    ('close', 'conversations', 'Close a thread: it ends now (its last answer is the result), or after its running turn.'),
    ('fork', 'conversations', "Start a new loop from a loop's state after turn N, optionally saying something else."),
    ('chat', 'chat', 'Talk with a thread: each line is a message, answers stream, approvals are asked here.'),
    ('desk', 'desk', "The inbox as a local web page: approve, deny or resolve with a reason, pause or resume a tool, an agent or a loop, read a workflow's receipts — in a browser."),
    ('audit', 'audit', "A workflow's audit chain: every policy decision, approval, review, escalation resolution, delegation and compensation, each entry holding the SHA-256 of the one before; and the runs a reset took off it, with what they hold that the surviving history does not."),
    ('receipts', 'receipts', 'What became of each effect: delivered, denied, failed, compensated or unknown.'),
    ('pause', 'incidents', "Pause a tool (its calls wait, unrun), an agent's loops and tasks or one of them (their tool calls wait, approved ones included, and a loop waits before its next model call); with nothing named, list the pauses."),
    ('resume', 'incidents', 'End a pause: what waits for it goes on, each call once, spread out.'),
    ('mcp', 'mcp', "Serve orga's loops, inbox and decisions as an MCP server."),
    ('spend', 'spend', 'What each user and tenant spent and holds, against their limits.'),
    ('codec', 'codec', "Serve the Web UI's codec endpoint: it shows payloads kept in the store in place of their references."),
    ('approver', 'approvers', "An approver's signing key: write one, or show the public key to enroll."),
    ('task', 'tasks', "Multi-step tasks: steps in order, stuck steps handled by policy, and compensation of what was done when a task cannot finish. The task file's format is schemas/task.schema.json (examples/tasks/order.json is a worked one)."),
    ('schedule', 'schedule', 'Temporal Schedules that start a loop (a prompt) or a task (a task file) on a cron or an interval. Temporal starts each run; a worker on the task queue must be running then.'),
    ('knowledge', 'knowledge', "An agent's knowledge: the facts, memories and conventions its loops are shown and can recall (config.knowledge)."),
    ('policy', 'policy', 'Test a Cedar policy set before it ships: what it would have decided on recorded loops (what-if), and a file of cases (test, record).'),
    ('judge', 'judges', 'Try a judge before it decides: what it would have said on the calls people decided (what-if), and a file of trials (record, test).'),
    ('blob', 'store', 'Full texts the payload guard cut before the model saw them.'),
    ('store', 'store', 'The store every worker and client shares.'),
)
"""Each verb: its name, the module of ``orga.cli`` that defines it, the first paragraph of its help."""
