"""The layout is the architecture: who may import what, and what workflow code may do.

``orga.contracts`` (types that travel), ``orga.core`` (pure decisions) and the workflows'
helpers (``orga.workflows.reasoning``, ``.saga``, ``.shared``) are shared with the workflow sandbox;
the two workflow definitions are checked by it on every run, and tests replay in a strict
sandbox that checks the helpers too; ``orga.runtime``, ``orga.cli``
and ``orga/activities/`` do I/O and stay outside. A lint rule (``ruff-deterministic.toml``) bans
clocks, randomness, environment reads and I/O in the three sandbox-side packages.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import (
    RestrictedWorkflowAccessError,
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

from orga.worker.sandbox import PASSTHROUGH, STRICT_PASSTHROUGH, workflow_runner
from tests.helpers import parse_python

ROOT = Path(__file__).resolve().parent.parent

SANDBOX_SIDE = ("orga.contracts", "orga.core", "orga.workflows")
ALLOWED: dict[str, tuple[str, ...]] = {
    # package: the first-party packages its modules may import
    "orga.contracts": ("orga.contracts",),
    "orga.core": ("orga.contracts", "orga.core"),
    "orga.workflows": ("orga.contracts", "orga.core", "orga.workflows"),
}
THIRD_PARTY_IN_SANDBOX = ("pydantic", "rapidfuzz", "re2", "temporalio", "cryptography")


def modules_of(package: str) -> list[str]:
    found = [package]
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
        found.append(info.name)
    return found


def imports_of(module: str) -> list[str]:
    path = importlib.import_module(module).__file__
    assert path is not None
    tree = parse_python(Path(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def first_party(name: str) -> bool:
    return name.split(".")[0] in {"orga", "worker", "tests"}


@pytest.mark.parametrize(
    "module", [m for p in SANDBOX_SIDE for m in modules_of(p)], ids=lambda m: m
)
def test_sandbox_side_imports_only_what_it_may(module: str) -> None:
    package = next(p for p in SANDBOX_SIDE if module == p or module.startswith(p + "."))
    allowed = ALLOWED[package]
    stdlib = sys.stdlib_module_names
    for name in imports_of(module):
        top = name.split(".")[0]
        if first_party(name):
            assert name.startswith(allowed), (
                f"{module} imports {name}; {package} may import only {allowed}"
            )
        else:
            assert top in stdlib or top in THIRD_PARTY_IN_SANDBOX or top == "__future__", (
                f"{module} imports {name}, which is not shared with the workflow sandbox"
            )


@pytest.mark.parametrize(
    "module", [m for p in SANDBOX_SIDE for m in modules_of(p)], ids=lambda m: m
)
def test_sandbox_side_never_opens_files(module: str) -> None:
    path = importlib.import_module(module).__file__
    assert path is not None
    for node in ast.walk(parse_python(Path(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in {"open", "input", "print", "exec", "eval"}, (
                f"{module} calls {node.func.id}() at line {node.lineno}"
            )


def test_activities_and_runtime_stay_out_of_workflow_code() -> None:
    for package in (
        "orga.activities",
        "orga.runtime",
        "orga.cli",
        "orga.providers",
        "orga.gates",
        "orga.tools",
        "orga.knowledge",
        "orga.testing",
        "orga.scripted",
        "orga.desk",
        "orga.server",
    ):
        for module in modules_of(package):
            for name in imports_of(module):
                assert not name.startswith("temporalio.workflow"), (module, name)
                assert not name.startswith("orga.workflows"), (module, name)
                if package == "orga.activities":
                    assert not name.startswith("orga.cli"), (module, name)


# ---- every room on its layer -------------------------------------------------------------

LAYERS: tuple[str, ...] = (
    "orga.contracts",
    "orga.core",
    "orga.workflows",
    "orga.runtime",
    "orga.providers",
    "orga.server",
    "orga.scripted",
    "orga.testing",
    "orga.tools",
    "orga.gates",
    "orga.knowledge",
    "orga.worker",
    "orga.activities",
    "orga.desk",
    "orga.client",
    "orga.web",
    "orga.plugin",
    "orga.cli",
)
"""Every room of orga, lowest first (DESIGN.md §9): a room imports only rooms below it (and
itself). ``orga`` itself, the surface a user imports, stands above them all."""


def room_of(module: str) -> str:
    """The room a module lives in: ``orga.cli.loops`` -> ``orga.cli``."""
    return ".".join(module.split(".")[:2])


def upward_imports(module: str, source: str) -> list[str]:
    """The first-party imports of ``module`` (whose text is ``source``) that reach a room
    above its own — lazy imports in functions and ``TYPE_CHECKING`` ones too."""
    rank = {room: index for index, room in enumerate(LAYERS)}
    own = rank[room_of(module)]
    found: list[str] = []
    for node in ast.walk(parse_python(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name == "orga" or (name.startswith("orga.") and rank[room_of(name)] > own):
                found.append(name)
    return found


def test_every_room_is_on_a_layer() -> None:
    rooms = {room_of(m) for m in modules_of("orga") if m != "orga"}
    assert sorted(rooms - set(LAYERS)) == [], "rooms with no layer: place them in LAYERS"


@pytest.mark.parametrize("module", [m for m in modules_of("orga") if m != "orga"], ids=str)
def test_every_room_imports_only_downward(module: str) -> None:
    path = importlib.import_module(module).__file__
    assert path is not None
    upward = upward_imports(module, Path(path).read_text())
    assert upward == [], f"{module} ({room_of(module)}) imports rooms above it: {upward}"


@pytest.mark.parametrize("room", LAYERS[:-1])
def test_a_planted_upward_import_is_caught_in_every_room(room: str) -> None:
    above = LAYERS[LAYERS.index(room) + 1]
    planted = f"def later() -> None:\n    from {above}.anything import thing\n"
    assert upward_imports(f"{room}.planted", planted) == [f"{above}.anything"]
    assert upward_imports(f"{room}.planted", f"import {room}.other\n") == []


def test_what_is_shared_with_the_sandbox() -> None:
    """Workers share the pure packages and all of orga's workflow code across runs; the strict
    runner (what tests replay with) shares only the pure packages, so the workflow code is
    imported per run and checked as it runs."""
    assert sorted(m for m in PASSTHROUGH if first_party(m)) == [
        "orga.contracts",
        "orga.core",
        "orga.workflows",
    ]
    assert sorted(m for m in STRICT_PASSTHROUGH if first_party(m)) == [
        "orga.contracts",
        "orga.core",
    ]


MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "deque", "Counter"}


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in MUTABLE_CALLS
    )


@pytest.mark.parametrize("module", modules_of("orga.workflows"))
def test_workflow_code_keeps_no_state_of_its_own(module: str) -> None:
    """A module every run shares must not carry one run's state into another: no ``global``
    and no mutable module-level value except a ``Final`` constant (per-run state lives on the
    workflow instance)."""
    path = importlib.import_module(module).__file__
    assert path is not None
    tree = parse_python(Path(path))
    for node in ast.walk(tree):
        assert not isinstance(node, (ast.Global, ast.Nonlocal)), f"{module}:{node.lineno}"
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            continue
        if isinstance(node, ast.Assign) and _mutable(node.value):
            pytest.fail(f"{module}:{node.lineno} keeps a mutable value at module level")
        named_all = isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "__all__"
        if isinstance(node, ast.AnnAssign) and _mutable(node.value) and not named_all:
            assert "Final" in ast.unparse(node.annotation), (
                f"{module}:{node.lineno} keeps a mutable value at module level"
            )


# ---- the lint rule -----------------------------------------------------------------------

PROBE = textwrap.dedent(
    """
    from datetime import datetime


    def stamp() -> datetime:
        return datetime.now()
    """
).lstrip()


def ruff_on(source: str, as_path: str) -> subprocess.CompletedProcess[str]:
    """Lint ``source`` as if it were the file ``as_path`` (so that folder's rules apply)."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--stdin-filename", as_path, "-"],
        input=source,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "as_path", ["orga/workflows/probe.py", "orga/core/probe.py", "orga/contracts/probe.py"]
)
def test_the_lint_refuses_wall_clock_time_in_sandbox_side_code(as_path: str) -> None:
    result = ruff_on(PROBE, as_path)
    assert result.returncode == 1 and "TID251" in result.stdout, result.stdout + result.stderr
    assert "datetime.datetime.now" in result.stdout


