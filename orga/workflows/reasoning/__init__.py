"""The parts of the ``ReasoningLoop`` workflow (``orga/workflows/loop.py``): workflow code only.

Modules, each named for what it holds:

* ``agent_loop`` — ``AgentLoop``: one run of the loop, its state, the run and the cycle
* ``loop_books`` — ``LoopBooks``: the journal, counters, status, ``state``
* ``loop_attributes`` — ``LoopAttributes``: its search attributes, kept current
* ``loop_budgets`` — ``LoopBudgets``: where budgets end a loop, and a thread's turn
* ``durable_conversation`` — ``Conversation``: the messages, their digest, what the model saw
* ``loop_parts`` — ``LoopParts``: the loop's setup (``resolve_loop``), the tools the model sees
* ``model_call`` — the Reason step's activity call, and its fallback models
* ``answering`` — ``FinalAnswers``: a final answer checked, gated and reviewed
* ``tool_runner`` — ``ToolRunner``: acting on a turn's gated calls, one result per call id
* ``call_executor`` — ``CallExecutor``: one call through its breaker and recovery strategy
* ``tool_state`` — ``ToolState``: the state tool dispatching reads and changes
* ``continuation`` — continue-as-new at an iteration boundary
* ``critic`` — ``Critic``: reviewing the final answer (a model or a person)
* ``deadline`` — the working-time timeout
* ``delegation`` — ``Delegations``: child loops of other agents on a shared budget
* ``remote_delegation`` — a delegation to an agent at an A2A endpoint (an activity)
* ``evidence_judge`` — ``EvidenceJudge``: information-gain judging around the gate
* ``finish`` — how the cycle ends, and the loop's result
* ``forks`` — ``ForkMarks``: where each turn ended; ``start_fork``: a fork's first step
* ``knowledge_bridge`` — ``KnowledgeBridge``: what the model is shown of its agent's
  knowledge; gated memory writes
* ``prehydration`` — resolving the task's references before the first model call
* ``loop_view`` — the loop as a reader of its stream sees it
* ``progress`` — ``ProgressStream``: a streamed loop's steps on its Workflow Stream, kept bounded
* ``running_summary`` — ``RunningSummary``: the summary of turns that left the context window
* ``steering`` — ``Steering``: messages people send a running loop, taken at the next Observe
* ``thread`` — ``Thread``: a conversation's turns, their budgets, the wait for the next message
"""

__all__: list[str] = []
