"""Pure logic of the session entities, the event records and the reply schemas."""

from __future__ import annotations

import json
import uuid

import jsonschema
import pytest
from pydantic import ValidationError

from engine import Config
from engine.config.roles import apply_roles
from engine.errors import ConfigError, SessionError
from engine.interrogation.transcript import audit_schema, gap_schema, transcript, witness_messages
from engine.models.events import (
    AnswerDelta,
    Finished,
    PairCompleted,
    Record,
    TrailAdded,
    decode_record,
    encode_record,
)
from engine.models.session import (
    CONTRADICTION_PENALTY,
    GAP_WEIGHTS,
    SCHEMA_VERSION,
    AuditResult,
    AuditTrailEntry,
    Contradiction,
    Gap,
    InterrogationSession,
    check_resumable,
    consistency_score,
)
from engine.report.export import to_json, to_markdown
from engine.routing.structured import check_schema
from tests.support.factory import sample_pair, sample_session

pair = sample_pair
session = sample_session


def test_consistency_score_follows_the_documented_weights() -> None:
    gaps = [Gap(category="ambiguity", description="d", severity=s)  # type: ignore[arg-type]
            for s in ("high", "medium", "low")]
    assert (CONTRADICTION_PENALTY, GAP_WEIGHTS) == (10, {"high": 15, "medium": 8, "low": 3})
    assert consistency_score(2, gaps) == 100 - 20 - 15 - 8 - 3
    assert consistency_score(9, gaps) == 0
    assert consistency_score(0, []) == 100


def test_the_score_is_recomputable_from_a_stored_session() -> None:
    audit = AuditResult(
        consistency_score=consistency_score(1, [pair(2).gap_analysis.gaps[0]]),
        contradictions=[Contradiction(qa_pair_indexes=(0, 1), description="x")],
        remaining_gaps=pair(2).gap_analysis.gaps,
        summary="s",
    )
    loaded = InterrogationSession.model_validate_json(
        session(audit_result=audit, status="completed").model_dump_json()
    )
    assert loaded.audit_result is not None
    assert loaded.audit_result.consistency_score == 75 == consistency_score(
        len(loaded.audit_result.contradictions), loaded.audit_result.remaining_gaps
    )


@pytest.mark.parametrize(
    "change",
    [
        {"iteration_limit": 4},
        {"iteration_limit": 21},
        {"status": "paused"},
        {"hypothesis": {"text": "   "}},
        {"id": "not-a-uuid"},
    ],
)
def test_invalid_sessions_are_refused(change: dict[str, object]) -> None:
    data = json.loads(session().model_dump_json())
    data.update(change)
    with pytest.raises(ValidationError):
        InterrogationSession.model_validate(data)


def test_pairs_must_be_numbered_in_order_and_contradictions_must_exist() -> None:
    data = json.loads(session(2).model_dump_json())
    data["qa_pairs"][1]["sequence"] = 3
    with pytest.raises(ValidationError, match="sequence 3"):
        InterrogationSession.model_validate(data)
    bad = AuditResult(consistency_score=90,
                      contradictions=[Contradiction(qa_pair_indexes=(0, 5), description="x")],
                      summary="s")
    with pytest.raises(ValidationError, match="does not exist"):
        session(2, audit_result=bad)


def test_event_records_round_trip_and_bad_lines_are_refused() -> None:
    entry = AuditTrailEntry(event="provider_switch", from_provider="a:m", to_provider="b:m",
                            reason="cut")
    for event in (AnswerDelta(sequence=1, text="\x1b[2J[/] ünï"), PairCompleted(pair=pair(1)),
                  TrailAdded(entry=entry), Finished(status="completed")):
        line = encode_record(Record(7, 1.5, event))
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert decode_record(line) == Record(7, 1.5, event)
    for bad in (b"{", b"[]", b'{"n":1,"at":0,"type":"nope"}', b'{"type":"finished"}'):
        with pytest.raises(ValueError):
            decode_record(bad)


def test_schemas_are_valid_and_bounded_by_the_token_budget() -> None:
    for schema in (gap_schema(5, 1024), gap_schema(1, 64), audit_schema(1, 64),
                   audit_schema(10, 4096)):
        check_schema(schema)
    assert audit_schema(1, 2048)["properties"]["contradictions"]["maxItems"] == 0
    assert audit_schema(3, 2048)["properties"]["contradictions"]["maxItems"] == 3
    # under the consistency protocol a round's own answers may contradict each other
    assert audit_schema(1, 2048, sampled=True)["properties"]["contradictions"]["maxItems"] == 1
    assert audit_schema(3, 2048, sampled=True)["properties"]["contradictions"]["maxItems"] == 6
    small = audit_schema(3, 200)["properties"]["summary"]["maxLength"]
    assert small < audit_schema(3, 2048)["properties"]["summary"]["maxLength"]
    jsonschema.validate({"gaps": [], "completeness_score": 100, "requires_follow_up": False},
                        gap_schema(1, 160))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"gaps": [], "completeness_score": 101, "requires_follow_up": False},
                            gap_schema(1, 160))


def test_the_witness_transcript_never_holds_analyses_the_detective_one_does() -> None:
    pairs = [pair(1), pair(2)]
    assert "gap 1" in transcript(pairs, analyses=True)
    assert "gap 1" not in transcript(pairs, analyses=False)
    assert "Q2: question 2?" in transcript(pairs, analyses=False)
    seen = witness_messages(pairs, "question 3?")
    assert [(m.role, m.content) for m in seen] == [
        ("user", "question 1?"), ("assistant", "an answer"),
        ("user", "question 2?"), ("assistant", "an answer"), ("user", "question 3?"),
    ]


def test_apply_roles_takes_names_and_kind_model_specs() -> None:
    config = Config.model_validate(
        {"providers": {"mine": {"kind": "openai", "model": "x", "base_url": "http://127.0.0.1:9/v1",
                                "enabled": False}}}
    )
    routed = apply_roles(config, ["mine", "ollama:llama3.2"], ["local:gemma"])
    assert routed.roles["detective"] == ["mine", "ollama"]
    assert routed.roles["witness"] == ["local"]
    assert routed.providers["ollama"].model == "llama3.2"
    assert routed.providers["mine"].enabled and not config.providers["mine"].enabled
    with pytest.raises(ConfigError, match="nope"):
        apply_roles(config, ["nope"], [])


def test_only_unfinished_sessions_resume() -> None:
    for status in ("running", "failed", "cancelled"):
        check_resumable(session(status=status))
    for status in ("completed", "limit-reached"):
        with pytest.raises(SessionError, match="already ended"):
            check_resumable(session(status=status))


def test_exports_hold_every_question_and_answer_and_json_loads_back_equal() -> None:
    original = session(3, status="failed", error="boom")
    original.qa_pairs[1].answer = "line one\n\x1b]52;c;ZXZpbA==\x07[@click=app.quit] two"
    markdown = to_markdown(original)
    for p in original.qa_pairs:
        assert p.question in markdown
    assert "line one" in markdown and "[@click=app.quit] two" in markdown
    assert "\x1b" not in markdown and "\x07" not in markdown
    loaded = InterrogationSession.model_validate_json(to_json(original))
    assert loaded == original
    assert json.loads(to_json(original))["schema_version"] == SCHEMA_VERSION == 2
    assert uuid.UUID(json.loads(to_json(original))["id"]).version == 4
