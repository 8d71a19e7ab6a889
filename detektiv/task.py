"""`detektiv/hallucinations`: a model answers the items of a data set detektiv reads, then
detektiv's examination scores each answer (`detektiv/examination`).

    inspect eval detektiv/hallucinations --model openai/gpt-4o-mini -T data=halueval-qa -T n=20
    inspect eval detektiv/hallucinations --model mockllm/model -T data=halueval-summarization \
        -T replay=true        # the data set's own answers, labelled: beside `detektiv eval`

`data` names what `detektiv eval` reads: `halueval-qa` (the question asked, the row's
knowledge held by detektiv's witness), `halueval-summarization` (the document summarised, the
witness holding it), `demo`, or a file of open questions or of HaluEval's rows (a path).
`n` items (whole rows), drawn with `seed` as `detektiv eval --n N --seed S` draws them.
`replay=true` answers with the data set's own answers instead of the model — HaluEval's right
and hallucinated ones, each a sample labelled in its metadata — so the scores and
`detektiv/verdict_accuracy` stand beside `detektiv eval`'s on the same items. The scorer's
options pass through: `value`, `witness`, `limit`, `demonstration`.
"""

from __future__ import annotations

from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver

from detektiv.scorer import Value, Witness, examination
from engine import EvalRequest, Paths, Workspace

__all__ = ["hallucinations", "replayed", "samples_of"]

SUMMARISE = "Summarize the following document in a few sentences.\n\n{document}"
"""What a model is asked for a summarization row (its document is also the witness's)."""


def samples_of(items: list[Any], replay: bool) -> list[Sample]:
    """Inspect's samples for `items` (`detektiv eval`'s, as `Evals.items` reads them): with
    `replay`, one for each item (its answer, labelled,
    in the metadata), else one for each group of items (a HaluEval row is one question,
    whatever answers it carries), the question put to the model."""
    found: list[Sample] = []
    seen: set[str] = set()
    for item in items:
        metadata: dict[str, Any] = {"document": item.document} if item.document else {}
        if item.question is None and item.document is not None:  # a summarization row
            question = SUMMARISE.format(document=item.document)
            given = item.claim
            metadata["question"] = None  # a summary answers no question: examined as it is
        else:
            question = item.question or item.claim
            given = item.answer if item.answer is not None else item.claim
        if replay:
            if item.label is None:
                continue  # an open question has no answer of its own to replay
            found.append(Sample(input=question, id=item.key, metadata={
                **metadata, "label": item.label, "answer": given}))
        elif item.group not in seen:
            seen.add(item.group)
            found.append(Sample(input=question, id=item.group, metadata=metadata))
    return found


@solver
def replayed() -> Solver:
    """The sample's own answer (`metadata["answer"]`) as the model's output: nothing is
    generated."""
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.output = ModelOutput.from_content(model="replay",
                                                content=str(state.metadata["answer"]))
        return state
    return solve


@task
def hallucinations(data: str = "halueval-qa", n: int | None = 20, seed: int = 0,
                   replay: bool = False, value: Value = "held",
                   witness: Witness = "configured", limit: int | None = None,
                   demonstration: bool = False) -> Task:
    """A model's answers to `data`'s items, examined by detektiv (the module docstring)."""
    workspace = Workspace(Paths.from_env())  # reads the items only: nothing to close
    _, _, items = workspace.evals.items(EvalRequest(data, n=n, seed=seed, mode="open"))
    chosen = list(items)
    dataset = MemoryDataset(samples_of(chosen, replay), name=f"detektiv-{data}")
    return Task(dataset=dataset, solver=replayed() if replay else generate(),
                scorer=examination(value=value, witness=witness, limit=limit,
                                   demonstration=demonstration))
