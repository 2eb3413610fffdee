"""What the model reads of an MCP tool's result: every content block, as text.

Worker-side code (never imported by workflows).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

__all__ = ["render_result"]


def render_result(result: types.CallToolResult) -> str:
    """What the model reads of a tool result: text and structured content as they are; images,
    audio and binary resources described (the model is given text), never silently dropped."""
    parts: list[str] = []
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
            texts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            size = _decoded_size(block.data)
            parts.append(f"[{block.type} ({block.mime_type}, about {size} bytes): not shown]")
        elif isinstance(block, types.ResourceLink):
            about = f": {block.description}" if block.description else ""
            parts.append(f"[resource link {block.name} <{block.uri}>{about}]")
        else:
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                parts.append(f"[resource <{resource.uri}>]\n{resource.text}")
            else:
                size = _decoded_size(resource.blob)
                mime = resource.mime_type or "binary"
                parts.append(f"[resource <{resource.uri}> ({mime}, about {size} bytes): not shown]")
    structured = result.structured_content
    if structured is not None and not _restated(structured, texts):
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


def _decoded_size(data: str) -> int:
    """Bytes in base64 ``data`` (without decoding it)."""
    data = data.strip()
    return len(data) * 3 // 4 - data[-2:].count("=")


def _restated(structured: dict[str, Any], texts: list[str]) -> bool:
    """Whether a text block already says what the structured content says (servers send both,
    as the protocol asks; a plain value comes wrapped as ``{"result": value}``)."""
    values = list(structured.values())
    for text in texts:
        if len(values) == 1 and values[0] == text:
            return True
        try:
            parsed = json.loads(text)
        except ValueError:
            continue
        if parsed == structured or (len(values) == 1 and parsed == values[0]):
            return True
    return False
