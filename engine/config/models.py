"""The configuration's sections: one pydantic model each (every field documented), and
`Config`, the whole file. Loading and saving are `engine.config.load`; providers are
`engine.config.providers`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from engine.config.defaults import DEFAULT_THEME
from engine.config.providers import LOCAL_PRIORITY, NAME_CHARS, ProviderConfig
from engine.config.shipped import default_local_model
from engine.models.testimony import SIGNAL_NAMES, SignalName

__all__ = ["AgentConfig", "CacheConfig", "Config", "EmbeddingsConfig", "InterrogationConfig",
           "OracleConfig", "RouterConfig", "UIConfig"]



class UIConfig(BaseModel):
    """The `[ui]` table."""

    model_config = ConfigDict(extra="forbid")

    theme: str = DEFAULT_THEME
    """Theme name; the shipped ones are detektiv-dark and detektiv-light."""


class OracleConfig(BaseModel):
    """The `[oracles]` table (SPEC §4)."""

    model_config = ConfigDict(extra="forbid")

    dir: str | None = None
    """The oracles directory read first (env ORACLES_DIR); unset: the shipped
    `prompts/oracles`. The user's `oracles/` beside the config file is read after it and
    overrides a file of the same name."""
    placeholder: str = "{{CONTEXT}}"
    """Where the context goes in an oracle prompt (env ORACLE_PLACEHOLDER)."""
    cache_ttl: float = Field(default=10.0, ge=0)
    """Seconds between re-reads of the oracle list (env ORACLE_CACHE_TTL)."""
    timeout: float = Field(default=30.0, gt=0, le=600)
    """Seconds that bound one oracle call (env LLM_TIMEOUT_SECONDS)."""
    max_tokens: int = Field(default=1024, ge=16, le=32768)
    """Token budget of one oracle answer, unless its front matter sets `max_tokens`."""


class AgentConfig(BaseModel):
    """The `[agent]` table: the case agent (SPEC §6)."""

    model_config = ConfigDict(extra="forbid")

    code_dir: str | None = None
    """The directory `search_code` searches (its .gitignore respected); unset: the tool says
    no code directory is configured."""
    turn_limit: int = Field(default=6, ge=2, le=20)
    """Turns of one run at most; the last one is a tool-free summary."""
    max_tokens: int = Field(default=1024, ge=16, le=32768)
    """Token budget of one turn's reply."""
    timeout: float = Field(default=120.0, gt=0, le=3600)
    """Seconds that bound one turn's model call."""
    tool_output_chars: int = Field(default=4000, ge=200, le=100_000)
    """Characters of one tool result given back to the model, at most."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature of the turns; unset leaves each provider's default."""


