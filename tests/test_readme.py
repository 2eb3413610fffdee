"""The README and every page of docs/, each walked top to bottom as a new user follows it,
offline (issues 26 and 29).

Every command of a page's ``sh``/``bash`` blocks runs as written (tests/readme_walk.py says how)
on the session's dev server with the offline worker, and ends as the page says: its exit code,
and the output lines the page shows under it. Each page is walked on its own (a task queue, a
data directory and example ids of its own), so a page's steps must set up what they use, as a
reader who opened only that page would. What is not run is listed in ``SKIPPED`` with the
reason; what a page's own steps do not set up is in ``SETUPS``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.readme_walk import (
    ROOT,
    PageFile,
    Walk,
    WalkError,
    commands,
    find_expected,
    runner,
    steps,
    walk_env,
)

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
"""Every page a reader follows: the README, then the docs site's pages."""
SAME_AS = {ROOT / "docs" / "getting-started.md": README}
"""Pages whose commands are the first ones of a walked page, as written (a test checks it): the
walked page runs them, so they run once."""
WALKED = [page for page in PAGES if commands(page) and page not in SAME_AS]
"""The pages that show commands: each is walked."""

SKIPPED: list[tuple[str, str]] = [
    (
        r"^uv run orga demo$",
        "its point is the embedded server it starts when none answers, and the walk's server "
        "answers: tests/test_cli.py::test_demo_offline_end_to_end runs it as written, offline",
    ),
    (r"^uv run orga server$", "the session's dev server stands in for it (one per test run)"),
    (
        r"^uv run orga server --codec-endpoint",
        "a server that runs until Ctrl-C (tests/test_cli.py runs `orga server` and stops it; "
        "no test starts it with --codec-endpoint yet)",
    ),
    (r"^uv run orga codec$", "a server that runs until Ctrl-C: tests/test_codec.py serves it"),
    (
        r"^uv run orga (desk|mcp)\b",
        "a server that runs until Ctrl-C: tests/test_desk_web.py, tests/test_mcp.py",
    ),
    (r"^uv run pytest\b|^make check$", "the test suite itself"),
    (
        r"^docker compose\b",
        "no Docker engine runs on this project's machines: tests/test_deploy.py checks the file",
    ),
    (
        r"^temporal worker deployment\b",
        "needs a Worker Deployment of two builds: tests/test_rollout.py drives one",
    ),
    (r"^uv run (python (bench/|-m )|--group)", "a benchmark, run by hand (bench/)"),
    (
        r"^uv run mkdocs\b",
        "serves the docs site until Ctrl-C: .ci/run builds it with `mkdocs build --strict`",
    ),
]
"""Commands of the pages that the walk does not run, and why."""


async def _two_refunds_waiting(walk: Walk) -> None:
    """Before the plain Temporal CLI's decisions: two calls waiting for approval. The README's
    desk decided its own with `orga approve` / `orga deny` just above; these blocks show the
    same decisions made another way, so they get refunds of their own."""
    for line in (
        'uv run orga run "Refund 1500 cents to bob@example.com: wrong size" --tool issue_refund '
        "--no-wait",
        'uv run orga run "Refund 900 cents to cy@example.com: late" --tool issue_refund --no-wait',
    ):
        await walk.run_line(line)


