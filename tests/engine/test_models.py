"""`detektiv models`: list, pull, rm, end to end against a loopback server that speaks the Hugging
Face Hub's download protocol (tests/hub.py; `HF_ENDPOINT` points huggingface_hub at it). No test
reaches the internet."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from engine import Paths
from engine.gguf.header import read_header
from engine.gguf.pull import BLOCK
from engine.gguf.store import resolve_model_path
from tests.support.hub import LoopbackHub, tiny_gguf
from tests.support.servers import ROOT, cli, local_server


def detektiv(home: Path, *args: str, hub: LoopbackHub | None = None,
             token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    env.pop("HF_TOKEN", None)
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    if token is not None:
        env["HF_TOKEN"] = token
    return subprocess.run(cli(*args), capture_output=True, text=True, env=env, timeout=240,
                          cwd=ROOT)


def test_models_lists_the_shipped_model_with_what_its_file_says(home: Path) -> None:
    done = detektiv(home, "models", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    gemma = rows["gemma-3-270m"]
    assert (gemma["source"], gemma["parameters"], gemma["quantisation"],
            gemma["context_length"], gemma["chat_template"], gemma["demonstration"]) == \
        ("shipped", "270M", "Q4_K_M", 32768, False, True)
    assert gemma["use_as"] == "local:gemma-3-270m" and gemma["size"] > 200_000_000
    table = detektiv(home, "models").stdout
    assert "gemma-3-270m" in table and "demonstration model" in table
    assert "detektiv models pull" in table


def test_a_pull_shows_progress_verifies_the_checksum_and_is_listed_then_removed(
    home: Path
) -> None:
    data = tiny_gguf()
    with LoopbackHub() as hub:
        digest = hub.add("acme/Tiny-GGUF", "tiny-q4_k_m.gguf", data)
        done = detektiv(home, "models", "pull", "acme/Tiny-GGUF", "tiny-q4_k_m.gguf", "--json",
                        hub=hub)
    assert done.returncode == 0, done.stderr
    assert "100%" in done.stderr  # huggingface_hub's progress bar
    assert f"sha256 {digest[:12]}… verified" in done.stderr
    assert "use it as local:tiny-q4_k_m" in done.stderr
    folder = home / "data" / "models" / "tiny-q4_k_m"
    assert hashlib.sha256((folder / "tiny-q4_k_m.gguf").read_bytes()).hexdigest() == digest
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["repo"], manifest["sha256"], manifest["size"]) == \
        ("acme/Tiny-GGUF", digest, len(data))
    rows = {r["name"]: r for r in json.loads(detektiv(home, "models", "--json").stdout)}
    pulled = rows["tiny-q4_k_m"]
    assert json.loads(done.stdout) == pulled  # pull --json prints the row models lists
    assert (pulled["source"], pulled["parameters"], pulled["chat_template"],
            pulled["use_as"]) == ("pulled", "1M", True, "local:tiny-q4_k_m")
    assert resolve_model_path("tiny-q4_k_m", Paths.from_env()) == folder / "tiny-q4_k_m.gguf"

    removed = detektiv(home, "models", "rm", "tiny-q4_k_m", "--json")
    assert removed.returncode == 0 and not folder.exists()
    assert json.loads(removed.stdout) == {"name": "tiny-q4_k_m", "removed": str(folder)}
    again = detektiv(home, "models", "rm", "tiny-q4_k_m")
    assert again.returncode == 1 and "no pulled model called tiny-q4_k_m" in again.stderr
    shipped = detektiv(home, "models", "rm", "gemma-3-270m")
    assert shipped.returncode == 1 and "ships with detektiv" in shipped.stderr


def test_an_interrupted_pull_resumes_where_it_stopped(home: Path) -> None:
    """The first pull is killed (kill -9) while the hub holds the download after 2.5 MB; the
    second asks only for what the first did not write."""
    data = tiny_gguf(4_000_000)
    env = {**os.environ, "DETEKTIV_HOME": str(home)}
    part = home / "data" / "models" / "tiny" / "tiny.gguf.part"

    def partial() -> int:
        return part.stat().st_size if part.exists() else 0

    with LoopbackHub() as hub:
        digest = hub.add("acme/Tiny-GGUF", "tiny.gguf", data)
        env["HF_ENDPOINT"] = hub.url
        hub.hold_after = 2_500_000
        process = subprocess.Popen(cli("models", "pull", "acme/Tiny-GGUF", "tiny.gguf"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=env, cwd=ROOT)
        try:
            assert hub.holding.wait(120), "the pull never started downloading"
            for _ in range(600):  # the whole blocks sent reach the disk
                if partial() >= 2 * BLOCK:
                    break
                hub.release.wait(0.05)
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
        kept = partial()
        assert 2 * BLOCK <= kept <= 2_500_000
        done = detektiv(home, "models", "pull", "acme/Tiny-GGUF", "tiny.gguf", hub=hub)
    assert done.returncode == 0, done.stderr
    gets = [r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]]
    assert [r[2] for r in gets] == [None, f"bytes={kept}-"], gets  # only the rest, again
    assert hashlib.sha256((part.parent / "tiny.gguf").read_bytes()).hexdigest() == digest
    assert not part.exists()


def test_a_corrupted_download_is_refused_and_deleted(home: Path) -> None:
    with LoopbackHub() as hub:
        hub.add("acme/Bad-GGUF", "bad.gguf", tiny_gguf(), corrupt=True)
        done = detektiv(home, "models", "pull", "acme/Bad-GGUF", "bad.gguf", hub=hub)
    assert done.returncode == 1
    assert "the download is corrupt" in done.stderr and "pull again" in done.stderr
    assert len(done.stderr.strip().splitlines()[-1]) < 200
    folder = home / "data" / "models" / "bad"
    assert not (folder / "bad.gguf").exists() and not (folder / "manifest.json").exists()


@pytest.mark.parametrize(("repo", "file", "said"), [
    ("acme/Nothing-GGUF", "x.gguf", "no repository acme/Nothing-GGUF on the Hub"),
    ("acme/Tiny-GGUF", "missing.gguf", "acme/Tiny-GGUF has no file missing.gguf"),
    ("acme/Gated-GGUF", "g.gguf", "acme/Gated-GGUF is gated: accept its licence on the Hub, "
                                  "then set HF_TOKEN"),
])
def test_a_failed_pull_is_named_in_one_line(home: Path, repo: str, file: str,
                                            said: str) -> None:
    with LoopbackHub() as hub:
        hub.add("acme/Tiny-GGUF", "tiny.gguf", tiny_gguf(1000))
        hub.add("acme/Gated-GGUF", "g.gguf", tiny_gguf(1000), gated=True)
        done = detektiv(home, "models", "pull", repo, file, hub=hub)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("detektiv: error: pull ") and said in lines[-1], done.stderr
    assert "Traceback" not in done.stderr


def test_a_gated_model_pulls_with_hf_token_and_the_token_is_never_shown(home: Path) -> None:
    secret = "hf_" + "s3cr3t" * 6
    with LoopbackHub() as hub:
        hub.add("acme/Gated-GGUF", "g.gguf", tiny_gguf(1000), gated=True)
        done = detektiv(home, "models", "pull", "acme/Gated-GGUF", "g.gguf", hub=hub,
                        token=secret)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stderr + done.stdout
    manifest = (home / "data" / "models" / "g" / "manifest.json").read_text()
    assert secret not in manifest


def test_bad_names_are_refused_before_anything_is_downloaded(home: Path) -> None:
    for args, said in ((("gemma-3-270m",), "ships with detektiv"),
                       (("no-such-model",), "neither a catalogue name"),
                       (("acme/Tiny-GGUF",), "name the GGUF file to pull"),
                       (("acme/Tiny-GGUF", "../evil.gguf"), "is not a GGUF file name")):
        done = detektiv(home, "models", "pull", *args)
        assert done.returncode == 1 and said in done.stderr, (args, done.stderr)


def test_a_pulled_model_runs_as_local_name_and_in_local_server(home: Path) -> None:
    """The shipped GGUF served by the loopback hub, pulled under a new name, then served."""
    shipped = resolve_model_path("gemma-3-270m", Paths.from_env())
    with LoopbackHub() as hub:
        hub.add("acme/Gemma-Copy-GGUF", "gemma-copy.gguf", shipped.read_bytes())
        done = detektiv(home, "models", "pull", "acme/Gemma-Copy-GGUF", "gemma-copy.gguf",
                        hub=hub)
    assert done.returncode == 0, done.stderr
    pulled = home / "data" / "models" / "gemma-copy" / "gemma-copy.gguf"
    assert read_header(pulled).parameters == "270M"
    with local_server(home, "--model", "gemma-copy", "--parallel", "1", "--ctx", "1024") as srv:
        assert srv.process.poll() is None
    config = home / "config.toml"
    config.write_text('[providers.copy]\nkind = "local"\nmodel = "gemma-copy"\n')
    done = detektiv(home, "providers", "--json")
    row = next(r for r in json.loads(done.stdout) if r["name"] == "copy")
    assert row["health"]["ok"] and "gemma-copy.gguf" in row["health"]["detail"], row
