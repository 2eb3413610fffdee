"""Inputs several test modules share: scripted model turns, agents files, task steps, MCP
servers files, the example policies and provider settings."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from orga.activities.summary import INSTRUCTIONS
from orga.gates.cedar import SCHEMA_FILE
from orga.runtime.settings import ProviderSettings
from orga.scripted.server import RecordedRequest, Turn
from orga.tools.sdk import tool

POLICY_EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples" / "policies"
"""The example policy sets (Cedar, OPA) the README points to."""


# ---- model turns ------------------------------------------------------------------------------


def ask(tool_name: str, query: str = "q") -> Turn:
    """A turn that calls ``tool_name`` with ``{"query": query}``."""
    return Turn(tool_calls=[(tool_name, {"query": query})])


def verdict(value: str, feedback: str = "") -> Turn:
    """A model critic's turn: its structured verdict."""
    return Turn(tool_calls=[("submit_review", {"verdict": value, "feedback": feedback})])


# ---- agents files -----------------------------------------------------------------------------


def critic_agents(tmp_path: Path, writer: str, critic: str) -> Path:
    """An agents file: ``writer`` on model ``writer``, ``critic`` on model ``critic``."""
    path = tmp_path / "agents.toml"
    path.write_text(
        f'[agents.writer]\nmodel = "{writer}"\n\n'
        f'[agents.critic]\ndescription = "Checks answers"\nmodel = "{critic}"\n'
    )
    return path


def agents_file(tmp_path: Path, models: dict[str, str], **lead: Any) -> Path:
    """``lead`` may delegate to ``research`` and ``writer`` (and hand on ``add``: a child is
    never wider than its parent); each agent has its own model."""
    extra = "".join(f"{key} = {value!r}\n" for key, value in lead.items())
    path = tmp_path / "agents.toml"
    path.write_text(
        f"""
[agents.lead]
description = "Plans and hands out work"
tools = ["add"]
delegates = ["research", "writer"]
model = "{models["lead"]}"
{extra}
[agents.research]
description = "Finds facts"
tools = ["add"]
model = "{models["research"]}"
max_total_tokens = 50_000

[agents.writer]
description = "Writes prose"
model = "{models["writer"]}"
"""
    )
    return path


# ---- a handbook read page by page, and its summariser (anchored_summary loops) ----------------

PAGES = 30
"""Pages of the handbook."""
FACT = "the vault code is 4711"
"""What only page 1 says."""
SUMMARY_USAGE = (300, 40)
"""Input and output tokens every scripted summary reports."""


@tool
def read_page(page: int) -> str:
    """Read one page of the handbook.

    Args:
        page: the page number, from 1.
    """
    if page == 1:
        return f"Page 1: {FACT}."
    return f"Page {page}: " + "filler about nothing in particular. " * 30


def is_summariser(request: RecordedRequest) -> bool:
    """Whether ``request`` is a ``summarise_context`` call (not the loop's own)."""
    return request.body["messages"][0]["content"] == INSTRUCTIONS


def summarise(request: RecordedRequest) -> Turn:
    """A scripted summariser: keeps the vault code and the pages it has seen (its previous
    summary is in its prompt, so facts carry over)."""
    prompt = request.user_texts()[-1]
    pages = sorted({int(p) for p in re.findall(r"[Pp]ages? (\d+)", prompt)})
    facts = sorted(set(re.findall(r"the vault code is \d+", prompt)))
    text = f"Read pages {', '.join(map(str, pages))}. " + "; ".join(facts)
    return Turn(text=text, input_tokens=SUMMARY_USAGE[0], output_tokens=SUMMARY_USAGE[1])


def reader(pages: int = PAGES) -> Any:
    """The loop's model: reads ``pages`` pages one per turn, then answers from what it sees."""
    calls = 0

    def step(request: RecordedRequest) -> Turn:
        nonlocal calls
        if is_summariser(request):
            return summarise(request)
        calls += 1
        if calls <= pages:
            return Turn(tool_calls=[("read_page", {"page": calls})])
        seen = "\n".join(str(m.get("content")) for m in request.body["messages"])
        code = re.search(r"the vault code is (\d+)", seen)
        return Turn(text=f"The vault code is {code.group(1)}." if code else "I do not know.")

    return step


# ---- task steps ---------------------------------------------------------------------------------

SHOP_STEPS: list[dict[str, Any]] = [
    {
        "id": "reserve",
        "action": {"kind": "tool", "tool": "reserve", "arguments": {"item": "lamp"}},
        "compensation": {"tool": "release", "arguments": {"reservation": "${result.reservation}"}},
    },
    {
        "id": "charge",
        "action": {"kind": "tool", "tool": "charge", "arguments": {"amount": 4200}},
        "compensation": {"tool": "refund", "arguments": {"charge_id": "${result}"}},
        "depends_on": ["reserve"],
    },
    {
        "id": "notify",
        "action": {"kind": "tool", "tool": "notify", "arguments": {"message": "done"}},
        "depends_on": ["charge"],
    },
]
"""Reserve, charge, notify (``sample_tools.Shop``), the first two undone in reverse."""


