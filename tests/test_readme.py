"""The README and every page of docs/, each walked top to bottom as a new user follows it,
offline (issues 26 and 29).

Every command of a page's ``sh``/``bash`` blocks runs as written (tests/readme_walk.py says how)
in a fresh clone of its own, offline, and ends as the page says: its exit code, and the output
lines the page shows under it. The README is walked as a newcomer's shell runs it (issue 51):
nothing set that the page does not set — no ``TEMPORAL_ADDRESS``, task queue or data directory —
so its ``orga demo`` and ``orga server`` run at orga's defaults and every command, worker and
program must find them there. The other pages are walked side by side on the session's dev
server, each with a task queue, a data directory and example ids of its own, so a page's steps
must set up what they use, as a reader who opened only that page would. What is not run is
listed in ``SKIPPED`` with the reason; what a page's own steps do not set up is in ``SETUPS``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.helpers import eventually, loop_state
from tests.readme_shell import ROOT, default_address, fresh_clone, newcomer_env, walk_env
from tests.readme_walk import (
    PageFile,
    Walk,
    WalkError,
    captured,
    commands,
    find_expected,
    runner,
    steps,
)

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
"""Every page a reader follows: the README, then the docs site's pages."""
SAME_AS = {ROOT / "docs" / "getting-started.md": README}
"""Pages whose commands are the first ones of a walked page, as written (a test checks it): the
walked page runs them, so they run once."""
WALKED = [page for page in PAGES if commands(page) and page not in SAME_AS]
"""The pages that show commands: each is walked."""
NEWCOMERS = [README]
"""Pages walked as a newcomer's shell runs them, on orga's default address (one at a time on a
machine): their `orga demo` and `orga server` run as written."""

ON_THE_SESSION_SERVER: list[tuple[str, str]] = [
    (
        r"^uv run orga demo$",
        "its point is the embedded server it starts when none answers, and the walk's server "
        "answers: the README's walk runs it as a newcomer does, tests/test_cli.py offline",
    ),
    (
        r"^uv run orga server$",
        "the session's dev server stands in for it (the README's walk runs it as written)",
    ),
]
"""Commands a page walked on the session's server does not run."""

SKIPPED: list[tuple[str, str]] = [
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
        r"^npm\b",
        "Node builds the example page: tests/test_web_example.py builds it (npm ci, npm run "
        "build) and drives it in headless Chromium",
    ),
    (
        r"^uv run orga api( |$)",
        "a server that runs until Ctrl-C: tests/test_web_example.py serves the example page "
        "with it, tests/test_agui_reconnect.py kills and restarts it",
    ),
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


def _waits_first(workflow_id: str) -> Callable[[Walk], Awaitable[None]]:
    """Before the next command: ``workflow_id``'s call waits for approval. The inbox lists the
    oldest first, and a page shows it in the order its commands were typed — a reader's seconds
    apart; the walk's are milliseconds apart, and on a loaded machine a loop started later could
    reach its gate first."""

    async def setup(walk: Walk) -> None:
        handle = walk.reached.get_workflow_handle(workflow_id)

        async def waits() -> bool:
            return bool((await loop_state(handle)).pending_approvals)

        await eventually(waits, f"{workflow_id} waits for approval")

    return setup


SETUPS = [
    (
        r"^uv run temporal workflow list --query 'OrgaStatus=.*awaiting_approval",
        _two_refunds_waiting,
    ),
    (r"^uv run orga run .*--id bob-mind", _waits_first("ann-lamp")),
    (r"^uv run orga task start .*--id order-notify", _waits_first("bob-mind")),
]
"""State a page's own steps do not create, made just before the command that needs it."""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", WALKED, ids=lambda page: str(page.relative_to(ROOT)))
async def test_the_page_walks_top_to_bottom(
    env: WorkflowEnvironment, tmp_path: Path, page: Path
) -> None:
    clone = fresh_clone(tmp_path / "clone")
    if page not in NEWCOMERS:
        await _walk(page, _on_the_session_server(env, clone, tmp_path))
        return
    async with default_address() as taken:
        if taken is None:
            await _walk(page, Walk(None, newcomer_env(clone, tmp_path / "home"), clone, SKIPPED))
            return
    await _walk(page, _on_the_session_server(env, clone, tmp_path))
    pytest.skip(  # walked, but not as a newcomer: say so rather than pass as if it had been
        f"{page.name} walked on the session's server with TEMPORAL_ADDRESS set, not at orga's "
        f"default address: {taken}"
    )


