"""`detektiv eval` and `detektiv evals` as a user runs them: real processes, scripted models
on loopback (so the figures are known), the loopback Hub, the real llama.cpp server, and a
real kill -9."""

from __future__ import annotations

import io
import json
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import Paths
from engine.evals.datasets import DATASETS
from engine.evals.folder import RunFolder
from engine.evals.items import read_items
from engine.storage.sessions import SessionStore
from tests.support.cli import Running, detektiv
from tests.support.evals import detective, knows, never, witness
from tests.support.hub import LoopbackHub
from tests.support.interrogation import FAST
from tests.support.scripted import ScriptedModel
from tests.support.servers import LlamaServer, closed_port

DEMO = read_items(Path(__file__).parents[2] / "engine" / "evals" / "data" / "claims.jsonl")


def write_config(home: Path, providers: dict[str, str], detective: str, witness: str,
                 kind: str = "openai") -> None:
    lines = []
    for priority, (name, url) in enumerate(providers.items(), start=1):
        lines += [f"[providers.{name}]", f'kind = "{kind}"', 'model = "m"',
                  f'base_url = "{url}"', f"priority = {priority}",
                  "first_token_timeout = 30", "stall_timeout = 15", ""]
    lines += ["[roles]", f'detective = ["{detective}"]', f'witness = ["{witness}"]', "",
              "[interrogation]", *(f"{k} = {json.dumps(v)}" for k, v in FAST.items())]
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def scripted(home: Path) -> Iterator[tuple[ScriptedModel, ScriptedModel]]:
    with ScriptedModel(detective(knows(DEMO)), pace=0.002) as sleuth, \
            ScriptedModel(witness, pace=0.002) as wit:
        write_config(home, {"sleuth": sleuth.url + "/v1", "wit": wit.url + "/v1"},
                     "sleuth", "wit")
        yield sleuth, wit


def only_run(home: Path) -> RunFolder:
    (folder,) = [RunFolder(d) for d in (home / "data" / "evals").iterdir()]
    return folder


