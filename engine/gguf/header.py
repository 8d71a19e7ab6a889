"""What a GGUF file says about itself: architecture, size, quantisation, context, template.

Only the header's key/value section is read, through a memory map: the `gguf` package's
`GGUFReader` parses every token and tensor into numpy objects (11.6 s for the bundled 270M
model here), and a model list needs six keys. Arrays are skipped by their lengths; the tensor
infos are walked only when the file names no size label.

A file that is not GGUF, or is cut short, raises `ValueError` saying so.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GgufInfo", "read_header"]

_MAGIC = b"GGUF"
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_ALIGNMENT = "general.alignment"
_WANTED = ("general.architecture", "general.name", "general.size_label", "general.file_type",
           "general.license", "tokenizer.chat_template", "tokenizer.ggml.model",
           "tokenizer.ggml.pre", "tokenizer.ggml.tokens")


@dataclass(frozen=True, slots=True)
class GgufInfo:
    """The facts `detektiv models` lists for one file."""

    architecture: str | None
    name: str | None
    parameters: str | None
    """`"270M"`, `"1.5B"`: the file's size label, else counted from its tensors."""
    quantisation: str | None
    context_length: int | None
    chat_template: bool
    licence: str | None
    tokenizer: str | None = None
    """The tokenizer's kind and pre-tokenizer (`"gpt2/qwen2"`): a draft model speaks the
    same, or it cannot propose tokens for this one."""
    vocabulary: int | None = None
    """How many tokens the tokenizer has."""
    data_needed: int | None = None
    """Bytes the file must have at least: where its last tensor's data begins (None where
    its tensors were not read)."""


class _Cursor:
    def __init__(self, data: mmap.mmap) -> None:
        self.data, self.at = data, 0

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ValueError("the file ends inside its header")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        if self.at + length > len(self.data):
            raise ValueError("the file ends inside its header")
        raw = self.data[self.at:self.at + length]
        self.at += length
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        length = self.unpack("<Q")  # read first: `self.at += …` would add to the old offset
        self.at += length

    def value(self, kind: int, keep: bool) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            if keep:
                return self.string()
            self.skip_string()
            return None
        if kind == _ARRAY:  # kept: its length
            inner, count = self.unpack("<I"), self.unpack("<Q")
            if inner in _SCALARS:
                self.at += struct.calcsize(_SCALARS[inner]) * count
            else:
                for _ in range(count):
                    self.value(inner, False)
            return count if keep else None
        raise ValueError(f"unknown GGUF value type {kind}")


def _label(count: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= size:
            return f"{count / size:.3g}{unit}"
    return str(count)


def read_header(path: Path, tensors: bool = False) -> GgufInfo:
    """The header facts of the GGUF file at `path` (with `tensors`, where their data must
    reach: `data_needed`); `ValueError` when it is not one."""
    with path.open("rb") as handle:
        if path.stat().st_size < 24:
            raise ValueError(f"{path.name} is not a GGUF file (too short)")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parse(data, path.name, tensors)


def _parse(data: mmap.mmap, name: str, tensors_wanted: bool = False) -> GgufInfo:
    if data[:4] != _MAGIC:
        raise ValueError(f"{name} is not a GGUF file")
    cursor = _Cursor(data)
    cursor.at = 4
    version = cursor.unpack("<I")
    if version < 2:
        raise ValueError(f"{name}: GGUF version {version} is too old")
    tensors, keys = cursor.unpack("<Q"), cursor.unpack("<Q")
    found: dict[str, Any] = {}
    for _ in range(keys):
        key = cursor.string()
        kind = cursor.unpack("<I")
        wanted = key in _WANTED or key.endswith(".context_length") or key == _ALIGNMENT
        value = cursor.value(kind, wanted)
        if wanted:
            found[key] = value
    architecture = found.get("general.architecture")
    parameters = found.get("general.size_label")
    needed: int | None = None
    if not parameters or tensors_wanted:
        total, last = 0, 0
        for _ in range(tensors):
            cursor.skip_string()
            dims = cursor.unpack("<I")
            count = 1
            for _ in range(dims):
                count *= cursor.unpack("<Q")
            cursor.at += 4  # type
            last = max(last, cursor.unpack("<Q"))
            total += count
        parameters = parameters or (_label(total) if total else None)
        alignment = found.get(_ALIGNMENT) or 32
        start = -(-cursor.at // alignment) * alignment if isinstance(alignment, int) else 0
        needed = start + last + 1
    file_type = found.get("general.file_type")
    tokenizer = found.get("tokenizer.ggml.model")
    if tokenizer and found.get("tokenizer.ggml.pre"):
        tokenizer = f"{tokenizer}/{found['tokenizer.ggml.pre']}"
    vocabulary = found.get("tokenizer.ggml.tokens")
    return GgufInfo(
        architecture=architecture,
        name=found.get("general.name"),
        parameters=parameters,
        quantisation=_quantisation(file_type),
        context_length=found.get(f"{architecture}.context_length"),
        chat_template=bool(found.get("tokenizer.chat_template")),
        licence=found.get("general.license"),
        tokenizer=str(tokenizer) if tokenizer else None,
        vocabulary=vocabulary if isinstance(vocabulary, int) else None,
        data_needed=needed if tensors_wanted else None,
    )


_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
    39: "NVFP4", 40: "Q1_0",
}
"""llama.cpp's `general.file_type` values (its `llama_ftype`), as the `gguf` package names
them; copied rather than imported, since importing that package costs 257 ms (numpy) for
one table. A newer value reads `type N`."""


def _quantisation(file_type: int | None) -> str | None:
    if file_type is None:
        return None
    return _FILE_TYPES.get(file_type, f"type {file_type}")
