"""Settings from the environment; keys stay secret in reprs."""

from __future__ import annotations

from pathlib import Path

import pytest

from orga.contracts.errors import InvalidConfig
from orga.runtime.settings import Settings


def test_defaults() -> None:
    s = Settings.from_env({})
    assert (s.temporal_address, s.temporal_namespace, s.task_queue) == (
        "localhost:7233",
        "default",
        "orga",
    )
    assert s.default_provider_name() == "openrouter"
    assert s.provider(None).base_url == "https://openrouter.ai/api/v1"


def test_provider_choice_and_keys_are_hidden() -> None:
    s = Settings.from_env(
        {
            "ANTHROPIC_API_KEY": "sk-ant-hidden-123",
            "ANTHROPIC_MODEL": "claude-x",
            "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/",
            "ORGA_TOOL_MODULES": "a.b, c",
            "TEMPORAL_ADDRESS": "temporal:7233",
        }
    )
    assert s.default_provider_name() == "openai"  # a local base URL needs no key
    anthropic = s.provider("anthropic")
    assert anthropic.default_model == "claude-x"
    assert "sk-ant-hidden-123" not in repr(s) and "sk-ant-hidden-123" not in s.model_dump_json()
    assert s.provider("openai").base_url == "http://127.0.0.1:8000/v1"
    assert not s.provider("openai").official
    assert s.tool_modules == ["a.b", "c"]
    assert s.temporal_address == "temporal:7233"
    assert Settings.from_env({"ORGA_PROVIDER": "anthropic"}).default_provider_name() == "anthropic"


def test_bad_provider() -> None:
    with pytest.raises(InvalidConfig, match="ORGA_PROVIDER='gpt'"):
        Settings.from_env({"ORGA_PROVIDER": "gpt"})


def test_the_trust_settings_the_worker_reads(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "ORGA_AGENTS": str(tmp_path / "agents.toml"),
            "ORGA_POLICY": "cedar",
            "ORGA_ALLOW_PERMISSIVE": "1",
            "ORGA_EGRESS_ALLOW": "127.0.0.1, 10.0.0.0/8,intranet.example",
            "ORGA_FILE_ROOT": str(tmp_path),
            "ORGA_FILE_READ_HIDDEN": "1",
        }
    )
    assert settings.agents_file == tmp_path / "agents.toml"
    assert settings.policy_floor == "cedar"
    assert settings.allow_permissive and settings.file_read_hidden
    assert settings.egress_allow == ["127.0.0.1", "10.0.0.0/8", "intranet.example"]
    assert settings.file_root == tmp_path
    safe = Settings.from_env({})
    assert (safe.agents_file, safe.policy_floor, safe.allow_permissive) == (None, "default", False)
    assert (safe.file_root, safe.file_read_hidden, safe.egress_allow) == (None, False, [])
    with pytest.raises(InvalidConfig, match="ORGA_POLICY='permissive' is not a policy floor"):
        Settings.from_env({"ORGA_POLICY": "permissive"})
