"""``file_read`` and the paths the gate judges: a root the operator names, no way out of it,
no hidden files, and the policy sees the file that will be read."""

from __future__ import annotations

from pathlib import Path

import pytest

from orga.contracts.errors import ToolInputError, ToolPermissionError
from orga.contracts.inference import Usage
from orga.contracts.policy import PolicyAction, PolicyDecision, PolicyRequest
from orga.core.paths import PathRefused, normalise
from orga.gates.default import normalise_paths
from orga.runtime.settings import Settings
from orga.tools._builtin import builtin_tools
from orga.tools.sdk import Tool, ToolContext, ToolRegistry

CTX = ToolContext(call_id="c", workflow_id="w", idempotency_key="w/c")


def file_read(root: Path | None, hidden: bool = False) -> Tool | None:
    settings = Settings(file_root=root, file_read_hidden=hidden)
    found = {t.name: t for t in builtin_tools(settings)}
    return found.get("file_read")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    (base / "docs").mkdir(parents=True)
    (base / "docs" / "a.txt").write_text("hello é")
    (base / ".env").write_text("OPENAI_API_KEY=sk-secret")
    (base / ".orga").mkdir()
    (base / ".orga" / "temporal.db").write_text("every history")
    (tmp_path / "outside.txt").write_text("outside")
    (base / "link").symlink_to(tmp_path / "outside.txt")
    (base / "docs" / "env-link").symlink_to(base / ".env")
    (base / "private").mkdir()
    (base / "private" / "plan.md").write_text("the plan")
    (base / "docs" / "plan-link").symlink_to(base / "private" / "plan.md")
    return base


def test_no_root_no_file_read() -> None:
    assert file_read(None) is None
    assert (
        Settings.from_env({}).file_root is None
    )  # no default: the current directory holds secrets


@pytest.mark.parametrize(
    ("path", "normalised"),
    [
        ("docs/a.txt", "docs/a.txt"),
        ("docs/./a.txt", "docs/a.txt"),
        ("x/../docs/a.txt", "docs/a.txt"),
    ],
)
def test_normalise(path: str, normalised: str) -> None:
    assert normalise(path) == normalised


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("docs/../.env", "hidden"),
        (".orga/temporal.db", "hidden"),
        ("docs/../../outside.txt", "outside the root"),
        ("..", "outside the root"),
        ("/etc/passwd", "absolute"),
        ("C:/windows", "absolute"),
        ("docs\\a.txt", "backslash"),
        ("", "empty"),
        (".", "the root itself"),
    ],
)
def test_normalise_refuses(path: str, rule: str) -> None:
    with pytest.raises(PathRefused, match=rule):
        normalise(path)


async def test_the_tool_stays_inside_its_root(root: Path) -> None:
    read = file_read(root)
    assert read is not None
    assert await read.invoke({"path": "docs/a.txt", "max_chars": 100}, CTX) == "hello é"
    assert await read.invoke({"path": "docs/../docs/a.txt", "max_chars": 100}, CTX) == "hello é"
    for bad, why in [
        ("docs/../.env", "hidden"),
        ("../outside.txt", "outside the root"),
        (str(root.parent / "outside.txt"), "absolute"),
        ("link", "outside the readable root"),  # a symlink out
        ("docs/env-link", "hidden file"),  # a symlink to a dot-file inside
        # A symlink inside: a policy that allows docs/* judged docs/plan-link, not private/.
        ("docs/plan-link", "symlink to 'private/plan.md'"),
    ]:
        with pytest.raises(ToolPermissionError, match=why):
            await read.invoke({"path": bad, "max_chars": 100}, CTX)
    with pytest.raises(ToolInputError, match="no file"):
        await read.invoke({"path": "docs/none.txt", "max_chars": 100}, CTX)
    hidden = file_read(root, hidden=True)
    assert hidden is not None
    assert "sk-secret" in await hidden.invoke({"path": ".env", "max_chars": 100}, CTX)


def gate_request(path: str) -> tuple[PolicyAction, ToolRegistry]:
    read = file_read(Path("/nonexistent-root"))
    assert read is not None
    action = PolicyAction(
        kind="call_tool", call_id="c1", tool="file_read", arguments=f'{{"path": "{path}"}}'
    )
    return action, ToolRegistry([read])


def test_the_gate_judges_the_normalised_path() -> None:
    action, registry = gate_request("docs/../docs/guide.md")
    checked = normalise_paths(action, registry, allow_hidden=False)
    assert isinstance(checked, PolicyAction)
    assert checked.arguments == '{"path": "docs/guide.md"}'
    action, registry = gate_request("docs/../.env")
    refused = normalise_paths(action, registry, allow_hidden=False)
    assert isinstance(refused, PolicyDecision) and refused.decision == "deny"
    assert "hidden" in refused.reason and refused.policy_ids == ["default.path"]


async def test_the_policy_activity_runs_what_it_judged() -> None:
    """``docs/../.env`` matched ``path like "docs/*"`` before; now the policy sees ``.env``
    (and refuses it); an allowed path that was normalised runs normalised (a ``modify``)."""
    from orga.activities.policy import PolicyActivities

    action, registry = gate_request("docs/./guide.md")
    escape, _ = gate_request("docs/../.env")
    request = PolicyRequest(
        mode="default",
        agent_id="a",
        workflow_id="w",
        iteration=1,
        usage=Usage(),
        advertised=["file_read"],
        actions=[action, escape.model_copy(update={"call_id": "c2"})],
    )
    result = await PolicyActivities(registry=registry).evaluate_policy(request)
    normalised, refused = result.decisions
    assert (normalised.decision, normalised.arguments) == ("modify", '{"path": "docs/guide.md"}')
    assert refused.decision == "deny" and "hidden" in refused.reason


def test_what_the_worker_writes_is_its_own(tmp_path: Path) -> None:
    """The embedded store (payloads, blobs, the ledger): 0600 files in a 0700 directory."""
    import stat

    from orga.runtime.store import Store
    from orga.tools.ledger import Ledger
    from orga.worker.blobs import BlobStore

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    with Store(f"sqlite:///{tmp_path / 'data' / 'store.db'}") as store:
        reference = BlobStore(store).put("a tool's result")
        assert BlobStore(store).get(reference) == "a tool's result"
        assert Ledger(store).once("k", lambda db: "done") == "done"
        assert mode(tmp_path / "data") == 0o700
        for path in (tmp_path / "data").iterdir():  # the database and SQLite's -wal/-shm
            assert mode(path) == 0o600, path.name
    # A directory the operator chose keeps its mode (ORGA_STORE_URL=sqlite:////tmp/s.db must
    # not make /tmp private); what is created in it is still the worker's own.
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o1777)
    with Store(f"sqlite:///{shared / 'store.db'}") as store:
        Ledger(store).once("k", lambda db: "done")
    assert mode(shared) == 0o1777 and mode(shared / "store.db") == 0o600
    with Store(f"sqlite:///{shared / 'a' / 'b' / 'store.db'}"):
        assert mode(shared / "a") == mode(shared / "a" / "b") == 0o700
