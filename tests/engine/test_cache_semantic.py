"""The response cache's semantic tier: nearest neighbours by an embedding model join the
candidates, and every one still passes the meaning guard. The GGUF kind runs the bundled
model in llama.cpp (real, in CI); the endpoint kinds speak their wire formats from a loopback
server, hostile replies included."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine import Paths
from engine.cache.cache import ResponseCache, Semantic
from engine.cache.embeddings import (
    Embedder,
    EmbeddingError,
    GGUFEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
    open_embedder,
)
from engine.cache.store import SQLiteCacheStore
from engine.config.models import EmbeddingsConfig
from tests.support.cache_sets import measure, pairs, scores


@pytest.fixture(scope="module")
def gguf() -> Iterator[Embedder]:
    """The bundled model as an embedding model (mean-pooled), loaded once."""
    embedder = open_embedder(EmbeddingsConfig(kind="gguf"), Paths.from_env())
    assert isinstance(embedder, GGUFEmbedder)
    yield embedder
    embedder.close()


def semantic_cache(tmp_path: Path, embedder: Embedder) -> ResponseCache:
    # any neighbour qualifies: the test is of the plumbing and the guard, never of how well a
    # tiny base model embeds
    return ResponseCache(SQLiteCacheStore(tmp_path / "cache.sqlite3"),
                         semantic=Semantic(embedder, similarity=0.0, neighbours=5))


def test_the_semantic_tier_finds_what_the_keyword_index_cannot(tmp_path: Path,
                                                               gguf: Embedder) -> None:
    cache = semantic_cache(tmp_path, gguf)
    try:
        cache.put("How do I reset the password of my router?", "Hold the reset button.")
        cache.put("Is coffee bad for the heart?", "Not in moderation.")
        plain = ResponseCache(cache.store)  # the same entries, no semantic tier
        # two mistyped words: no entry holds all but one of its keywords
        asked = "How do I reset the pasword of my routr?"
        assert plain.lookup(asked)[1] is None
        why, served = cache.lookup(asked)
        assert served is not None and served.payload == "Hold the reset button."
        assert why.tier == "semantic" and "semantic tier" in why.reason
        content = next(c for c in why.checks if c.name == "content")
        assert "pasword" in content.detail and "routr" in content.detail
        assert cache.lookup(asked)[0].tier == "variation"  # the wording is recorded
    finally:
        cache.store.close()


def test_a_near_vector_is_never_served_without_the_guard(tmp_path: Path,
                                                         gguf: Embedder) -> None:
    cache = semantic_cache(tmp_path, gguf)
    try:
        cache.put("Is coffee bad for the heart?", "Not in moderation.")
        why, served = cache.lookup("Was coffee ever good for the heart, in 1990?")
        assert served is None and why.rejected
        assert any(r[2].startswith("semantic tier, cosine") for r in why.rejected), why
    finally:
        cache.store.close()


@pytest.mark.heavy
def test_the_held_out_opposites_stay_unserved_with_the_semantic_tier(
    tmp_path: Path, gguf: Embedder
) -> None:
    """What lets the tier be on whenever a model is configured: no opposite is served."""
    opposites = [p for p in pairs("cache_heldout.tsv") if p.kind == "opposite"]
    cache = semantic_cache(tmp_path, gguf)
    try:
        result = scores(measure(opposites, cache))
    finally:
        cache.store.close()
    assert result.pairs == len(opposites) >= 140 and result.wrong == 0


class _Replies:
    """A loopback embeddings server; `reply(body) -> (status, text)` answers each POST."""

    def __init__(self, reply: Callable[[dict[str, object]], tuple[int, str]]) -> None:
        self.bodies: list[dict[str, object]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append({"path": self.path, **body})
                status, text = reply(body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _openai(body: dict[str, object]) -> tuple[int, str]:
    texts = body["input"]
    assert isinstance(texts, list)
    data = [{"index": i, "embedding": [1.0, float(len(str(t))), 0.5]}
            for i, t in reversed(list(enumerate(texts)))]  # out of order on purpose
    return 200, json.dumps({"data": data})


def test_the_openai_and_ollama_wire_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBED_KEY", "sk-secret-value")
    server = _Replies(_openai)
    try:
        embedder = OpenAIEmbedder(EmbeddingsConfig(kind="openai", model="e", api_key_env=
                                                   "EMBED_KEY", base_url=server.url + "/v1"))
        rows = embedder.embed(["a", "abcd"])
        assert rows.shape == (2, 3) and rows[1][1] > rows[0][1]  # in the texts' order
        assert abs(float((rows ** 2).sum(axis=1)[0]) - 1) < 1e-6
        assert server.bodies[0] == {"path": "/v1/embeddings", "model": "e",
                                    "input": ["a", "abcd"]}
        embedder.close()
    finally:
        server.close()
    server = _Replies(lambda body: (200, json.dumps({"embeddings": [[0.0, 2.0]]})))
    try:
        ollama = OllamaEmbedder(EmbeddingsConfig(kind="ollama", model="nomic",
                                                 base_url=server.url))
        assert ollama.embed(["x"]).tolist() == [[0.0, 1.0]]
        assert server.bodies[0]["path"] == "/api/embed"
        ollama.close()
    finally:
        server.close()


@pytest.mark.parametrize(("status", "text", "says"), [
    (500, "{}", "HTTP 500"),
    (200, "<html>", "not JSON"),
    (200, '{"data": "no"}', "no `data` list"),
    (200, '{"data": [{"embedding": [1, 2]}, {"embedding": [1]}]}', "not all of one length"),
    (200, '{"data": [{"embedding": ["1", 2]}, {"embedding": [1, 2]}]}', "not a list of numbers"),
    (200, '{"data": [{"embedding": [0, 0]}, {"embedding": [1, 2]}]}', "all zeros"),
    (200, '{"data": [{"embedding": [1e999, 2]}, {"embedding": [1, 2]}]}', "finite"),
    (200, '{"data": [{"embedding": [1, 2]}]}', "expected 2 embedding(s), got 1"),
])
def test_a_reply_that_is_no_embedding_is_named_and_never_used(
    status: int, text: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBED_KEY", "sk-secret-value")
    server = _Replies(lambda body: (status, text))
    try:
        embedder = OpenAIEmbedder(EmbeddingsConfig(kind="openai", model="e", api_key_env=
                                                   "EMBED_KEY", base_url=server.url))
        with pytest.raises(EmbeddingError) as error:
            embedder.embed(["a", "b"])
        assert says in str(error.value) and "sk-secret" not in str(error.value)
        # through the cache: the tier is skipped, the cache works on
        cache = ResponseCache(SQLiteCacheStore(tmp_path / "c.sqlite3"),
                              semantic=Semantic(embedder, 0.0))
        cache.put("Who wrote Hamlet?", "Shakespeare.")
        assert cache.lookup("who wrote hamlet")[1] is not None
        assert cache.lookup("Who painted the Mona Lisa?")[1] is None
        cache.store.close()
        embedder.close()
    finally:
        server.close()


def test_an_unreachable_endpoint_or_missing_key_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.servers import closed_port

    dead = OllamaEmbedder(EmbeddingsConfig(kind="ollama", model="m",
                                           base_url=f"127.0.0.1:{closed_port()}"))
    with pytest.raises(EmbeddingError, match="cannot reach"):
        dead.embed(["a"])
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="NO_SUCH_KEY is not set"):
        OpenAIEmbedder(EmbeddingsConfig(kind="openai", model="m", api_key_env="NO_SUCH_KEY"))
    with pytest.raises(ValueError, match="needs `model`"):
        EmbeddingsConfig(kind="ollama")


def test_the_workspace_turns_the_tier_on_only_when_a_model_is_configured(
    home: Path
) -> None:
    from engine import Workspace

    plain = Workspace(Paths.from_env())
    assert plain.cache.semantic is None
    (home / "config.toml").write_text('[cache.embeddings]\nkind = "gguf"\n')
    configured = Workspace(Paths.from_env())
    assert configured.cache.semantic is not None
    assert configured.cache.semantic.embedder.name.startswith("gguf:")
    (home / "config.toml").write_text('[cache.embeddings]\nkind = "gguf"\nsemantic = false\n')
    assert Workspace(Paths.from_env()).cache.semantic is None
