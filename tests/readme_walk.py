"""Walk a Markdown page's shell examples as a reader runs them (issue 26: the README; issue 29:
every page of ``docs/`` too; issue 39: the files a page asks the reader to write).

Every command runs in a fresh clone (``tests/readme_shell.py`` makes it, and the environments):
a directory of its own holding what the repository tracks — none of the files a reader of the
checkout made, no ``.orga/`` — as a reader who has just cloned the repository runs it. A
```` ```python ```` block whose first line is ``# NAME.py`` is a file the reader writes: the
walk writes it, at that point of the page, to the clone's root (where the page's commands run),
and removes it at the end; a file of that name that is already there and says something else
fails the walk. Other Python blocks are fragments, not run. What a page shows in its
```` ```sh ```` and ```` ```bash ```` blocks is read, in order, as commands:

* a ``\\`` at the end of a line joins the next one, and a quoted string may span lines;
* ``;`` and ``&&`` separate commands on one line (a pipe is refused: the walker runs none);
* ``# …`` after a command is its comment, and indented ``# …`` lines below it continue it; a
  comment that says ``exit N`` (``# exit 1: the task aborted``) is the exit code the command
  ends with, else it must end with 0;
* lines that start with ``#`` at column 0 right after a command are its output as the page shows
  it. They must be found in the command's stdout then stderr, in order: ``…`` elides anything,
  any run of whitespace stands for any whitespace (a wrapped line still matches), a time
  (``2025-05-01T09:14:02+00:00``) for any time, and the page's example ids — ``loop-``,
  ``task-`` or ``thread-`` and 12 hex digits, a call id ``i1_call_1_0``, a run id cut short
  ``01a2…`` — for the real ids the walk meets: each is bound to the real id the first time an
  output shows it (two example ids never bind the same real id) and replaced by it in every
  later command.

How each command runs (see ``Walk``): ``uv run orga …`` and ``uv run temporal …`` as written, as
processes of the venv's own executables (what ``uv run`` would start, without its start-up;
``orga`` forked from the CLI imported once, as every test's ``orga`` command is), in the
clone with ``$PWD`` the clone, offline (no API key). The README is walked as a newcomer's
shell runs it (``newcomer_env``): no variable the page does not set — no ``TEMPORAL_ADDRESS``,
task queue or data directory — so orga's defaults are what is walked: ``uv run orga demo``
starts its embedded server on ``localhost:7233``, ``uv run orga server`` is the reader's first
terminal (started in the background, stopped with Ctrl-C at the end), and every command and
program reaches it there (``default_address`` holds those ports for one walk at a time on the
machine). Other pages are walked side by side on the session's server, each with a task queue
and a data directory of its own (``walk_env``; ``--task-queue orga`` names its queue).
``[VAR=value …] uv run worker.py …`` starts the worker in the background and waits for its
banner (its output lines, if the page shows some, are found in its start-up log), stopping the
previous one with Ctrl-C (SIGINT) — unless it is the same command, which is left running as a
reader's terminal would be. ``[VAR=value …] uv run python NAME.py`` runs a file the page wrote,
as a program in a terminal of its own in place of the worker (the page says to stop that one:
the walk stops it with Ctrl-C): the walk goes on once the program has printed the first output
line the page shows under it (binding its ids, and noting a workflow it says it ``started``),
and when the next worker or program starts, or the page ends, waits for the program to end by
itself, with the exit code and all the output lines the page shows. ``<workflow-id>`` and
``<id>`` are the workflow the walk started last — or, in a command that also names
``<call-id>``, the walk's oldest call waiting for approval, whose id ``<call-id>`` then is; an
``orga`` verb that answers a person's item (approve, deny, review, resolve) runs once its
workflow waits for a person, as a reader answers what the inbox shows. Commands a test lists
as skipped are not run, each with its reason; a setup a test names for a command runs just
before it. Anything else the walker cannot run fails the walk, so nothing on the page goes
unwalked in silence.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from temporalio.client import Client
from temporalio.service import RPCError

from orga.contracts.messages import LOOP_WORKFLOW, TASK_WORKFLOW
from orga.desk.inbox import inbox
from orga.runtime.connect import connect
from orga.runtime.settings import Settings
from orga.server.devserver import temporal_binary
from tests.harness import replay
from tests.helpers import eventually, forked_orga, start_worker
from tests.readme_shell import BIN, ROOT

COMMAND_TIMEOUT: Final = 90.0
"""Seconds one command may take (``orga run`` waits for its loop's answer)."""
SETTLE_WITHIN: Final = 30.0
"""Seconds a read-only command is asked again until it shows what the page says it shows (a loop
started with ``--no-wait`` reaches its approval a moment later)."""

_FENCE: Final = re.compile(r"^```(\w*)\s*$")
_FILE: Final = re.compile(r"^# (\w+\.py)$")
"""The first line of a Python block that is a file the reader writes (in the repository root)."""
_EXIT: Final = re.compile(r"\bexits? (\d+)\b")
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_VARIABLE: Final = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_CAPTURE: Final = re.compile(r"^([A-Za-z_]\w*)=\$\((.*)$")

EXAMPLE_IDS: Final = {
    "run": (r"\b[0-9a-f]{4}…", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    "loop": (r"\bloop-[0-9a-f]{12}\b", r"loop-[0-9a-f]{12}"),
    "task": (r"\btask-[0-9a-f]{12}\b", r"task-[0-9a-f]{12}"),
    "thread": (r"\bthread-[0-9a-f]{12}\b", r"thread-[0-9a-f]{12}"),
    "call": (r"\bi\d+_call_\d+_\d+\b", r"i\d+_[^\s'\"]+"),
}
"""How a page writes an example id, and what the real id it stands for looks like."""
_TIME: Final = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?"
_PIECES: Final = re.compile(
    "|".join(f"(?P<{kind}>{written})" for kind, (written, _) in EXAMPLE_IDS.items())
    + f"|(?P<time>{_TIME})|(?P<gap>…)|(?P<space>\\s+)"
)
_IN_COMMANDS: Final = re.compile("|".join(written for written, _ in EXAMPLE_IDS.values()))
_STARTED: Final = (
    re.compile(r"^started (\S+)$", re.MULTILINE),  # orga run / orga task start
    re.compile(r"^forked \S+ after turn \d+ as (\S+)$", re.MULTILINE),  # orga fork
    re.compile(r"^\s*WorkflowId\s+(\S+)$", re.MULTILINE),  # temporal workflow start
    re.compile(r'"workflowId":\s*"([^"]+)"'),  # temporal workflow execute -o json
)
_BANNER: Final = "Temporal dev server on "
"""What ``orga server`` prints once its server answers."""
_ANSWERS: Final = frozenset({"approve", "deny", "review", "resolve"})
"""``orga`` verbs that answer what waits for a person."""
_READ_ONLY: Final = re.compile(
    r"^(orga (pending|state|journal|list|task state|knowledge (list|search)|schedule list"
    r"|policy (what-if|test|record))"
    r"|temporal (workflow (list|query|describe)|schedule (list|describe)))\b"
)
"""Commands that change nothing, so asking again until their output settles is safe."""


class WalkError(AssertionError):
    """A step of the page did not end as the page says."""


@dataclass
class Command:
    """One command of a page, as written."""

    where: str
    """``page.md:LINE`` of the line it starts on."""
    words: tuple[str, ...]
    """Its words as the shell splits them, leading ``VAR=value`` assignments included."""
    comment: str = ""
    expected: list[str] = field(default_factory=list[str])
    """The output lines the page shows after it, without their ``# ``."""

    @property
    def text(self) -> str:
        return shlex.join(self.words)

    @property
    def exit_code(self) -> int:
        said = _EXIT.search(self.comment)
        return int(said.group(1)) if said else 0


@dataclass(frozen=True)
class PageFile:
    """A file a page asks the reader to write: a ```` ```python ```` block headed ``# NAME.py``."""

    where: str
    name: str
    text: str


Step = Command | PageFile


def steps(page: Path) -> list[Step]:
    """The commands of ``page``'s ``sh`` and ``bash`` blocks and the files of its Python blocks,
    in order."""
    found: list[Step] = []
    lines = page.read_text().splitlines()
    number = 0
    while number < len(lines):
        fence = _FENCE.match(lines[number])
        number += 1
        if fence is None:
            continue
        end = number
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if fence.group(1) in ("sh", "bash"):
            found += _block(_name(page), lines, number, end)
        elif fence.group(1) == "python" and number < end:
            named = _FILE.match(lines[number])
            if named is not None:
                text = "\n".join(lines[number:end]) + "\n"
                found.append(PageFile(f"{_name(page)}:{number + 1}", named.group(1), text))
        number = end + 1
    return found


def commands(page: Path) -> list[Command]:
    """The commands of ``page``'s ``sh`` and ``bash`` blocks, in order."""
    return [step for step in steps(page) if isinstance(step, Command)]


def _name(page: Path) -> str:
    """How a step names its page: relative to the repository (``docs/guides/…``), else by name."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def _block(name: str, lines: list[str], start: int, end: int) -> list[Command]:
    found: list[Command] = []
    number = start
    while number < end:
        line = lines[number]
        where = f"{name}:{number + 1}"
        number += 1
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            if not found:
                raise WalkError(f"{where}: a comment with no command before it: {line!r}")
            if line.startswith("#"):  # at column 0: what the command printed
                found[-1].expected.append(line[1:].removeprefix(" "))
            else:  # indented: the command's comment goes on
                found[-1].comment += " " + line.strip().removeprefix("#").strip()
            continue
        text = line
        while True:
            code, comment, open_quote = _split_comment(text)
            if code.endswith("\\") and number < end:
                text = code[:-1] + " " + lines[number].strip()
            elif open_quote and number < end:
                text += "\n" + lines[number]
            else:
                break
            number += 1
        if open_quote:
            raise WalkError(f"{where}: a quote is never closed: {text!r}")
        parts = _parts(code, where)
        found += [Command(where, words) for words in parts]
        found[-1].comment = comment
    return found


def _split_comment(text: str) -> tuple[str, str, bool]:
    """``text`` as code and trailing comment, and whether a quote is still open at its end."""
    quote: str | None = None
    escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index].rstrip(), text[index + 1 :].strip(), False
    return text.rstrip(), "", quote is not None


def _parts(code: str, where: str) -> list[tuple[str, ...]]:
    lexer = shlex.shlex(code, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    parts: list[list[str]] = [[]]
    for word in lexer:
        if word in (";", "&&"):
            parts.append([])
        elif word and set(word) <= set(";&|"):
            raise WalkError(f"{where}: the walker runs no pipelines or background jobs: {code!r}")
        else:
            parts[-1].append(word)
    return [tuple(words) for words in parts if words]


# ---- what a page says a command printed ------------------------------------------------------


def find_expected(
    expected: Sequence[str], output: str, bound: Mapping[str, str]
) -> dict[str, str] | None:
    """The example ids ``expected`` binds when ``output`` shows it (see the module docstring),
    ``{}`` when it binds none, or None when ``output`` does not show it."""
    groups: dict[str, str] = {}  # example id -> its group
    kinds: dict[str, str] = {}
    pattern: list[str] = []
    for line in expected:
        pieces: list[str] = []
        at = 0
        stripped = line.strip()
        for piece in _PIECES.finditer(stripped):
            pieces.append(re.escape(stripped[at : piece.start()]))
            at = piece.end()
            kind = piece.lastgroup
            written = piece.group()
            if kind == "gap":
                pieces.append(".*?")
            elif kind == "space":
                pieces.append(r"\s+")
            elif kind == "time":
                pieces.append(_TIME)
            elif kind is not None and written in bound:
                pieces.append(re.escape(bound[written]))
            elif written in groups:
                pieces.append(f"(?P={groups[written]})")
            elif kind is not None:
                others = [re.escape(v) for k, v in bound.items() if _kind(k) == kind]
                others += [f"(?P={g})" for w, g in groups.items() if kinds[w] == kind]
                groups[written] = f"g{len(groups)}"
                kinds[written] = kind
                unlike = f"(?!(?:{'|'.join(others)})(?![\\w-]))" if others else ""
                pieces.append(f"{unlike}(?P<{groups[written]}>{EXAMPLE_IDS[kind][1]})")
        pieces.append(re.escape(stripped[at:]))
        if "".join(pieces):
            pattern.append("".join(pieces))
    found = re.search(".*?".join(pattern), output, re.DOTALL)
    if found is None:
        return None
    return {written: found.group(group) for written, group in groups.items()}


def _kind(written: str) -> str | None:
    """``loop``, ``task``, ``call`` or ``run`` for an example id as a page writes it."""
    whole = _PIECES.fullmatch(written)
    return whole.lastgroup if whole else None


def first_missing(expected: Sequence[str], output: str, bound: Mapping[str, str]) -> str:
    """The first line of ``expected`` that ``output`` does not show after the ones before it."""
    for count in range(1, len(expected) + 1):
        if find_expected(expected[:count], output, bound) is None:
            return expected[count - 1]
    return ""


# ---- the walk ---------------------------------------------------------------------------------

Setup = Callable[["Walk"], Awaitable[None]]


class _Process(Protocol):
    @property
    def returncode(self) -> int | None: ...
    def send_signal(self, signal: int, /) -> None: ...
    def kill(self) -> None: ...
    async def wait(self) -> int: ...


@dataclass
class Worker:
    """What runs in the reader's second terminal: the worker the walk started last, or a program
    the page wrote (``command`` is None for a worker: it runs until Ctrl-C)."""

    text: str
    """The command as the page wrote it."""
    process: _Process
    log: list[str]
    reader: asyncio.Task[None]
    program: Command | None = None
    """The page's command when it is a program, which ends by itself."""


@dataclass
class Walk:
    """The state of a walk: the server, the bindings of example ids, the workflows it started."""

    client: Client | None
    """A client of the walk's server; None until the page's ``uv run orga server`` starts it
    (a newcomer's walk)."""
    env: dict[str, str]
    """The environment every command runs with (``newcomer_env``, or ``walk_env``: the session's
    server, a task queue and a data directory of the walk's own)."""
    root: Path
    """Where the commands run and the page's files are written: a fresh clone."""
    skips: Sequence[tuple[str, str]] = ()
    """``(pattern, reason)``: commands matching ``pattern`` (re.search) are not run."""
    setups: Sequence[tuple[str, Setup]] = ()
    """``(pattern, setup)``: ``setup`` runs before the first command matching ``pattern``."""
    bound: dict[str, str] = field(default_factory=dict[str, str])
    started: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    """``(workflow id, workflow type)`` of every workflow a command started, in order."""
    log: list[str] = field(default_factory=list[str])
    """One line per command: where, what, and how it ended (or why it was skipped)."""
    settle_within: float = SETTLE_WITHIN
    worker: Worker | None = None
    server: Worker | None = None
    """``uv run orga server``, the reader's first terminal, once the page started it."""
    written: set[Path] = field(default_factory=set[Path])
    """Files the walk's commands named that did not exist before: removed at the end."""
    _done_setups: set[str] = field(default_factory=set[str])

    @property
    def task_queue(self) -> str:
        return self.env.get("ORGA_TASK_QUEUE", "orga")  # orga's default

    @property
    def reached(self) -> Client:
        """The client of the walk's server.

        Raises:
            WalkError: no server runs yet (a newcomer's page must start one first).
        """
        if self.client is None:
            raise WalkError("a command needs Temporal before the page started a server")
        return self.client

    async def walk(self, page: Path) -> None:
        """Write every file and run every command of ``page`` in order; raise ``WalkError`` at
        the first that does not end as the page says."""
        for step in steps(page):
            if isinstance(step, PageFile):
                self.write(step)
            else:
                await self.step(step)

    def write(self, file: PageFile) -> None:
        """Write ``file`` where the page's commands run (removed when the walk is over)."""
        path = self.root / file.name
        if path.exists() and path not in self.written and path.read_text() != file.text:
            raise WalkError(f"{file.where}: {file.name} is already there and says something else")
        if not path.exists():
            self.written.add(path)
        path.write_text(file.text)
        self.log.append(f"{file.where}  wrote  {file.name}")

    async def step(self, command: Command) -> None:
        how = runner(command, self.skips)
        if how.startswith("skip: "):
            self.log.append(f"{command.where}  skipped  {command.text}: {how[6:]}")
            return
        for pattern, setup in self.setups:
            if pattern not in self._done_setups and re.search(pattern, command.text):
                self._done_setups.add(pattern)
                await setup(self)
        shell = captured(command.words)
        if shell is not None:  # NAME=$(uv run orga …): the walk's shell keeps its output
            name, inner = shell
            program = BIN / "orga" if how == "orga" else temporal_binary()
            out = await self._run(command, {}, [str(program), *inner[3:]], capture=True)
            self.env[name] = out.strip()
            return
        assignments, words = _assignments(command.words)
        if how == "server":
            await self._start_server(command, assignments, words[4:])
        elif how == "worker":
            await self._start_worker(command, assignments, words[3:])
        elif how == "python":
            await self._start_program(command, assignments, words[3:])
        else:
            program = BIN / "orga" if how == "orga" else temporal_binary()
            await self._run(command, assignments, [str(program), *words[3:]])

    async def run_line(self, line: str) -> None:
        """Run one command line written as a page writes it (for setups)."""
        for words in _parts(line, "setup"):
            await self.step(Command("setup", words))

    # ---- running ---------------------------------------------------------------------------

    async def _run(
        self,
        command: Command,
        assignments: dict[str, str],
        argv: list[str],
        *,
        capture: bool = False,
    ) -> str:
        """Run ``argv`` until it ends as the page says; its stdout. ``capture``: a shell
        variable keeps the output, which must then be there (not empty)."""
        argv = await self._substituted(command, argv)
        env = {**self.env, **{name: self._expanded(v) for name, v in assignments.items()}}
        self.written |= {
            self.root / argv[i + 1]
            for i, word in enumerate(argv[:-1])
            if word in ("--export", "--out") and not (self.root / argv[i + 1]).exists()
        }
        began = asyncio.get_running_loop().time()
        settle = began + self.settle_within
        shown = " ".join([Path(argv[0]).name, *argv[1:]])
        while True:
            code, out, err = await _execute(argv, env, self.root)
            found = find_expected(command.expected, out + "\n" + err, self.bound)
            if capture and not out.strip():
                found = None
            if code == command.exit_code and found is not None:
                await self._track(out + "\n" + err)
                self.bound.update(found)
                took = asyncio.get_running_loop().time() - began
                self.log.append(f"{command.where}  exit {code}  {took:4.1f} s  {command.text}")
                return out
            if not _READ_ONLY.match(shown) or asyncio.get_running_loop().time() > settle:
                break
            await asyncio.sleep(0.3)
        missing = first_missing(command.expected, out + "\n" + err, self.bound)
        raise WalkError(
            f"{command.where}: `{command.text}` did not end as the page says\n"
            f"ran: {shlex.join(argv)}\n"
            f"exit code {code} (the page says {command.exit_code})\n"
            + (f"the output does not show: {missing!r}\n" if found is None else "")
            + f"--- stdout ---\n{out}--- stderr ---\n{err}"
            + self._worker_log()
        )

    async def _substituted(self, command: Command, argv: list[str]) -> list[str]:
        """``argv`` with the page's placeholders replaced (see the module docstring)."""

        def real(example: re.Match[str]) -> str:
            if example.group() not in self.bound:
                raise WalkError(
                    f"{command.where}: `{command.text}` uses the example id {example.group()!r} "
                    "before any output the page shows binds it to a real one"
                )
            return self.bound[example.group()]

        words = [self._expanded(_IN_COMMANDS.sub(real, word)) for word in argv]
        for index, word in enumerate(words[:-1]):
            if word == "--task-queue" and words[index + 1] == "orga":
                words[index + 1] = self.task_queue
        if any("<call-id>" in word for word in words):
            workflow_id, call_id = await self._waiting_call()
            words = [w.replace("<call-id>", call_id).replace("<id>", workflow_id) for w in words]
            words = [w.replace("<workflow-id>", workflow_id) for w in words]
        if any("<workflow-id>" in word or "<id>" in word for word in words):
            if not self.started:
                raise WalkError(f"{command.where}: `{command.text}` names a workflow, none started")
            newest = self.started[-1][0]
            words = [w.replace("<workflow-id>", newest).replace("<id>", newest) for w in words]
            if words[1:2] and words[1] in _ANSWERS:
                await self._waiting_person(newest)
        elif words[2:3] and words[1] in _ANSWERS and words[2] in {w for w, _ in self.started}:
            await self._waiting_person(words[2])  # an id the reader chose: as for the newest
        return words

    def _expanded(self, word: str) -> str:
        """``word`` with ``$NAME`` / ``${NAME}`` of the walk's environment filled in."""
        return _VARIABLE.sub(lambda v: self.env.get(v.group(1) or v.group(2), v.group()), word)

    async def _waiting_call(self) -> tuple[str, str]:
        """The walk's oldest call waiting for approval: ``(workflow id, call id)``."""
        ours = {workflow_id for workflow_id, _ in self.started}

        async def probe() -> tuple[str, str] | None:
            for item in await inbox(self.reached):
                if item.kind == "approval" and item.workflow_id in ours and item.item_id:
                    return item.workflow_id, item.item_id
            return None

        return await eventually(probe, "a call of the walk waiting for approval")

    async def _waiting_person(self, workflow_id: str) -> None:
        """Until ``workflow_id`` waits for a person (a reader answers what the inbox shows)."""

        async def probe() -> bool | None:
            return any(i.workflow_id == workflow_id for i in await inbox(self.reached)) or None

        await eventually(probe, f"{workflow_id} waiting for a person")

    async def _track(self, output: str) -> None:
        """Note the workflows ``output`` says were started, with their type."""
        known = {workflow_id for workflow_id, _ in self.started}
        seen = [m.group(1) for pattern in _STARTED for m in pattern.finditer(output)]
        for workflow_id in dict.fromkeys(seen):
            if workflow_id not in known:
                description = await self.reached.get_workflow_handle(workflow_id).describe()
                self.started.append((workflow_id, description.workflow_type))

    # ---- the worker ------------------------------------------------------------------------

    async def _start_worker(
        self, command: Command, assignments: dict[str, str], args: Sequence[str]
    ) -> None:
        if self.worker is not None and self.worker.text == command.text:
            self.log.append(f"{command.where}  running  {command.text} (still running as is)")
            return
        await self.stop_worker()
        args = await self._substituted(command, list(args))
        assignments = {name: self._expanded(value) for name, value in assignments.items()}
        try:
            process, banner = await start_worker({**self.env, **assignments}, *args, cwd=self.root)
        except AssertionError as exited:
            raise WalkError(f"{command.where}: `{command.text}` did not start: {exited}") from None
        if find_expected(command.expected, banner, self.bound) is None:
            raise WalkError(
                f"{command.where}: `{command.text}` started without saying "
                f"{first_missing(command.expected, banner, self.bound)!r}:\n{banner}"
            )
        log = [banner]
        assert process.stderr is not None
        reader = asyncio.create_task(_drain(process.stderr, log))
        self.worker = Worker(command.text, process, log, reader)
        self.log.append(f"{command.where}  started  {command.text}")

    async def _start_program(
        self, command: Command, assignments: dict[str, str], args: Sequence[str]
    ) -> None:
        """A file the page wrote, run as a program in the reader's second terminal."""
        script = self.root / args[0] if args else None
        if script is None or script not in self.written:
            raise WalkError(f"{command.where}: `{command.text}` runs no file the page wrote")
        await self.stop_worker()
        args = await self._substituted(command, list(args))
        env = {**self.env, **{name: self._expanded(v) for name, v in assignments.items()}}
        process = await asyncio.create_subprocess_exec(
            str(BIN / "python"),
            *args,
            cwd=self.root,
            env={**env, "PYTHONUNBUFFERED": "1"},  # each line at once, as a terminal shows it
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert process.stdout is not None
        log: list[str] = []
        reader = asyncio.create_task(_drain(process.stdout, log))
        self.worker = Worker(command.text, process, log, reader, program=command)
        first = command.expected[:1]

        async def printed() -> tuple[dict[str, str]] | None:
            found = find_expected(first, "".join(log), self.bound)
            if found is None and process.returncode is not None:
                raise WalkError(
                    f"{command.where}: `{command.text}` ended {process.returncode} without "
                    f"printing {first[0]!r}:\n{''.join(log)}"
                )
            return None if found is None else (found,)

        try:
            (found,) = await eventually(printed, command.text, timeout=COMMAND_TIMEOUT)
        except AssertionError:
            raise WalkError(
                f"{command.where}: `{command.text}` did not print {first[0]!r}:\n{''.join(log)}"
            ) from None
        self.bound.update(found)
        await self._track("".join(log))
        self.log.append(f"{command.where}  started  {command.text}")

    async def _start_server(
        self, command: Command, assignments: dict[str, str], args: Sequence[str]
    ) -> None:
        """``uv run orga server``: the reader's first terminal, running until the walk ends;
        the walk's client connects to it once it says it serves."""
        if self.server is not None:
            raise WalkError(f"{command.where}: a second `orga server`; one runs already")
        env = {**self.env, **{name: self._expanded(v) for name, v in assignments.items()}}
        process = await asyncio.create_subprocess_exec(
            str(BIN / "orga"),
            "server",
            *await self._substituted(command, list(args)),
            cwd=self.root,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert process.stdout is not None
        log: list[str] = []
        reader = asyncio.create_task(_drain(process.stdout, log))
        self.server = Worker(command.text, process, log, reader)

        def up() -> str | None:
            if process.returncode is not None:
                raise WalkError(
                    f"{command.where}: `{command.text}` ended {process.returncode}:\n"
                    + "".join(log)
                )
            said = "".join(log)
            return said if _BANNER in said else None

        try:
            said = await eventually(up, command.text, timeout=60)
        except AssertionError:
            said = "".join(log)
            raise WalkError(f"{command.where}: `{command.text}` never served:\n{said}") from None
        if find_expected(command.expected, said, self.bound) is None:
            raise WalkError(
                f"{command.where}: `{command.text}` started without saying "
                f"{first_missing(command.expected, said, self.bound)!r}:\n{said}"
            )
        served = Settings.from_env(env).temporal_address
        self.client = await connect(
            Settings(temporal_address=served, data_dir=self.root / ".orga"), timeout=30
        )
        self.log.append(f"{command.where}  started  {command.text} (on {served})")

    async def stop_server(self) -> None:
        """Ctrl-C to ``orga server``, which must stop cleanly (the walk's last step)."""
        server, self.server = self.server, None
        if server is None:
            return
        if server.process.returncode is None:
            server.process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(server.process.wait(), 60)
        await server.reader
        if code != 0:
            raise WalkError(f"`{server.text}` ended {code} on Ctrl-C:\n{''.join(server.log)}")

    async def stop_worker(self) -> None:
        """Ctrl-C to the running worker, which must stop cleanly; or, for a program, wait for it
        to end as the page says."""
        worker, self.worker = self.worker, None
        if worker is None:
            return
        if worker.program is None:
            worker.process.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(worker.process.wait(), 60)
            await worker.reader
            if code != 0:
                raise WalkError(f"`{worker.text}` ended {code} on Ctrl-C:\n{''.join(worker.log)}")
            return
        command = worker.program
        try:
            code = await asyncio.wait_for(worker.process.wait(), COMMAND_TIMEOUT)
        except TimeoutError:
            worker.process.kill()
            await worker.process.wait()
            code = None
        await worker.reader
        output = "".join(worker.log)
        found = find_expected(command.expected, output, self.bound)
        missing = first_missing(command.expected, output, self.bound)
        if code == command.exit_code and found is not None:
            self.bound.update(found)
            started = f"{command.where}  started  {command.text}"
            self.log[self.log.index(started)] = f"{command.where}  exit {code}  {command.text}"
            return
        raise WalkError(
            f"{command.where}: `{command.text}` did not end as the page says\n"
            + (
                f"it ran past {COMMAND_TIMEOUT:.0f} s and was killed\n"
                if code is None
                else f"exit code {code} (the page says {command.exit_code})\n"
            )
            + (f"the output does not show: {missing!r}\n" if found is None else "")
            + f"--- its output ---\n{output}"
        )

    def _worker_log(self) -> str:
        if self.worker is None:
            return ""
        return f"--- the worker ({self.worker.text}), last lines ---\n" + "".join(
            self.worker.log[-30:]
        )

    # ---- afterwards -------------------------------------------------------------------------

    async def clean_up(self) -> None:
        """Stop the worker, end what the walk left running, delete its schedules and files
        (the server, if the page started one, runs on until ``stop_server``)."""
        try:
            await self.stop_worker()
        finally:
            try:
                if self.client is not None:
                    await self._end_what_runs(self.client)
            finally:
                for path in self.written:
                    path.unlink(missing_ok=True)

    async def _end_what_runs(self, client: Client) -> None:
        query = f"TaskQueue = '{self.task_queue}' AND ExecutionStatus = 'Running'"
        async for execution in client.list_workflows(query):
            await client.get_workflow_handle(execution.id).terminate("the walk is over")
        async for listed in await client.list_schedules():
            handle = client.get_schedule_handle(listed.id)
            action = (await handle.describe()).schedule.action
            if getattr(action, "task_queue", None) == self.task_queue:
                await handle.delete()

    async def replay_all(self) -> int:
        """Replay every workflow the walk started from its history; how many were replayed."""
        replayed = 0
        for workflow_id, workflow_type in self.started:
            if workflow_type in (LOOP_WORKFLOW, TASK_WORKFLOW):
                try:
                    await replay(self.reached.get_workflow_handle(workflow_id), self.reached)
                except RPCError as error:
                    raise WalkError(f"{workflow_id}: its history was not read: {error}") from error
                replayed += 1
        return replayed


def runner(command: Command, skips: Sequence[tuple[str, str]]) -> str:
    """How the walk runs ``command``: ``server`` (``orga server``, in the background), ``worker``,
    ``python`` (a file the page wrote), ``orga``, ``temporal``, or ``skip: <reason>``.

    Raises:
        WalkError: none of them: the walker would have to be taught, or the test to skip it.
    """
    for pattern, reason in skips:
        if re.search(pattern, command.text):
            return f"skip: {reason}"
    kept = captured(command.words)
    words = kept[1] if kept else _assignments(command.words)[1]
    if words[:4] == ("uv", "run", "orga", "server"):
        return "server"
    if words[:2] == ("uv", "run") and words[2:3] in (("worker.py",), ("orga",), ("temporal",)):
        return words[2].removesuffix(".py")
    if words[:3] == ("uv", "run", "python") and _FILE.match(f"# {' '.join(words[3:4])}"):
        return "python"
    raise WalkError(
        f"{command.where}: the walker does not know how to run `{command.text}`: teach it, or "
        "list the command among the test's skips with the reason"
    )


def captured(words: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """``NAME=$(command …)``: the variable's name and the command whose output it keeps."""
    found = _CAPTURE.match(words[0]) if words else None
    if found is None or not words[-1].endswith(")"):
        return None
    inner = (found.group(2), *words[1:]) if found.group(2) else words[1:]
    return found.group(1), (*inner[:-1], inner[-1].removesuffix(")"))


def _assignments(words: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
    """Leading ``VAR=value`` words as an environment, and the command after them."""
    count = 0
    while count < len(words) and _ASSIGNMENT.match(words[count]):
        count += 1
    assigned = dict(word.split("=", 1) for word in words[:count])
    return assigned, words[count:]


async def _execute(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    if argv[0] == str(BIN / "orga"):  # the CLI forked, imported once (tests/helpers/_commands)
        try:
            return await forked_orga(argv[1:], env, cwd, COMMAND_TIMEOUT)
        except TimeoutError as killed:
            return -signal.SIGKILL, "", str(killed)
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), COMMAND_TIMEOUT)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
        err += f"\n(killed after {COMMAND_TIMEOUT:.0f} s)".encode()
    return process.returncode or 0, out.decode(), err.decode()


async def _drain(stream: asyncio.StreamReader, log: list[str]) -> None:
    """Keep reading what a worker or program writes, so a full pipe never blocks it."""
    while line := await stream.readline():
        log.append(line.decode())