SETUPS = [
    (
        r"^uv run temporal workflow list --query 'OrgaStatus=.*awaiting_approval",
        _two_refunds_waiting,
    )
]
"""State a page's own steps do not create, made just before the command that needs it."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", WALKED, ids=lambda page: str(page.relative_to(ROOT)))
async def test_the_page_walks_top_to_bottom(
    env: WorkflowEnvironment, tmp_path: Path, page: Path
) -> None:
    walk = Walk(
        client=env.client,
        env=walk_env(
            env.client.service_client.config.target_host,
            f"walk-{uuid.uuid4().hex[:8]}",
            tmp_path / "data",
        ),
        skips=SKIPPED,
        setups=SETUPS,
    )
    try:
        await walk.walk(page)
    finally:
        print("\n".join(walk.log))  # what ran, how it ended, how long it took
        await walk.clean_up()
    await walk.replay_all()
    done = [line for line in walk.log if not line.startswith("setup ")]
    assert len(done) == len(steps(page)), walk.log  # each ran, or was skipped with a reason


def test_pages_walked_side_by_side_write_files_of_their_own() -> None:
    """The walks run in parallel, each writing its page's files where the commands run: no two
    pages may write one file."""
    writers: dict[str, str] = {}
    for page in WALKED:
        for step in steps(page):
            if isinstance(step, PageFile):
                assert writers.setdefault(step.name, step.where).split(":")[0] == str(
                    page.relative_to(ROOT)
                ), f"{step.where} writes {step.name}, as {writers[step.name]} does"


def test_a_page_walked_once_shows_the_same_commands_as_the_page_walked() -> None:
    for page, walked in SAME_AS.items():
        shown = [(c.text, c.comment, c.expected) for c in commands(page)]
        first = [(c.text, c.comment, c.expected) for c in commands(walked)][: len(shown)]
        assert shown == first, (
            f"{page.relative_to(ROOT)} no longer shows what {walked.relative_to(ROOT)} does: "
            "walk it (take it out of SAME_AS), or show the same commands"
        )


# ---- the walker itself ---------------------------------------------------------------------------

PAGE = """\
Some text.

```sh
uv run orga run "What is 2+3?" \\
  --tool add          # prints the answer
# [offline scripted model] 2 + 3 = 5 …
uv run orga task start examples/tasks/order.json   # exit 1: the task aborts
                                                   # (notify keeps failing)
uv run temporal workflow start --input '{"a":
  1}'; uv run orga state <workflow-id>
```

