"""`detektiv/examination`: each sample's output examined by detektiv, as `detektiv run` examines
an answer — taken apart into claims, each claim read by its signals and questioned where they
leave doubt — and scored by what the examination held.

    from detektiv.scorer import examination
    Task(dataset=..., solver=generate(), scorer=examination(value="held"))
    inspect score LOG.eval --scorer detektiv/examination -S witness=model

The answer is `state.output.completion`, the question `state.input_text` (or
`metadata["question"]`, where a sample gives one; None: the answer is a summary and answers
none, examined as it stands). With a document
(the sample's `target`, or `metadata["document"]`) the witness holds it (`--mode document`):
the examination asks whether the document says what the answer says. Without one, the
witness is the one detektiv's configuration chooses (`witness="configured"`), or the very
model Inspect evaluated (`witness="model"`: called through Inspect's own model API, lent to
detektiv's engine as a provider whose answers arrive whole, `Workspace.lend`): the answer's
claims are read against its answers to the same question drawn again, and questioned.

The score's value is what `value` asks for — `"held"` (the share of the answer's checkable
claims held), `"holds"` (1 when the answer holds as a whole, 0 when not, unscored when its
verdict is undetermined) or `"p_false"` (the answer's P(false)) — with the claims counted in
its metadata, the session id (`detektiv export ID` opens the examination behind it), and an
explanation naming the claims contradicted, unsupported and unsure with their P(false). The
metrics: the value's mean and standard error, `detektiv/held_share` and
`detektiv/contradicted_share` (each with Inspect's standard error), and, where the samples'
metadata carry a `label` (a replayed HaluEval item), `detektiv/verdict_accuracy`.

A session is keyed by the sample, its epoch and what is examined (`ident`): scored again —
`inspect eval-retry`, `inspect score` — an examination that ended is read back, one that was
cut off is resumed. Examinations run side by side within detektiv's servers' slots (one
workspace and one router per process). detektiv's providers are detektiv's own
configuration (`DETEKTIV_HOME`, `detektiv providers`); where they cannot examine (invalid,
or only the shipped demonstration model), the sample is unscored with one line that says what
to set (`scoring_failed`), and the rest go on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import uuid
from contextlib import aclosing
from typing import Any, Literal

from inspect_ai.model import get_model
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Target,
    mean,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState

from detektiv._witness import lent_answer
from engine import (
    ConfigError,
    DetektivError,
    Paths,
    SessionError,
    SessionNotFound,
    Workspace,
)

__all__ = ["contradicted_share", "examination", "held_share", "verdict_accuracy"]

Value = Literal["held", "holds", "p_false"]
Witness = Literal["configured", "model"]
LENT = "inspect"
"""The name Inspect's model is lent to detektiv under, for `witness="model"`."""
NAMESPACE = uuid.UUID("5d0b0c3e-4f2a-4c55-9a5e-76c1e0b8d7a1")
SETUP = ("set detektiv's detective and witness (a [providers.NAME] table in "
         "DETEKTIV_HOME's config.toml, or `detektiv providers add`; `detektiv providers` "
         "says what it has)")


def _derived(scores: list[SampleScore], key: str) -> list[SampleScore]:
    """`scores` with each value replaced by its metadata's `key` (those that have one)."""
    found = []
    for sample in scores:
        value = (sample.score.metadata or {}).get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and \
                not math.isnan(value):
            found.append(SampleScore(score=Score(value=float(value)),
                                     sample_id=sample.sample_id))
    return found


def _share(key: str, scores: list[SampleScore]) -> dict[str, float]:
    """`key`'s mean over the samples that have it, and its standard error (Inspect's own
    `mean` and `stderr`), named `key` and `key_stderr` in the log."""
    derived = _derived(scores, key)
    if not derived:
        return {key: float("nan"), f"{key}_stderr": float("nan")}
    return {key: float(mean()(derived)),  # type: ignore[arg-type]
            f"{key}_stderr": float(stderr()(derived))}  # type: ignore[arg-type]


