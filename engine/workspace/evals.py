"""The workspace's evaluation part: `detektiv eval` and the app's Evaluations screen.

    run = await workspace.evals.start(EvalRequest("demo", n=20), runs=3, baselines=True)
    async for event in run.events(): ...
    workspace.evals.runs() / summary(ref) / report(ref, Path("out")) / sessions(ref)

Everything an evaluation does to its items goes through `workspace.sessions` (each item is a
stored interrogation) and one router of its own; see `engine.evals.run`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from engine.config.roles import apply_roles
from engine.costs import Budget
from engine.errors import ConfigError, DatasetError
from engine.evals.board import write_board
from engine.evals.compare import Leaderboard, comparison_id, leaderboard
from engine.evals.datasets import DATASETS, NamedDataset, Progress, dataset_path
from engine.evals.folder import EvalRunInfo, RunFolder, list_runs
from engine.evals.items import Items, check_documents, chosen_items, holds_questions
from engine.evals.report import write_report
from engine.evals.run import (
    DEFAULT_CONCURRENCY,
    EvalRequest,
    EvalRun,
    Sessions as RunSessions,
    run_id,
)
from engine.evals.summary import EvalSummary, summarize
from engine.models.session import Protocol, WitnessMode, unknown_protocols
from engine.routing.slots import role_slots
from engine.storage.atomic import file_sha256

if TYPE_CHECKING:
    from engine.routing.router import Router
    from engine.storage.index import SessionSummary
    from engine.workspace.core import Workspace

__all__ = ["Evals", "RUNS"]

RUNS = (1, 3)
"""Interrogations an item may get: one, or three for a majority verdict."""
MAX_CONCURRENCY = 64


class Evals:
    """Evaluation runs of one workspace; see the module docstring."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    @property
    def root(self) -> Path:
        return self.workspace.paths.data_dir / "evals"

    @staticmethod
    def datasets() -> tuple[NamedDataset, ...]:
        """The named datasets (`demo`, `halueval-qa`)."""
        return tuple(DATASETS.values())

    def items(self, request: EvalRequest, progress: Progress | None = None
              ) -> tuple[Path, str, Items]:
        """(file, sha256, the sampled items) of a request; a Hub dataset is fetched on first
        use (blocking). `DatasetError` when they cannot be had. The items of a JSON-lines
        file are read from it as they are needed (`chosen_items`)."""
        path = dataset_path(self.workspace.paths, request.dataset, progress)
        items = chosen_items(path, request.n, request.seed)
        check_documents(items, request.mode)
        if request.mode not in ("open", "document") and any(
                item.label is None for item in items):
            raise ConfigError(f"{path.name}: open questions are asked of the witness as they "
                               "are: --mode open (or document), not " + request.mode)
        return path, file_sha256(path), items

    @staticmethod
    def default_mode(dataset: str, compared: bool) -> WitnessMode:
        """The witness mode when none is asked for: `open` for a comparison or a file of open
        questions (asked as they are), else `planted`."""
        return "open" if compared or holds_questions(Path(dataset)) else "planted"

    async def start(self, request: EvalRequest, *, runs: int = 1, baselines: bool = False,
                    concurrency: int | None = None, retry_failed: bool = False,
                    progress: Progress | None = None,
                    max_cost: float | None = None,
                    protocols: Sequence[str] = ("cross-exam",),
                    compared: bool = False) -> EvalRun:
        """A run ready to go (its folder created or found again). `protocols`: the
        interrogation protocols to judge each item with (each a system of its own; like
        `baselines`, they add to a run). `compared`: the run is one witness of a comparison
        (`compare`). `ConfigError` for bad settings or unknown providers, `DatasetError` for
        items that cannot be read."""
        chosen = tuple(dict.fromkeys(protocols))
        if (problem := unknown_protocols(chosen or [""])) is not None:
            raise ConfigError(f"--protocol: {problem}")
        if runs not in RUNS:
            raise ConfigError(f"--runs must be 1 or 3 (got {runs})")
        if max_cost is not None and not max_cost > 0:
            raise ConfigError(f"--max-cost must be more than 0 (got {max_cost})")
        if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ConfigError(f"--concurrency must be between 1 and {MAX_CONCURRENCY} "
                              f"(got {concurrency})")
        workspace = self.workspace
        limit = workspace.sessions.check_limit(request.limit)
        path, checksum, items = await asyncio.to_thread(self.items, request, progress)
        router = await self._router(request)
        try:
            slots = concurrency or await _slots(router)
            ident = run_id(request, checksum, limit)
            folder = RunFolder(self.root / ident)
            comparison = comparison_id(request, checksum, limit) if compared else None
            detective = router.chain("detective")
            witness = router.chain("witness")
            if not detective or not witness:
                raise ConfigError("no provider can play the "
                                  + ("detective" if not detective else "witness"))
            first = router.providers[detective[0]]
            if folder.exists:
                info = folder.info()
                info = info.model_copy(update={
                    "runs": max(info.runs, runs), "baselines": info.baselines or baselines,
                    "protocols": list(dict.fromkeys([*info.protocols, *chosen])),
                    "comparison": info.comparison or comparison})
            else:
                info = EvalRunInfo(
                    id=ident, dataset=request.dataset, dataset_file=str(path),
                    checksum=checksum, n=request.n, seed=request.seed, mode=request.mode,
                    detective=list(request.detective), witness=list(request.witness),
                    limit=limit, items=len(items), runs=runs, baselines=baselines,
                    protocols=list(chosen),
                    detective_label=first.label,
                    witness_label=router.providers[witness[0]].label,
                    demonstration=first.config.is_demonstration,
                    comparison=comparison,
                    pooling=workspace.config.interrogation.pooling,
                )
            folder.open()
            folder.save_info(info)
        except BaseException:
            await router.aclose()
            raise
        door = RunSessions(start=workspace.sessions.start, resume=workspace.sessions.resume,
                           load=workspace.store.load)
        run = EvalRun(door, workspace.config.interrogation, folder, info, items, router,
                      runs=runs, baselines=baselines, concurrency=slots,
                      retry_failed=retry_failed, protocols=cast(tuple[Protocol, ...], chosen))
        run.budget = Budget(max_cost) if max_cost is not None else None
        return run

    async def _router(self, request: EvalRequest) -> Router:
        """The run's own router: its chains, the response cache bypassed."""
        from engine.providers import discover_ollama

        workspace = self.workspace
        config = workspace.config
        names = [*request.detective, *request.witness]
        if any(n not in config.providers and ":" not in n for n in names) or not (
                request.detective and request.witness):
            await discover_ollama(config)
        config = apply_roles(config, list(request.detective), list(request.witness))
        config.cache.enabled = False  # a copy: the workspace's own config is untouched
        return await workspace.new_router(config, discover=False)

    def runs(self) -> list[EvalRunInfo]:
        """Every evaluation run, the most recently run first."""
        return list_runs(self.root)

    def folder(self, ref: str) -> RunFolder:
        """The run whose id starts with `ref`; `DatasetError` when none or several do."""
        ref = ref.strip()
        found = [info.id for info in self.runs() if ref and info.id.startswith(ref)]
        if len(found) != 1:
            raise DatasetError(f"no evaluation run {ref!r}" if not found else
                               f"{ref!r} names {len(found)} evaluation runs; give more of "
                               "the id")
        return RunFolder(self.root / found[0])

    def summary(self, ref: str) -> EvalSummary:
        """The figures of a run so far (streaming over its results)."""
        return summarize(self.folder(ref))

    def report(self, ref: str, directory: Path, summary: EvalSummary | None = None
               ) -> list[Path]:
        """Write report.md, results.jsonl and the plots of a run into `directory`."""
        folder = self.folder(ref)
        return write_report(summary or summarize(folder), folder, directory)

    def fit(self, ref: str, output: Path) -> tuple[Path, dict[str, Any]]:
        """Fit the pool on run `ref`'s labelled results (`engine.evals.fitting`), written as
        `output` (a pooling file: `[interrogation] pooling` names it); the file and the fit's
        figures. `FitRefused` when the results cannot fit one."""
        from engine.evals.fitting import fit_results
        from engine.interrogation.pooling import load_pooling
        from engine.storage.atomic import atomic_write_text  # a write that replaces a file

        folder = self.folder(ref)
        info = folder.info()
        configured = self.workspace.config.interrogation.pooling
        base, _ = load_pooling(Path(configured).expanduser() if configured else None)
        pool, figures = fit_results(folder.results(), info, base,
                                    where=f"evaluation run {info.id}: {info.dataset}")
        output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(output, json.dumps(pool.to_json(), indent=1) + "\n")
        return output, figures

    def comparisons(self) -> dict[str, list[EvalRunInfo]]:
        """Each witness comparison's runs (its id → its runs, the most recent first)."""
        found: dict[str, list[EvalRunInfo]] = {}
        for info in self.runs():
            if info.comparison:
                found.setdefault(info.comparison, []).append(info)
        return found

    def comparison(self, ref: str) -> Leaderboard:
        """The leaderboard of the comparison whose id starts with `ref` (its witnesses in the
        order they were first run)."""
        ref = ref.strip()
        every = self.comparisons()
        found = [ident for ident in every if ref and ident.startswith(ref)]
        if len(found) != 1:
            raise DatasetError(f"no witness comparison {ref!r}" if not found else
                               f"{ref!r} names {len(found)} comparisons; give more of the id")
        runs = sorted(every[found[0]], key=lambda info: info.created)
        system = "consistency" if runs[0].protocols[:1] == ["consistency"] else "interrogation"
        return leaderboard(found[0], [RunFolder(self.root / info.id) for info in runs], system)

    def board_report(self, ref: str, directory: Path, board: Leaderboard | None = None
                     ) -> list[Path]:
        """Write a comparison's report.md and leaderboard.png into `directory` (`board`: its
        leaderboard, when it was just read)."""
        return write_board(board or self.comparison(ref), directory)

    def sessions(self, ref: str) -> list[SessionSummary]:
        """The stored sessions of a run, newest first."""
        ident = self.folder(ref).directory.name
        return [row for row in self.workspace.store.list() if row.eval_run == ident]


async def _slots(router: Router) -> int:
    """The fewest slots the first detective and witness servers report (no more than
    `MAX_CONCURRENCY`, whatever a server says), else the default."""
    return await role_slots(router, MAX_CONCURRENCY, DEFAULT_CONCURRENCY)
