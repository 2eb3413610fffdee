"""What the CLI prints from models, tools and clients cannot steer the operator's terminal
(issue 24, item 6), and ``orga pending`` never hides an argument (item 9, issue 26).

The attacker writes terminal escapes (erase the line, move up, retitle the window, colour),
bidi overrides and rich markup into a model's answer, a tool's name and a call's arguments; the
operator reads them with ``orga run``, ``state``, ``journal`` and ``pending``. Every one of those
prints a visible stand-in instead, and ``--json`` still carries the exact text.
"""

from __future__ import annotations

import ast
import json
import re
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from rich.table import Table
from temporalio.testing import WorkflowEnvironment

from orga.cli.views import WorkflowRow, rows_table
from orga.contracts.state import LoopState
from orga.desk.inbox import InboxItem
from orga.desk.inbox_text import ARGUMENT_LIMIT, PAGE_WIDTH, argument_lines, render_inbox
from orga.runtime.safe_text import SafeConsole, json_text, one_line, printable
from orga.scripted.server import Turn
from tests.harness import Harness
from tests.helpers import inbox, on, orga, parse_python, pending, waiting_review
from tests.sample_tools import transfer

# Written out here, not imported: the test states what must never reach a terminal.
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
HOSTILE = (
    "Refund 5 cents.\x1b[2K\x1b[1A\x1b]0;TITLE\x07\x1b[31mFAKE: approved by ops\x1b[0m "
    "\u202eevil\u202c \u2066iso\u2069 \x9b31m [red]markup[/red] :smile:\rOVER\x08"
)
"""An answer that erases the line, moves up, retitles the window, colours, reverses text,
uses a one-character CSI, carries rich markup and overwrites with CR and backspace."""
LONG_EMAIL = "refunds." + "x" * 70 + "@attacker.example"
"""About 95 characters: a table cut at 60 showed this and hid what came after."""


def assert_safe(text: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in UNSAFE.findall(text)})
    assert not found, f"unsafe characters printed: {found}"


# ---- the sanitiser -----------------------------------------------------------------------


def test_each_hostile_character_is_shown_not_obeyed() -> None:
    shown = printable(HOSTILE)
    assert shown == (
        "Refund 5 cents.␛[2K␛[1A␛]0;TITLE␇␛[31mFAKE: approved by ops␛[0m "
        "<U+202E>evil<U+202C> <U+2066>iso<U+2069> <U+009B>31m [red]markup[/red] :smile:␍OVER␈"
    )
    assert printable("one\r\ntwo\nthree\tfour") == "one\ntwo\nthree\tfour"
    assert one_line("one\r\ntwo\nthree") == "one␤two␤three"
    assert printable("\u2028\x7f\ud800") == "<U+2028>␡<U+D800>"


@given(st.text())
def test_printable_leaves_nothing_a_terminal_obeys(text: str) -> None:
    shown = printable(text)
    assert_safe(shown)
    assert "\n" not in one_line(text)
    assert printable(shown) == shown  # applied twice (views, then the console): the same
    assert len(shown) >= len(text.replace("\r\n", "\n"))  # nothing silently dropped


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Cf", "Zl", "Zp"))))
def test_ordinary_text_is_untouched(text: str) -> None:
    assert printable(text) == text


@given(st.recursive(st.none() | st.text() | st.integers(), lambda inner: st.lists(inner)))
def test_json_text_is_the_same_value_and_safe(value: object) -> None:
    encoded = json_text(json.dumps(value, ensure_ascii=False))
    assert json.loads(encoded) == value
    assert_safe(encoded)


def test_the_console_prints_markup_and_escapes_as_written() -> None:
    out = SafeConsole(width=200, force_terminal=True, color_system="truecolor", highlight=False)
    table = Table(box=None, show_header=False)
    table.add_column("ANSWER")
    table.add_row(HOSTILE)
    with out.capture() as captured:
        out.print(HOSTILE)
        out.print(HOSTILE, markup=True)  # even asked to, it reads no markup from text
        out.print(table)
    text = captured.get()
    assert "\x1b" not in text  # no style was set: any ESC would be the attacker's
    assert text.count("[red]markup[/red] :smile:") == 3
    assert text.count("␛[31mFAKE") == 3


