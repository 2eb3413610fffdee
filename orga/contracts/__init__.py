"""The types that travel through Temporal: workflow and activity inputs, results, queries,
the journal, and the error tree.

Pure pydantic models and constants, passed through the workflow sandbox. A model stored in
history is a wire format: add fields with defaults; never rename or remove one. Contracts
import nothing from orga but other contracts. Import from the modules:

    agents           the worker's agents: who a loop may run as, with which tools and budgets
    answers          typed answers: an answer checked against the loop's output_schema
    forks            a loop started from another's state after one of its turns
    approvals        approvals and escalations: pending waits, decisions, records
    audit            the audit chain: every governance record, hash-chained
    carry            what a loop carries into its next run (continue-as-new)
    config           LoopConfig and LoopInput
    conversation     Message, ToolCall, ToolResult, the conversation digest
    critic           the critic's config, verdicts and review records
    delegation       handing a task to another agent: the delegate tool and its records
    errors           every error orga raises, as one tree
    evidence         evidence results and the information-gain record
    inference        the inference activity's request and response, Usage
    journal          the typed journal
    judges           a judge in the approver's seat: its spec, its case, its answer
    knowledge        the knowledge bridge: config, items, the recall and store tools
    messages         the names of the queries, updates and signals the workflows answer
    policy           the policy activity's request: the actions a turn proposes
    prehydration     config.pre_hydration
    progress         what a streamed loop says on its stream besides the model's text
    principals       who a loop runs for: claims, resolved principals, spend limits and lines
    resilience       circuit breakers and recovery strategies
    search_attributes  the search attributes every workflow keeps current
    setup            what the worker resolves when a loop or task starts
    state            LoopState (the state query) and LoopResult
    task             the Task workflow's input, state and result
    threads          a loop that is a conversation: ThreadConfig, turns and their answers
    tools            ToolDefinition, ToolProfile and the tool activities' inputs
    verdicts         the gate's decisions (the policy activity's and a model call's)
    vocabulary       provider names and policy modes
    wire             every model's base (Contract: built on first use); what a payload leaves
                     out: defaults (Compact), never a union's tag (Tagged)
"""

__all__: list[str] = []
