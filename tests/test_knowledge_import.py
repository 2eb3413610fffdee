"""``orga knowledge import`` reads a tree and nothing outside it: links out of the tree, hidden
directories, and files that are not plain files are skipped, and the import says so."""

from __future__ import annotations

import json
import os
from pathlib import Path

from orga.knowledge.conventions import MAX_FILE_BYTES, find_conventions
from tests.helpers import orga

SECRET = "the deploy token is SECRET-7f3a9c"


def hostile_repository(tmp_path: Path) -> Path:
    """A repository whose convention files lead out of it, next to a file holding a secret."""
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.md").write_text(f"- {SECRET}\n")
    (outside / "dir" / "AGENTS.md").write_text(f"- {SECRET} (in a directory)\n")
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / ".secret").mkdir()
    (repo / "AGENTS.md").symlink_to(outside / "secret.md")  # absolute
    (repo / "src" / "CONVENTIONS.md").symlink_to(Path("..") / ".." / "outside" / "secret.md")
    (repo / "docs").symlink_to(outside / "dir")  # a directory link
    (repo / ".secret" / "AGENTS.md").write_text(f"- {SECRET} (hidden)\n")
    (repo / ".env").write_text(f"TOKEN={SECRET}\n")
    (repo / "lib" / "CLAUDE.md").symlink_to(Path("..") / ".env")  # inside, but hidden
    # What the import is for still comes in.
    (repo / "lib" / "AGENTS.md").write_text("- lib functions are pure\n")
    (repo / ".cursorrules").write_text("Prefer small modules.\n")
    (repo / ".editorconfig").write_text("[*]\nindent_style = space\n")
    (repo / "lib" / "a.py").write_text("")
    return repo


async def test_an_import_does_not_follow_links_out_of_the_tree(tmp_path: Path) -> None:
    repo = hostile_repository(tmp_path)
    env = {"ORGA_STORE_URL": f"sqlite:///{tmp_path / 'store' / 'store.db'}"}
    # The operator imports the repository an attacker prepared.
    code, out, err = await orga("knowledge", "import", str(repo), "-a", "coder", "--json", env=env)
    assert code == 0, err
    report = json.loads(out)
    outside = str((tmp_path / "outside").resolve())
    assert report["skipped"] == [
        {
            "path": ".secret",
            "reason": "a hidden directory; --include-hidden reads it",
        },
        {
            "path": "docs",
            "reason": f"a link out of the tree (to {outside + '/dir'!r}); links are not followed",
        },
        {
            "path": "AGENTS.md",
            "reason": f"a link out of the tree (to {outside + '/secret.md'!r}); not followed",
        },
        {
            "path": "lib/CLAUDE.md",
            "reason": "a link to a hidden file ('.env'); --include-hidden reads it",
        },
        {
            "path": "src/CONVENTIONS.md",
            "reason": f"a link out of the tree (to {outside + '/secret.md'!r}); not followed",
        },
    ]
    assert report["created"] == 3  # .cursorrules, .editorconfig, lib/AGENTS.md: nothing lost
    # The store holds none of it, so no later loop can be shown it.
    code, out, err = await orga("knowledge", "list", "-a", "coder", "--json", env=env)
    assert code == 0, err
    contents = [item["content"] for item in json.loads(out)]
    assert sorted(contents) == [
        "Files *: indent_style = space",
        "Prefer small modules.",
        "lib functions are pure",
    ]
    assert not any("SECRET" in content for content in contents)
    # Said in words too: a line per skipped path, and how many.
    code, out, err = await orga("knowledge", "import", str(repo), "-a", "coder", env=env)
    assert code == 0, err
    assert "imported 0 convention(s) (3 already known) for coder" in out
    assert "skipped 5 path(s):" in out
    assert f"  'AGENTS.md': a link out of the tree (to {outside + '/secret.md'!r})" in out
    assert "  '.secret': a hidden directory; --include-hidden reads it" in out


def test_hidden_directories_are_read_only_when_asked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".github" / "AGENTS.md").write_text("- review every workflow change\n")
    (repo / ".git" / "AGENTS.md").write_text("- not a convention\n")
    (repo / "AGENTS.md").symlink_to(Path(".git") / "AGENTS.md")
    plain = find_conventions(repo)
    assert plain.conventions == []
    asked = find_conventions(repo, include_hidden=True)
    assert [(c.directory, c.content) for c in asked.conventions] == [
        (".github", "review every workflow change")
    ]
    # .git is never walked, nor read through a link.
    assert {(s.path, s.reason) for s in asked.skipped} == {
        (".git", "dependencies, build output or version control; never read"),
        ("AGENTS.md", "a link to '.git/AGENTS.md', in a directory never read"),
    }


def test_files_that_are_not_plain_files_are_skipped(tmp_path: Path) -> None:
    """A FIFO would block the import, a hard link may be any file of the same file system, a
    huge file would fill the store: each is skipped with its reason, the rest imported."""
    repo = tmp_path / "repo"
    for name in ("fifo", "linked", "huge", "inside"):
        (repo / name).mkdir(parents=True)
    os.mkfifo(repo / "fifo" / "AGENTS.md")
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text(f"- {SECRET}\n")
    os.link(elsewhere, repo / "linked" / "AGENTS.md")
    (repo / "huge" / "AGENTS.md").write_text("x" * (MAX_FILE_BYTES + 1))
    (repo / "inside" / "AGENTS.md").write_text("- one rule\n")
    (repo / "inside" / "CLAUDE.md").symlink_to("AGENTS.md")  # a link inside the tree: read
    found = find_conventions(repo)
    assert [(c.source, c.content) for c in found.conventions] == [
        ("inside/AGENTS.md", "one rule"),
        ("inside/CLAUDE.md", "one rule"),
    ]
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("fifo/AGENTS.md", "not a regular file"),
        (
            "huge/AGENTS.md",
            f"larger than {MAX_FILE_BYTES} bytes ({MAX_FILE_BYTES + 1})",
        ),
        (
            "linked/AGENTS.md",
            "a hard link (2 names): it may be a file from outside the tree; copy it to import it",
        ),
    ]