def charge_step(tool_name: str, **arguments: Any) -> dict[str, Any]:
    """A ``charge`` step on ``tool_name`` (``sample_tools.Bank``), refunded by its receipt."""
    return {
        "id": "charge",
        "action": {"kind": "tool", "tool": tool_name, "arguments": arguments},
        "compensation": {"tool": "refund", "arguments": {"receipt": "${result}"}},
    }


DECLINE = {
    "id": "check",
    "action": {"kind": "tool", "tool": "decline", "arguments": {"reason": "card declined"}},
    "parallel": True,
}
"""A parallel step that fails (``sample_tools.Bank``'s ``decline``)."""

ADDS = 20
"""Turns of ``add`` after the payment: enough events for at least one continue-as-new."""


# ---- MCP servers --------------------------------------------------------------------------------

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
"""The reference MCP server ``mcp-server-time`` (stdio), installed with the dev dependencies."""

TIME = f"""
[servers.time]
command = "{TIME_SERVER}"
args = ["--local-timezone", "UTC"]
"""
"""An MCP servers file with the time server."""


def servers_file(tmp_path: Path, text: str) -> Path:
    """An MCP servers file (``ORGA_MCP_SERVERS``) that says ``text``."""
    path = tmp_path / "mcp.toml"
    path.write_text(text)
    return path


# ---- providers ----------------------------------------------------------------------------------

PROVIDER_KEY = "sk-SECRET-abcdef1234567890"
"""The key of ``provider_settings`` (tests prove it never leaks)."""


def provider_settings(
    name: Any = "openai", *, official: bool = False, key: str | None = PROVIDER_KEY
) -> ProviderSettings:
    """Settings of a provider at an address no request reaches (for mock transports)."""
    return ProviderSettings(
        name=name,
        base_url="https://provider.test/v1",
        api_key=SecretStr(key) if key else None,
        api_key_env=f"{str(name).upper()}_API_KEY",
        default_model="m",
        official=official,
    )


def decisions_schema() -> str:
    """The examples' schema, with transfer's arguments and the approve / deny actions."""
    schema = json.loads((POLICY_EXAMPLES / SCHEMA_FILE).read_text())
    [space] = schema.values()
    space["commonTypes"]["Arguments"]["attributes"] |= {
        "amount": {"type": "Long", "required": False},
        "to": {"type": "String", "required": False},
    }
    space["entityTypes"] |= {"Approver": {"memberOfTypes": ["Group"]}, "Group": {}, "Call": {}}
    context = {
        "type": "Record",
        "attributes": {
            "tool": {"type": "String"},
            "agent": {"type": "String"},
            "arguments": {"type": "Arguments"},
        },
    }
    for verb in ("approve", "deny"):
        space["actions"][verb] = {
            "appliesTo": {
                "principalTypes": ["Approver"],
                "resourceTypes": ["Call"],
                "context": context,
            }
        }
    return json.dumps(schema)


PEOPLE_DECIDE = """
@id("answers")
permit (principal, action == Action::"respond", resource);

@id("transfers-need-a-person")
@approval("required")
permit (principal, action == Action::"call_tool", resource == Tool::"transfer");

@id("people-decide")
permit (principal, action in [Action::"approve", Action::"deny"], resource);
"""
"""Transfers wait for a person, and people may decide (with ``decisions_schema``)."""
WHO_DECIDES = (
    PEOPLE_DECIDE
    + """
@id("big-transfers-need-finance")
@reason("transfers over 100000 need an approver in finance")
forbid (principal, action == Action::"approve", resource)
when { context.tool == "transfer" && context.arguments has amount
       && context.arguments.amount > 100000 }
unless { principal in Group::"finance" };
"""
)
"""A policy set that says who may approve transfers (with ``decisions_schema``)."""


def decision_policies(directory: Path, policy: str = WHO_DECIDES) -> Path:
    """A Cedar policy directory of ``policy`` over ``decisions_schema``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "people.cedar").write_text(policy)
    (directory / SCHEMA_FILE).write_text(decisions_schema())
    return directory


_ANSWER_SCHEMA = {
    "": {
        "entityTypes": {"Agent": {}, "Tool": {}, "Answer": {}},
        "actions": {
            "call_tool": {"appliesTo": {"principalTypes": ["Agent"], "resourceTypes": ["Tool"]}},
            "respond": {
                "appliesTo": {
                    "principalTypes": ["Agent"],
                    "resourceTypes": ["Answer"],
                    "context": {
                        "type": "Record",
                        "attributes": {
                            "iteration": {"type": "Long"},
                            "tokens_used": {"type": "Long"},
                            "answer": {
                                "type": "Record",
                                "required": False,
                                "attributes": {
                                    "amount": {"type": "Long", "required": False},
                                },
                            },
                        },
                    },
                }
            },
        },
    }
}
_BIG_REFUNDS = """
permit (principal, action, resource);

@id("big-refunds")
@reason("a refund over 1000 needs a person: offer at most 1000")
forbid (principal, action == Action::"respond", resource)
when { context has answer && context.answer has amount && context.answer.amount > 1000 };
"""


def refund_policies(directory: Path) -> Path:
    """A Cedar policy set whose final-answer gate judges a typed answer's ``amount``: over 1000
    is denied (``big-refunds``)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "schema.cedarschema.json").write_text(json.dumps(_ANSWER_SCHEMA))
    (directory / "refunds.cedar").write_text(_BIG_REFUNDS)
    return directory