def test_a_listing_keeps_each_row_on_its_line() -> None:
    row = WorkflowRow(
        workflow_id="loop-1\nloop-2  task  completed  forged",
        kind="loop",
        status="running",
        agent_id="\x1b[8mhidden\u202e",
        iteration=1,
        tokens=2,
        started=None,
    )
    out = SafeConsole(width=200, highlight=False)
    with out.capture() as captured:
        out.print(rows_table([row]))
    [header, line] = captured.get().splitlines()
    assert "loop-1␤loop-2" in line and "␛[8mhidden<U+202E>" in line
    assert_safe(header + line)


async def test_knowledge_items_are_printed_safely(tmp_path: Path) -> None:
    env = {"ORGA_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}", "ORGA_AGENTS": ""}
    code, _, err = await orga("knowledge", "add", HOSTILE, "-a", "support", env=env)
    assert code == 0, err
    for verb in (["list"], ["search", "refund"]):
        code, out, err = await orga("knowledge", *verb, "-a", "support", env=env)
        assert code == 0, err
        assert_safe(out + err)
        assert "␛[31mFAKE" in out
    code, out, _ = await orga("knowledge", "list", "-a", "support", "--json", env=env)
    assert json.loads(out)[0]["content"] == HOSTILE


# ---- orga pending's layout ---------------------------------------------------------------


def approval(arguments: str, workflow_id: str = "loop-3f2a9c1b7d4e") -> InboxItem:
    ids = f"{workflow_id} i1_call_1_0"
    return InboxItem(
        kind="approval",
        workflow_id=workflow_id,
        workflow_type="ReasoningLoop",
        item_id="i1_call_1_0",
        tool="transfer",
        arguments=arguments,
        reason="tool 'transfer' requires approval",
        since=datetime(2025, 5, 1, 9, 14, 2, tzinfo=UTC),
        options=["approve", "deny"],
        commands=[f"orga approve {ids} --reason '…'", f"orga deny {ids} --reason '…'"],
    )


def test_a_long_value_cannot_hide_the_amount_next_to_the_approve_command() -> None:
    arguments = json.dumps({"email": LONG_EMAIL, "amount": 99999999})
    text = render_inbox([approval(arguments)])
    assert '"amount": 99999999' in text and LONG_EMAIL in "".join(text.split())
    assert "cut" not in text  # nothing was left out, so nothing says so
    assert max(len(line) for line in text.splitlines()) <= PAGE_WIDTH

    huge = json.dumps({"email": "y" * 5000 + "@attacker.example", "amount": 99999999})
    text = render_inbox([approval(huge)])
    hidden = len(json.dumps("y" * 5000 + "@attacker.example")) - ARGUMENT_LIMIT
    assert '"amount": 99999999' in text
    assert f"…[+{hidden} characters]" in text
    assert f"{hidden} characters not shown: `orga pending --full` or `orga state " in text
    assert max(len(line) for line in text.splitlines()) <= PAGE_WIDTH
    full = render_inbox([approval(huge)], full=True)
    assert "y" * 5000 in "".join(line.strip() for line in full.splitlines())
    assert "not shown" not in full


def test_arguments_that_are_not_an_object_and_many_keys() -> None:
    lines, hidden = argument_lines("not json " * 200, full=False)
    assert hidden == len("not json " * 200) - 1000 and lines[-1].endswith(f"[+{hidden} characters]")
    many = json.dumps({f"k{i}": i for i in range(60)})
    lines, hidden = argument_lines(many, full=False)
    assert lines[-1] == "…[+10 more arguments]" and hidden > 0
    assert len(argument_lines(many, full=True)[0]) == 60


# ---- nothing prints past the sanitiser ---------------------------------------------------

