"""The case agent's behaviour tree (py_trees), ticked from the async engine without blocking it.

    case agent (sequence)
    ├── classify                   the question's type, what it needs searched
    ├── compose                    the system prompt from the segments for that type
    ├── gather                     async: what the classification says the question needs
    │                              (needs_vault: the vault searched for its words)
    └── until a stop (failure is success)
        └── turns (repeat)
            └── turn (sequence)
                ├── model turn     async: one streamed reply          (RUNNING while it streams)
                ├── parse signal   the reply's signal, into AgentSignalState
                ├── tools          async: the reply's tool calls       (RUNNING while they run)
                └── decide         go on (SUCCESS) or stop (FAILURE, the stop on the blackboard)

A tick never waits: an async step starts its coroutine as a task when it is entered and
reports RUNNING until the task is done; the task's end wakes the engine, which ticks again.
The tree's state lives on a blackboard under the run's own namespace (several runs in one
process do not share it); the steps are the run's methods (`Steps`).
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Protocol


def _stdout_for_import() -> None:
    """py_trees reads `sys.stdout.encoding` when it is imported; inside a running Textual app
    stdout is the app's print capture, which has none (the import would fail on the first
    run of the agent in the app). Import it once with a stdout that has one."""
    if "py_trees" in sys.modules or getattr(sys.stdout, "encoding", None):
        return
    captured = sys.stdout
    sys.stdout = sys.__stdout__ or io.StringIO()
    try:
        import py_trees  # noqa: F401
    finally:
        sys.stdout = captured


_stdout_for_import()

import py_trees  # noqa: E402
from py_trees.common import Access, Status  # noqa: E402

__all__ = ["KEYS", "AgentTree", "Steps"]

KEYS = ("question", "classification", "segments", "turn", "reply", "signal", "tool_calls",
        "stop")
"""The blackboard keys of a run."""


class Steps(Protocol):
    """What the tree's leaves do; `engine.agent.run.AgentRun` implements it. A sync step
    returns True for SUCCESS; an async step returns a coroutine, or None when there is
    nothing to do."""

    def classify(self) -> bool: ...
    def compose(self) -> bool: ...
    def gather(self) -> Awaitable[None] | None: ...
    def model_turn(self) -> Awaitable[None] | None: ...
    def parse_signal(self) -> bool: ...
    def tools(self) -> Awaitable[None] | None: ...
    def decide(self) -> bool: ...


class _Sync(py_trees.behaviour.Behaviour):
    def __init__(self, name: str, step: Callable[[], bool]) -> None:
        super().__init__(name)
        self.step = step

    def update(self) -> Status:
        return Status.SUCCESS if self.step() else Status.FAILURE


class _Async(py_trees.behaviour.Behaviour):
    def __init__(self, name: str, start: Callable[[], Awaitable[None] | None],
                 wake: Callable[[], None]) -> None:
        super().__init__(name)
        self.start = start
        self.wake = wake
        self.task: asyncio.Future[None] | None = None

    def initialise(self) -> None:
        work = self.start()
        self.task = None if work is None else asyncio.ensure_future(work)
        if self.task is not None:
            self.task.add_done_callback(lambda _: self.wake())

    def update(self) -> Status:
        if self.task is None:
            return Status.SUCCESS
        if not self.task.done():
            return Status.RUNNING
        if self.task.cancelled() or self.task.exception() is not None:
            return Status.FAILURE
        return Status.SUCCESS

    def terminate(self, new_status: Status) -> None:
        if new_status == Status.INVALID and self.task is not None and not self.task.done():
            self.task.cancel()

    def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()


class AgentTree:
    """The tree of one run, its blackboard client, and the node it is at."""

    def __init__(self, run_id: str, steps: Steps, wake: Callable[[], None]) -> None:
        self.blackboard = py_trees.blackboard.Client(name=f"agent-{run_id}",
                                                     namespace=f"agent_{run_id}")
        for key in KEYS:
            self.blackboard.register_key(key, access=Access.WRITE)
            self.blackboard.set(key, None)
        self._async = [_Async("model turn", steps.model_turn, wake),
                       _Async("tools", steps.tools, wake),
                       _Async("gather", steps.gather, wake)]
        turn = py_trees.composites.Sequence("turn", memory=True, children=[
            self._async[0],
            _Sync("parse signal", steps.parse_signal),
            self._async[1],
            _Sync("decide", steps.decide),
        ])
        loop = py_trees.decorators.FailureIsSuccess(
            "until a stop", py_trees.decorators.Repeat("turns", turn, num_success=-1))
        self.root = py_trees.composites.Sequence("case agent", memory=True, children=[
            _Sync("classify", steps.classify), _Sync("compose", steps.compose),
            self._async[2], loop])
        self.tree = py_trees.trees.BehaviourTree(self.root)

    def tick(self) -> None:
        self.tree.tick()

    @property
    def running(self) -> bool:
        return self.root.status == Status.RUNNING

    @property
    def node(self) -> str:
        """The running leaf, else the last leaf ticked."""
        tip = self.tree.tip()
        return tip.name if tip is not None else self.root.name

    @property
    def path(self) -> list[str]:
        """From the root down to the current node."""
        tip = self.tree.tip()
        names: list[str] = []
        while tip is not None:
            names.append(tip.name)
            tip = tip.parent
        return list(reversed(names))

    def set(self, key: str, value: Any) -> None:
        self.blackboard.set(key, value)

    def get(self, key: str) -> Any:
        return self.blackboard.get(key)

    def cancel(self) -> None:
        """Cancel whatever async step is running (its node then fails)."""
        for step in self._async:
            step.cancel()

    def close(self) -> None:
        """Stop every task and take the run's keys off the shared blackboard."""
        self.cancel()
        self.tree.interrupt()
        self.blackboard.unregister(clear=True)
