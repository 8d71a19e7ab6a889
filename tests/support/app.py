"""Driving the app in tests: waiting for a condition, an app on a given config, and a fixed
session for snapshots."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable

from engine import Paths, load_config
from engine.models.events import (
    AnswerDelta,
    AuditReady,
    Finished,
    GapAnalysisReady,
    PairCompleted,
    Phase,
    ProviderChosen,
    QuestionDelta,
    Started,
)
from engine.models.session import (
    AuditResult,
    Gap,
    Hypothesis,
    InterrogationSession,
)
from engine.storage.eventlog import EventLogWriter
from tests.support.factory import sample_pair
from tests.support.interrogation import FAST
from tui.app import DetektivApp


async def until(pilot: Pilot[int], condition: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await pilot.pause(0.05)


def _sized(table: DataTable[Any]) -> bool:
    """Whether `table` has sized its columns to its cells (it does so when idle: a shot taken
    before shows them cut to their headings' widths)."""
    for index, column in enumerate(table.ordered_columns):
        cells = (table.get_row_at(row)[index] for row in range(table.row_count))
        widest = max(((cell if isinstance(cell, Text) else Text(str(cell))).cell_len
                      for cell in cells), default=0)
        if column.auto_width and column.content_width < widest:
            return False
    return True


async def quiet(pilot: Pilot[int], done: Callable[[], bool] = lambda: True,
                timeout: float = 90) -> None:
    """Until `done()` holds, no worker runs and every table on the screen has rows sized to
    its cells; then a frame more. What a snapshot waits for, however busy the machine."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause()
        app = pilot.app
        if done() and not any(w.is_running for w in app.workers) \
                and all(_sized(t) for t in app.screen.query(DataTable)):
            break
        if time.monotonic() > deadline:
            raise AssertionError("the screen never settled")
        await pilot.pause(0.02)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


def app_for(home: Path, text: str = "") -> DetektivApp:
    (home / "config.toml").write_text(text)
    paths = Paths.from_env()
    return DetektivApp(paths, load_config(paths))


def config_text(providers: dict[str, str], detective: list[str], witness: list[str],
                min_rounds: int = 3) -> str:
    """A config of `providers` (OpenAI-compatible, by base URL) in those roles, with the fast
    budgets and `min_rounds` (3: a run the scripted detective judges decisively still takes
    three rounds, long enough to watch)."""
    lines = []
    for priority, (name, url) in enumerate(providers.items(), start=1):
        lines += [f"[providers.{name}]", 'kind = "openai"', 'model = "gemma"',
                  f'base_url = "{url}"', f"priority = {priority}", "first_token_timeout = 30",
                  "stall_timeout = 15", ""]
    lines += ["[roles]", f"detective = {json.dumps(detective)}",
              f"witness = {json.dumps(witness)}", "", "[interrogation]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in {**FAST, "min_rounds": min_rounds}.items()]
    return "\n".join(lines) + "\n"


def finished(app: DetektivApp) -> bool:
    return app.live.status_text.startswith(("completed", "limit-reached", "failed",
                                            "cancelled"))


START = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)


def fixed_session(root: Path, n: int, status: str = "completed") -> InterrogationSession:
    begun = START + timedelta(hours=n)
    gaps = [Gap(category="vagueness", description="the dates stay vague", severity="medium")]
    pair = sample_pair(
        1, question="Where was the shipment on the third?",
        answer="At the **harbour**, as far as I know.\n\n- loaded at 03:10\n- left at dawn",
        when=begun, gaps=gaps, completeness=70, follow_up=False,
        detective="cloud:gpt-4o", witness="local:gemma-3-270m",
    )
    audit = AuditResult(consistency_score=92, remaining_gaps=gaps,
                        summary="The witness places the shipment at the harbour.",
                        verdict="false", probability_false=0.8, deciding_rounds=[1])
    session = InterrogationSession(
        id=uuid.UUID(hex=f"{(n + 1) * 0x1234567:08x}" + "0" * 24), hypothesis=Hypothesis(
            text=f"Hypothesis {n}: the shipment left on the third", created_at=begun),
        start_time=begun, end_time=begun + timedelta(minutes=2), status=status,  # type: ignore[arg-type]
        iteration_limit=8, current_iteration=1, qa_pairs=[pair], audit_result=audit,
    )
    name = f"{begun.strftime('%Y-%m-%d_%H-%M-%S')}_{session.short_id}"
    directory = root / name
    directory.mkdir(parents=True)
    log = EventLogWriter(directory / "events.jsonl", clock=lambda: 1000.0)
    for event in (
        Started(session_id=str(session.id), hypothesis=session.hypothesis.text,
                iteration_limit=8),
        Phase(phase="question", sequence=1),
        ProviderChosen(role="detective", provider="cloud:gpt-4o"),
        QuestionDelta(sequence=1, text=pair.question),
        Phase(phase="answer", sequence=1),
        ProviderChosen(role="witness", provider="local:gemma-3-270m"),
        AnswerDelta(sequence=1, text=pair.answer),
        Phase(phase="analysis", sequence=1),
        GapAnalysisReady(sequence=1, analysis=pair.gap_analysis),
        PairCompleted(pair=pair),
        Phase(phase="audit", sequence=1),
        AuditReady(audit=audit),
        Finished(status=status),  # type: ignore[arg-type]
    ):
        log.append(event)
    log.close()
    session.events_recorded = log.last_n
    (directory / "metadata.json").write_text(session.model_dump_json())
    return session  # no index line: the store reads a folder its index does not know


TESTIMONY_TEXT = ("Niacin is vitamin B3. It helps convert food into energy.\n"
                  "Niacin is also called pantothenic acid. You should eat more fish.")


ClaimSpec = tuple[str, str, float | None, tuple[str, str, float] | None, str | None]
"""A stored testimony's claim: its text, state, P(false), its round (question, answer, the
answer's P(true)) or None, and why (its state's reason) or None."""


def fixed_testimony(root: Path, n: int = 9) -> InterrogationSession:
    """A testimony's stored session, fixed for snapshots: the witness's answer to a request,
    its four claims (held, contradicted, unsure, not checkable) and their rounds, as a run
    journals them."""
    return stored_testimony(root, n, "Summarize the health benefits of vitamin B3",
                            TESTIMONY_TEXT, [
        ("Niacin is vitamin B3.", "held", 0.03,
         ("Which vitamin is niacin?", "Niacin is vitamin B3.", 0.97), None),
        ("Niacin helps convert food into energy.", "unsure", 0.5,
         ("What does niacin do in the body?", "It is a vitamin.", 0.5),
         "the rounds that bear on the hypothesis cancel each other out"),
        ("Niacin is also called pantothenic acid.", "contradicted", 0.96,
         ("What other name does niacin have?", "Niacin is nicotinic acid; pantothenic acid "
          "is vitamin B5.", 0.04), None),
        ("You should eat more fish.", "not checkable", None, None, "advice, not a fact")],
        order=[1, 3, 2])


LONG_TESTIMONY = """Niacin, also known as **vitamin B3**, has several health benefits:

