"""The context manager's budgets and fitting (SPEC §5): pure planning, the estimate, window
discovery, and exact counts on the real llama.cpp server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from engine import ContextOverflowError, GapAnalysis, Paths, Workspace
from engine.context.budget import Prompt, fit, forget_window
from engine.context.fit import (
    CUT_MARK,
    DoesNotFit,
    RoundCost,
    plan_all_rounds,
    plan_rounds,
    shorten,
    span,
)
from engine.context.tokens import bound_messages, estimate, estimate_messages
from engine.context.windows import default_window, window_of
from engine.errors import overflow_window
from engine.interrogation.transcript import transcript, transcript_prompt, witness_prompt
from engine.models.session import ProvidersUsed, QuestionAnswerPair
from engine.providers import Message, StreamRequest, create_provider
from engine.providers._ollama import ollama_window
from tests.support.faults import FaultProxy
from tests.support.scripted import Judged
from tests.support.servers import LlamaServer, local_server
from tests.support.wire import Reply, WireServer, json_reply

CUT = re.compile(re.escape(CUT_MARK).replace(r"\{n\}", r"\d+"))


def pair(n: int, question: str, answer: str, gaps: int = 1) -> QuestionAnswerPair:
    analysis = GapAnalysis.model_validate({
        "gaps": [{"category": "vagueness", "description": f"gap {g} of round {n}",
                  "severity": "low"} for g in range(gaps)],
        "completeness_score": 10 * (n % 10), "requires_follow_up": True,
    })
    return QuestionAnswerPair(sequence=n, question=question, answer=answer,
                              gap_analysis=analysis,
                              provider_used=ProvidersUsed(detective="d:m", witness="w:m"))


def rounds_of(count: int, answer_words: int = 60) -> list[QuestionAnswerPair]:
    return [pair(n, f"Question {n}: where exactly was item {n} kept, and by whom?",
                 " ".join(f"answer{n}word{w}" for w in range(answer_words)))
            for n in range(1, count + 1)]


def frame(text: str) -> list[Message]:
    return [Message("system", "You are the detective. The hypothesis: tea contains caffeine."),
            Message("user", f"The interrogation so far:\n\n{text}\n\nAsk the next question.")]


def compose(pairs: list[QuestionAnswerPair], limit: int, every_round: bool = False,
            analyses: bool = True) -> tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    request = StreamRequest(messages=tuple(frame(transcript(pairs, analyses))), max_tokens=10)
    prompt = transcript_prompt(request, pairs, frame, analyses=analyses, every_round=every_round)
    messages, trim = prompt.messages(limit, estimate)
    return messages[1].content, trim.digested, trim.shortened, trim.omitted


def sent_rounds(text: str) -> dict[int, str]:
    """Round number → how it was sent: whole (Q and A lines), digest, or absent."""
    found: dict[int, str] = {}
    for match in re.finditer(r"^Q(\d+)( \(digest\))?: ", text, re.MULTILINE):
        n = int(match.group(1))
        found[n] = "digest" if match.group(2) else "whole"
        if not match.group(2):
            assert re.search(rf"^A{n}: ", text, re.MULTILINE), f"round {n} split from its answer"
    return found


# ---- the planner ------------------------------------------------------------------------------

def test_a_transcript_that_fits_is_sent_whole() -> None:
    pairs = rounds_of(4)
    text, digested, shortened, omitted = compose(pairs, 100_000)
    assert sent_rounds(text) == {n: "whole" for n in range(1, 5)}
    assert (digested, shortened, omitted) == ((), (), ())
    assert transcript(pairs, analyses=True) in text


def test_the_first_and_newest_rounds_stay_whole_and_the_middle_is_digested() -> None:
    pairs = rounds_of(12)
    whole = estimate(compose(pairs, 100_000)[0])
    text, digested, shortened, omitted = compose(pairs, whole // 2)
    sent = sent_rounds(text)
    assert sent[1] == "whole" and sent[12] == "whole"
    assert digested and not omitted and not shortened
    assert all(sent[n] == "digest" for n in digested)
    # the newest rounds are whole from the first digest-free point to the end: no gaps
    newest_whole = [n for n in range(2, 13) if sent[n] == "whole"]
    assert newest_whole == list(range(min(newest_whole), 13))
    assert max(digested) < min(newest_whole)
    # a digest is one line: its question, completeness and gaps, written by code
    line = next(line for line in text.splitlines() if line.startswith("Q2 (digest)"))
    assert "completeness 20/100" in line and "gap 0 of round 2" in line


def test_digests_give_way_oldest_first_then_answers_are_shortened() -> None:
    pairs = rounds_of(12)
    two = estimate(compose(pairs[:1] + pairs[-1:], 100_000)[0])
    text, digested, shortened, omitted = compose(pairs, two + 40)
    sent = sent_rounds(text)
    assert sent[1] == "whole" and sent[12] == "whole"
    assert omitted and omitted == tuple(range(2, 2 + len(omitted)))  # oldest first
    assert "are left out here, to fit the context window" in text
    tight = compose(pairs, two // 2)
    assert 12 in tight[2] and sent_rounds(tight[0])[12] == "whole"
    assert CUT.search(tight[0])


def test_only_the_frame_is_indispensable() -> None:
    """Past its smallest whole form, the newest round goes as a digest, then is left out
    (a line says so); only a limit the frame itself passes cannot be met."""
    pairs = rounds_of(3, answer_words=400)
    frame_only = estimate(compose([], 100_000)[0]) + 12
    smallest = estimate(compose(pairs[-1:], 100_000)[0])
    text, digested, _, omitted = compose(pairs, frame_only + 60)
    assert omitted and sent_rounds(text).get(3) in ("digest", None)
    assert "are left out here, to fit the context window" in text or digested == (3,)
    assert smallest > frame_only + 60
    with pytest.raises(DoesNotFit):
        compose(pairs, 5)


def test_the_audit_sees_every_round_with_answers_shortened_evenly() -> None:
    pairs = rounds_of(10, answer_words=200)
    whole = estimate(compose(pairs, 100_000, every_round=True, analyses=False)[0])
    text, digested, shortened, omitted = compose(pairs, whole // 3, every_round=True,
                                                 analyses=False)
    assert sent_rounds(text) == {n: "whole" for n in range(1, 11)}
    assert not digested and not omitted and set(shortened) == set(range(1, 11))
    answers = re.findall(r"^A\d+: (.*)$", text, re.MULTILINE)
    kept = {len(CUT.sub("", answer)) for answer in answers}
    assert max(kept) - min(kept) <= 2  # one cap for all (head and tail, the cut marked)
    assert all(CUT.search(answer) for answer in answers)
    assert all(f"answer{n}word0" in text and f"answer{n}word199" in text for n in range(1, 11))


def test_shorten_keeps_head_and_tail_and_marks_the_cut() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    short = shorten(text, 90)
    assert short.startswith(text[:60]) and short.endswith(text[-30:])
    assert "910 chars cut" in short
    assert shorten("short", 90) == "short" and shorten(text, None) == text


def test_span_reads_as_ranges() -> None:
    assert span([2, 3, 4, 7, 9, 10]) == "2–4, 7, 9–10"
    assert span([5]) == "5"


@settings(max_examples=150, deadline=None)
@given(
    answers=st.lists(st.integers(0, 3000), min_size=1, max_size=30),
    limit=st.integers(50, 6000),
    every_round=st.booleans(),
)
def test_a_plan_never_exceeds_its_limit_and_never_splits_a_round(
    answers: list[int], limit: int, every_round: bool
) -> None:
    costs = [RoundCost(item=n, number=n, question="q" * 40, answer="a" * size,
                       whole=lambda cap, qcap, size=size: "x" * (20 + min(size, cap or size) // 4),
                       digest=lambda: "d" * 30, count=len)
             for n, size in enumerate(answers, start=1)]
    try:
        plan = (plan_all_rounds(costs, limit) if every_round
                else plan_rounds(costs, limit, lambda k: 10 + k))
    except DoesNotFit:
        return
    assert plan.tokens <= limit
    modes = [mode for _, mode, _, _ in plan.rounds]
    assert [cost.number for cost, *_ in plan.rounds] == list(range(1, len(answers) + 1))
    # the newest round is whole, unless every other round was left out first (then it is a
    # digest, or left out too: only the prompt's frame is indispensable)
    assert modes[-1] == "whole" or set(modes[:-1]) <= {"omitted"}
    if every_round:
        assert set(modes) == {"whole"}
        caps = {cap for _, _, cap, _ in plan.rounds}
        assert len(caps) == 1  # shortened evenly: one cap


def test_the_witness_sees_its_own_answers_never_an_analysis() -> None:
    pairs = rounds_of(12)
    request = StreamRequest(messages=(), max_tokens=10)
    prompt = witness_prompt(request, "You are a witness.", pairs, "What next?")
    messages, trim = prompt.messages(500, estimate)
    assert messages[0].role == "system" and messages[-1] == Message("user", "What next?")
    assert trim.digested or trim.omitted
    body = "\n".join(m.content for m in messages)
    assert "completeness" not in body and "gap 0" not in body
    roles = [m.role for m in messages[1:-1]]
    assert roles == ["user", "assistant"] * (len(roles) // 2)  # exchanges are never split


# ---- the estimate -----------------------------------------------------------------------------

def test_the_estimate_grows_with_text_and_counts_what_tokenizers_split() -> None:
    assert estimate("") == 0
    assert estimate("word") == 1
    assert estimate("a much longer sentence with words") > estimate("a sentence")
    assert estimate("1234567890") == 10  # digits one by one, as Gemma cuts them
    assert estimate("日本語のテキスト") >= 8
    assert estimate("🙂🙃") == 4


# ---- windows ----------------------------------------------------------------------------------

def test_default_windows_by_model_and_kind() -> None:
    assert default_window("anthropic", "claude-sonnet-4-5", True).tokens == 200_000
    assert default_window("openai", "gpt-4o-mini", True).tokens == 128_000
    assert default_window("openai", "gemini-2.5-flash", True).tokens == 1_048_576
    assert default_window("openai", "my-model", False).tokens == 8_192
    assert default_window("ollama", "llama3.2", False).tokens == 4_096


def test_ollama_window_is_num_ctx_capped_by_the_models_context_length() -> None:
    show = {"model_info": {"llama.context_length": 131072}, "parameters": "temperature 0.7"}
    assert ollama_window(show) == 4096  # Ollama's default when nothing sets num_ctx
    assert ollama_window(show, 16384) == 16384
    assert ollama_window({**show, "parameters": "num_ctx 32768\nstop x"}) == 32768
    assert ollama_window({"model_info": {"gemma3.context_length": 2048}}, 8192) == 2048
    assert ollama_window("garbage") is None
    assert ollama_window({"model_info": {"x.context_length": "lots"}}, "many") == 4096


def test_an_overflow_message_names_the_window() -> None:
    assert overflow_window("request (2108 tokens) exceeds the available context size "
                           "(2048 tokens), try increasing it") == 2048
    assert overflow_window("This model's maximum context length is 8192 tokens.") == 8192
    assert overflow_window("input too long") is None
    error = ContextOverflowError("x", "HTTP 400: the available context size (1024 tokens)")
    assert error.window == 1024


async def test_the_local_kind_gives_each_slot_its_share_and_counts_exactly(paths) -> None:
    from engine import ProviderConfig

    config = ProviderConfig(kind="local", model="gemma-3-270m", n_ctx=32768, n_parallel=4)
    provider = create_provider("local", config, paths)
    try:
        window = await window_of(provider)
        assert (window.tokens, window.source, window.exact) == (8192, "server", True)
        messages = [Message("user", "The quick brown fox jumps over the lazy dog.")]
        exact = await provider.count_tokens(messages)
        assert exact is not None and 10 < exact < 40
    finally:
        await provider.aclose()


async def test_a_llama_cpp_server_is_asked_its_slot_window(llama_server: LlamaServer,
                                                          paths) -> None:
    provider = create_provider("srv", llama_server.provider_config(), paths)
    configured = create_provider("srv2", llama_server.provider_config(context_window=1000),
                                 paths)
    try:
        window = await window_of(provider)
        assert (window.tokens, window.source, window.exact) == (2048, "server", True)
        told = await window_of(configured)
        assert (told.tokens, told.source) == (1000, "config")
    finally:
        await provider.aclose()
        await configured.aclose()


async def test_a_server_that_cannot_say_gets_the_default_and_the_estimate(paths) -> None:
    """A hostile or foreign server: /props answers nonsense, /tokenize an HTML page."""
    routes = {
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": "huge"}}),
        "GET /slots": lambda _: json_reply([{"n_ctx": -5}]),
        "POST /apply-template": lambda _: Reply(200, {"content-type": "text/html"},
                                                [b"<html>no</html>"]),
    }
    with WireServer(routes) as server:
        from engine import ProviderConfig

        config = ProviderConfig(kind="openai", model="m", base_url=server.url + "/v1")
        provider = create_provider("odd", config, paths)
        try:
            window = await window_of(provider)
            assert (window.tokens, window.source, window.exact) == (8192, "default", False)
            request = StreamRequest.of("hello " * 50, max_tokens=100)
            fitted = await fit(provider, request)
            assert fitted.report.counted == "estimate"
            assert fitted.report.used <= 8192 - 100 - 819  # a tenth of the window kept aside
        finally:
            forget_window(provider)
            await provider.aclose()


async def test_calls_that_start_together_ask_the_server_its_window_once(paths) -> None:
    """An evaluation starts 32 claims at once: their first calls wait for one discovery
    instead of each asking /props (and every replica's /props) themselves."""
    import asyncio

    asked: list[str] = []

    def props(_: object) -> Reply:
        asked.append("props")
        return json_reply({"default_generation_settings": {"n_ctx": 4096}})

    with WireServer({"GET /props": props}) as server:
        from engine import ProviderConfig

        config = ProviderConfig(kind="openai", model="m", base_url=server.url + "/v1")
        provider = create_provider("together", config, paths)
        try:
            windows = await asyncio.gather(*(window_of(provider) for _ in range(16)))
        finally:
            forget_window(provider)
            await provider.aclose()
    assert {w.tokens for w in windows} == {4096} and asked == ["props"]


async def test_a_prompt_short_in_bytes_goes_by_its_byte_bound_with_no_count(paths) -> None:
    """No tokenizer makes more tokens than a text has bytes: a prompt whose bytes (and a
    template's markers) are within half the limit is sent with no count at all, from the first
    call, and its bound is above the server's count; a longer one is counted."""
    from engine import ProviderConfig
    from engine.context.budget import byte_bound

    counted: list[int] = []

    def tokenize(recorded: object) -> Reply:
        tokens = len(recorded.json()["content"].encode())  # type: ignore[attr-defined]
        counted.append(tokens)  # the most any tokenizer gives: a token a byte
        return json_reply({"tokens": list(range(tokens))})

    routes = {
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": 4096}}),
        "POST /apply-template": lambda r: json_reply({"prompt": "".join(
            f"<|{m['role']}|>{m['content']}<|end|>" for m in r.json()["messages"])}),
        "POST /tokenize": tokenize,
    }
    with WireServer(routes) as server:
        config = ProviderConfig(kind="openai", model="m", base_url=server.url + "/v1")
        provider = create_provider("bytes", config, paths)
        try:
            short = StreamRequest.of("Wie hoch ist der Turm? 🙂 " * 20, max_tokens=100)
            fits = [await fit(provider, short) for _ in range(3)]
            probe = len(counted)
            long = await fit(provider, StreamRequest.of("Wie hoch? " * 300, max_tokens=100))
        finally:
            forget_window(provider)
            await provider.aclose()
    assert [f.report.counted for f in fits] == ["bounded"] * 3 and probe <= 1  # the probe
    assert fits[0].report.used == byte_bound(fits[0].request.messages)
    async with httpx.AsyncClient() as client:  # the bound is above a byte-a-token count
        with WireServer(routes) as server:
            from engine.providers._llamacpp import count_chat_tokens

            exact = await count_chat_tokens(client, server.url, {}, fits[0].request.messages)
    assert exact <= fits[0].report.used
    assert long.report.counted == "exact" and len(counted) > probe + 1


async def test_counts_measured_earlier_bound_prompts_far_from_the_limit(paths) -> None:
    """A server that counts exactly is asked for its first `CALIBRATION` counts; after that,
    a prompt far from the limit goes by a bound from the largest ratio measured (no round
    trip, one in `RECOUNT` counted all the same), a prompt near the limit is still counted,
    and a server that refused a prompt as too long is measured again from scratch."""
    from engine import ProviderConfig
    from engine.context.measure import CALIBRATION, RECOUNT

    counted: list[int] = []

    def tokenize(recorded: object) -> Reply:
        # a word a token, and the chat template's own
        tokens = len(recorded.json()["content"].split()) + 20  # type: ignore[attr-defined]
        counted.append(tokens)
        return json_reply({"tokens": list(range(tokens))})

    routes = {
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": 4096}}),
        "POST /apply-template": lambda r: json_reply({"prompt": " ".join(
            m["content"] for m in r.json()["messages"])}),
        "POST /tokenize": tokenize,
    }
    with WireServer(routes) as server:
        config = ProviderConfig(kind="openai", model="m", base_url=server.url + "/v1")
        provider = create_provider("bounded", config, paths)
        try:
            # short in tokens, but too long in bytes to go by `byte_bound` alone
            short = StreamRequest.of("How tall is the tower? " * 100, max_tokens=100)
            fits = [await fit(provider, short) for _ in range(CALIBRATION + RECOUNT)]
            asked = len(counted)
            near = await fit(provider, StreamRequest.of("word " * 2400, max_tokens=100))
            near_asked = len(counted) - asked
            forget_window(provider, 4096)
            after = await fit(provider, short)
        finally:
            forget_window(provider)
            await provider.aclose()
    kinds = [f.report.counted for f in fits]
    assert kinds[:CALIBRATION] == ["exact"] * CALIBRATION
    assert kinds[CALIBRATION:].count("exact") == 1  # the RECOUNT-th, measured again
    assert kinds[CALIBRATION:].count("bounded") == RECOUNT - 1
    exact = counted[0]
    assert all(exact <= f.report.used for f in fits)  # a bound is never below the count
    assert asked == 1 + CALIBRATION + 1  # the probe, the calibration, the recount
    assert near.report.counted == "exact" and near_asked == 1
    assert after.report.counted == "exact"  # measured again after the overflow


async def test_replies_that_report_their_prompt_calibrate_a_counting_server(paths) -> None:
    """A llama.cpp server's replies say how many tokens their prompt took (`usage`): that is an
    exact count taken for free: half the calibration's counts. From then on, a prompt far from
    the limit goes by the bound with no count asked, and never a recount (the replies keep
    measuring); a prompt near the limit is still counted, and the bound is above its count."""
    from engine import Config, ProviderConfig
    from engine.context.measure import CALIBRATION, RECOUNT
    from engine.routing.events import Fitted
    from engine.routing.router import Router

    counted: list[int] = []

    def tokenize(recorded: object) -> Reply:
        tokens = len(recorded.json()["content"].split()) + 20  # type: ignore[attr-defined]
        counted.append(tokens)
        return json_reply({"tokens": list(range(tokens))})

    def chat(recorded: object) -> Reply:
        words = sum(len(m["content"].split())
                    for m in recorded.json()["messages"])  # type: ignore[attr-defined]
        reply = _sse("ok")
        usage = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [], "usage": {"prompt_tokens": words + 20, "completion_tokens": 1,
                                          "total_tokens": words + 21}}
        reply.body.insert(2, f"data: {json.dumps(usage)}\n\n".encode())
        return reply

    routes = {
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": 4096}}),
        "POST /apply-template": lambda r: json_reply({"prompt": " ".join(
            m["content"] for m in r.json()["messages"])}),
        "POST /tokenize": tokenize,
        "POST /v1/chat/completions": chat,
    }
    with WireServer(routes) as server:
        config = Config(providers={"srv": ProviderConfig(kind="openai", model="m",
                                                         base_url=server.url + "/v1")})
        router = Router(config, paths, persist=False)
        # short in tokens, but too long in bytes to go by `byte_bound` alone
        short = StreamRequest.of("How tall is the tower? " * 100, max_tokens=100)
        try:
            fits = []
            for _ in range(CALIBRATION + RECOUNT + 1):
                events = [event async for event in router.stream(short)]
                fits += [e.report for e in events if isinstance(e, Fitted)]
            asked = len(counted)
            near = await fit(router.providers["srv"],
                             StreamRequest.of("word " * 2400, max_tokens=100))
        finally:
            forget_window(router.providers["srv"])
            await router.aclose()
    kinds = [f.counted for f in fits]
    # each call is counted, and its reply counts too, until `CALIBRATION` counts in all
    calibrating = CALIBRATION // 2
    assert kinds == ["exact"] * calibrating + ["bounded"] * (CALIBRATION + RECOUNT + 1 -
                                                             calibrating)
    assert asked == 1 + calibrating  # the probe and the calls counted: never a recount
    assert all(f.used >= counted[1] for f in fits)  # a bound is never below the count
    assert near.report.counted == "exact" and len(counted) == asked + 1


