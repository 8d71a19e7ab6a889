"""A provider lent by the program that embeds the engine (`Workspace.lend`: Inspect AI's model
as the witness of its scorer): its replies come whole from a function, a role names it, the
config file never holds it, and its function's failure is a provider's error the run names."""

from __future__ import annotations

import tomllib
from contextlib import aclosing
from pathlib import Path

import pytest

from engine import ConfigError, LentReply, Paths, StreamRequest, Workspace
from tests.engine.test_testimony import REQUEST, SAMPLE, TESTIMONY, sample_reader
from tests.support.interrogation import make_config
from tests.support.scripted import ScriptedModel


async def test_a_lent_witness_is_sampled_for_a_given_answer_and_never_saved(
        paths: Paths) -> None:
    asked: list[StreamRequest] = []

    async def answer(request: StreamRequest) -> LentReply:
        asked.append(request)
        return LentReply(SAMPLE, prompt_tokens=40, completion_tokens=12)

    with ScriptedModel(sample_reader) as det:
        config = make_config({"det": det.url + "/v1"}, ["det"], ["det"],
                             testimony_samples=2, claim_concurrency=1)
        workspace = Workspace(paths, config)
        try:
            workspace.lend("inspect", "mockllm/model", answer)
            run = workspace.sessions.start(REQUEST, 5, witness=["inspect"], answer=TESTIMONY,
                                           answered_by="inspect:mockllm/model")
            async with aclosing(run.events()) as events:
                async for _ in events:
                    pass
            session = workspace.store.load(str(run.session.id))
            workspace.save_config()
        finally:
            await workspace.aclose()
    assert session.status == "completed", session.error
    assert session.testimony is not None and session.testimony.samples == [SAMPLE, SAMPLE]
    drawn = [r for r in asked if r.messages[-1].content.startswith(REQUEST)]
    assert len(drawn) == 2 and all(r.temperature == 1.0 and r.seed is not None for r in drawn)
    assert drawn[0].seed != drawn[1].seed  # each draw its own seed
    # its rounds were asked of it too, in fresh conversations
    assert any(not r.messages[-1].content.startswith(REQUEST) for r in asked)
    assert {p.provider_used.witness for p in session.qa_pairs[1:]} == {
        "inspect:mockllm/model"}
    saved = tomllib.loads(paths.config_file.read_text(encoding="utf-8"))
    assert "inspect" not in saved.get("providers", {})  # lent for the process only


async def test_a_lent_model_that_fails_is_a_provider_error_named_not_a_crash(
        paths: Paths) -> None:
    async def answer(request: StreamRequest) -> LentReply:
        raise RuntimeError("the model's API said no\nsecond line")

    with ScriptedModel(sample_reader) as det:
        config = make_config({"det": det.url + "/v1"}, ["det"], ["det"], testimony_samples=1)
        workspace = Workspace(paths, config)
        try:
            workspace.lend("inspect", "mockllm/model", answer)
            run = workspace.sessions.start("Name a river in France.", 5, witness=["inspect"])
            async with aclosing(run.events()) as events:
                async for _ in events:
                    pass
            session = workspace.store.load(str(run.session.id))
        finally:
            await workspace.aclose()
    assert session.status == "failed"
    assert session.error is not None
    assert "inspect: the lent model failed: the model's API said no" in session.error
    assert "second line" not in session.error


def test_a_name_configured_already_is_not_lent_over(tmp_path: Path, paths: Paths) -> None:
    config = make_config({"inspect": "http://127.0.0.1:9/v1"}, ["inspect"], ["inspect"])
    workspace = Workspace(paths, config)

    async def answer(request: StreamRequest) -> LentReply:
        return LentReply("")

    with pytest.raises(ConfigError, match="configured already"):
        workspace.lend("inspect", "m", answer)
