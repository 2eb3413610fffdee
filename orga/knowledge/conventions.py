"""Conventions found in a source tree, as scoped knowledge (``orga knowledge import``).

Convention files (``AGENTS.md``, ``CONVENTIONS.md``, ``CLAUDE.md``, ``.cursorrules``,
``.editorconfig``) apply to the directory they are in and below. Each bullet or paragraph of a
Markdown file becomes one convention of that directory (under its heading, if any); each section
of an ``.editorconfig`` one too — at the root, a section for one file type (``[*.py]``) becomes a
convention of that language. A directory's language is guessed from the files in and below it
(the most common source extension), so ``recall_knowledge`` can fall back to the language's
conventions.

Reading a tree stays inside it: links (to files or directories) are never followed out of
it, a link to a directory is not walked at all, hidden directories (``.github``, ``.secret``)
are walked only when asked, dependency and build directories never, and a convention file must
be a regular file of at most ``MAX_FILE_BYTES`` with one name. What was passed over is listed
with its reason, so an import says what it did not read.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "CONVENTION_FILES",
    "MAX_FILE_BYTES",
    "Convention",
    "Skipped",
    "TreeConventions",
    "find_conventions",
    "guess_language",
]

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
MAX_FILE_BYTES: Final = 1_000_000
"""A convention file larger than this is skipped (bytes)."""
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


@dataclass(frozen=True)
class Skipped:
    """A path of the tree that was not read, and why."""

    path: str
    """Relative to the root."""
    reason: str


@dataclass(frozen=True)
class TreeConventions:
    """What ``find_conventions`` found, and what it passed over."""

    conventions: list[Convention]
    skipped: list[Skipped]


def _walk(
    root: Path, *, include_hidden: bool = False, skipped: list[Skipped] | None = None
) -> Iterator[tuple[Path, list[str]]]:
    """Each directory below ``root`` with its files; links to directories are not walked
    (``os.walk`` does not follow them), nor hidden directories unless ``include_hidden``."""
    note = skipped.append if skipped is not None else None

    def unreadable(error: OSError) -> None:
        if note is not None and error.filename is not None:
            where = _relative(Path(error.filename), root)
            note(Skipped(where, f"cannot be read ({error.strerror or error})"))

    for directory, subdirectories, files in os.walk(root, onerror=unreadable):
        here = Path(directory)
        walked: list[str] = []
        for name in sorted(subdirectories):
            reason = _passed_over(here / name, root, include_hidden)
            if reason is None:
                walked.append(name)
            elif note is not None:
                note(Skipped(_relative(here / name, root), reason))
        subdirectories[:] = walked
        yield here, sorted(files)


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _passed_over(directory: Path, root: Path, include_hidden: bool) -> str | None:
    """Why a subdirectory is not walked (``None``: it is)."""
    name = directory.name
    if directory.is_symlink():
        target = directory.resolve()
        if not target.is_relative_to(root):
            return f"a link out of the tree (to {str(target)!r}); links are not followed"
        return (
            f"a link to a directory of the tree ({_relative(target, root)!r}); links to "
            "directories are not followed"
        )
    if name in _SKIPPED:
        return "dependencies, build output or version control; never read"
    if name.startswith(".") and not include_hidden:
        return "a hidden directory; --include-hidden reads it"
    return None


def _hidden(relative: str) -> bool:
    """A path with a hidden part, other than a convention file's own name (``.editorconfig``)."""
    *directories, name = relative.split("/")
    return any(p.startswith(".") for p in directories) or (
        name.startswith(".") and name not in CONVENTION_FILES
    )


def _read(path: Path, root: Path, include_hidden: bool) -> str | Skipped:
    """A convention file's text, or why it was not read: it must be (or link to) a regular
    file inside the tree, of at most ``MAX_FILE_BYTES``, with one name (a hard link may be a
    file from anywhere)."""
    where = _relative(path, root)
    target = path.resolve()
    if not target.is_relative_to(root):
        return Skipped(where, f"a link out of the tree (to {str(target)!r}); not followed")
    inside = _relative(target, root)
    if inside != where:
        if any(part in _SKIPPED for part in inside.split("/")[:-1]):
            return Skipped(where, f"a link to {inside!r}, in a directory never read")
        if not include_hidden and _hidden(inside):
            return Skipped(
                where, f"a link to a hidden file ({inside!r}); --include-hidden reads it"
            )
    try:
        # No link is left in ``target``; O_NOFOLLOW refuses one swapped in since, O_NONBLOCK
        # a FIFO (which would block the import).
        descriptor = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return Skipped(where, f"cannot be read ({error.strerror or error})")
    with os.fdopen(descriptor, "rb") as handle:
        found = os.fstat(handle.fileno())
        if not stat.S_ISREG(found.st_mode):
            return Skipped(where, "not a regular file")
        if found.st_nlink > 1:
            return Skipped(
                where,
                f"a hard link ({found.st_nlink} names): it may be a file from outside the tree; "
                "copy it to import it",
            )
        if found.st_size > MAX_FILE_BYTES:
            return Skipped(where, f"larger than {MAX_FILE_BYTES} bytes ({found.st_size})")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        return Skipped(where, f"larger than {MAX_FILE_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


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
_HEADING = re.compile(r"^\s*+#{1,6}\s+(.*)$")
"""A heading; its closing ``#``s are cut in code: a lazy ``(.*?)\\s*#*\\s*$`` took cubic time
on a long line of spaces, and a convention file may come from a repository of strangers."""


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
            heading = match.group(1).rstrip().rstrip("#").rstrip()
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


def find_conventions(root: Path, *, include_hidden: bool = False) -> TreeConventions:
    """Every convention in the tree below ``root``, directory by directory, and what was
    skipped (see the module docstring); ``include_hidden`` walks hidden directories too."""
    root = root.resolve()
    found: list[Convention] = []
    skipped: list[Skipped] = []
    for directory, files in _walk(root, include_hidden=include_hidden, skipped=skipped):
        present = [name for name in CONVENTION_FILES if name in files]
        if not present:
            continue
        relative = directory.relative_to(root).as_posix()
        where = "" if relative == "." else relative
        language = guess_language(directory)
        for name in present:
            source = (Path(where) / name).as_posix()
            text = _read(directory / name, root, include_hidden)
            if isinstance(text, Skipped):
                skipped.append(text)
                continue
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
    return TreeConventions(found, skipped)