async def test_a_prompt_too_long_for_any_form_is_refused_before_sending(
    llama_server: LlamaServer, paths
) -> None:
    provider = create_provider("srv", llama_server.provider_config(), paths)
    try:
        with pytest.raises(DoesNotFit, match="tokens"):
            await fit(provider, StreamRequest.of("word " * 5000, max_tokens=100))
    finally:
        await provider.aclose()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rounds=st.lists(st.tuples(st.integers(1, 60), st.integers(0, 400)), min_size=1, max_size=14),
    window=st.integers(700, 2048),
    reply=st.sampled_from([64, 256, 1024]),
    every_round=st.booleans(),
)
def test_a_fitted_prompt_fits_by_the_real_tokenizer_and_never_splits_a_round(
    llama_server: LlamaServer, paths, rounds: list[tuple[int, int]], window: int, reply: int,
    every_round: bool,
) -> None:
    import asyncio
    import random

    rng = random.Random(window * 31 + reply)
    vocabulary = ["tower", "Paris", "1889", "Eiffel", "iron", "—", "émigré", "🙂", "x=3;",
                  "colour", "the", "of", "and", "structure", "well,", "\n"]
    pairs = [pair(n, " ".join(rng.choices(vocabulary, k=q)) + "?",
                  " ".join(rng.choices(vocabulary, k=a)))
             for n, (q, a) in enumerate(rounds, start=1)]
    request = StreamRequest(messages=tuple(frame(transcript(pairs, True))), max_tokens=reply)
    prompt = transcript_prompt(request, pairs, frame, analyses=not every_round,
                               every_round=every_round)

    async def check() -> None:
        provider = create_provider("srv", llama_server.provider_config(context_window=window),
                                   paths)
        try:
            try:
                fitted = await fit(provider, prompt)
            except DoesNotFit:
                event("cannot fit")
                return
            event("fitted" + (" with rounds trimmed" if fitted.report.trim else " whole"))
            sent = fitted.request
            assert sent.max_tokens is not None
            async with httpx.AsyncClient() as client:
                from engine.providers._llamacpp import count_chat_tokens

                exact = await count_chat_tokens(client, llama_server.base, {}, sent.messages)
            assert exact <= window - sent.max_tokens
            if fitted.report.counted == "bounded":  # from the server's earlier counts
                assert fitted.report.used >= exact
            else:
                assert fitted.report.counted == "exact" and fitted.report.used == exact
            seen = sent_rounds(sent.messages[1].content)
            assert len(pairs) in seen and seen[len(pairs)] == "whole"
            if every_round:
                assert seen == {n: "whole" for n in range(1, len(pairs) + 1)}
        finally:
            await provider.aclose()

    asyncio.run(check())