@metric
def held_share() -> Metric:
    """The mean share of an answer's checkable claims held, with its standard error."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return _share("held_share", scores)
    return compute


@metric
def contradicted_share() -> Metric:
    """The mean share of an answer's checkable claims contradicted or unsupported, with its
    standard error."""
    def compute(scores: list[SampleScore]) -> dict[str, float]:
        return _share("contradicted_share", scores)
    return compute


@metric
def verdict_accuracy() -> Metric:
    """Of the samples whose metadata carry a `label` (True: the answer is right), the share
    whose verdict says so — as `detektiv eval` counts accuracy (an undetermined verdict is
    never right); NaN where none has a label."""
    def compute(scores: list[SampleScore]) -> float:
        rows = [(s.score.metadata or {}) for s in scores]
        labelled = [r for r in rows if isinstance(r.get("label"), bool)]
        if not labelled:
            return float("nan")
        right = sum(1 for r in labelled if r.get("verdict") == ("true" if r["label"]
                                                                 else "false"))
        return right / len(labelled)
    return compute


class _Examiner:
    """One workspace for the process (its shared router for detektiv's own providers; a run
    whose witness is a lent model has a router of its own), the models of Inspect's lent to
    it, and how many examinations run at once."""

    def __init__(self, demonstration: bool) -> None:
        self.demonstration = demonstration
        self.workspace: Workspace | None = None
        self._lent: dict[str, str] = {}
        """Inspect's model (its name) → the name it is lent under."""
        self._gate: asyncio.Semaphore | None = None
        self._lock = asyncio.Lock()

    async def ready(self, lend: bool) -> tuple[Workspace, asyncio.Semaphore, list[str]]:
        """The workspace, the gate and the witness chain (empty: the configured one);
        `DetektivError` when detektiv cannot examine."""
        async with self._lock:
            if self.workspace is None:
                # the response cache bypassed, as an evaluation's: a sample scored again must
                # not be served the first examination's answers
                workspace = Workspace(Paths.from_env(), use_cache=False)
                try:
                    workspace.config  # noqa: B018 - a ConfigError is said for each sample
                    router = await workspace.router()
                    chain = router.chain("detective")
                    if not chain:
                        raise ConfigError("detektiv has no detective: " + SETUP)
                    if router.providers[chain[0]].config.is_demonstration and \
                            not self.demonstration:
                        raise ConfigError("detektiv's detective is its shipped demonstration "
                                          "model, which cannot judge: " + SETUP)
                    self._gate = asyncio.Semaphore(await workspace.sessions.side_by_side())
                except BaseException:
                    await workspace.aclose()
                    raise
                self.workspace = workspace
            assert self._gate is not None
            if not lend:
                return self.workspace, self._gate, []
            model = get_model()
            key = str(model)
            if key not in self._lent:  # each model lent under a name of its own
                self._lent[key] = f"{LENT}-{len(self._lent) + 1}"
                self.workspace.lend(self._lent[key], key, lent_answer(model))
            return self.workspace, self._gate, [self._lent[key]]


def ident(state: TaskState, answer: str, document: str | None, options: dict[str, Any]
          ) -> uuid.UUID:
    """A session's id for this sample, epoch, answer, document and options: the same
    examination is found again (read back, or resumed), another one never is."""
    key = json.dumps({"sample": str(state.sample_id), "epoch": state.epoch,
                      "question": state.input_text, "answer": answer,
                      "document": hashlib.sha256((document or "").encode()).hexdigest(),
                      **options}, sort_keys=True)
    return uuid.uuid5(NAMESPACE, key)


def _reason(problem: str) -> str:
    """Inspect's reason for an answer detektiv could not examine: the model's (it refused,
    said nothing, or only echoed the question), else the instrument's."""
    if not problem.startswith("no testimony"):
        return "scoring_failed"
    if "declines" in problem:
        return "refusal"
    return "no_response" if "does not know" in problem or "no answer" in problem else \
        "invalid_response_format"


def _value(found: Any, value: Value) -> float:
    if value == "held":
        return found.held_share if found.held_share is not None else float("nan")
    if value == "p_false":
        return found.p_false if found.p_false is not None else float("nan")
    if found.verdict == "true":
        return 1.0
    return 0.0 if found.verdict == "false" else float("nan")


