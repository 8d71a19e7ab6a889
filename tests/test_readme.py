"""The README is the product page (issue 73): it starts with the two commands, as ever, reads
in two minutes (150 lines at most), and every link and picture in it leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TWO_COMMANDS = (
    "```sh\n"
    "make run    # creates .venv, installs, opens the app on the embedded local model "
    "(no key, no server)\n"
    "make test   # the whole suite, against a real llama.cpp server on 127.0.0.1\n"
    "```\n")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_starts_with_the_two_commands_and_make_has_them() -> None:
    text = README.read_text()
    first = text.split("\n", 2)[2]  # after the title and its blank line
    assert first.startswith(TWO_COMMANDS)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_the_readme_is_a_page_not_a_notebook() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    tables = [line for line in lines if line.startswith("| test sample |")]
    assert len(tables) == 1, "one table of results"


def test_every_link_and_picture_in_the_readme_leads_somewhere() -> None:
    text = README.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        assert target.is_file(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {slug(h) for h in headings}, link