async def test_a_prompt_sent_whole_keeps_its_extra_messages(paths) -> None:
    prompt = Prompt.whole(StreamRequest.of("question")).then(
        Message("assistant", "(empty)"), Message("user", "again"))
    messages, trim = prompt.messages(1000, estimate)
    assert [m.content for m in messages] == ["question", "(empty)", "again"] and not trim


# ---- a whole interrogation in a small window, on the real server -----------------------------

@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """`local-server --ctx 4096` with 4 slots: 1024 tokens a request."""
    with local_server(tmp_path_factory.mktemp("small-server"), "--parallel", "4",
                      "--ctx", "4096") as server:
        yield server


async def test_ten_rounds_in_a_1024_token_window_complete_without_overflow(
    small_server: LlamaServer, paths
) -> None:
    from engine import ContextFitted, Finished, PairCompleted

    proxy = FaultProxy(small_server.base)
    await proxy.start()
    # the detective's analyses always ask for more, so the run goes the whole way; the words
    # are scripted (the tiny model's are not to be relied on), the window and every token
    # count are the real server's
    gap = {"gaps": [{"category": "vagueness", "severity": "high",
                     "description": "No year, no architect, no height: press on each number."}],
           "completeness_score": 30, "requires_follow_up": True}
    proxy.scripts["gap"] = (json.dumps(gap), "stop")
    proxy.schema_scripts["gap_analysis"] = "gap"
    proxy.scripts["audit"] = (json.dumps({
        "contradictions": [], "summary": "The witness named years and builders at length.",
        "verdict": "true"}), "stop")
    proxy.schema_scripts["audit"] = "audit"
    proxy.judgement = Judged(0.5)  # every round silent: the run goes the whole way
    for n in range(1, 11):
        proxy.scripts[f"q{n}"] = (f"What happened at the Eiffel Tower in {1880 + n}?", "stop")
        proxy.scripts[f"a{n}"] = (f"In {1880 + n} the engineers of the company came to check "
                                  "the rivets, the paint and the lifts; " * 2, "stop")
        proxy.plan += [f"script:q{n}", f"script:a{n}"]
    paths.config_file.write_text(
        f'[providers.small]\nkind = "openai"\nmodel = "gemma"\nbase_url = "{proxy.url}"\n'
        "priority = 1\n[interrogation]\ntemperature = 0\nrounds_samples = 1\n"
        'signals = ["rounds"]\n')
    workspace = Workspace(paths)
    try:
        run = workspace.sessions.start("The Eiffel Tower is in Paris.", 10, ["small"], ["small"])
        events = [event async for event in run.events()]
    finally:
        await workspace.aclose()
        await proxy.stop()
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.status == "limit-reached", finished.reason
    assert sum(isinstance(e, PairCompleted) for e in events) == 10
    fits = [e.fit for e in events if isinstance(e, ContextFitted)]
    assert len(fits) >= 41  # four calls a round and the audit
    # counted by the server, or bounded by its earlier counts where far from the limit; a
    # bound never let a prompt past the window (no HTTP 400 below)
    assert all(f.window == 1024 and f.counted in ("exact", "bounded") for f in fits)
    assert all(f.counted == "exact" for f in fits if f.digested or f.omitted)
    assert all(f.used + f.reply <= f.window for f in fits)
    assert any(f.digested or f.omitted for f in fits)  # the middle gave way
    audit = fits[-1]
    assert audit.sequence is None and not audit.digested and not audit.omitted
    trail = " ".join(entry.reason for entry in run.session.audit_trail)
    assert "context size" not in trail and "HTTP 400" not in trail
    assert run.session.context_fits == fits  # stored with the session, for `show`
    report = workspace.sessions.export(run.session.short_id, "md")
    assert "## Context" in report and "fitted to their windows" in report


