"""Speculative decoding for the embedded llama.cpp engine: which kind, with which draft.

    speculation = chosen(config.speculation, config.draft_model, model_path, config.model, paths)
    speculation.apply(params)          # on xllamacpp's CommonParams, before the server starts
    speculation.label()                # "speculative: draft qwen2.5-coder-0.5b" / "plain …"

A draft model proposes a few tokens; the model checks them in one batch and keeps those it
would have chosen itself, so a token the draft guessed costs a share of one batched step
instead of a step of its own. llama.cpp's n-gram kinds propose tokens from what is already in
the context (a claim restated in a question, a testimony split into its own sentences) with
no second model. Speculation is set when the server loads; a draft that is missing, of
another tokenizer, not the file its hash pins, or that llama.cpp refuses to load leaves plain
decoding, with the reason in `why` (said once, where the model is shown).

llama.cpp does not promise the same greedy output with and without speculation (batched
verification moves the floats): `bench/speculation.py` compares the verdicts and claims, and
says where two outputs first differ.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from engine.config.shipped import DRAFTS, pulled_present
from engine.storage.atomic import file_sha256

if TYPE_CHECKING:
    from engine.paths import Paths

__all__ = ["NGRAM_KINDS", "Speculation", "chosen", "compatible"]

Kind = Literal["off", "draft", "ngram"]

NGRAM_KINDS = ("ngram_simple", "ngram_map_k", "ngram_map_k4v", "ngram_mod", "ngram_cache")
"""llama.cpp's draft-free kinds (`bench/speculation.py` measures each)."""
NGRAM = "ngram_simple"
"""The n-gram kind `speculation = "ngram"` uses."""
AUTO = "off"
"""What `speculation = "auto"` chooses: plain decoding. On two CPU cores every kind measured
slower than plain or level with it (docs/benchmarks.md, issue 74: the 0.5B draft 0.16×, the
n-gram kinds 0.87–1.05×); `auto` stays the setting that follows the measurements."""
DRAFT_TOKENS = 16
"""Tokens the draft proposes at most a step (llama.cpp's own default for its server)."""
VOCABULARY_SLACK = 128
"""Tokens two vocabularies may differ by and still be one (llama.cpp's own limit: the 0.5B
and the 1.5B pad theirs differently)."""


@dataclass(frozen=True, slots=True)
class Speculation:
    """How the engine decodes: `kind`, its draft, and why it is plain where it was asked."""

    kind: Kind = "off"
    draft: Path | None = None
    ngram: str = NGRAM
    n_max: int = DRAFT_TOKENS
    why: str = ""
    """Why decoding is plain though speculation was asked for ("" where nothing was)."""

    def label(self) -> str:
        """One line for `detektiv models`, the Providers tab and `local-server`."""
        if self.kind == "draft" and self.draft is not None:
            return f"speculative: draft {self.draft.name}"
        if self.kind == "ngram":
            return f"speculative: {self.ngram.replace('_', '-')}"
        return f"plain decoding ({self.why})" if self.why else "plain decoding"

    def apply(self, params: Any) -> None:
        """Set this speculation on xllamacpp's `CommonParams` (nothing for plain)."""
        if self.kind == "off":
            return
        import xllamacpp

        kinds = xllamacpp.common_speculative_type
        speculative = params.speculative
        if self.kind == "draft":
            speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
            speculative.draft.mparams.path = str(self.draft)
            speculative.draft.n_max = self.n_max
            threads = params.cpuparams.n_threads
            speculative.draft.cpuparams.n_threads = threads
            speculative.draft.cpuparams_batch.n_threads = threads
        else:
            speculative.types = [getattr(kinds, f"COMMON_SPECULATIVE_TYPE_{self.ngram.upper()}")]