def _on_the_session_server(env: WorkflowEnvironment, clone: Path, tmp_path: Path) -> Walk:
    """A walk on the session's dev server, on a task queue and data directory of its own."""
    host = env.client.service_client.config.target_host
    return Walk(
        client=env.client,
        env=walk_env(host, f"walk-{uuid.uuid4().hex[:8]}", tmp_path / "data", clone),
        root=clone,
        skips=[*SKIPPED, *ON_THE_SESSION_SERVER],
    )


async def _walk(page: Path, walk: Walk) -> None:
    walk.setups = SETUPS
    try:
        try:
            await walk.walk(page)
        finally:
            print("\n".join(walk.log))  # what ran, how it ended, how long it took
            await walk.clean_up()
        await walk.replay_all()
    finally:
        await walk.stop_server()
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


def test_the_walker_keeps_a_command_s_output_in_a_shell_variable(tmp_path: Path) -> None:
    """``NAME=$(uv run orga …)`` runs the command (as orga) and keeps its output, which later
    commands read as ``"$NAME"`` — so a page's commands paste as they stand."""
    page = tmp_path / "page.md"
    page.write_text(
        "```sh\nid=$(uv run orga pending --oldest --field workflow_id)\n"
        'uv run orga state "$id"\n```\n'
    )
    keep, use = commands(page)
    assert runner(keep, []) == "orga" and runner(use, []) == "orga"
    assert captured(keep.words) == (
        "id",
        ("uv", "run", "orga", "pending", "--oldest", "--field", "workflow_id"),
    )
    assert captured(use.words) is None and use.words[-1] == "$id"


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
    clone = fresh_clone(tmp_path / "clone")
    host = env.client.service_client.config.target_host
    settings = walk_env(host, "nowhere", tmp_path / "d", clone)
    walk = Walk(client=env.client, env=settings, root=clone, settle_within=0)
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
    assert {"server", "worker", "python", "orga", "temporal", "skip"} == set(ways)
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
        made = {"__pycache__", "node_modules"} & set(path.parts)  # by a run, not shipped
        if not path.is_file() or made or path.name == "__init__.py":
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
    clone = fresh_clone(tmp_path / "clone")
    host = env.client.service_client.config.target_host
    settings = walk_env(host, "nowhere", tmp_path / "d", clone)
    page = tmp_path / "page.md"
    for second, fails in (("second line", None), ("third line", "does not show: 'third line'")):
        page.write_text(program.replace("{second}", second))
        walk = Walk(client=env.client, env=settings, root=clone)
        await walk.walk(page)
        assert (clone / name).read_text().startswith(f"# {name}\nimport sys\n")
        if fails is None:
            await walk.clean_up()
            assert walk.log[-1] == f"page.md:11  exit 3  uv run python {name}", walk.log
        else:
            with pytest.raises(WalkError, match=fails):
                await walk.clean_up()
        assert not (clone / name).exists()
    (clone / name).write_text("# something of the reader's own\n")
    with pytest.raises(WalkError, match=f"{name} is already there and says something else"):
        await Walk(client=env.client, env=settings, root=clone).walk(page)
    assert (clone / name).read_text() == "# something of the reader's own\n"


def test_a_walk_runs_in_a_fresh_clone_with_nothing_of_the_checkout_s_own(tmp_path: Path) -> None:
    """What a reader of this checkout made in it — their ``mytools.py`` from the README, the
    key ``orga approver keygen`` wrote in ``.orga/`` — is not in the clone a walk runs in (it
    failed the README's walk: "mytools.py is already there and says something else")."""
    own = ROOT / f"walk_probe_{uuid.uuid4().hex[:8]}.py"  # untracked, as a reader's file is
    own.write_text("# a reader's own tools\n")
    try:
        clone = fresh_clone(tmp_path / "clone")
    finally:
        own.unlink()
    names = {entry.name for entry in clone.iterdir()}
    assert {"README.md", "worker.py", "examples", "orga", "pyproject.toml"} <= names
    assert own.name not in names and ".orga" not in names and ".venv" not in names
    shell = newcomer_env(clone, tmp_path / "home")
    assert shell["PWD"] == str(clone) and shell["HOME"] == str(tmp_path / "home")
    assert not [k for k in shell if k.startswith(("ORGA_", "TEMPORAL_", "PYTEST_"))], shell
