"""The worker's memory of each loop's conversation, so model calls can carry only deltas.

The workflow sends each model call the messages added since its previous call plus a digest
of the whole conversation. This cache extends what it holds with the delta when the digests
agree; when they do not (another worker served the previous call, the worker restarted, the
entry was evicted) it rebuilds the conversation from the workflow's ``conversation`` query and
checks the digest again. A wrong conversation is never sent to a model.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from orga.contracts.conversation import Message, chain_digest
from orga.contracts.errors import ConversationUnavailable
from orga.contracts.inference import ConversationSlice

__all__ = ["CACHED_CONVERSATIONS", "CACHE_BYTES", "ConversationCache", "FetchConversation"]

FetchConversation = Callable[[str, int], Awaitable[list[Message]]]
"""Fetch messages ``[0, length)`` of a workflow's conversation."""


CACHED_CONVERSATIONS: Final = 1_000
"""As many conversations as the worker keeps workflows cached (the SDK's default): a loop that
resumes from the workflow cache finds its conversation here too."""
CACHE_BYTES: Final = 256 * 2**20
"""What the cached conversations may hold in all (their text, roughly)."""
_OVERHEAD = 64
"""Bytes counted per message beyond its text (role, ids)."""


def _size(message: Message) -> int:
    return (
        _OVERHEAD
        + len(message.content)
        + sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
        + sum(len(r.content) for r in message.tool_results)
        + sum(len(r.text) + len(r.signature or r.data or "") for r in message.reasoning)
    )


@dataclass
class _Entry:
    messages: list[Message] = field(default_factory=list[Message])
    digests: list[str] = field(default_factory=lambda: [""])
    """``digests[i]`` is the digest of ``messages[:i]``."""
    sizes: list[int] = field(default_factory=list[int])
    size: int = 0

    def extend(self, messages: list[Message]) -> None:
        for message in messages:
            self.digests.append(chain_digest(self.digests[-1], [message]))
            self.messages.append(message)
            self.sizes.append(_size(message))
            self.size += self.sizes[-1]

    def truncate(self, length: int) -> None:
        self.size -= sum(self.sizes[length:])
        del self.messages[length:]
        del self.digests[length + 1 :]
        del self.sizes[length:]


class ConversationCache:
    """Conversations by workflow id, least recently used evicted first, bounded by count and
    by bytes (the one entry in use is kept whatever its size)."""

    def __init__(
        self,
        fetch: FetchConversation,
        max_entries: int = CACHED_CONVERSATIONS,
        max_bytes: int = CACHE_BYTES,
    ) -> None:
        self._fetch = fetch
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def bytes(self) -> int:
        """What the cached conversations hold now (roughly, their text)."""
        return self._bytes

    async def resolve(self, window: ConversationSlice) -> list[Message]:
        """The whole conversation ``[0, window.length)`` that ``window`` describes.

        Raises:
            ConversationUnavailable: it could not be rebuilt with the expected digest.
        """
        entry = self._entries.pop(window.workflow_id, None)
        if entry is not None:
            self._bytes -= entry.size  # counted again when it goes back in
        if entry is None and window.start == 0:
            entry = _Entry()  # the window holds the whole conversation
        if entry is not None and len(entry.messages) >= window.start:
            prefix_digest = entry.digests[window.start]
            if chain_digest(prefix_digest, window.messages) == window.digest:
                entry.truncate(window.start)
                entry.extend(window.messages)
                self._touch(window.workflow_id, entry)
                self.hits += 1
                return list(entry.messages)
        self.misses += 1
        fetched = await self._fetch(window.workflow_id, window.length)
        entry = _Entry()
        entry.extend(fetched)
        if len(entry.messages) != window.length or entry.digests[-1] != window.digest:
            raise ConversationUnavailable(
                f"the conversation of workflow {window.workflow_id!r} read back from the "
                f"workflow ({len(entry.messages)} messages) does not match the model call's "
                f"digest for {window.length} messages; retrying"
            )
        self._touch(window.workflow_id, entry)
        return list(entry.messages)

    def expect(self, window: ConversationSlice, answer: Message) -> None:
        """After a model call on ``window``: the assistant turn ``answer`` (the loop's ids) will
        follow it in the conversation, as the loop records it unless it changes it — the next
        call then carries only what follows (``Conversation.expect``); when the loop recorded
        something else, that call's digest does not match and the conversation is read back."""
        entry = self._entries.get(window.workflow_id)
        if entry is None or entry.digests[-1] != window.digest:
            return  # not the conversation that call was made on (evicted, or moved on since)
        before = entry.size
        entry.extend([answer])
        self._bytes += entry.size - before

    def _touch(self, workflow_id: str, entry: _Entry) -> None:
        self._entries[workflow_id] = entry
        self._entries.move_to_end(workflow_id)
        self._bytes += entry.size
        while len(self._entries) > 1 and (
            len(self._entries) > self._max_entries or self._bytes > self._max_bytes
        ):
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.size
