"""The parts of the ``ReasoningLoop`` workflow (``orga/workflows/loop.py``): workflow code only.

Modules:

* ``bookkeeping`` — the conversation, journal, counters, status and the ``state`` query
* ``catalog`` — the loop's setup (``resolve_loop``) and the tools the model sees
* ``continuation`` — continue-as-new at an iteration boundary
* ``critic`` — reviewing the final answer (a model or a person)
* ``cycle`` — one run of the loop: its state, the run and the cycle
* ``deadline`` — the working-time timeout
* ``delegation`` — child loops of other agents on a shared budget
* ``dispatcher`` — acting on a turn's gated calls, one result per call id
* ``evidence`` — information-gain judging around the gate
* ``executor`` — one call through its breaker and recovery strategy
* ``finish`` — how the cycle ends, and the loop's result
* ``knowledge`` — what the model is shown of its agent's knowledge; gated memory writes
* ``model`` — the Reason step's activity call
* ``prehydration`` — resolving the task's references before the first model call
* ``summary`` — the running summary of turns that left the context window
* ``toolstate`` — the state tool dispatching reads and changes
"""

__all__: list[str] = []