1. **Energy Production**: Niacin helps convert food into energy. It is part of NAD and NADP.
2. **Cholesterol**: Niacin can raise HDL cholesterol and lower triglycerides.
3. **Skin Health**: Niacin is essential for maintaining healthy skin.
4. **Nervous System**: Niacin supports the nervous system.
5. **Digestion**: Niacin helps the digestive system work.
6. **Pellagra**: A lack of niacin causes pellagra, with dermatitis, diarrhoea and dementia.
7. **Anaemia**: Niacin can help reduce symptoms of pernicious anaemia.
8. **Glucose**: Niacin helps convert carbohydrates into glucose.

### In short
Niacin is water-soluble, so the body does not store it. High doses can cause flushing. \
The daily value for adults is 16 mg for men and 14 mg for women. Niacin is found in meat, \
fish and peanuts. Harvard's HSACF study proved that niacin improves memory. You should talk \
to your doctor before taking supplements."""
"""A witness's markdown answer of 17 claims (the Vitamin B3 request, as users run it)."""

LONG_CLAIMS: list[ClaimSpec] = [
    ("Niacin is also known as vitamin B3.", "held", 0.02,
     ("What other name does niacin have?", "Niacin is vitamin B3.", 0.97), None),
    ("Niacin helps convert food into energy.", "held", 0.05, None, None),
    ("Niacin is part of NAD and NADP.", "held", 0.08, None, None),
    ("Niacin can raise HDL cholesterol and lower triglycerides.", "held", 0.12, None, None),
    ("Niacin is essential for maintaining healthy skin.", "held", 0.2, None, None),
    ("Niacin supports the nervous system.", "unsure", 0.5,
     ("What does niacin do for the nerves?", "It is important for nerves, but not always.",
      0.5), "the rounds lean against it and the other readings for it"),
    ("Niacin helps the digestive system work.", "held", 0.3, None, None),
    ("A lack of niacin causes pellagra, with dermatitis, diarrhoea and dementia.", "held",
     0.04, None, None),
    ("Niacin can help reduce symptoms of pernicious anaemia.", "contradicted", 0.86,
     ("Which condition does a lack of vitamin B12 cause?", "Pernicious anaemia comes from a "
      "lack of vitamin B12; niacin does not directly affect its symptoms.", 0.08), None),
    ("Niacin helps convert carbohydrates into glucose.", "unsupported", 0.71,
     ("What does niacin do with carbohydrates?", "It helps release energy from them.", 0.3),
     None),
    ("Niacin is water-soluble.", "held", 0.06, None, None),
    ("The body does not store niacin.", "held", 0.25, None, None),
    ("High doses of niacin can cause flushing.", "held", 0.1, None, None),
    ("The daily value of niacin for adults is 16 mg for men and 14 mg for women.", "unsure",
     0.5, None, "the readings lean neither way"),
    ("Niacin is found in meat, fish and peanuts.", "held", 0.07, None, None),
    ("Harvard's HSACF study proved that niacin improves memory.", "contradicted", 0.93,
     ("Which study found that niacin improves memory?", "I am not aware of such a study.",
      0.1), None),
    ("You should talk to your doctor before taking supplements.", "not checkable", None,
     None, "advice, not a fact"),
]