_SANITISERS = {"printable", "one_line", "json_text"}
_REVIEWED = {
    ("common.py", "print_table"): "writes what the safe console rendered",
    ("common.py", "start_workflow"): "the workflow id the user just gave, and a link",
    ("mcp.py", "announce"): "host and port the operator chose",
    ("run.py", "_print"): "the stream's own notes and the prefix (the text is printable)",
    ("run.py", "read"): "a newline",
    ("chat.py", "next"): "the prompt, one of chat.py's own constants",
    ("verbs.py", "main"): "the path of the file it wrote, in the checkout (a developer's tool)",
}


def test_every_raw_write_in_the_cli_is_sanitised_or_reviewed() -> None:
    """A verb that prints through ``console()`` is safe by construction; one that writes to
    stdout or stderr itself must pass its text through a sanitiser, or be reviewed here."""
    found: list[str] = []
    for path in sorted(Path("orga/cli").glob("*.py")):
        for function, call in _writes(parse_python(path), "<module>"):
            safe = all(isinstance(arg, ast.Constant) or _sanitised(arg) for arg in call.args)
            if not safe and (path.name, function) not in _REVIEWED:
                found.append(f"{path}:{call.lineno} in {function}")
    assert not found, f"raw output that skips safe_text: {found}"


def _writes(node: ast.AST, function: str) -> list[tuple[str, ast.Call]]:
    """The calls that write to stdout or stderr, each with its innermost function's name."""
    found: list[tuple[str, ast.Call]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            found += _writes(child, child.name)
            continue
        if isinstance(child, ast.Call):
            func = child.func
            if (isinstance(func, ast.Name) and func.id == "print") or (
                isinstance(func, ast.Attribute)
                and func.attr in {"write", "echo", "secho"}
                and ast.unparse(func.value) in {"sys.stdout", "sys.stderr", "out", "typer"}
            ):
                found.append((function, child))
        found += _writes(child, function)
    return found


def _sanitised(arg: ast.expr) -> bool:
    """``arg`` passes through a sanitiser, or is ``json.dumps`` (which writes ASCII)."""
    for inner in ast.walk(arg):
        if isinstance(inner, ast.Call):
            name = ast.unparse(inner.func)
            if name in _SANITISERS:
                return True
            if name == "json.dumps" and not any(k.arg == "ensure_ascii" for k in inner.keywords):
                return True
    return False


# ---- the attacker's steps, through the real command --------------------------------------


async def test_a_hostile_answer_reaches_no_terminal_through_run_state_and_journal(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    bad_tool = "\x1b]0;TITLE\x07\x1b[2Kdelete_all\u202e"
    model = harness.new_model([Turn(tool_calls=[(bad_tool, {})]), Turn(text=HOSTILE)])
    async with harness.worker():
        code, out, err = await orga(
            "run", "Refund ann.", "--provider", "openai", "--model", model, env=on(env, harness)
        )
        assert code == 0, err
        workflow_id = err.split("started ")[1].split()[0]
        harness.handles.append(harness.client.get_workflow_handle(workflow_id))
        assert_safe(out + err)
        assert out.startswith("Refund 5 cents.␛[2K␛[1A␛]0;TITLE␇␛[31mFAKE")
        assert "[red]markup[/red]" in out and "<U+202E>evil" in out

        code, out, err = await orga("state", workflow_id, env=on(env, harness))
        assert code == 0, err
        assert_safe(out + err)
        assert "output        Refund 5 cents.␛[2K" in out
        assert "␛]0;TITLE␇␛[2Kdelete_all<U+202E>" in out  # the unknown tool's name, shown

        code, out, err = await orga("journal", workflow_id, env=on(env, harness))
        assert code == 0, err
        assert_safe(out + err)
        assert "delete_all<U+202E>" in out
        assert all(re.match(r"#\d+ ", line) for line in out.splitlines())  # one line each

        # --json is for programs: the exact text, escaped so that it is safe on a terminal.
        code, out, err = await orga("state", workflow_id, "--json", env=on(env, harness))
        assert code == 0, err
        assert_safe(out)
        state = LoopState.model_validate_json(out)
        assert state.output == HOSTILE
        assert state.tool_calls[0].tool == bad_tool
        code, out, err = await orga("journal", workflow_id, "--json", env=on(env, harness))
        assert_safe(out)
        assert bad_tool in {
            n for line in out.splitlines() for n in json.loads(line).get("tool_calls", [])
        }


async def test_pending_shows_the_amount_after_a_long_value_and_no_escapes(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    arguments = {"to": LONG_EMAIL + "\x1b[2K\x1b[1A\u202e", "amount": 99999999}
    paying = harness.new_model(
        [Turn(tool_calls=[("transfer", arguments)]), Turn(text="denied, fine")]
    )
    writer = harness.new_model([Turn(text=HOSTILE)])
    async with harness.worker(tools=[transfer]):
        payment = await harness.start("Refund ann 5 cents.", model=paying, tools=["transfer"])
        reviewed = await harness.start(
            "Write the refund note.", model=writer, critic={"kind": "human", "max_rounds": 1}
        )
        [call] = (await pending(payment)).pending_approvals
        await waiting_review(reviewed, 1)
        items = await inbox(env, harness, 2)
        code, out, err = await orga("pending", env=on(env, harness))
        assert code == 0, err
        assert_safe(out + err)
        ours = out.split(f"approval  {call.call_id}  transfer")[1].split("\n\n")[0]
        assert '"amount": 99999999' in ours
        assert f"orga approve {payment.id} {call.call_id}" in ours
        assert "␛[2K␛[1A<U+202E>" not in ours  # JSON writes the ESC as \u001b: shown, not run
        assert "\\u001b[2K\\u001b[1A<U+202E>" in ours
        assert "Refund 5 cents.␛[2K␛[1A␛]0;TITLE␇" in out  # the answer waiting for review
        assert max(len(line) for line in out.splitlines()) <= PAGE_WIDTH

        code, out, err = await orga("pending", "--json", env=on(env, harness))
        listed = {i["workflow_id"]: i for i in json.loads(out)}
        assert_safe(out)
        assert json.loads(listed[payment.id]["arguments"]) == arguments  # exact
        assert listed[reviewed.id]["arguments"] == HOSTILE
        assert {i["workflow_id"] for i in items} == {payment.id, reviewed.id}

        # One field a line, for a shell variable: shown, not obeyed, one line each.
        code, out, err = await orga("pending", "--field", "arguments", env=on(env, harness))
        assert code == 0, err
        assert_safe(out)
        assert len(out.splitlines()) == 2 and "Refund 5 cents.␛[2K␛[1A␛]0;TITLE␇" in out

        # Nothing was lost: the call still waits, is refused with a reason, the answer reviewed.
        code, _, err = await orga(
            "deny", payment.id, call.call_id, "--reason", "not to that address",
            "--approver", "ops", env=on(env, harness),
        )  # fmt: skip
        assert code == 0, err
        code, _, err = await orga(
            "review", reviewed.id, "--verdict", "approve", "--reviewer", "ops",
            env=on(env, harness),
        )  # fmt: skip
        assert code == 0, err
        assert (await payment.result()).output == "denied, fine"
        assert (await reviewed.result()).output == HOSTILE


async def test_streamed_text_is_shown_not_obeyed(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model([Turn(text=HOSTILE, piece_delay=0.01)])
    async with harness.worker():
        code, out, err = await orga(
            "run", "Refund ann.", "--stream", "--provider", "openai", "--model", model,
            env=on(env, harness),
        )  # fmt: skip
        assert code == 0, err
        harness.handles.append(
            harness.client.get_workflow_handle(err.split("started ")[1].split()[0])
        )
    assert_safe(out + err)
    assert out.startswith("Refund 5 cents.␛[2K␛[1A␛]0;TITLE␇")
