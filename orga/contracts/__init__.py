"""The types that travel through Temporal: workflow and activity inputs, results, queries,
the journal, and the error tree.

Pure pydantic models and constants, passed through the workflow sandbox. A model stored in
history is a wire format: add fields with defaults; never rename or remove one. Contracts
import nothing from orga but other contracts. Import from the modules::

    approvals        approvals and escalations: pending waits, decisions, records
    carry            what a loop carries into its next run (continue-as-new)
    config           LoopConfig and LoopInput
    conversation     Message, ToolCall, ToolResult, the conversation digest
    errors           every error orga raises, as one tree
    evidence         evidence results and the information-gain record
    inference        the inference activity's request and response, Usage
    journal          the typed journal
    policy           the policy activity's request and decisions
    prehydration     config.pre_hydration
    resilience       circuit breakers and recovery strategies
    search_attributes  the search attributes every workflow keeps current
    state            LoopState (the state query) and LoopResult
    task             the Task workflow's input, state and result
    tools            ToolDefinition, ToolProfile and the tool activities' inputs
    vocabulary       provider names and policy modes
"""

__all__: list[str] = []
