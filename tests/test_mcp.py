"""MCP servers as tool sources, against real servers: the reference ``mcp-server-time`` (from
the package index, over stdio) and a streamable-HTTP server built with the SDK's ``MCPServer``
(FastMCP) inside the test."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from temporalio.testing import WorkflowEnvironment

from orga.contracts.errors import InvalidConfig
from orga.contracts.state import LoopState
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.mcp.hub import (
    McpHub,
    load_mcp_config,
    open_mcp,
    render_result,
    tool_name,
)
from tests.harness import TEST_STORE, Harness, scripted_settings
from tests.helpers import (
    ORGA,
    POLICY_EXAMPLES,
    TIME,
    children,
    conversation,
    eventually,
    failure,
    http_server,
    on,
    orga,
    servers_file,
    serving,
    tool_results,
)
from tests.sample_tools import transfer


def time_server_pids() -> set[int]:
    """The ``mcp-server-time`` processes this test process started."""
    return children(os.getpid(), b"mcp-server-time")


# ---- pure: names, results, the file ----------------------------------------------------------


def test_names_providers_accept() -> None:
    assert tool_name("time", "get_current_time") == "time__get_current_time"
    assert tool_name("gh", "repos.list/all") == "gh__repos_list_all"
    long = tool_name("srv", "x" * 100)
    assert len(long) == 64 and long.startswith("srv__xxx")
    assert long != tool_name("srv", "x" * 99)  # a digest of the original keeps them apart


def test_results_are_text_and_nothing_is_dropped_silently() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a chart"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.ResourceLink(type="resource_link", name="report", uri="file:///r.pdf"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="mem://note", text="the note"),
            ),
        ],
        structured_content={"points": 3},
    )
    assert render_result(result).splitlines() == [
        "a chart",
        "[image (image/png, about 100 bytes): not shown]",
        "[resource link report <file:///r.pdf>]",
        "[resource <mem://note>]",
        "the note",
        '{"points": 3}',
    ]
    same = types.CallToolResult(
        content=[types.TextContent(type="text", text='{"points": 3}')],
        structured_content={"points": 3},
    )
    assert render_result(same) == '{"points": 3}'  # structured content given as text: once


def test_the_servers_file_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = load_mcp_config(POLICY_EXAMPLES.parent / "mcp.toml")  # the README's example holds
    assert shipped.servers["time"].transport == "stdio"
    assert shipped.servers["github"].transport == "http" and not shipped.servers["github"].required
    both = servers_file(tmp_path, '[servers.x]\ncommand = "a"\nurl = "http://h/mcp"\n')
    with pytest.raises(InvalidConfig, match=r"either command .* or url"):
        load_mcp_config(both)
    bad_name = servers_file(tmp_path, '[servers."my__srv"]\ncommand = "a"\n')
    with pytest.raises(InvalidConfig, match="server name 'my__srv' is not allowed"):
        load_mcp_config(bad_name)
    with pytest.raises(InvalidConfig, match="is not valid TOML"):
        load_mcp_config(servers_file(tmp_path, "[servers\n"))
    monkeypatch.delenv("ORGA_TEST_NO_SUCH_TOKEN", raising=False)
    secret = servers_file(
        tmp_path,
        '[servers.gh]\nurl = "http://h/mcp"\n'
        'headers = { Authorization = "Bearer ${ORGA_TEST_NO_SUCH_TOKEN}" }\n',
    )
    with pytest.raises(InvalidConfig, match=r"needs \$\{ORGA_TEST_NO_SUCH_TOKEN\}"):
        McpHub(load_mcp_config(secret))


async def test_a_server_down_at_start(tmp_path: Path) -> None:
    down = servers_file(tmp_path, '[servers.ghost]\ncommand = "/nonexistent/mcp-ghost"\n')
    with pytest.raises(InvalidConfig) as refused:
        async with open_mcp(down):
            pass
    assert "MCP server 'ghost' (/nonexistent/mcp-ghost) is down" in str(refused.value)
    assert "required = false" in str(refused.value)
    optional = servers_file(
        tmp_path,
        '[servers.ghost]\ncommand = "/nonexistent/mcp-ghost"\nrequired = false\n'
        "connect_timeout = 1\n",
    )
    async with open_mcp(optional) as hub:
        assert hub is not None and hub.current() == {}
        why = hub.absent("ghost__haunt")
        assert why is not None and "MCP server 'ghost' has not connected yet" in why


# ---- stdio: the reference time server ----------------------------------------------------


async def test_a_loop_uses_the_reference_time_server(harness: Harness, tmp_path: Path) -> None:
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("time__get_current_time", {"timezone": "Europe/Paris"}),
                    ("time__get_current_time", {"timezone": "Nowhere/City"}),
                    ("time__get_current_time", {"zone": "Europe/Paris"}),
                ]
            ),
            Turn(text="It is evening in Paris."),
        ]
    )
    settings = scripted_settings(harness.model, mcp_servers_file=servers_file(tmp_path, TIME))
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "What time is it in Paris?",
            model=model,
            tools=["time__get_current_time", "time__convert_time"],
        )
        result = await handle.result()
        results = tool_results(await conversation(handle))
    assert result.output == "It is evening in Paris."
    paris, nowhere, wrong = results
    assert paris.status == "ok" and json.loads(paris.content)["timezone"] == "Europe/Paris"
    assert nowhere.status == "failed" and "Invalid timezone" in nowhere.content
    assert wrong.status == "denied" and "'timezone' is a required property" in wrong.content
    offered = harness.model.requests_for(model)[0].body["tools"]
    by_name = {t["function"]["name"]: t["function"] for t in offered}
    assert set(by_name) == {"time__get_current_time", "time__convert_time"}
    get_time = by_name["time__get_current_time"]
    assert "Get current time in a specific timezone" in get_time["description"]
    assert get_time["parameters"]["required"] == ["timezone"]


async def test_a_server_killed_mid_loop_is_restarted(harness: Harness, tmp_path: Path) -> None:
    killed: list[int] = []

    def kill_then_ask(request: RecordedRequest) -> Turn:
        for pid in time_server_pids():  # the server dies between two calls of the loop
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return Turn(tool_calls=[("time__get_current_time", {"timezone": "Asia/Tokyo"})])

    model = harness.new_model(
        [
            Turn(tool_calls=[("time__get_current_time", {"timezone": "Europe/Paris"})]),
            kill_then_ask,
            Turn(text="Paris, then Tokyo."),
        ]
    )
    settings = scripted_settings(harness.model, mcp_servers_file=servers_file(tmp_path, TIME))
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "Paris and Tokyo?", model=model, tools=["time__get_current_time"]
        )
        result = await handle.result()
        results = tool_results(await conversation(handle))
        restarted = time_server_pids()
    assert result.output == "Paris, then Tokyo."
    assert len(killed) == 1 and restarted and killed[0] not in restarted
    assert not time_server_pids()  # the worker stopped its server when it stopped
    assert [r.status for r in results] == ["ok", "ok"]
    assert json.loads(results[1].content)["timezone"] == "Asia/Tokyo"


async def test_a_cedar_forbid_on_one_mcp_tool(harness: Harness, tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "schema.cedarschema.json").write_text(
        (POLICY_EXAMPLES / "schema.cedarschema.json").read_text()
    )
    (policies / "mcp.cedar").write_text(
        'permit (principal, action, resource);\n\n@id("no-conversions")\n'
        '@reason("time conversions are not for this agent")\n'
        'forbid (principal, action == Action::"call_tool", '
        'resource == Tool::"time__convert_time");\n'
    )
    model = harness.new_model(
        [
            Turn(
                tool_calls=[
                    ("time__get_current_time", {"timezone": "UTC"}),
                    (
                        "time__convert_time",
                        {
                            "source_timezone": "UTC",
                            "time": "12:00",
                            "target_timezone": "Asia/Tokyo",
                        },
                    ),
                ]
            ),
            Turn(text="done"),
        ]
    )
    settings = scripted_settings(
        harness.model,
        mcp_servers_file=servers_file(tmp_path, TIME),
        policy_dir=policies,
    )
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "What time is it?",
            model=model,
            tools=["time__get_current_time", "time__convert_time"],
            policy="cedar",
        )
        await handle.result()
        results = tool_results(await conversation(handle))
        state = await handle.query("state", result_type=LoopState)
    assert [r.status for r in results] == ["ok", "denied"]
    assert "time conversions are not for this agent" in results[1].content
    assert state.tool_call_count == 2


async def test_agent_globs_and_pre_hydration_name_mcp_tools(
    harness: Harness, tmp_path: Path
) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text('[agents.clock]\ntools = ["time__*"]\n\n[agents.other]\ntools = ["add"]\n')
    model = harness.new_model([Turn(text="It is known.")])
    settings = scripted_settings(
        harness.model, mcp_servers_file=servers_file(tmp_path, TIME), agents_file=agents
    )
    async with harness.worker(settings=settings):
        handle = await harness.start(
            "What time is it in Europe/Vienna?",
            model=model,
            agent_id="clock",
            tools=["time__get_current_time"],
            pre_hydration={
                "patterns": [{"ref_type": "zone", "pattern": r"\b[A-Z][a-z]+/[A-Z][a-z_]+\b"}],
                "resolvers": {"zone": {"tool": "time__get_current_time", "argument": "timezone"}},
            },
        )
        await handle.result()
        refused = await harness.start(
            "time?", model=model, agent_id="other", tools=["time__get_current_time"]
        )

        error = await failure(refused)
    first = harness.model.requests_for(model)[0]
    seen = " ".join(str(m.get("content")) for m in first.body["messages"])
    assert "Europe/Vienna" in seen and '"datetime"' in seen  # resolved before the first call
    assert error.type == "InvalidConfig" and "time__get_current_time" in error.message


# ---- streamable HTTP: a server built with the SDK, in the test ----------------------------


def demo_server() -> MCPServer:
    server = MCPServer("demo")

    @server.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @server.tool()
    def chart() -> list[types.ContentBlock]:
        """A chart."""
        png = base64.b64encode(b"\x89PNG" + b"\0" * 60).decode()
        return [
            types.TextContent(type="text", text="sales went up"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
        ]

    @server.tool()
    def old_report() -> str:
        """The old report."""
        return "old"

    @server.tool()
    async def upgrade(ctx: Context) -> str:
        """Replace the old report with the new one."""
        server.remove_tool("old_report")
        server.add_tool(lambda: "new", name="new_report", description="The new report.")
        await ctx.notify_tools_changed()
        return "upgraded"

    return server


async def test_a_streamable_http_server_and_its_changing_tools(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORGA_TEST_MCP_TOKEN", "tok-5e3a")
    state: dict[str, Any] = {}

    def when_refreshed(request: RecordedRequest) -> Turn:
        refreshed: Callable[[], bool] = state["refreshed"]
        for _ in range(200):  # the notification arrives on its own stream: wait for it
            if refreshed():
                break
            time.sleep(0.05)
        return Turn(tool_calls=[("demo__old_report", {}), ("demo__new_report", {})])

    model = harness.new_model(
        [
            Turn(tool_calls=[("demo__echo", {"text": "hi"}), ("demo__chart", {})]),
            Turn(tool_calls=[("demo__upgrade", {})]),
            when_refreshed,
            Turn(text="done"),
        ]
    )
    async with http_server(demo_server(), "tok-5e3a") as url:
        path = servers_file(
            tmp_path,
            f'[servers.demo]\nurl = "{url}"\n'
            'headers = { Authorization = "Bearer ${ORGA_TEST_MCP_TOKEN}" }\n',
        )
        state["refreshed"] = lambda: (
            harness.mcp is not None and "demo__new_report" in harness.mcp.current()
        )
        settings = scripted_settings(harness.model, mcp_servers_file=path)
        async with harness.worker(settings=settings):
            handle = await harness.start(
                "go",
                model=model,
                tools=["demo__echo", "demo__chart", "demo__upgrade", "demo__old_report"],
            )
            result = await handle.result()
            results = tool_results(await conversation(handle))
    assert result.output == "done"
    echo, chart, upgrade, old, new = results
    assert (echo.status, echo.content) == ("ok", "hi")
    assert chart.content == "sales went up\n[image (image/png, about 64 bytes): not shown]"
    assert upgrade.content == "upgraded"
    assert old.status == "denied"  # the gate found it gone, and says why
    assert "tool 'demo__old_report' is no longer offered by MCP server 'demo'" in old.content
    assert new.status == "denied" and "not available" in new.content  # never advertised


# ---- orga as an MCP server, driven by the SDK's own client ---------------------------------


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, render_result(result)
    assert result.structured_content is not None
    return result.structured_content


async def test_orga_mcp_drives_a_loop_over_stdio(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    model = harness.new_model(
        [Turn(tool_calls=[("transfer", {"amount": 12, "to": "ann"})]), Turn(text="paid ann")]
    )
    variables = {
        **on(env, harness),
        "ORGA_STORE_URL": TEST_STORE.url,
        "ORGA_APPROVER": "mcp-tester",
        "ORGA_UI_URL": "http://ui.example",
    }
    server = StdioServerParameters(command=ORGA, args=["mcp", "--decisions"], env=variables)

    async def person(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"confirm": True, "reason": "expected"})

    async with (
        harness.worker(tools=[transfer]),
        Client(server, elicitation_callback=person) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {
            "start_loop",
            "loop_result",
            "loop_state",
            "loop_journal",
            "inbox",
            "approve",
            "deny",
        }
        started = structured(
            await client.call_tool(
                "start_loop",
                {
                    "prompt": "pay ann 12",
                    "tools": ["transfer"],
                    "provider": "openai",
                    "model": model,
                },
            )
        )
        workflow_id = started["workflow_id"]
        harness.handles.append(harness.client.get_workflow_handle(workflow_id))  # replayed too
        assert started["web_ui"].startswith("http://ui.example/") and started["status"] == "running"

        async def waiting() -> dict[str, Any] | None:
            items = structured(await client.call_tool("inbox", {}))["items"]
            ours = [i for i in items if i["workflow_id"] == workflow_id]
            return ours[0] if ours else None

        item = await eventually(waiting, "the approval in the inbox over MCP")
        assert (item["kind"], item["tool"]) == ("approval", "transfer")
        state = structured(await client.call_tool("loop_state", {"workflow_id": workflow_id}))
        assert state["status"] == "awaiting_approval"
        decided = structured(
            await client.call_tool(
                "approve",
                {"workflow_id": workflow_id, "call_id": item["item_id"], "reason": "expected"},
            )
        )
        assert (decided["approved"], decided["approver"]) == (True, "mcp-tester")
        assert (decided["source"], decided["reason"]) == ("mcp-elicitation", "expected")
        ended = structured(
            await client.call_tool("loop_result", {"workflow_id": workflow_id, "wait_seconds": 60})
        )
        assert (ended["status"], ended["output"]) == ("completed", "paid ann")
        journal = structured(await client.call_tool("loop_journal", {"workflow_id": workflow_id}))
        kinds = [e["kind"] for e in journal["entries"]]
        assert "ApprovalDecided" in kinds and kinds[-1] == "Terminated"
        unknown = await client.call_tool("loop_state", {"workflow_id": "loop-nope"})
        assert unknown.is_error and "loop-nope" in render_result(unknown)


async def test_orga_mcp_over_http_wants_a_token_beyond_this_machine(
    env: WorkflowEnvironment, harness: Harness
) -> None:
    variables = {**on(env, harness), "ORGA_APPROVER": "mcp-tester", "ORGA_TEST_TOKEN": "t0k"}
    code, _, err = await orga("mcp", "--http", "--host", "0.0.0.0", env=variables)
    assert code == 2 and "--token-env" in err
    async with serving(
        "mcp",
        "--http",
        "--port",
        "0",
        "--token-env",
        "ORGA_TEST_TOKEN",
        env=variables,
        announce="orga MCP server on",
    ) as url:
        denied = await asyncio.to_thread(_status_without_token, url)
        assert denied == 401
        # Patient: a workflow another test left waiting without a worker costs the inbox up
        # to desk.INBOX_QUERY_TIMEOUT (it is listed as unreadable).
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer t0k"}, timeout=30)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            inbox = structured(await client.call_tool("inbox", {}))
    assert isinstance(inbox["items"], list)


def _status_without_token(url: str) -> int:
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=10)
    except urllib.error.HTTPError as error:
        return error.code
    return 200