@scorer(metrics=[mean(), stderr(), held_share(), contradicted_share(), verdict_accuracy()])
def examination(value: Value = "held", witness: Witness = "configured",
                limit: int | None = None, demonstration: bool = False) -> Any:
    """The sample's output examined by detektiv (see the module docstring). `value`: `held`,
    `holds` or `p_false`; `witness`: `configured` (detektiv's witness role) or `model` (the
    model Inspect evaluated); `limit`: rounds at most a claim (detektiv's default);
    `demonstration`: let detektiv's shipped demonstration models examine (its own tests do;
    their verdicts mean nothing)."""
    if value not in ("held", "holds", "p_false"):
        raise ValueError(f"value must be held, holds or p_false (got {value!r})")
    if witness not in ("configured", "model"):
        raise ValueError(f"witness must be configured or model (got {witness!r})")
    examiner = _Examiner(demonstration)

    async def score(state: TaskState, target: Target) -> Score:
        answer = state.output.completion if state.output is not None else ""
        document = target.text.strip() or str(state.metadata.get("document") or "").strip() \
            or None
        label = state.metadata.get("label")
        extra = {"label": label} if isinstance(label, bool) else {}
        if not answer.strip():
            return Score.unscored(reason="no_response", answer="",
                                  explanation="The model gave no answer: nothing to examine.",
                                  metadata=extra)
        lend = witness == "model" and document is None
        try:
            workspace, gate, chosen = await examiner.ready(lend)
        except DetektivError as exc:
            return Score.unscored(reason="scoring_failed", explanation=(
                f"detektiv cannot examine: {exc.message}"), metadata=extra)
        key = ident(state, answer, document, {"witness": witness, "limit": limit,
                                              "model": str(state.model) if lend else None})
        try:
            async with gate:
                await _examined(workspace, state, answer, document, chosen, key, limit,
                                str(state.model))
            found = workspace.sessions.findings(str(key))
        except DetektivError as exc:  # refused before it ran (an answer too long, a session
            # damaged since): this sample's reason, the rest go on
            return Score.unscored(reason="scoring_failed", explanation=(
                f"detektiv cannot examine: {exc.message}"), metadata=extra)
        metadata = {**extra, "session": str(key), "verdict": found.verdict,
                    "p_false": found.p_false, "claims": found.counts,
                    "checkable": found.checkable, "held_share": found.held_share,
                    "contradicted_share": found.contradicted_share,
                    "mode": "document" if document is not None else "open",
                    "export": f"detektiv export {str(key)[:8]}"}
        if found.problem is not None:  # the answer said nothing, or the run could not end
            return Score.unscored(reason=_reason(found.problem),
                                  answer=found.verdict or "",
                                  explanation=found.explanation, metadata=metadata)
        return Score(value=_value(found, value), answer=found.verdict,
                     explanation=found.explanation, metadata=metadata)

    return score


async def _examined(workspace: Workspace, state: TaskState, answer: str,
                    document: str | None, witness: list[str], key: uuid.UUID,
                    limit: int | None, model: str) -> None:
    """Session `key` to its end: left as it is when it ended, resumed when it was cut off,
    else started (a cancellation from Inspect ends it `cancelled`, resumable)."""
    sessions = workspace.sessions
    try:
        status: str | None = sessions.status(str(key))
    except SessionNotFound:
        status = None
    if status in ("completed", "limit-reached", "nothing-asked"):
        return
    if status is not None:
        try:
            run = sessions.resume(str(key))
        except SessionError:  # another process runs it: what it has is what is read
            return
    else:
        asked = state.metadata["question"] if "question" in state.metadata else \
            state.input_text  # a sample may say it answers no question (a summary)
        run = sessions.examine_answer(asked, answer, document=document,
                                      document_name=f"sample {state.sample_id}",
                                      witness=witness, answered_by=model, ident=key,
                                      limit=limit)
    async with aclosing(run.events()) as events:
        async for _ in events:
            pass
