"""Reference extraction and rendering for pre-hydration (pure)."""

from __future__ import annotations

import pytest

from orga.contracts.prehydration import PreHydrationConfig, ReferencePattern
from orga.core.prehydration import CONTEXT_MARKER, Reference, extract, render

CONFIG = PreHydrationConfig()


def refs(text: str, config: PreHydrationConfig = CONFIG) -> list[tuple[str, str]]:
    return [(r.ref_type, r.value) for r in extract(text, config)]


def test_urls_paths_issues_and_prs() -> None:
    text = (
        "See https://example.org/docs/page?a=1, then read docs/guide.md and ./src/main.py. "
        "It broke in PR #45 and acme/widgets#67; also #123 (and README.md)."
    )
    assert refs(text) == [
        ("url", "https://example.org/docs/page?a=1"),
        ("file", "docs/guide.md"),
        ("file", "./src/main.py"),
        ("pr", "45"),
        ("issue", "acme/widgets#67"),
        ("issue", "123"),
        ("file", "README.md"),
    ]


def test_dedupe_cap_and_ids() -> None:
    text = " ".join(f"#{n} #{n}" for n in range(20))
    found = extract(text, PreHydrationConfig(max_references=3))
    assert [(r.id, r.value) for r in found] == [("ref-1", "0"), ("ref-2", "1"), ("ref-3", "2")]


def test_multibyte_text_around_references() -> None:
    text = "Überprüfe bitte «docs/straße.md» und https://例え.jp/パス — danke #7 ✓"
    assert refs(text) == [
        ("file", "docs/straße.md"),
        ("url", "https://例え.jp/パス"),
        ("issue", "7"),
    ]


def test_no_false_references() -> None:
    assert refs("version 2.5, e.g. this; email a@b.com; x/y; C#; &#39;") == []


def test_custom_patterns() -> None:
    config = PreHydrationConfig(
        patterns=[ReferencePattern(ref_type="ticket", pattern=r"\bJIRA-(\d+)\b")]
    )
    assert refs("fix JIRA-881 and #2", config) == [("ticket", "881"), ("issue", "2")]
    with pytest.raises(ValueError, match="not a regex RE2 can run"):
        ReferencePattern(ref_type="bad", pattern="(")


def test_render_cuts_on_a_character_boundary() -> None:
    reference = Reference(id="ref-1", ref_type="file", value="a.md")
    text = render([(reference, "é" * 5000)], max_tokens=100)
    assert text.startswith(CONTEXT_MARKER)
    assert len(text.encode()) <= 400
    assert text.endswith("[… pre-hydrated context cut to its token budget]")
    text.encode("utf-8")  # whole characters only
