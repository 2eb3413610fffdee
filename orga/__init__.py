"""orga: durable, governed agent reasoning loops on Temporal.

The public surface for tool authors and clients. Nothing imported here does I/O, so workflow
code can use it inside Temporal's sandbox.
"""

from orga.config import LoopConfig, LoopInput
from orga.conversation import Message, ToolCall, ToolResult
from orga.inference import Usage
from orga.journal import Journal, JournalEntry
from orga.state import LoopResult, LoopState
from orga.tools import Tool, ToolContext, ToolDefinition, tool

__all__ = [
    "Journal",
    "JournalEntry",
    "LoopConfig",
    "LoopInput",
    "LoopResult",
    "LoopState",
    "Message",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolResult",
    "Usage",
    "tool",
]