```python
print("not a shell block")
```
"""


def test_the_walker_reads_commands_comments_and_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    run, task, start, state = commands(page)
    assert run.words == ("uv", "run", "orga", "run", "What is 2+3?", "--tool", "add")
    assert (run.where, run.comment, run.exit_code) == ("page.md:4", "prints the answer", 0)
    assert run.expected == ["[offline scripted model] 2 + 3 = 5 …"]
    assert task.exit_code == 1 and task.comment.endswith("(notify keeps failing)")
    assert start.words[-1] == '{"a":\n  1}' and state.words[-1] == "<workflow-id>"


def test_a_comment_line_with_no_command_before_it_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\n# …or, instead:\nuv run orga list\n```\n")
    with pytest.raises(WalkError, match="no command before it"):
        commands(page)


def test_expected_output_elides_and_binds_example_ids() -> None:
    output = (
        "approval  i1_call_7_0  issue_refund\n  workflow   loop-0123456789ab (loop) · waiting "
        "since 2026-12-01T22:30:15+00:00\n  act  orga approve loop-0123456789ab i1_call_7_0\n"
        "approval  i1_call_8_0  issue_refund\n  workflow   loop-ba9876543210 (loop) · …\n"
    )
    expected = [
        "approval  i1_call_1_0  issue_refund",
        "  workflow   loop-3f2a9c1b7d4e (loop) · waiting since 2025-05-01T09:14:02+00:00",
        "  act  orga approve loop-3f2a9c1b7d4e i1_call_1_0",
        "approval  i1_call_2_0  issue_refund",
        "  workflow   loop-7d4e3f2a9c1b (loop) · …",
    ]
    assert find_expected(expected, output, {}) == {
        "i1_call_1_0": "i1_call_7_0",
        "loop-3f2a9c1b7d4e": "loop-0123456789ab",
        "i1_call_2_0": "i1_call_8_0",
        "loop-7d4e3f2a9c1b": "loop-ba9876543210",
    }
    # A bound id must be the same real one; two example ids never bind one real id.
    assert find_expected(expected[:1], output, {"i1_call_1_0": "i1_call_9_0"}) is None
    assert find_expected(
        ["loop-7d4e3f2a9c1b (loop)"], output, {"loop-3f2a9c1b7d4e": "loop-0123456789ab"}
    ) == {"loop-7d4e3f2a9c1b": "loop-ba9876543210"}
    assert find_expected(["approval … refund", "why"], output, {}) is None  # in order, all of it


async def test_a_step_that_ends_otherwise_fails_with_what_it_printed(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    page = tmp_path / "page.md"
    settings = walk_env(env.client.service_client.config.target_host, "nowhere", tmp_path / "d")
    walk = Walk(client=env.client, env=settings, settle_within=0)
    page.write_text(
        '```sh\nuv run orga knowledge add -a notes "ann prefers tea"\n# stored: #99\n```\n'
    )
    with pytest.raises(WalkError) as failed:
        await walk.walk(page)
    message = str(failed.value)
    assert message.startswith("page.md:2: `uv run orga knowledge add -a notes 'ann prefers tea'`")
    assert "exit code 0 (the page says 0)" in message
    assert "the output does not show: 'stored: #99'" in message
    assert "--- stdout ---\nstored: #1\n" in message
    page.write_text("```sh\nuv run orga state nothing-here   # exit 0, says the page\n```\n")
    with pytest.raises(WalkError, match=r"exit code 1 \(the page says 0\)\n(.|\n)*nothing-here"):
        await walk.walk(page)
    page.write_text("```sh\necho hello\n```\n")
    with pytest.raises(WalkError, match="does not know how to run `echo hello`"):
        await walk.walk(page)


def test_every_command_is_either_run_or_skipped_with_a_reason() -> None:
    """What the walk cannot run is a choice written in SKIPPED, never a silent gap; the pages
    together run most of what they show."""
    ways = [runner(command, SKIPPED).split(":")[0] for page in PAGES for command in commands(page)]
    assert {"worker", "python", "orga", "temporal", "skip"} == set(ways)
    assert ways.count("orga") + ways.count("temporal") >= 60, ways
    assert README in WALKED and len(WALKED) >= 10, WALKED


# ---- examples/: every file is used, as shipped, by some test -----------------------------------


def test_every_example_file_is_used_by_a_test() -> None:
    """Each file of examples/ (or a folder above it) is named by a test or by a command of a
    page the walk runs."""
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").glob("*.py"))
    tests = tests.replace('" / "', "/")  # Path(…) / "examples" / "policies" names examples/policies
    walked = "\n".join(c.text for page in PAGES for c in commands(page))
    for path in sorted((ROOT / "examples").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.name == "__init__.py":
            continue
        relative = path.relative_to(ROOT)
        names = {str(p) for p in [relative, *relative.parents][:-2]}
        names.add(str(relative.with_suffix("")).replace("/", "."))  # a module: examples.shop
        assert any(n in tests or n in walked for n in names), f"no test uses {relative}"


async def test_a_file_the_page_writes_runs_as_a_program_that_ends_as_the_page_says(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """A ``# NAME.py`` block is written where the commands run and removed afterwards; the
    program that runs it goes on in its own terminal, and what it prints later and how it
    ends are checked when it ends."""
    name = f"walk_probe_{uuid.uuid4().hex[:8]}.py"
    program = f"""\
```python
# {name}
import sys

print("first line")
print("second line")
sys.exit(3)
```

```sh
uv run python {name}   # exit 3
# first line
# {{second}}
```
"""
    settings = walk_env(env.client.service_client.config.target_host, "nowhere", tmp_path / "d")
    page = tmp_path / "page.md"
    for second, fails in (("second line", None), ("third line", "does not show: 'third line'")):
        page.write_text(program.replace("{second}", second))
        walk = Walk(client=env.client, env=settings)
        await walk.walk(page)
        assert (ROOT / name).read_text().startswith(f"# {name}\nimport sys\n")
        if fails is None:
            await walk.clean_up()
            assert walk.log[-1] == f"page.md:11  exit 3  uv run python {name}", walk.log
        else:
            with pytest.raises(WalkError, match=fails):
                await walk.clean_up()
        assert not (ROOT / name).exists()
    (ROOT / name).write_text("# something of the reader's own\n")
    try:
        with pytest.raises(WalkError, match=f"{name} is already there and says something else"):
            await Walk(client=env.client, env=settings).walk(page)
        assert (ROOT / name).read_text() == "# something of the reader's own\n"
    finally:
        (ROOT / name).unlink()
