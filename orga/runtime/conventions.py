"""Conventions found in a source tree, as scoped knowledge (``orga knowledge import``).

Convention files (``AGENTS.md``, ``CONVENTIONS.md``, ``CLAUDE.md``, ``.cursorrules``,
``.editorconfig``) apply to the directory they are in and below. Each bullet or paragraph of a
Markdown file becomes one convention of that directory (under its heading, if any); each section
of an ``.editorconfig`` one too — at the root, a section for one file type (``[*.py]``) becomes a
convention of that language. A directory's language is guessed from the files in and below it
(the most common source extension), so ``recall_knowledge`` can fall back to the language's
conventions.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["CONVENTION_FILES", "Convention", "find_conventions", "guess_language"]

CONVENTION_FILES: Final = (
    "AGENTS.md",
    "CONVENTIONS.md",
    "CLAUDE.md",
    ".cursorrules",
    ".editorconfig",
)
LANGUAGES: Final = {
    ".py": "python",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".js": "javascript",
    ".jsx": "javascript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".rb": "ruby",
    ".php": "php",
    ".cs": "csharp",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".swift": "swift",
    ".scala": "scala",
    ".sh": "shell",
}
_SKIPPED: Final = frozenset(
    {".git", "node_modules", ".venv", "venv", "__pycache__", "dist", "build", "target", ".tox"}
)
_LANGUAGE_SAMPLE = 2_000
"""Files looked at, at most, to guess one directory's language."""
_MAX_ITEM = 1_000


@dataclass(frozen=True)
class Convention:
    """One convention found in a tree."""

    content: str
    directory: str | None
    """Relative to the tree's root (``""``: the root); ``None`` for a language's."""
    language: str | None
    source: str
    """The file it came from, relative to the root."""


def _walk(root: Path) -> Iterator[tuple[Path, list[str]]]:
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            d for d in subdirectories if d not in _SKIPPED and not d.startswith(".")
        )
        yield Path(directory), sorted(files)


def guess_language(directory: Path) -> str | None:
    """The most common source language in and below ``directory`` (``None``: no source)."""
    counts: Counter[str] = Counter()
    seen = 0
    for _, files in _walk(directory):
        for name in files:
            language = LANGUAGES.get(Path(name).suffix.lower())
            if language is not None:
                counts[language] += 1
            seen += 1
            if seen >= _LANGUAGE_SAMPLE:
                break
        if seen >= _LANGUAGE_SAMPLE:
            break
    return counts.most_common(1)[0][0] if counts else None


_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*?)\s*#*\s*$")


def _markdown(text: str) -> list[str]:
    """Bullets and paragraphs, each under its nearest heading; code blocks left out."""
    items: list[str] = []
    heading = ""
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            body = " ".join(line.strip() for line in paragraph)
            items.append(f"{heading}: {body}" if heading else body)
            paragraph.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        if match := _HEADING.match(line):
            flush()
            heading = match.group(1)
        elif match := _BULLET.match(line):
            flush()
            paragraph.append(match.group(1))
            flush()
        elif not line.strip():
            flush()
        else:
            paragraph.append(line)
    flush()
    return [item[:_MAX_ITEM] for item in items if item.strip()]


def _editorconfig(text: str) -> list[tuple[str, list[str]]]:
    """``(glob, ["key = value", …])`` per section."""
    sections: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            sections.append((line[1:-1], []))
        elif "=" in line and sections:
            key, _, value = line.partition("=")
            sections[-1][1].append(f"{key.strip()} = {value.strip()}")
    return [(glob, settings) for glob, settings in sections if settings]


def find_conventions(root: Path) -> list[Convention]:
    """Every convention in the tree below ``root``, directory by directory."""
    root = root.resolve()
    found: list[Convention] = []
    for directory, files in _walk(root):
        present = [name for name in CONVENTION_FILES if name in files]
        if not present:
            continue
        relative = directory.relative_to(root).as_posix()
        where = "" if relative == "." else relative
        language = guess_language(directory)
        for name in present:
            path = directory / name
            source = (Path(where) / name).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            if name == ".editorconfig":
                for glob, settings in _editorconfig(text):
                    single = re.fullmatch(r"\*(\.\w+)", glob)
                    glob_language = LANGUAGES.get(single.group(1).lower()) if single else None
                    content = f"Files {glob}: {'; '.join(settings)}"
                    if where == "" and glob_language is not None:
                        found.append(Convention(content, None, glob_language, source))
                    else:
                        found.append(Convention(content, where, glob_language or language, source))
                continue
            for item in _markdown(text):
                found.append(Convention(item, where, language, source))
    return found