def test_the_lint_allows_it_where_io_belongs() -> None:
    result = ruff_on(PROBE, "orga/activities/probe.py")
    assert result.returncode == 0, result.stdout + result.stderr


# ---- the sandbox itself ------------------------------------------------------------------


async def test_every_sandbox_side_module_imports_inside_the_sandbox(
    env: WorkflowEnvironment,
) -> None:
    """Module-level code of every shared module runs in a sandbox that passes nothing of orga
    through, so any restricted call at import time fails here."""
    probe = ROOT / "tests" / "sandbox_imports.py"
    assert probe.exists()
    strict = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            "rapidfuzz", "re2", "cryptography"
        )
    )
    from tests.sandbox_imports import ImportEverything

    # Building a worker validates each workflow: the sandbox imports its module (and with it
    # every module it names) and refuses restricted calls.
    Worker(
        env.client,
        task_queue=f"imports-{uuid.uuid4().hex[:8]}",
        workflows=[ImportEverything],
        workflow_runner=strict,
    )
    from tests.sandbox_imports import MODULES

    assert set(MODULES) == {m for p in SANDBOX_SIDE for m in modules_of(p)}


@pytest.mark.parametrize("strict", [False, True], ids=["worker", "strict"])
async def test_a_helper_that_reads_the_clock_fails_its_workflow(
    env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strict: bool
) -> None:
    """A helper that is not passed through is imported per run, so the sandbox checks what it
    does (the strict runner treats orga's workflow code so)."""
    package = tmp_path / "clockprobe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text(PROBE)
    (package / "flow.py").write_text(
        textwrap.dedent(
            """
            from temporalio import workflow

            from clockprobe.helper import stamp


            @workflow.defn(name="ClockProbe")
            class ClockProbe:
                @workflow.run
                async def run(self) -> str:
                    return stamp().isoformat()
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    flow = importlib.import_module("clockprobe.flow")
    queue = f"clock-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[flow.ClockProbe],
        workflow_runner=workflow_runner(strict=strict),
        workflow_failure_exception_types=[RestrictedWorkflowAccessError],
    ):
        with pytest.raises(WorkflowFailureError) as failure:
            await env.client.execute_workflow(
                "ClockProbe", id=f"clock-{uuid.uuid4().hex[:8]}", task_queue=queue
            )
    assert "datetime.datetime.now" in str(failure.value.cause)


# ---- every room says what it holds ---------------------------------------------------------

ROOMS = ("orga",)


def _packages() -> list[str]:
    found: list[str] = []
    for root in ROOMS:
        package = importlib.import_module(root)
        found.append(root)
        found += [
            info.name for info in pkgutil.walk_packages(package.__path__, f"{root}.") if info.ispkg
        ]
    return found


@pytest.mark.parametrize("package", _packages())
def test_every_package_docstring_lists_its_modules(package: str) -> None:
    """A reader opening a package's ``__init__`` learns every module it holds."""
    imported = importlib.import_module(package)
    doc = imported.__doc__ or ""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", doc))
    missing = [
        info.name
        for info in pkgutil.iter_modules(imported.__path__)
        if not info.name.startswith("_") and info.name not in words
    ]
    assert not missing, f"{package}'s docstring does not name {missing}"


@pytest.mark.parametrize(
    "path",
    sorted(
        p for room in ROOMS for p in (ROOT / room).rglob("*.py") if "__pycache__" not in p.parts
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_is_over_400_lines_without_a_reason(path: Path) -> None:
    text = path.read_text()
    if text.count("\n") <= 400:
        return
    tree = parse_python(text)
    doc = ast.get_docstring(tree) or ""
    assert "Over 400 lines:" in doc, (
        f"{path.relative_to(ROOT)} has {text.count(chr(10))} lines: split it, or say why not "
        "in its docstring ('Over 400 lines: …')"
    )


# ---- the architecture page walks the house as it is ---------------------------------------


def _rooms_on_the_page() -> dict[str, set[str]]:
    """Each ``### `orga/…/``` section of docs/guides/architecture.md and the names its table
    lists (modules, sub-rooms with a trailing ``/``, other files)."""
    page = (ROOT / "docs" / "guides" / "architecture.md").read_text()
    rooms: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in page.splitlines():
        heading = re.fullmatch(r"### `(orga(?:/[a-z_]+)*)/`", line)
        if heading:
            current = rooms.setdefault(heading.group(1), set())
        elif line.startswith("## "):
            current = None
        elif current is not None and (row := re.match(r"\| `([^`]+)` \|", line)):
            current.add(row.group(1))
    return rooms


def _rooms_in_the_tree() -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for init in sorted((ROOT / "orga").rglob("__init__.py")):
        if "__pycache__" in init.parts:
            continue
        room = init.parent
        names = {p.stem for p in room.glob("*.py") if p.name != "__init__.py"}
        names |= {p.name + "/" for p in room.iterdir() if (p / "__init__.py").exists()}
        names |= {p.name for p in room.glob("*.html")}
        rooms[str(room.relative_to(ROOT))] = names
    return rooms


def test_the_architecture_page_walks_every_room_as_it_is() -> None:
    """docs/guides/architecture.md names every room and every module in it, and nothing the
    tree does not hold: a module added, moved or renamed changes the page too."""
    page, tree = _rooms_on_the_page(), _rooms_in_the_tree()
    assert sorted(page) == sorted(tree), (
        f"rooms missing from the page: {sorted(set(tree) - set(page))}; "
        f"on the page but not in the tree: {sorted(set(page) - set(tree))}"
    )
    for room, names in tree.items():
        assert page[room] == names, (
            f"{room}: missing from the page {sorted(names - page[room])}, "
            f"on the page but not in the tree {sorted(page[room] - names)}"
        )