def _sse(text: str) -> Reply:
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Reply(200, {"content-type": "text/event-stream"},
                 [f"data: {json.dumps(chunk)}\n\n".encode(), f"data: {json.dumps(end)}\n\n"
                  .encode(), b"data: [DONE]\n\n"])


async def test_a_count_that_fails_once_under_load_does_not_charge_the_schema(paths) -> None:
    """A llama.cpp server (it counts exactly, and turns a schema into a grammar) whose
    /tokenize drops one request, as a busy machine's does by timing out: that call is
    estimated, with the estimate's margin, but the schema is still not prompt text. Charging
    it left 88 tokens of a 1024-token window for the gap analysis's prompt."""
    from engine import ProviderConfig
    from engine.interrogation.transcript import gap_schema
    from tests.support.wire import DROP

    tokenized = []

    def tokenize(recorded) -> object:  # type: ignore[no-untyped-def]
        tokenized.append(recorded)
        if len(tokenized) == 2:  # the first is the probe that finds the server counts
            return DROP
        return json_reply({"tokens": list(range(estimate(recorded.json()["content"])))})

    routes = {
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": 1024}}),
        "POST /apply-template": lambda r: json_reply(
            {"prompt": " ".join(m["content"] for m in r.json()["messages"])}),
        "POST /tokenize": tokenize,
    }
    with WireServer(routes) as server:
        provider = create_provider(
            "busy", ProviderConfig(kind="openai", model="m", base_url=server.url + "/v1"), paths)
        try:
            schema = gap_schema(5, 1024)
            # ~465 tokens by the upper bound: room for them is 1024 − 341 (the reply, a
            # third) − 64 (the margin when nobody counts); charging the schema's ~264 as text
            # would leave ~355
            request = StreamRequest.of("analyse " * 300, max_tokens=1024, schema=schema)
            fitted = await fit(provider, request)
            assert fitted.report.counted == "estimate" and len(tokenized) == 2
            assert fitted.report.reply == 341  # not lowered to make room
            assert 1024 - 341 - 64 - 264 < fitted.report.used <= 1024 - 341 - 64
            again = await fit(provider, request)
            assert again.report.counted == "exact"  # one dropped count changed nothing more

            # a probe that gets no answer is asked again, not taken for "cannot count"
            forget_window(provider)
            tokenized.clear()
            tokenized.append(None)  # the next request (the probe) is the second: dropped
            later = await fit(provider, request)
            assert later.report.counted == "exact" and len(tokenized) == 4  # probe, again, count
        finally:
            forget_window(provider)
            await provider.aclose()