def test_eval_on_the_shipped_set_prints_the_table_and_writes_report_and_plots(
        home: Path, scripted: tuple[ScriptedModel, ScriptedModel], tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = detektiv("eval", "demo", "--n", "6", "--baselines", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "interrogation" in done.stdout and "F1" in done.stdout
    # the ablation, a table of its own: each signal alone, and the pool without it
    assert "The interrogation's signals, from the same sessions" in done.stdout
    ablation = done.stdout.split("The interrogation's signals", 1)[1]
    assert "pool without it: AUROC" in ablation and "alone " in ablation
    assert "1.000" in done.stdout.split("F1", 1)[1].splitlines()[0]
    assert "eval" in done.stderr and "item" in done.stderr  # the progress bar
    report = (out / "report.md").read_text()
    assert "## The signals, from the same sessions" in report
    assert "| F1 |" in report and "![reliability.png]" in report and "demonstration" not in report
    for plot in ("reliability.png", "pr_curve.png"):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # the detective alone is a reading of the sessions themselves: no unit of its own
    assert Counter(r["kind"] for r in rows) == {"interrogation": 6, "are-you-sure": 6}
    assert all(set(r["readings"]) == {"alone", "rounds"} for r in rows
               if r["kind"] == "interrogation")
    listed = detektiv("evals", "--json")
    (run,) = json.loads(listed.stdout)
    assert run["items"] == 6 and run["mode"] == "planted"
    shown = json.loads(detektiv("evals", run["id"][:4], "--json").stdout)
    assert shown["systems"]["interrogation"]["f1"]["value"] == 1.0
    assert shown["systems"]["signal:alone"]["n"] == 6
    assert shown["systems"]["without:rounds"]["n"] == 6
    # the run's six sessions are one line of `sessions`, listed with --run, all in --json
    lines = detektiv("sessions").stdout.splitlines()
    assert len(lines) == 2 and f"evaluation run {run['id']}" in lines[1]
    assert "6 sessions" in lines[1]
    assert len(detektiv("sessions", "--run", run["id"][:6]).stdout.splitlines()) == 7
    assert len(json.loads(detektiv("sessions", "--json").stdout)) == 6
    assert f"its sessions: detektiv sessions --run {run['id']}" in done.stderr


def test_fit_writes_a_pooling_file_and_says_how_to_use_it(
        home: Path, scripted: tuple[ScriptedModel, ScriptedModel], tmp_path: Path) -> None:
    out = tmp_path / "fit"
    few = detektiv("eval", "demo", "--n", "4", "--fit", "-o", str(out))
    assert few.returncode == 1 and "a fit needs 20 labelled items" in few.stderr
    assert "Traceback" not in few.stderr
    done = detektiv("eval", "demo", "--n", "24", "--fit", "-o", str(out))
    assert done.returncode == 0, done.stderr
    written = out / "pooling.json"
    fitted = json.loads(written.read_text())
    assert fitted["readings_version"] == 2 and "open" in fitted["modes"]
    figures = fitted["modes"]["open"]["figures"]
    assert figures["items"] == 24 and figures["cross_validated"]["auroc"] > 0.9
    assert set(fitted["modes"]["open"]["model"]["signals"]) == {"alone", "rounds"}
    assert "pooling = " in done.stdout and str(written.resolve()) in done.stdout
    assert "[interrogation]" in done.stdout
    # named in the configuration, a run pools by it; a corrupt one is named and not used
    config = home / "config.toml"
    config.write_text(re.sub(r"^pooling = .*$", f"pooling = {json.dumps(str(written))}",
                             config.read_text(), flags=re.M))
    ran = detektiv("run", "The capital of Australia is Canberra.")
    assert ran.returncode == 0, ran.stderr
    assert "pooling file" not in ran.stderr
    written.write_text("{ not json")
    broken = detektiv("run", "The capital of Australia is Canberra.")
    assert broken.returncode == 0, broken.stderr
    assert f"the pooling file {written} is not used" in broken.stderr + broken.stdout
    assert "Traceback" not in broken.stderr


def test_an_unknown_dataset_or_a_bad_file_is_one_clear_line(home: Path,
                                                            scripted: object,
                                                            tmp_path: Path) -> None:
    missing = detektiv("eval", "no-such-set")
    assert missing.returncode == 1 and "neither a file nor a named dataset" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"claim": "x", "label": "perhaps"}\n')
    refused = detektiv("eval", str(bad))
    assert refused.returncode == 1 and "line 1" in refused.stderr
    assert "Traceback" not in refused.stderr + missing.stderr
    assert detektiv("eval", "demo", "--limit", "2").returncode == 2


def test_an_evaluation_that_judges_nothing_fails_and_one_that_judges_something_does_not(
        home: Path) -> None:
    """Every unit failing (the models unreachable) is exit 1 with the first failure, never a
    report of nothing that exits 0."""
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    write_config(home, {"sleuth": dead, "wit": dead}, "sleuth", "wit")
    failed = detektiv("eval", "demo", "--n", "2", "--baselines")
    assert failed.returncode == 1, failed.stderr
    assert "no item could be judged; the first failure: every provider" in failed.stderr
    assert "Traceback" not in failed.stderr
    with ScriptedModel(detective(knows(DEMO)), pace=0.002) as sleuth, \
            ScriptedModel(witness, pace=0.002) as wit:
        write_config(home, {"sleuth": sleuth.url + "/v1", "wit": wit.url + "/v1"},
                     "sleuth", "wit")
        redone = detektiv("eval", "demo", "--n", "2", "--baselines", "--retry-failed")
    assert redone.returncode == 0, redone.stderr


def test_kill_9_in_the_middle_then_rerun_loses_no_item_and_does_none_twice(
        home: Path, tmp_path: Path) -> None:
    with ScriptedModel(detective(knows(DEMO)), pace=0.01) as sleuth, \
            ScriptedModel(witness, pace=0.05) as wit:
        write_config(home, {"sleuth": sleuth.url + "/v1", "wit": wit.url + "/v1"},
                     "sleuth", "wit")
        args = ("eval", "demo", "--n", "8", "--concurrency", "2", "--json")
        run = Running(*args)
        run.wait_for('"type": "result"')
        folder = only_run(home)
        deadline = time.monotonic() + 60
        while len(folder.sessions()) <= len(list(folder.results())):  # one in flight
            assert time.monotonic() < deadline
            time.sleep(0.005)
        run.process.send_signal(signal.SIGKILL)
        run.finish()
        before = len(list(folder.results()))
        assert 1 <= before < 8
        again = detektiv(*args)
        assert again.returncode == 0, again.stderr
    results = list(folder.results())
    assert len(results) == 8 and len({r.item for r in results}) == 8  # each once
    sessions = folder.sessions()
    assert len(sessions) == 8 and len(set(sessions.values())) == 8
    store = SessionStore.of(Paths.at(home))
    tagged = [row for row in store.list() if row.eval_run == folder.directory.name]
    assert len(tagged) == 8 and all(row.status == "completed" for row in tagged)
    assert {r.session for r in results} == {row.id for row in tagged}
    resumed = [row for row in tagged if any(e.event == "resumed"
                                            for e in store.load(row.id).audit_trail)]
    assert len(resumed) >= 1  # the one in flight went on, not started over


@pytest.mark.heavy
def test_kill_9_with_32_items_in_flight_then_rerun_loses_no_round_and_redoes_none(
        home: Path, tmp_path: Path) -> None:
    """The journal's rule with many sessions writing at once: kill -9 while 32 items are
    mid-interrogation, some with rounds stored; the rerun judges every claim once, makes no
    second session for any, and every round a killed session had stored is in it unchanged."""
    dataset = tmp_path / "claims.jsonl"
    dataset.write_text("".join(json.dumps({
        "id": f"c{i}", "claim": f"Bridge number {i} was built in {1800 + i}.",
        "label": "true" if i % 2 else "false"}) + "\n" for i in range(48)))
    items = read_items(dataset)
    store = SessionStore.of(Paths.at(home))
    with ScriptedModel(detective(knows(items)), pace=0.005) as sleuth, \
            ScriptedModel(witness, pace=0.03) as wit:
        write_config(home, {"sleuth": sleuth.url + "/v1", "wit": wit.url + "/v1"},
                     "sleuth", "wit")
        with (home / "config.toml").open("a") as config:
            config.write("min_rounds = 3\n")  # rounds to lose, had the rule been broken
        args = ("eval", str(dataset), "--n", "48", "--concurrency", "32", "--json")
        run = Running(*args)
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline and run.process.poll() is None, run.err
            evals = home / "data" / "evals"
            folder = only_run(home) if evals.is_dir() and any(evals.iterdir()) else None
            if folder is not None and len(folder.sessions()) - len(list(folder.results())) \
                    >= 32 and len(_stored_rounds(store)) >= 8:
                break
            time.sleep(0.01)
        run.process.send_signal(signal.SIGKILL)
        run.finish()
        in_flight = len(folder.sessions()) - len(list(folder.results()))
        judged = {r.session for r in folder.results()}
        stored = {ident: pairs for ident, pairs in _stored_rounds(store).items()
                  if ident not in judged}  # rounds of the sessions the kill cut short
        again = detektiv(*args)
        assert again.returncode == 0, again.stderr
    assert in_flight >= 30 and len(stored) >= 8, (in_flight, len(stored))
    results = list(folder.results())
    assert len(results) == 48 and len({r.item for r in results}) == 48  # each once
    sessions = folder.sessions()
    assert len(sessions) == 48 and len(set(sessions.values())) == 48
    assert len(list(store.root.iterdir())) == 48  # no session made twice
    for ident, pairs in stored.items():
        session = store.load(ident)
        assert session.status == "completed", session.error
        resumed = [e.reason for e in session.audit_trail if e.event == "resumed"]
        assert resumed and resumed[0].startswith(f"resumed after round {max(pairs)} ")  # on
        kept = {p.sequence: p.model_dump(mode="json") for p in session.qa_pairs}
        assert all(kept[n] == pair for n, pair in pairs.items()), ident


def _stored_rounds(store: SessionStore) -> dict[str, dict[int, dict[str, object]]]:
    """Each session's rounds its log holds as stored (`pair` events), by session id."""
    found: dict[str, dict[int, dict[str, object]]] = {}
    for folder in store.root.iterdir() if store.root.is_dir() else ():
        log = folder / "events.jsonl"
        if not log.is_file():
            continue
        pairs = {}
        for line in log.read_bytes().split(b"\n"):
            if b'"type":"pair"' in line and line.endswith(b"}"):  # a torn last line waits
                pair = json.loads(line)["pair"]
                pairs[pair["sequence"]] = pair
        if pairs:
            found[json.loads((folder / "metadata.json").read_bytes())["id"]] = pairs
    return found


def _parquet(rows: list[dict[str, str]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def test_a_named_dataset_is_fetched_from_the_hub_once_then_checked(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = DATASETS["halueval-qa"]
    rows = [{"knowledge": f"SECRET-KNOWLEDGE-{i}", "question": f"Who built tower {i}?",
             "right_answer": f"Builder {i}", "hallucinated_answer": f"Impostor {i}",
             "task_type": "qa"} for i in range(3)]
    with LoopbackHub() as hub, ScriptedModel(detective(never)) as sleuth, \
            ScriptedModel(witness) as wit:
        assert entry.repo is not None
        hub.add(entry.repo, entry.file, _parquet(rows))
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        write_config(home, {"sleuth": sleuth.url + "/v1", "wit": wit.url + "/v1"},
                     "sleuth", "wit")
        done = detektiv("eval", "halueval-qa", "--n", "4", "--json")
        assert done.returncode == 0, done.stderr
        results = [json.loads(line) for line in done.stdout.splitlines()
                   if line.startswith('{"type": "result"')]
        assert len(results) == 4 and sum(r["label"] for r in results) == 2
        assert all("is: Builder" in r["claim"] or "is: Impostor" in r["claim"]
                   for r in results)
        asked = json.dumps(sleuth.chats + wit.chats)
        assert "SECRET-KNOWLEDGE" not in asked  # knowledge never reaches a model
        assert any(f"/datasets/{entry.repo}/resolve/{entry.revision}/" in path
                   for _, path, _ in hub.requests)
        folder = Paths.from_env().data_dir / "datasets" / "halueval-qa"
        record = json.loads((folder / "checksum.json").read_text())
        assert len(record["sha256"]) == 64 and record["revision"] == entry.revision
        fetched = len(hub.requests)
        assert detektiv("eval", "halueval-qa", "--n", "4").returncode == 0
        assert len(hub.requests) == fetched  # used from the data dir, not fetched again
        cached = folder / Path(entry.file).name
        cached.write_bytes(cached.read_bytes() + b"tampered")
        refused = detektiv("eval", "halueval-qa", "--n", "4")
        assert refused.returncode == 1
        assert "has changed since it was downloaded" in refused.stderr


@pytest.mark.heavy
def test_the_real_local_server_runs_two_items_end_to_end(
        home: Path, llama_server: LlamaServer, tmp_path: Path) -> None:
    """Plumbing only: the embedded model as the detective (a demonstration model, said so),
    the real llama.cpp server as the witness. Its verdicts mean nothing and are not looked at;
    each item ends with a verdict or a named failure."""
    write_config(home, {"llama": llama_server.url}, "llama", "llama")
    out = tmp_path / "out"
    done = detektiv("eval", "demo", "--n", "2", "--limit", "5", "--detective",
                    "local:gemma-3-270m", "--witness", "llama", "-o", str(out), timeout=600)
    assert "demonstration model" in done.stderr
    assert "demonstration model" in (out / "report.md").read_text()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["verdict"] in ("true", "false", "undetermined") or row["error"]
        assert row["session"]
    # what the tiny model says decides only which of the two honest endings it is
    if all(row["verdict"] is None for row in rows):
        assert done.returncode == 1 and "no item could be judged" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
