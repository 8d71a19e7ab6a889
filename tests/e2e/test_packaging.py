"""A built wheel carries what the installed app needs: prompts/ and themes/."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.servers import ROOT


def test_wheel_ships_prompts_themes_and_the_console_script(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    wheel = next(tmp_path.glob("detektiv-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("prompts/structured_output.md", "prompts/segments/base.md",
                    "themes/detektiv-dark.toml",
                    "themes/detektiv-light.toml"):
        assert f"engine/_data/{shipped}" in names
    assert "tui/app.tcss" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "detektiv = tui.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