async def test_a_tokenizer_that_answers_nonsense_is_not_believed(paths) -> None:
    routes = {
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": 2048}}),
        "POST /apply-template": lambda _: json_reply({"prompt": "whatever"}),
        "POST /tokenize": lambda _: json_reply({"tokens": []}),
    }
    with WireServer(routes) as server:
        from engine import ProviderConfig

        provider = create_provider(
            "liar", ProviderConfig(kind="openai", model="m", base_url=server.url + "/v1"), paths)
        try:
            fitted = await fit(provider, StreamRequest.of("tell me " * 200, max_tokens=100))
            assert fitted.report.counted == "estimate" and fitted.report.window == 2048
            assert fitted.report.used == bound_messages(fitted.request.messages)  # upper
            # by the bound, too long beside the least reply; by the estimate (the server,
            # never measured, would say so if it were wrong) it fits: sent, never believed
            # to be 0 tokens
            tight = await fit(provider, StreamRequest.of("tell me " * 900, max_tokens=100))
            assert tight.report.used == estimate_messages(tight.request.messages) > 1800
            assert tight.report.reply < 100 and tight.report.counted == "estimate"
            with pytest.raises(DoesNotFit):  # too long even by the estimate
                await fit(provider, StreamRequest.of("tell me " * 1200, max_tokens=100))
        finally:
            forget_window(provider)
            await provider.aclose()


