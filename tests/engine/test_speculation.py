"""Speculative decoding for the embedded model (`engine.providers._speculation`), on the real
llama.cpp engine with the bundled Gemma 3 270M as its own draft (the plumbing: a draft of
the same model proposes what the model would say): the draft is used and accepted, the
verdicts are the same with and without it, and every way a draft can be wrong (missing, of
another tokenizer, not its pinned file, refused by llama.cpp) leaves plain decoding with the
reason said, never a failed load. A provider detektiv does not start cannot be asked to
speculate."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from engine import Paths
from engine.config.providers import ProviderConfig
from engine.config.shipped import CAPABLE_MODEL, DRAFT_MODEL, smollm2_path
from engine.gguf.store import Manifest, bundled_model_path, list_models, pulled_dir, write_manifest
from engine.providers import create_provider
from engine.providers._llama import LlamaEngine
from engine.providers._speculation import Speculation, chosen, compatible


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bundled_model_path(tmp_path_factory.mktemp("models"))


def local(model: str, **settings: object) -> ProviderConfig:
    return ProviderConfig.model_validate({"kind": "local", "model": model, "n_ctx": 2048,
                                          "n_parallel": 1, **settings})


def pulled(paths: Paths, name: str, data: bytes, file: str, sha256: str | None = None) -> Path:
    """A pulled model `name` holding `data` (its manifest pins `sha256`, else the data's)."""
    folder = pulled_dir(paths) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_bytes(data)
    write_manifest(folder, Manifest(
        name=name, repo="test", file=file, revision="test", commit=None,
        sha256=sha256 or hashlib.sha256(data).hexdigest(), size=len(data),
        pulled_at="2026-12-06T00:00:00Z"))
    return folder / file


async def streamed(provider_config: ProviderConfig, paths: Paths) -> tuple[str, LlamaEngine]:
    from engine.providers._events import Message, StreamRequest, TokenDelta

    provider = create_provider("local", provider_config, paths)
    request = StreamRequest(messages=(Message("user", "Repeat exactly: the quick brown fox "
                                                      "jumps over the lazy dog."),),
                            max_tokens=24, temperature=0, seed=7)
    text = "".join([e.text async for e in provider.stream(request) if isinstance(e, TokenDelta)])
    engine = provider.engine()  # type: ignore[attr-defined]
    await provider.aclose()
    return text, engine


async def test_a_model_drafting_for_itself_is_used_accepted_and_says_so(
        gemma: Path, paths: Paths) -> None:
    text, engine = await streamed(local("gemma-3-270m", speculation="draft",
                                        draft_model=str(gemma)), paths)
    assert engine.speculation == Speculation("draft", gemma)
    assert engine.speculation.label() == f"speculative: draft {gemma.name}"
    assert text.strip()
    drafted = engine.last_timings
    assert drafted.get("draft_n", 0) > 0  # the draft proposed tokens …
    assert drafted.get("draft_n_accepted", 0) > 0  # … and the model kept some
    plain_text, plain = await streamed(local("gemma-3-270m", speculation="off"), paths)
    assert plain.speculation.label() == "plain decoding"
    assert "draft_n" not in plain.last_timings or plain.last_timings["draft_n"] == 0
    assert plain_text == text  # its own draft: what it would have said, token for token


async def test_the_ngram_kind_needs_no_draft(gemma: Path, paths: Paths) -> None:
    text, engine = await streamed(local("gemma-3-270m", speculation="ngram"), paths)
    assert engine.speculation.label() == "speculative: ngram-simple"
    assert text.strip()


async def test_what_the_examination_reads_is_the_same_with_and_without_the_draft(
        gemma: Path, paths: Paths) -> None:
    """A judgement, a question and a split, each asked of the model plainly and with its own
    draft, at temperature 0 on one slot (two calls batched together would move each other's
    floats, draft or not): the same words, so the same verdicts."""
    asks = [
        [("user", "Claim: Water boils at 100 C at sea level.\nAnswer: Yes, at 100 degrees."
                  "\nDoes the answer support the claim? One word:")],
        [("user", "Write one short question that would test this claim: The Berlin Wall fell "
                  "in 1989.")],
        [("user", "Repeat exactly, one sentence a line: Niacin is vitamin B3. Pellagra is "
                  "caused by a lack of niacin.")],
    ]
    said: dict[str, list[str]] = {}
    for speculation in ("off", "draft"):
        provider = create_provider("local", local("gemma-3-270m", speculation=speculation,
                                                  draft_model=str(gemma)), paths)
        said[speculation] = [await reply(provider, ask) for ask in asks]
        await provider.aclose()
    assert all(text.strip() for text in said["off"]), said["off"]
    assert said["draft"] == said["off"]


async def reply(provider: object, ask: list[tuple[str, str]]) -> str:
    from engine.providers._events import Message, StreamRequest, TokenDelta

    request = StreamRequest(messages=tuple(Message(role, text) for role, text in ask),  # type: ignore[arg-type]
                            max_tokens=32, temperature=0, seed=3)
    return "".join([e.text async for e in provider.stream(request)  # type: ignore[attr-defined]
                    if isinstance(e, TokenDelta)])


def test_a_draft_of_another_tokenizer_is_refused_with_both_named(gemma: Path) -> None:
    smollm2 = smollm2_path()
    assert smollm2 is not None
    refused = compatible(gemma, smollm2)
    assert refused.startswith(f"draft {smollm2.name} refused: another tokenizer (gpt2/smollm;")
    assert "the model's is llama/default" in refused


def test_a_missing_or_unreadable_draft_means_plain_decoding_and_why(
        gemma: Path, paths: Paths, tmp_path: Path) -> None:
    missing = chosen("draft", str(tmp_path / "none.gguf"), gemma, "gemma-3-270m", paths)
    assert missing.kind == "off" and "no such file" in missing.why
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all, not even close")
    refused = chosen("draft", str(junk), gemma, "gemma-3-270m", paths)
    assert refused.kind == "off" and refused.why.startswith("draft junk.gguf refused:")
    assert refused.label().startswith("plain decoding (draft junk.gguf refused:")
    # a model with no draft of its own: plain, and nothing to say unless one was asked for
    assert chosen("auto", None, gemma, "gemma-3-270m", paths) == Speculation()
    assert chosen("draft", None, gemma, "gemma-3-270m", paths).why == "this model has no draft"


def test_the_capable_model_takes_its_pulled_draft_and_not_one_that_is_not_its_pinned_file(
        gemma: Path, paths: Paths) -> None:
    from engine.config.load import load_config

    model = pulled(paths, CAPABLE_MODEL, gemma.read_bytes(), "model.gguf")
    assert chosen("draft", None, model, CAPABLE_MODEL, paths).why == (
        f"its draft is not here: detektiv models pull {DRAFT_MODEL}")
    paths.config_file.write_text('[providers.local]\nkind = "local"\n'
                                 f'model = "{CAPABLE_MODEL}"\nspeculation = "draft"\n')
    note = {m.name: m.note for m in list_models(paths, load_config(paths))}[CAPABLE_MODEL]
    assert note.endswith(f"plain decoding (its draft {DRAFT_MODEL} is not here: detektiv "
                         f"models pull {DRAFT_MODEL})")
    draft = pulled(paths, DRAFT_MODEL, gemma.read_bytes(), "draft.gguf")
    assert chosen("draft", None, model, CAPABLE_MODEL, paths) == Speculation("draft", draft)
    # auto is what measured fastest on CPU: plain, the draft here or not
    assert chosen("auto", None, model, CAPABLE_MODEL, paths) == Speculation()
    assert chosen("off", None, model, CAPABLE_MODEL, paths) == Speculation()
    rows = {m.name: m.note for m in list_models(paths, load_config(paths))}
    assert rows[CAPABLE_MODEL].endswith(f"speculative decoding with its draft {DRAFT_MODEL}")
    assert rows[DRAFT_MODEL].endswith(f'the draft of {CAPABLE_MODEL} (for speculation = "draft")')
    # the same size, other bytes: refused by its pinned sha256
    pulled(paths, DRAFT_MODEL, gemma.read_bytes(), "draft.gguf", sha256="0" * 64)
    refused = chosen("draft", None, model, CAPABLE_MODEL, paths)
    assert refused.kind == "off"
    assert refused.why.startswith("draft draft.gguf refused: its sha256 ")
    assert "is not the pinned 000000000000…" in refused.why


def test_a_draft_cut_short_is_refused_before_llama_cpp_sees_it(
        gemma: Path, paths: Paths, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(gemma.read_bytes()[: 8 << 20])
    refused = chosen("draft", str(cut), gemma, "gemma-3-270m", paths)
    assert refused.kind == "off"
    assert refused.why.startswith("draft cut.gguf refused: the file is cut short (8,388,608 "
                                  "bytes; its tensors reach past ")


def test_a_draft_llama_cpp_will_not_load_falls_back_to_plain_decoding(
        gemma: Path, tmp_path: Path) -> None:
    """Its header whole, the end of its last tensor cut off: llama.cpp refuses the draft;
    the model loads alone and says why. In a process of its own: a llama.cpp server whose
    draft failed can hang when it is freed, and the suite's workers must end."""
    import subprocess
    import sys

    from tests.support.servers import ROOT

    data = gemma.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) - 512])
    assert compatible(gemma, cut) == ""
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from engine.providers._llama import LlamaEngine, LlamaOptions\n"
        "from engine.providers._speculation import Speculation\n"
        f"engine = LlamaEngine(LlamaOptions(model_path=Path({str(gemma)!r}), n_ctx=1024, "
        f"n_parallel=1, n_threads=1, speculation=Speculation('draft', Path({str(cut)!r}))))\n"
        "engine.load()\n"
        "print(engine.loaded, engine.speculation.label(), flush=True)\n"
        "os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("True plain decoding (draft cut.gguf failed to load: ")


@pytest.mark.parametrize("kind", ["openai", "ollama", "anthropic"])
def test_speculation_is_unsupported_for_a_server_detektiv_does_not_start(kind: str) -> None:
    with pytest.raises(ValueError, match=f"speculation \\(draft\\) is unsupported for a {kind} "
                       "provider: only the embedded model"):
        ProviderConfig.model_validate({"kind": kind, "model": "m", "speculation": "draft"})
    with pytest.raises(ValueError, match="speculation \\(a draft\\) is unsupported"):
        ProviderConfig.model_validate({"kind": kind, "model": "m", "draft_model": "x.gguf"})
    # off (or the default) asks nothing of it
    assert ProviderConfig.model_validate({"kind": kind, "model": "m",
                                          "speculation": "off"}).speculation == "off"


def test_the_draft_hash_is_checked_once_per_file_state(gemma: Path, paths: Paths) -> None:
    model = pulled(paths, CAPABLE_MODEL, gemma.read_bytes(), "model.gguf")
    draft = pulled(paths, DRAFT_MODEL, gemma.read_bytes(), "draft.gguf")
    assert chosen("draft", None, model, CAPABLE_MODEL, paths).kind == "draft"
    marker = draft.with_name("draft.gguf.verified")
    size, _, sha = json.loads(marker.read_text())
    assert size == draft.stat().st_size and sha == hashlib.sha256(draft.read_bytes()).hexdigest()


def test_local_server_speculates_as_asked_and_says_how_it_decodes(
        gemma: Path, home: Path, tmp_path: Path) -> None:
    """`detektiv local-server --speculation draft --draft GGUF`: its first line says how it
    decodes, and the replies it serves carry the draft's counts; a draft it refuses is an
    error that names it, before anything is served."""
    import os
    import subprocess

    from engine.lifeline import spawn_tied
    from tests.support.servers import ROOT, cli, stop

    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    process = spawn_tied(cli("local-server", "--port", "0", "--json", "--model", str(gemma),
                             "--parallel", "1", "--ctx", "2048", "--speculation", "draft",
                             "--draft", str(gemma)),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                         cwd=ROOT)
    try:
        assert process.stdout is not None
        started = json.loads(process.stdout.readline())
        assert started["decoding"] == f"speculative: draft {gemma.name}"
        import httpx

        reply = httpx.post(f"{started['url']}/chat/completions", timeout=120, json={
            "messages": [{"role": "user", "content": "Say: one two three four five six."}],
            "max_tokens": 16, "temperature": 0}).json()
        assert reply["timings"]["draft_n"] > 0
    finally:
        stop(process, timeout=15)
    smollm2 = smollm2_path()
    assert smollm2 is not None
    refused = subprocess.run(cli("local-server", "--port", "0", "--model", str(gemma),
                                 "--draft", str(smollm2)),
                             capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert refused.returncode != 0
    assert f"--draft {smollm2}: draft {smollm2.name} refused: another tokenizer" in refused.stderr
    assert "Traceback" not in refused.stderr