def long_testimony(root: Path, n: int = 10) -> InterrogationSession:
    """The Vitamin B3 request's testimony of 17 claims, fixed for snapshots: a markdown
    answer (a numbered list with bold headings, a heading), every state among its claims."""
    return stored_testimony(root, n, "Summarize the health benefits of Vitamin B3",
                            LONG_TESTIMONY, LONG_CLAIMS, samples=True)


def stored_testimony(root: Path, n: int, request: str, text: str, specs: list[ClaimSpec],
                     order: list[int] | None = None, samples: bool = False
                     ) -> InterrogationSession:
    """A testimony's stored session as a run journals it: `request` answered by `text`, its
    claims as `specs` say, their rounds in `order` (claim numbers; default: in turn);
    `samples`: each claim read against sampled answers too."""
    from engine.interrogation.claims import locate
    from engine.interrogation.rounds import analysis_of
    from engine.interrogation.testimony import NO_ANALYSIS, testimony_audit
    from engine.models.events import ClaimExamined, ClaimsSplit
    from engine.models.judgement import Judgement
    from engine.models.session import ProvidersUsed, QuestionAnswerPair
    from engine.models.testimony import Claim, SignalReading, Testimony

    begun = START + timedelta(hours=n)
    used = ProvidersUsed(detective="cloud:gpt-4o", witness="local:qwen")
    first = QuestionAnswerPair(sequence=1, question=request, answer=text,
                               timestamp=begun, gap_analysis=NO_ANALYSIS, testimony=True,
                               provider_used=ProvidersUsed(detective="", witness="local:qwen"))
    claims = []
    for number, (said, _, _, _, why) in enumerate(specs, start=1):
        start, end = locate(said, text)
        claims.append(Claim(number=number, text=said, start=start, end=end, why=why))
    pairs = [first]
    for number in order or [i for i, spec in enumerate(specs, start=1) if spec[3]]:
        _, _, _, asked, _ = specs[number - 1]
        assert asked is not None
        question, answer, p_true = asked
        bearing = "supports" if p_true >= 0.6 else "contradicts" if p_true <= 0.4 else "silent"
        judgement = Judgement(bearing=bearing, p_true=p_true, source="logprobs")  # type: ignore[arg-type]
        pairs.append(QuestionAnswerPair(
            sequence=len(pairs) + 1, question=question, answer=answer, timestamp=begun,
            gap_analysis=analysis_of(judgement, specs[number - 1][0]), provider_used=used,
            judgement=judgement, claim=number))
    for number, (_, state, p_false, asked, _) in enumerate(specs, start=1):
        claim = claims[number - 1]
        claim.state, claim.probability_false = state, p_false  # type: ignore[assignment]
        if state == "not checkable":
            continue
        own = [p for p in pairs if p.claim == number]
        claim.deciding = own[-1].sequence if own and state not in ("unsure",) else None
        claim.readings = {"alone": SignalReading(p_true=0.8)}
        if samples:
            claim.readings["samples"] = SignalReading(p_true=round(1 - (p_false or 0.5), 2))
        if asked is not None:
            claim.readings["rounds"] = SignalReading(
                p_true=asked[2] if abs(asked[2] - 0.5) > 0.1 else None)
    split = Testimony(source="witness", claims=[Claim(number=c.number, text=c.text,
                                                      start=c.start, end=c.end,
                                                      state="not checkable"
                                                      if c.state == "not checkable"
                                                      else "pending", why=c.why)
                                                for c in claims], split=True)
    session = InterrogationSession(
        id=uuid.UUID(hex=f"{(n + 1) * 0x1234567:08x}" + "0" * 24),
        hypothesis=Hypothesis(text=request, created_at=begun), start_time=begun,
        end_time=begun + timedelta(minutes=2), status="completed", iteration_limit=5,
        current_iteration=len(pairs), qa_pairs=pairs,
        testimony=Testimony(source="witness", claims=claims, split=True))
    session.audit_result = testimony_audit(session)
    name = f"{begun.strftime('%Y-%m-%d_%H-%M-%S')}_{session.short_id}"
    directory = root / name
    directory.mkdir(parents=True)
    log = EventLogWriter(directory / "events.jsonl", clock=lambda: 1000.0)
    events: list[Any] = [
        Started(session_id=str(session.id), hypothesis=request, iteration_limit=5),
        Phase(phase="testimony", sequence=1),
        ProviderChosen(role="witness", provider="local:qwen"),
        AnswerDelta(sequence=1, text=text), PairCompleted(pair=first),
        Phase(phase="split", sequence=1), ClaimsSplit(testimony=split),
        Phase(phase="claims", sequence=1)]
    examined: set[int] = set()
    for pair in pairs[1:]:
        events.append(PairCompleted(pair=pair))
        assert pair.claim is not None
        if pair.claim not in examined and pair.claim == max(
                p.claim or 0 for p in pairs if p.claim == pair.claim):
            examined.add(pair.claim)
            events.append(ClaimExamined(claim=claims[pair.claim - 1]))
    for claim in claims:  # those no round was needed for
        if claim.number not in examined and claim.state != "not checkable":
            events.append(ClaimExamined(claim=claim))
    events += [Phase(phase="audit", sequence=len(pairs)),
               AuditReady(audit=session.audit_result), Finished(status="completed")]
    for event in events:
        log.append(event)
    log.close()
    session.events_recorded = log.last_n
    (directory / "metadata.json").write_text(session.model_dump_json())
    return session


def screen_text(app: DetektivApp) -> list[str]:
    """The screen as it is drawn now, a string a row (what a terminal would show)."""
    strips = app.screen._compositor.render_strips()
    return ["".join(segment.text for segment in strip) for strip in strips]