async def test_a_server_that_refuses_a_prompt_as_too_long_gets_it_refitted(paths) -> None:
    """A server claims a window it does not have: its 400 names the real one, and the router
    fits the prompt again to that, once, without counting it against the circuit."""
    from engine import Config, ProviderConfig
    from engine.providers import TokenDelta
    from engine.routing.router import Router

    received: list[int] = []

    def chat(recorded) -> Reply:  # type: ignore[no-untyped-def]
        messages = recorded.json()["messages"]
        size = sum(estimate(m["content"]) for m in messages)
        received.append(size)
        if size > 900:
            return json_reply({"error": {"message": f"request ({size} tokens) exceeds the "
                                         "available context size (1024 tokens), try increasing "
                                         "it", "code": 400}}, status=400)
        return _sse("fitted")

    routes = {"GET /props": lambda _: json_reply({"default_generation_settings":
                                                  {"n_ctx": 100_000}}),
              "POST /v1/chat/completions": chat}
    with WireServer(routes) as server:
        config = Config(providers={"srv": ProviderConfig(kind="openai", model="m",
                                                         base_url=server.url + "/v1")})
        router = Router(config, paths, persist=False)
        pairs = rounds_of(30)
        request = StreamRequest(messages=tuple(frame(transcript(pairs, True))), max_tokens=50)
        prompt = transcript_prompt(request, pairs, frame, analyses=True)
        try:
            events = [event async for event in router.stream(prompt)]
        finally:
            forget_window(router.providers["srv"])
            await router.aclose()
    assert [e.text for e in events if isinstance(e, TokenDelta)] == ["fitted"]
    assert len(received) == 2 and received[0] > 1024 >= received[1]
    assert router.states["srv"].consecutive_failures == 0


async def test_a_failover_to_a_smaller_window_refits_the_prompt(llama_server: LlamaServer,
                                                                paths, proxy) -> None:
    """The first provider claims 100k tokens and fails; the prompt the second one (2048)
    receives is fitted for 2048, not the one built for 100k."""
    from engine import Config, ProviderConfig
    from engine.providers import Done
    from engine.routing.events import Attempt, Fitted
    from engine.routing.router import Router

    proxy.default = "500"
    config = Config(providers={
        "big": ProviderConfig(kind="openai", model="m", base_url=proxy.url,
                              context_window=100_000, priority=1),
        "small": llama_server.provider_config(priority=2),
    })
    router = Router(config, paths, persist=False)
    pairs = rounds_of(30)
    request = StreamRequest(messages=tuple(frame(transcript(pairs, True))), max_tokens=8,
                            temperature=0)
    prompt = transcript_prompt(request, pairs, frame, analyses=True)
    try:
        events = [event async for event in router.stream(prompt)]
    finally:
        await router.aclose()
    fits = {event.provider: event.report for event in events if isinstance(event, Fitted)}
    assert [e.provider for e in events if isinstance(e, Attempt)] == ["big", "small"]
    assert not fits["big"].trim and fits["big"].window == 100_000
    assert fits["small"].window == 2048 and fits["small"].trim
    assert fits["small"].used <= 2048 - 8 and fits["small"].counted == "exact"
    sent_to_big = json.loads(proxy.requests[0])["messages"][1]["content"]
    assert sent_rounds(sent_to_big) == {n: "whole" for n in range(1, 31)}
    assert isinstance(events[-1], Done)  # the small one answered (perhaps nothing: a tiny model)


async def test_a_vllm_server_lists_its_window(paths) -> None:
    routes = {"GET /v1/models": lambda _: json_reply({"object": "list", "data": [
        {"id": "other", "max_model_len": 4096},
        {"id": "qwen", "object": "model", "max_model_len": 32768}]})}
    with WireServer(routes) as server:
        from engine import ProviderConfig

        provider = create_provider(
            "vllm", ProviderConfig(kind="openai", model="qwen", base_url=server.url + "/v1"),
            paths)
        try:
            window = await window_of(provider)
            assert (window.tokens, window.source, window.exact) == (32768, "server", False)
        finally:
            forget_window(provider)
            await provider.aclose()


# ---- where nobody counts: the upper bound, on the real tokenizers ---------------------------