class EmbeddingsConfig(BaseModel):
    """`[cache.embeddings]`: the embedding model of the cache's semantic tier (off without)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["openai", "ollama", "gguf"]
    """openai (any OpenAI-compatible `/embeddings`), ollama (`/api/embed`), or gguf (a GGUF
    model run in-process by llama.cpp)."""
    model: str = ""
    """The model's name; for gguf, a model of `detektiv models` (a pulled name, the bundled
    `gemma-3-270m`) or the path of a GGUF file."""
    base_url: str | None = None
    """openai: e.g. `https://api.openai.com/v1`; ollama: OLLAMA_HOST or 127.0.0.1:11434."""
    api_key_env: str | None = None
    """openai: the environment variable holding the key."""
    similarity: float = Field(default=0.8, ge=0, le=1)
    """Cosine similarity a neighbour needs before the meaning guard looks at it."""
    neighbours: int = Field(default=5, ge=1, le=50)
    """Nearest neighbours the guard checks, at most."""
    semantic: bool = True
    """False keeps the model configured but the tier off."""
    timeout: float = Field(default=10.0, gt=0, le=300)
    """Seconds one embedding call may take (an endpoint's)."""

    @model_validator(mode="after")
    def _named(self) -> EmbeddingsConfig:
        if self.kind != "gguf" and not self.model:
            raise ValueError(f"a {self.kind} embedding model needs `model`")
        return self


class CacheConfig(BaseModel):
    """The `[cache]` table (SPEC §3)."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    """`postgresql://…` for a cache shared by a team; unset: SQLite in the data directory."""
    threshold: float = Field(default=80.0, ge=50, le=100)
    """Fuzzy score (0–100) a candidate needs before the meaning guard looks at it."""
    max_mb: float = Field(default=10.0, gt=0, le=100_000)
    """Size cap; the least recently used entries go beyond it (down to 90 %)."""
    enabled: bool = True
    """Off: no call goes through the cache (the `cache` commands still work)."""
    ask: bool = True
    """`detektiv ask` without `-p` (the router's default role)."""
    oracle: bool = True
    """Oracle consultations (the same case file gives the same prompt: an exact hit)."""
    witness: bool = False
    """The witness's answers (off: cross-examination must see fresh answers; on, a served
    answer is a `cache_hit` entry in the session's audit trail)."""
    detective: bool = False
    """The detective's questions (its structured calls are never cached)."""
    embeddings: EmbeddingsConfig | None = None
    """The semantic tier's embedding model; unset, the tier is off."""

    @field_validator("url")
    @classmethod
    def _postgres(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("use a postgresql:// URL, or leave it unset for SQLite")
        return value


class RouterConfig(BaseModel):
    """The `[router]` table: circuit breakers, rate limits, health checks (SPEC §2)."""

    model_config = ConfigDict(extra="forbid")

    failure_threshold: int = Field(default=3, ge=1, le=100)
    """Consecutive failures that open a provider's circuit."""
    cooldown: float = Field(default=300.0, gt=0, le=86400)
    """Seconds an open circuit waits before one half-open trial call."""
    retry_after_cap: float = Field(default=600.0, gt=0, le=86400)
    """Longest Retry-After honoured, in seconds; longer ones are capped (and said so)."""
    rate_limit_default: float = Field(default=30.0, gt=0, le=3600)
    """Seconds a 429 without Retry-After keeps a provider aside."""
    health_interval: float = Field(default=30.0, gt=0, le=3600)
    """Seconds between background health checks of each enabled provider."""


class InterrogationConfig(BaseModel):
    """The `[interrogation]` table (SPEC §1)."""

    model_config = ConfigDict(extra="forbid")

    iteration_limit: int = Field(default=10, ge=5, le=20)
    """Rounds a run may take when `--limit` is not given (5–20)."""
    satisfied_at: int = Field(default=80, ge=0, le=100)
    """Completeness (0–100) the last gap analysis must reach before the session may end
    `completed`; below it the loop asks again, whatever the detective advises."""
    min_rounds: int = Field(default=1, ge=1, le=20)
    """Rounds asked before the questioning may close (never more than the limit): it closes
    once a round's judgement is decisive (`engine.interrogation.verdict`), or, for a
    hypothesis that states no claim, once the gap analysis is satisfied
    (`engine.interrogation.checks`)."""
    max_gaps: int = Field(default=5, ge=1, le=20)
    """Most gaps one gap analysis may list."""
    question_max_tokens: int = Field(default=256, ge=8, le=8192)
    """Token budget of one detective question."""
    answer_max_tokens: int = Field(default=1024, ge=8, le=32768)
    """Token budget of one witness answer."""
    analysis_max_tokens: int = Field(default=1024, ge=64, le=32768)
    """Token budget of one gap analysis (JSON)."""
    audit_max_tokens: int = Field(default=2048, ge=64, le=32768)
    """Token budget of the audit (JSON with the markdown summary)."""
    judgement_max_tokens: int = Field(default=16, ge=1, le=4096)
    """Token budget of a round's judgement (one word, or a stated probability); a reasoning
    model that spends it thinking is asked again with a larger one."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature for both roles; unset leaves each provider's default."""
    consistency_samples: int = Field(default=3, ge=2, le=10)
    """Answers to each question under `--protocol consistency`."""
    consistency_temperature: float = Field(default=1.0, ge=0, le=2)
    """The temperature the further answers are sampled at (the first keeps `temperature`): at
    0 they could only repeat the first."""
    max_claims: int = Field(default=100, ge=1, le=100)
    """No longer read: every checkable claim of a testimony is examined, within
    `claim_tokens` (issue 72). Kept so that a configuration that sets it still loads."""
    signals: list[SignalName] = Field(default_factory=lambda: list(SIGNAL_NAMES),
                                      min_length=1)
    """The signals a claim is examined by (`engine.interrogation.signals`): `words` (with a
    document, the claim's words it lacks), `alone` (the detective's own reading), `samples`
    (the witness's answer drawn again), `rounds` (the sampled questioning). Each reads only
    where it applies; the pool weighs those that read (`pooling`)."""
    pooling: str | None = None
    """A pooling file fitted on your own labelled claims (`detektiv eval ITEMS --fit` writes
    one); unset: the shipped one, fitted on the development samples. A file that cannot be
    used is named and the shipped one used."""
    rounds_samples: int = Field(default=1, ge=1, le=10)
    """Answers the witness gives to each of the detective's questions about a claim, each in
    a fresh conversation at `rounds_temperature`: their spread is the rounds' reading (a
    fact the witness made up varies between draws). One by default: on the development
    samples three answers a question ranked false claims no better than one (own answers
    0.662 against 0.678, simple claims 0.990 both) at three times the rounds' tokens."""
    rounds_temperature: float | None = Field(default=1.0, ge=0, le=2)
    """The temperature those answers are drawn at (unset: `sampling_temperature`)."""
    claim_rounds: int = Field(default=2, ge=1, le=20)
    """Rounds a testimony's claim is asked at most (a session's own hypothesis: its
    `--limit`)."""
    claim_tokens: int = Field(default=2500, ge=200, le=1_000_000)
    """Tokens a testimony may spend a checkable claim, all told (its answer, split and
    samples shared out): the cheap readings for every claim first, then rounds for those
    they leave in doubt, riskiest first, until the testimony's budget (this × its claims) is
    spent; a claim's own rounds stop once they pass it."""
    testimony_max_tokens: int = Field(default=512, ge=16, le=32768)
    """Token budget of the witness's testimony (its answer to a question or request). The
    1.5B answers an open question in 150–220 tokens; a capable model's few paragraphs fit
    in 512, and claims past `max_claims` would not be examined anyway."""
    testimony_samples: int = Field(default=2, ge=0, le=10)
    """Answers the witness gives again to the question of a testimony it gave (`open` mode),
    at `consistency_temperature`, told nothing: each claim is read against each of them and
    the mean pooled into its verdict (SelfCheckGPT's signal: a fact the witness made up
    varies between samples; rule 8 of `engine.interrogation.verdict`). 0 draws none. Two:
    on the 107 development claims of issue 72, the samples' reading alone ranked the false
    ones at AUROC 0.81 with the first sample and 0.86 with two, the strongest reading of
    all, and the shipped pool is fitted on two; each costs about a testimony's time (the
    Vitamin B3 request: 162 s with none, 225 s with two, idle, on the 1.5B)."""
    claim_answer_max_tokens: int = Field(default=128, ge=8, le=32768)
    """Token budget of the witness's answer to a testimony claim's question (never above
    `answer_max_tokens`): the question asks for one key fact, and the judgement reads the
    answer's first sentences. Uncapped, the 1.5B answered some with 300–450 tokens of
    everything it knew of the topic, 20 s each on two busy cores; the claim figures of
    docs/benchmarks.md were measured with answers of 48 tokens."""
    split_max_tokens: int = Field(default=768, ge=32, le=32768)
    """Token budget of the detective's split of a testimony into claims (a claim a line)."""
    claim_concurrency: int = Field(default=0, ge=0, le=64)
    """Claims examined at once; 0: the slots the detective's and the witness's servers
    report (the fewer of the two; one for the embedded model, and for a server on this
    machine when it has no GPU and reads prompts at a CPU's rate: their slots share this
    machine's cores), else 2."""


class Price(BaseModel):
    """What a model's tokens cost, per million: `[prices."openai:gpt-4o-mini"]` with
    `input = 0.15` and `output = 0.60`. None are shipped: prices change, and are yours to set
    from your provider's price list."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    """Per million prompt tokens."""
    output: float = Field(ge=0)
    """Per million reply tokens."""
    cached_input: float | None = Field(default=None, ge=0)
    """Per million prompt tokens read from the provider's prompt cache (Anthropic's cache
    reads, OpenAI's `cached_tokens`); unset: the input price."""
    cache_write: float | None = Field(default=None, ge=0)
    """Per million prompt tokens written to the cache (Anthropic's cache creation); unset:
    the input price."""


class Config(BaseModel):
    """The whole configuration."""

    model_config = ConfigDict(extra="forbid")

    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    """Configured providers by name, plus those implied by the environment."""
    roles: dict[str, list[str]] = Field(default_factory=dict)
    """Provider chains by role (`detective`, `witness`, `default`); unset roles use priority."""
    router: RouterConfig = Field(default_factory=RouterConfig)
    ui: UIConfig = Field(default_factory=UIConfig)
    oracles: OracleConfig = Field(default_factory=OracleConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    interrogation: InterrogationConfig = Field(default_factory=InterrogationConfig)
    keymap: dict[str, str] = Field(default_factory=dict)
    """Key bindings by id (`stop = "ctrl+c"`); the app's help screen lists every id."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Token prices by provider name, `kind:model` or model name (the first found wins); a
    provider on this machine without one costs nothing, any other is `unpriced`."""

    @model_validator(mode="before")
    @classmethod
    def _embedded_defaults(cls, data: Any, info: ValidationInfo) -> Any:
        """The embedded model's table needs nothing said: `[providers.local]` is of kind
        `local` unless it says otherwise, a `local` provider runs the default model unless it
        names one, and comes last (priority `LOCAL_PRIORITY`) unless it sets a priority. So
        `[providers.local] enabled = false` alone turns the embedded model off."""
        if not isinstance(data, dict) or not isinstance(data.get("providers"), dict):
            return data
        providers = dict(data["providers"])
        for name, table in providers.items():
            if not isinstance(table, dict):
                continue
            if name == "local" and "kind" not in table:
                table = {**table, "kind": "local"}
            if table.get("kind") == "local":
                data_dir = (info.context or {}).get("data_dir")
                table = {"model": default_local_model(data_dir), "priority": LOCAL_PRIORITY,
                         **table}
            providers[name] = table
        return {**data, "providers": providers}

    @model_validator(mode="after")
    def _check_providers(self) -> Config:
        for name in self.providers:
            if not name or not set(name) <= NAME_CHARS:
                raise ValueError(
                    f"provider name {name!r} may only use letters, digits, '_', '-' and '.'"
                )
        seen: dict[int, str] = {}
        for name, provider in self.providers.items():
            if not provider.enabled:
                continue
            if provider.priority in seen:
                raise ValueError(
                    f"providers.{name}.priority: {provider.priority} is already used by "
                    f"providers.{seen[provider.priority]} (priorities of enabled providers "
                    "must be unique)"
                )
            seen[provider.priority] = name
        return self

    def by_priority(self) -> list[tuple[str, ProviderConfig]]:
        """Enabled providers, lowest priority number first."""
        enabled = [(n, p) for n, p in self.providers.items() if p.enabled]
        return sorted(enabled, key=lambda item: item[1].priority)


