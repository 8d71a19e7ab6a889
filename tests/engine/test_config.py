"""Configuration: reading, validation messages, environment, defaults, writing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine import ConfigError, Paths, load_config
from engine.config.load import save_config
from engine.config.providers import GEMINI_URL, default_local_model


def write(paths: Paths, text: str, mode: int = 0o600) -> None:
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(text)
    os.chmod(paths.config_file, mode)


def test_no_file_means_the_embedded_model(paths: Paths) -> None:
    config = load_config(paths, env={})
    assert list(config.providers) == ["local"]
    local = config.providers["local"]
    assert (local.kind, local.model, local.origin) == ("local", default_local_model(), "default")
    assert local.is_demonstration
    assert local.total_timeout == 120


def test_keys_in_the_environment_imply_cloud_providers(paths: Paths) -> None:
    env = {"OPENAI_API_KEY": "sk-1", "GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a"}
    config = load_config(paths, env=env)
    ranked = [name for name, _ in config.by_priority()]
    assert ranked == ["openai", "anthropic", "gemini", "local"]
    assert config.providers["gemini"].base_url == GEMINI_URL
    assert config.providers["openai"].total_timeout == 30


def test_configured_providers_come_first(paths: Paths) -> None:
    write(paths, """
[providers.localsrv]
kind = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "gemma"
priority = 1
first_token_timeout = 30
timeout = 120
""")
    config = load_config(paths, env={"OPENAI_API_KEY": "sk-x"})
    assert [n for n, _ in config.by_priority()] == ["localsrv", "openai", "local"]
    localsrv = config.providers["localsrv"]
    assert localsrv.is_local and localsrv.ttft_timeout == 30 and localsrv.total_timeout == 120


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[providers.a]\nkind = "openai"\nmodel = "m"\npriority = "high"\n',
         "providers.a.priority: Input should be a valid integer"),
        ('[providers.a]\nkind = "gpt"\nmodel = "m"\n', "providers.a.kind: Input should be"),
        ('[providers.a]\nkind = "openai"\n', "providers.a.model: Field required"),
        ('[providers.a]\nkind = "openai"\nmodel = "m"\ntimeout = 500\n',
         "providers.a: timeout must be between 15 and 120 s for a cloud provider"),
        ('[providers.a]\nkind = "ollama"\nmodel = "m"\ntimeout = 2000\n',
         "providers.a: timeout must be between 15 and 1800 s for a local provider"),
        ('[providers.a]\nkind = "openai"\nmodel = "m"\ncolour = "red"\n',
         "providers.a.colour: Extra inputs are not permitted"),
        ('[providers.a]\nkind = "openai"\nmodel = "m"\npriority = 1\n'
         '[providers.b]\nkind = "openai"\nmodel = "m"\npriority = 1\n',
         "providers.b.priority: 1 is already used by providers.a"),
        ("[providers\n", "invalid TOML"),
    ],
)
def test_invalid_file_gives_one_line_naming_file_and_field(
    paths: Paths, text: str, expected: str
) -> None:
    write(paths, text)
    with pytest.raises(ConfigError) as caught:
        load_config(paths, env={})
    message = caught.value.message
    assert message.startswith(f"{paths.config_file}: ")
    assert expected in message
    assert "\n" not in message


def test_a_byte_order_mark_an_editor_wrote_is_no_toml(paths: Paths) -> None:
    write(paths, '\ufeff[router]\nfailure_threshold = 7\n')
    assert load_config(paths, env={}).router.failure_threshold == 7


def test_disabled_providers_may_share_a_priority(paths: Paths) -> None:
    write(paths, '[providers.a]\nkind = "openai"\nmodel = "m"\npriority = 1\n'
                 '[providers.b]\nkind = "openai"\nmodel = "m"\npriority = 1\nenabled = false\n')
    assert [n for n, _ in load_config(paths, env={}).by_priority()] == ["a", "local"]


def test_key_in_a_readable_file_is_refused(paths: Paths) -> None:
    write(paths, '[providers.a]\nkind = "openai"\nmodel = "m"\napi_key = "sk-secret-123456"\n',
          mode=0o644)
    with pytest.raises(ConfigError) as caught:
        load_config(paths, env={})
    assert "chmod 600" in caught.value.message
    assert "sk-secret-123456" not in caught.value.message


def test_environment_overrides(paths: Paths) -> None:
    write(paths, "[oracles]\ntimeout = 20\n")
    env = {"LLM_TIMEOUT_SECONDS": "45", "ORACLES_DIR": "/x", "ORACLE_PLACEHOLDER": "<<C>>",
           "ORACLE_CACHE_TTL": "3"}
    oracles = load_config(paths, env=env).oracles
    assert (oracles.timeout, oracles.dir, oracles.placeholder, oracles.cache_ttl) == (
        45, "/x", "<<C>>", 3)
    with pytest.raises(ConfigError, match="environment: LLM_TIMEOUT_SECONDS"):
        load_config(paths, env={"LLM_TIMEOUT_SECONDS": "soon"})


def test_save_is_private_atomic_and_round_trips(paths: Paths, tmp_path: Path) -> None:
    write(paths, '[providers.a]\nkind = "anthropic"\nmodel = "claude"\npriority = 3\n'
                 'api_key = "sk-ant-kept-in-file"\n[ui]\ntheme = "detektiv-light"\n')
    config = load_config(paths, env={"OPENAI_API_KEY": "sk-env"})
    target = tmp_path / "out" / "config.toml"
    save_config(config, target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    text = target.read_text()
    assert "openai" not in text and "local" not in text, "implied providers are not written"
    again = load_config(Paths.from_env(target), env={})
    assert again.providers["a"] == config.providers["a"]
    assert again.providers["a"].api_key.get_secret_value() == "sk-ant-kept-in-file"  # type: ignore[union-attr]
    assert again.ui.theme == "detektiv-light"
    assert [p.name for p in target.parent.iterdir()] == ["config.toml"], "no temp file left"


def test_the_documented_example_is_a_valid_config(paths: Paths) -> None:
    from tests.support.servers import ROOT

    readme = (ROOT / "docs" / "config.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    write(paths, example)
    config = load_config(paths, env={})
    assert [name for name, _ in config.by_priority()] == ["localsrv", "work-ollama", "local"]
    from engine.routing.chains import chain_for

    assert chain_for(config, "witness") == ["work-ollama", "local"]
    assert chain_for(config, "detective") == ["localsrv", "work-ollama", "local"]  # [roles]
    assert config.providers["localsrv"].between_tokens_timeout == 10


def test_role_chains(paths: Paths) -> None:
    from engine.routing.chains import chain_for

    write(paths, '[providers.ollama]\nkind = "ollama"\nmodel = "llama3.2"\npriority = 5\n'
                 '[providers.srv]\nkind = "openai"\nbase_url = "http://127.0.0.1:8080/v1"\n'
                 'model = "m"\npriority = 3\n'
                 '[providers.off]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                 'model = "m"\nenabled = false\n')
    config = load_config(paths, env={"OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "a"})
    assert chain_for(config, "detective") == ["openai", "anthropic", "srv", "ollama"]
    assert chain_for(config, "witness") == ["srv", "ollama", "local"]
    assert chain_for(config, "default") == ["srv", "ollama", "openai", "anthropic", "local"]
    config.roles["detective"] = ["srv", "local"]  # the user put it there: it stays
    assert chain_for(config, "detective") == ["srv", "local"]
    del config.roles["detective"]
    alone = load_config(paths.__class__.from_env(paths.config_file.parent / "none.toml"),
                        env={})
    assert chain_for(alone, "detective") == ["local"], "nothing else could play it"
    config.roles["witness"] = ["off", "ollama"]
    assert chain_for(config, "witness") == ["ollama"], "disabled providers are left out"
    config.roles["witness"] = ["ollama", "nope"]
    with pytest.raises(ConfigError, match=r"roles\.witness: unknown provider 'nope'"):
        chain_for(config, "witness", paths.config_file)


def test_a_disabled_provider_is_a_decision_the_environment_respects(paths: Paths) -> None:
    write(paths, '[providers.gpt]\nkind = "openai"\nmodel = "gpt-4o"\nenabled = false\n')
    config = load_config(paths, env={"OPENAI_API_KEY": "sk-x"})
    assert "openai" not in config.providers
    assert [name for name, _ in config.by_priority()] == ["local"]


def test_the_embedded_models_table_needs_nothing_said(paths: Paths) -> None:
    """`[providers.local] enabled = false` alone turns the embedded model off (kind and model
    are the embedded one's), and a `local` provider that sets no priority comes last, at the
    priority docs/config.md names."""
    write(paths, "[providers.local]\nenabled = false\n")
    config = load_config(paths, env={})
    local = config.providers["local"]
    assert (local.kind, local.model, local.enabled) == ("local", default_local_model(), False)
    assert config.by_priority() == []
    write(paths, '[providers.mine]\nkind = "openai"\nbase_url = "http://127.0.0.1:1/v1"\n'
                 'model = "m"\n\n[providers.local]\nkind = "local"\nmodel = "gemma-3-270m"\n')
    config = load_config(paths, env={})
    assert [(n, p.priority) for n, p in config.by_priority()] == [("mine", 100),
                                                                  ("local", 1000)]
    documented = (Path(__file__).parents[2] / "docs" / "config.md").read_text()
    assert "[providers.local]" in documented and "priority = 1000" in documented