def _varied_texts() -> list[tuple[str, str]]:
    """detektiv's own prompts, docs and code in pieces, and texts unlike them: another
    alphabet, CJK, a table of numbers, emoji."""
    from tests.support.servers import ROOT

    texts = []
    for pattern in ("prompts/*.md", "docs/*.md", "engine/context/*.py", "tests/data/*.tsv"):
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            texts += [(path.name, text[i:i + 2000]) for i in range(0, min(len(text), 6000), 2000)]
    texts += [("cjk", "东京是日本的首都。北京是中国的首都。" * 30),
              ("cyrillic", "Москва является столицей России. Река Волга длинная. " * 15),
              ("numbers", " ".join(str(i * 7919) for i in range(300))),
              ("emoji", "🙂 the cat 🐈 sat 🪑 " * 40),
              # a small model's broken output: whitespace of every kind, one letter repeated,
              # digits spaced apart (a space before a digit is a token on every tokenizer)
              ("mixed whitespace", "{" + " \t" * 300 + "}"),
              ("blank lines", "end" + "\n \n" * 200 + "\t\t  \n" * 50),
              ("newlines", "end" + "\n" * 600),
              ("one letter", "A" + "h" * 900),
              ("spaced digits", " ".join("7" * 500)),
              ("decimals", " 37.5 (1952)" * 100),
              ("short", "Is it true?")]
    return texts


