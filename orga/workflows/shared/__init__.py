"""What both workflows (the loop and the task) use: workflow code only.

Modules:

* ``common`` — input that may not validate; search attributes
* ``elsewhere`` — a local activity that needs tools its worker lacks runs where they are
* ``failures`` — what an activity or child workflow failure says, read one way everywhere
* ``gate`` — one policy decision per turn, journaled, failing closed
* ``human_desk`` — ``HumanDesk``: waiting for people durably, approvals and escalations
* ``judging`` — a loop's judge asked about a held call while a person may answer it too
* ``signal_answers`` — ``SignalAnswers``: a signal's answer given to its wait, also one the
  signal's own workflow task raises
* ``desk_handlers`` — ``DeskHandlers``: the people's signals and updates of both workflows
* ``metrics`` — replay-safe metrics from workflow code
* ``options`` — timeouts and retry policies of the activities
* ``pause_wait`` — a call held by a pause waits for the ``pause_lifted`` signal, not by polling
* ``patches`` — every ``workflow.patched`` id, and what it guards
* ``principals`` — a workflow's principal as its setup is asked it; its calls' fairness key
* ``stopping`` — ``Stopping``: once a workflow is cancelled (or its timeout passed), nothing
  new is asked or run
* ``tool_calls`` — the tool activity, and what its failure means
"""

__all__: list[str] = []