def chosen(setting: str, draft_model: str | None, model_path: Path, model: str,
           paths: Paths) -> Speculation:
    """The speculation a `local` provider's settings ask for, its draft found and checked."""
    if setting == "auto":  # a draft named is a draft asked for
        setting = "draft" if draft_model else AUTO
    if setting == "off":
        return Speculation()
    if setting == "ngram":
        return Speculation("ngram")
    from engine.gguf.store import resolve_model_path

    asked = draft_model or DRAFTS.get(_known_name(model, model_path))
    if asked is None:
        return Speculation(why="this model has no draft" if setting == "draft" else "")
    if draft_model is None:
        found = _own_draft(asked, model_path, paths)
        if found is None:
            return Speculation(why=f"its draft is not here: detektiv models pull {asked}")
        draft = found
    else:
        try:
            draft = resolve_model_path(asked, paths)
        except FileNotFoundError as exc:
            return Speculation(why=f"draft {asked}: {exc}")
        if not draft.is_file():
            return Speculation(why=f"draft {asked}: no such file")
    refused = compatible(model_path, draft) or _pinned(draft, paths)
    if refused:
        return Speculation(why=refused)
    return Speculation("draft", draft)


def _known_name(model: str, path: Path) -> str:
    """The catalogue's name for the model (`model` itself, or the entry whose file `path`
    is: a GGUF path named by its file, as the benchmarks give it)."""
    from engine.gguf.catalog import CATALOG

    if model.lower() in DRAFTS:
        return model.lower()
    return next((entry.name for entry in CATALOG if entry.file == path.name), model.lower())


def _own_draft(name: str, model_path: Path, paths: Paths) -> Path | None:
    """The draft `name`: pulled here, else its catalogue file beside the model's file."""
    from engine.gguf.catalog import catalog_entry
    from engine.gguf.store import resolve_model_path

    if pulled_present(paths.data_dir, name):
        return resolve_model_path(name, paths)
    entry = catalog_entry(name)
    beside = model_path.with_name(entry.file) if entry is not None else None
    return beside if beside is not None and beside.is_file() else None


def compatible(model: Path, draft: Path) -> str:
    """"" when `draft` can propose tokens for `model` (a whole GGUF file, the same tokenizer,
    vocabularies within `VOCABULARY_SLACK`), else why not."""
    from engine.gguf.header import read_header

    try:
        ours, theirs = read_header(model), read_header(draft, tensors=True)
        size = draft.stat().st_size
    except (OSError, ValueError) as exc:
        return f"draft {draft.name} refused: {exc}"
    if theirs.data_needed is not None and size < theirs.data_needed:
        # caught here, never handed to llama.cpp: a server whose draft failed to load can
        # hang when it is freed
        return (f"draft {draft.name} refused: the file is cut short ({size:,} bytes; its "
                f"tensors reach past {theirs.data_needed:,})")
    if ours.tokenizer != theirs.tokenizer:
        return (f"draft {draft.name} refused: another tokenizer ({theirs.tokenizer}; the "
                f"model's is {ours.tokenizer})")
    if ours.vocabulary is None or theirs.vocabulary is None or \
            abs(ours.vocabulary - theirs.vocabulary) > VOCABULARY_SLACK:
        return (f"draft {draft.name} refused: another vocabulary ({theirs.vocabulary} tokens; "
                f"the model has {ours.vocabulary})")
    return ""


def _pinned(draft: Path, paths: Paths) -> str:
    """"" when a pulled draft is the file its manifest's sha256 names (hashed once per file
    state: a marker keeps the size and mtime it was verified at), else why not."""
    from engine.gguf.store import read_manifest

    manifest = read_manifest(draft.parent)
    if manifest is None or manifest.sha256 is None or manifest.file != draft.name:
        return ""  # a user's own file: its header was checked, its bytes are theirs
    marker = draft.with_name(draft.name + ".verified")
    stat = draft.stat()
    state = [stat.st_size, stat.st_mtime_ns, manifest.sha256]
    with contextlib.suppress(OSError, ValueError):
        if json.loads(marker.read_text(encoding="utf-8")) == state:
            return ""
    actual = file_sha256(draft)
    if actual != manifest.sha256:
        return (f"draft {draft.name} refused: its sha256 {actual[:12]}… is not the pinned "
                f"{manifest.sha256[:12]}… (pull it again)")
    with contextlib.suppress(OSError):
        marker.write_text(json.dumps(state), encoding="utf-8")
    return ""