@pytest.mark.parametrize("model", ["gemma-3-270m", "smollm2-135m"])
async def test_the_upper_bound_is_never_below_the_real_count(
        model: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A server that cannot count (a gateway) has its prompts measured by `bound_messages`:
    on both bundled tokenizers (a 262k and a 49k vocabulary) it is at or above the exact
    count of every text, and the estimate alone is not (it is below on some: the bound is
    needed)."""
    from engine.providers._llamacpp import count_chat_tokens

    below_estimate = 0
    with local_server(tmp_path_factory.mktemp(f"bound-{model}"), "--model", model,
                      "--parallel", "1", "--ctx", "8192") as server:
        async with httpx.AsyncClient() as client:
            for name, text in _varied_texts():
                messages = [Message("user", text)]
                exact = await count_chat_tokens(client, server.base, {}, messages)
                assert bound_messages(messages) >= exact, (model, name)
                below_estimate += estimate_messages(messages) < exact
    assert below_estimate > 0


async def gateway_fits(paths: Paths, chat: object, prompts: list[str]) -> list[Any]:
    """How each of `prompts` was fitted, sent in turn to a gateway of a 4,096-token window that
    cannot count (an `openai` kind on loopback) whose replies `chat` writes (their usage)."""
    from engine.config.models import Config
    from engine.routing.events import Fitted
    from engine.routing.router import Router

    with WireServer({"POST /v1/chat/completions": chat}) as server:
        config = Config.model_validate({"providers": {"gw": {
            "kind": "openai", "model": "m", "base_url": server.url + "/v1",
            "context_window": 4096}}})
        router = Router(config, paths, persist=False)
        try:
            fits = []
            for text in prompts:
                events = [e async for e in router.stream(StreamRequest.of(text, max_tokens=8))]
                fits += [e.report for e in events if isinstance(e, Fitted)]
        finally:
            await router.aclose()
    return fits


async def test_a_server_that_cannot_count_is_measured_by_what_its_replies_report(paths) -> None:
    """A gateway counts nothing, but its replies report their prompt's tokens: the first
    prompt is measured by the upper bound, later ones by their text's estimate times the
    ratio the reports measured (and `REPORTED_SLACK`) and the template's fixed part, above
    the bound too when the server's tokenizer makes more of it than any measured here. A
    short prompt (its template's fixed part would pass for the ratio) measures nothing until
    a longer one has."""
    import math

    from engine import ProviderConfig
    from engine.context.measure import ONE_PROMPT_FIXED, REPORTED_SLACK
    from tests.support.scripted import sse

    def counting(factor: float, reported: list[int]) -> object:
        def chat(recorded) -> Reply:  # type: ignore[no-untyped-def]
            messages = [Message(m["role"], m["content"]) for m in recorded.json()["messages"]]
            reported.append(math.ceil(estimate_messages(messages) * factor))
            return sse("ok", usage=(reported[-1], 1))
        return chat

    for factor in (0.9, 2.0):
        reported: list[int] = []
        chat = counting(factor, reported)

        fits = await gateway_fits(paths, chat, ["first question " * 150,
                                                "a longer second question " * 200])
        first = [Message("user", "first question " * 150)]
        second = [Message("user", "a longer second question " * 200)]
        assert fits[0].used == bound_messages(first)
        # one prompt reported: its template's fixed part taken as ONE_PROMPT_FIXED a message
        # (and one more for the reply's header), the rest its text's ratio
        fixed = ONE_PROMPT_FIXED * 2
        ratio = (reported[0] - fixed) / estimate(first[0].content)
        assert fits[1].used == math.ceil((estimate(second[0].content) * ratio + fixed)
                                         * REPORTED_SLACK)
        assert fits[1].used >= reported[1]  # an upper bound of what the server then counted
        assert (fits[1].used < bound_messages(second)) == (factor < 1.35)

    from engine.context.budget import measured

    provider = create_provider("short", ProviderConfig(kind="openai", model="m",
                                                       base_url="http://127.0.0.1:9/v1"), paths)
    measured(provider, [Message("user", "Is it true?")], 40)  # 22 estimated: not a measure
    fitted = await fit(provider, StreamRequest.of("word " * 300, max_tokens=8))
    assert fitted.report.used == bound_messages(fitted.request.messages)


async def test_a_short_prompt_is_measured_by_the_template_the_replies_showed(paths) -> None:
    """A gateway whose template adds 5 tokens a message (and 5 for the reply's header, as
    ChatML does), where the estimate assumes 12 and 10: once its replies reported a long
    prompt and two short ones, a short prompt is fitted within 20 % above what the server
    then counts, and never below it; before, the assumed template padded it by a third."""
    import math

    from tests.support.scripted import sse

    reported: list[int] = []

    def chat(recorded) -> Reply:  # type: ignore[no-untyped-def]
        messages = recorded.json()["messages"]
        texts = sum(estimate(m["content"]) for m in messages)
        reported.append(math.ceil(texts * 0.93) + 5 * (len(messages) + 1))
        return sse("ok", usage=(reported[-1], 1))

    prompts = ["a long opening question of the interrogation " * 60,
               "Is the sky green?", "Which planet is the largest one in the solar system?",
               "What is the boiling point of water at sea level, in degrees?",
               "Who wrote the novel Don Quixote, and when was it first published?"]
    fits = [report.used for report in await gateway_fits(paths, chat, prompts)]
    for used, counted, text in list(zip(fits, reported, prompts, strict=True))[3:]:
        assert counted <= used <= 1.2 * counted, (used, counted)
        by_estimate = estimate_messages([Message("user", text)]) * reported[0] / \
            estimate_messages([Message("user", prompts[0])])
        assert by_estimate > 1.25 * counted  # what the whole estimate's ratio would have said


def test_a_schema_sent_as_text_is_measured_at_the_ratio_its_own_text_showed(paths) -> None:
    """A gateway whose tokenizer makes 1.05 tokens of the prompts' prose for each estimated and
    0.85 of a JSON schema's (braces and quotes merge), its template 5 tokens a message: once
    its replies reported prompts of both kinds, the schema is measured within 20 % above its
    own tokens and the prose within 20 % above its own, never below; one ratio for both took
    the schema for more than a fifth above."""
    import math

    from engine import ProviderConfig
    from engine.context.measure import measured, schema_measure, text_measure, uncounted
    provider = create_provider("schema", ProviderConfig(kind="anthropic", model="m",
                               base_url="http://127.0.0.1:9"), paths)
    schema = provider.schema_prompt(GapAnalysis.model_json_schema())

    def tokens(messages: list[Message], beside: str = "") -> int:
        return math.ceil(sum(estimate(m.content) for m in messages) * 1.05) + \
            5 * (len(messages) + 1) + math.ceil(estimate(beside) * 0.85)

    prose = ["The witness was asked which river flows through Vienna, and answered the "
             "Danube, adding that it reaches the Black Sea. " * n for n in (6, 3, 9, 5)]
    for n, text in enumerate(prose):
        messages = [Message("system", "You are a detective auditing an interrogation."),
                    Message("user", text)]
        measured(provider, messages, tokens(messages, schema if n % 2 else ""), added=schema
                 if n % 2 else "")
    own = math.ceil(estimate(schema) * 0.85)
    assert own <= schema_measure(provider)(schema) <= 1.2 * own
    assert text_measure(provider)(schema) > 1.2 * own  # the prose's ratio would say
    asked = [Message("user", "Which sea does the Danube reach, and through which cities? " * 4)]
    assert tokens(asked) <= uncounted(provider, asked) <= 1.2 * tokens(asked)


@pytest.mark.parametrize(("window", "told"), [(256, None), (300, None), (1024, None),
                                              (1024, 120)])
async def test_a_small_window_lowers_the_reply_s_room_and_never_says_a_negative_number(
        paths, window: int, told: int | None) -> None:
    """The reply's room (a third of a small window) is lowered, down to 32 tokens, when that
    lets the prompt fit, and said so; a prompt that cannot fit even then gets an error that
    names the context window and never a negative room ("-209 available")."""
    from engine import ProviderConfig
    from engine.report.stream import trim_note
    from tests.support.servers import closed_port

    provider = create_provider("gw", ProviderConfig(
        kind="openai", model="m", base_url=f"http://127.0.0.1:{closed_port()}/v1",
        context_window=window), paths)
    window = told or window  # a window a server's refusal named (a learned 120)
    try:
        for words in (10, 40, 120, 400):
            request = StreamRequest.of("word " * words, max_tokens=4096)
            try:
                fitted = await fit(provider, request, told=told)
            except DoesNotFit as exc:
                message = str(exc)
                assert f"context window of {window} tokens" in message
                assert not re.search(r"(?<![\w.])-\d", message), message
                assert exc.needed > exc.limit >= 0
                continue
            report = fitted.report
            assert report.used + report.reply <= window
            assert report.reply >= min(32, window // 3) and report.reply_lowered
            assert fitted.request.max_tokens == report.reply
            note = trim_note(report)
            assert note is not None and f"the reply may take at most {report.reply}" in note
    finally:
        await provider.aclose()


async def test_a_server_whose_count_stops_answering_is_estimated_after_a_few_tries(
        paths: Paths) -> None:
    """A llama.cpp server that counted the discovery's probe, then drops every count: each
    call is estimated (never failed), and after `UNANSWERED` unanswered counts in a row it
    is not asked to count again — a hanging `/tokenize` would hold every call."""
    from engine import ProviderConfig
    from engine.context.measure import UNANSWERED
    from tests.support.wire import DROP

    templates: list[int] = []

    def template(_: object) -> Any:
        templates.append(1)
        return json_reply({"prompt": "user: ok"}) if len(templates) == 1 else DROP

    with WireServer({
        "GET /props": lambda _: json_reply({"default_generation_settings": {"n_ctx": 1024}}),
        "POST /apply-template": template,
        "POST /tokenize": lambda _: json_reply({"tokens": [1, 2, 3, 4]}),
    }) as server:
        provider = create_provider("det", ProviderConfig.model_validate(
            {"kind": "openai", "model": "m", "base_url": server.url + "/v1"}), paths)
        long = StreamRequest.of("Where were you on Monday night? " * 60, max_tokens=64)
        try:
            window = await window_of(provider)
            fits = [await fit(provider, long) for _ in range(UNANSWERED + 2)]
        finally:
            await provider.aclose()
    assert window.exact and window.tokens == 1024
    assert [f.report.counted for f in fits] == ["estimate"] * len(fits)
    assert len(templates) == 1 + UNANSWERED  # the probe, then the counts left unanswered
