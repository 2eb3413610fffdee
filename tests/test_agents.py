"""The worker's agents: loading the file, and a config that may only narrow its agent (pure)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from orga.contracts.agents import AgentSpec
from orga.contracts.config import Limits, LoopConfig
from orga.contracts.errors import InvalidConfig
from orga.contracts.vocabulary import PolicyMode, ProviderName
from orga.core.agents import Offer, choose_policy, offers_delegation, resolve_loop
from orga.worker.agent_registry import AgentRegistry

MODELS: dict[ProviderName, str] = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


def offer(*engines: PolicyMode, permissive: bool = False) -> Offer:
    return Offer(
        engines=frozenset({"default", *engines}),
        allow_permissive=permissive,
        default_provider="openai",
        default_model=lambda provider: MODELS[provider],
        origin="ORGA_AGENTS=agents.toml",
    )


SUPPORT = AgentSpec(
    id="support",
    tools=["file_read", "kb_*"],
    policy="cedar",
    max_iterations=10,
    timeout=timedelta(minutes=2),
    providers=["openai"],
    models=["gpt-4o*"],
)


def test_a_config_within_the_agent_gets_the_agent_ceilings_as_defaults() -> None:
    resolved = resolve_loop(SUPPORT, LoopConfig(tools=["kb_search"]), ["kb_search"], offer("cedar"))
    assert resolved.policy == "cedar"  # the floor
    assert resolved.limits == Limits(
        max_iterations=10,  # the default 25 capped by the ceiling
        max_total_tokens=100_000,
        timeout=timedelta(minutes=2),
        max_concurrent_tools=5,
    )
    assert (resolved.provider, resolved.model) == ("openai", "gpt-4o-mini")
    narrower = LoopConfig(tools=["kb_search"], max_iterations=3, timeout=timedelta(seconds=30))
    limits = resolve_loop(SUPPORT, narrower, ["kb_search"], offer("cedar")).limits
    assert (limits.max_iterations, limits.timeout) == (3, timedelta(seconds=30))


LEAD = AgentSpec(id="lead", tools=["plus", "wire_money"], delegates=["research"])


@pytest.mark.parametrize(
    ("config", "offered"),
    [
        (LoopConfig(), True),  # names no tools: keeps its agent's delegates
        (LoopConfig(tools=["plus"]), False),  # narrowed without delegate: takes it away
        (LoopConfig(tools=["plus", "delegate"]), True),
        (LoopConfig(delegation_depth=1), False),  # a child: its tools are all it may use
        (LoopConfig(tools=["delegate"], delegation_depth=1), True),
        (LoopConfig(tools=["delegate"], delegation_depth=2), False),  # at the depth
    ],
)
def test_delegate_is_offered_only_where_the_loop_s_tools_include_it(
    config: LoopConfig, offered: bool
) -> None:
    assert offers_delegation(LEAD, config, 2) is offered
    assert not offers_delegation(SUPPORT, config, 2)  # no delegates: never


def test_an_agent_s_delegates_let_it_name_delegate() -> None:
    config = LoopConfig(tools=["plus", "delegate"])
    resolve_loop(LEAD, config, config.tools, offer())  # its globs do not list it
    with pytest.raises(InvalidConfig, match=r"may not use: \['delegate'\]"):
        resolve_loop(SUPPORT, LoopConfig(tools=["delegate"]), ["delegate"], offer("cedar"))


@pytest.mark.parametrize(
    ("config", "tools", "message"),
    [
        (LoopConfig(tools=["web_fetch"]), ["web_fetch"], "may not use: ['web_fetch']"),
        (LoopConfig(max_iterations=50), [], "config.max_iterations=50 is above the ceiling of "),
        (LoopConfig(timeout=timedelta(hours=1)), [], "config.timeout=3600 s is above"),
        (LoopConfig(policy="default"), [], "policy 'default' is weaker than 'cedar'"),
        (LoopConfig(policy="opa"), [], "policy 'opa' is another engine than 'cedar'"),
        (LoopConfig(policy="permissive"), [], "ORGA_ALLOW_PERMISSIVE=1"),
        (LoopConfig(provider="anthropic"), [], "provider 'anthropic' is not one agent 'support'"),
        (LoopConfig(model="o1-preview"), [], "model 'o1-preview' is not one agent 'support'"),
    ],
)
def test_asking_for_more_than_the_agent_allows_is_refused(
    config: LoopConfig, tools: list[str], message: str
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        resolve_loop(SUPPORT, config, tools, offer("cedar", "opa"))
    assert message in refused.value.message
    assert "agents.toml" in refused.value.message or "ALLOW_PERMISSIVE" in refused.value.message


def test_policy_choices() -> None:
    default = AgentSpec(id="d", policy="default")
    assert choose_policy(default, None, offer()) == "default"
    assert choose_policy(default, "cedar", offer("cedar")) == "cedar"  # stronger is fine
    with pytest.raises(InvalidConfig, match="'cedar' is not configured on this worker"):
        choose_policy(default, "cedar", offer())
    assert choose_policy(default, "permissive", offer(permissive=True)) == "permissive"
    with pytest.raises(InvalidConfig, match="weaker than 'cedar'"):
        choose_policy(SUPPORT, "permissive", offer("cedar", permissive=True))


def test_the_implicit_agent_keeps_todays_behaviour() -> None:
    registry = AgentRegistry.implicit()
    agent = registry.get("anything-the-client-says")
    resolved = resolve_loop(agent, LoopConfig(tools=["web_fetch", "add"]), ["web_fetch"], offer())
    assert resolved.policy == "default" and resolved.limits == Limits()
    with pytest.raises(InvalidConfig, match="weaker than 'cedar'"):
        choose_policy(AgentRegistry.implicit("cedar").get("x"), "default", offer("cedar"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(text)
    return path


def test_the_agents_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [agents.support]
        description = "Answers from the docs"
        tools = ["file_read"]
        policy = "cedar"
        max_total_tokens = 20_000
        timeout = "PT10M"
        system_prompt = "Answer from the documentation only."

        [agents.ops]
        tools = ["*"]
        """,
    )
    registry = AgentRegistry.load(path, frozenset({"default", "cedar"}))
    assert registry.ids() == ["ops", "support"]
    support = registry.get("support")
    assert (support.policy, support.max_total_tokens, support.timeout) == (
        "cedar",
        20_000,
        timedelta(minutes=10),
    )
    with pytest.raises(InvalidConfig, match=r"there is no agent 'sales' .*\['ops', 'support'\]"):
        registry.get("sales")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[agents.a]\ntools = [", "is not TOML"),
        ("[agents.a]\ntool = ['x']", "agent 'a' is invalid: tool: Extra inputs"),
        ("[agents.a]\npolicy = 'permissive'", "agent 'a' is invalid: policy"),
        ("[agents.a]\npolicy = 'opa'", "which this worker has not configured"),
        ("[agent.a]\ntools = []", "[agents.<id>] tables"),
        ("", "[agents.<id>] tables"),
    ],
)
def test_a_bad_agents_file_stops_the_worker(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        AgentRegistry.load(write(tmp_path, text), frozenset({"default", "cedar"}))
    assert message in refused.value.message


def test_the_example_agents_file_loads() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "agents.toml"
    registry = AgentRegistry.load(example, frozenset({"default"}))
    assert registry.ids() == ["demo", "lead", "research", "shop", "support"]
    assert registry.get("lead").delegates == ["research"]
