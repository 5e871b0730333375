"""README.md tells the truth about the command line: every ``ktour COMMAND`` it quotes exists,
every ``--option`` quoted with a command is an option of that command, and every other
``--option`` it names is an option of some command. Checked against each command's ``--help``,
through ``main([...])`` in this process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knights_tour.cli import COMMANDS, main

README = Path(__file__).resolve().parent.parent / "README.md"
NOT_KTOUR = {"--help"}  # and the options of other programs, recognised by their command line


def _help(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([command, "--help"]) == 0
    return capsys.readouterr().out


def _quoted_invocations(text: str) -> list[tuple[str, list[str]]]:
    """(command, options) of every ``ktour COMMAND ...`` in code, blocks and inline."""
    out = []
    for m in re.finditer(r"\bktour ([a-z][a-z-]*[a-z])((?:[ \t]+[^\s`|#]+)*)", text):
        out.append((m.group(1), re.findall(r"(--[a-z][a-z-]*)", m.group(2))))
    return out


def test_every_quoted_command_and_its_options_exist(capsys):
    text = README.read_text(encoding="utf-8")
    invocations = _quoted_invocations(text)
    assert len(invocations) > 20
    helps: dict[str, str] = {}
    for command, options in invocations:
        assert command in COMMANDS, f"README quotes `ktour {command}`, which does not exist"
        if command not in helps:
            helps[command] = _help(command, capsys)
        for opt in options:
            assert opt in helps[command], f"README quotes `ktour {command} {opt}`: no such option"


def test_every_option_named_in_the_readme_is_an_option_of_some_command(capsys):
    text = README.read_text(encoding="utf-8")
    other_programs = "\n".join(
        line for line in text.splitlines() if re.search(r"\b(celery|docker|pip|python|cp)\b", line)
    )
    named = set(re.findall(r"`(--[a-z][a-z-]*)", text)) | set(
        re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text)
    )
    named -= set(re.findall(r"(--[a-z][a-z-]*)", other_programs)) | NOT_KTOUR
    every_help = "\n".join(_help(c, capsys) for c in COMMANDS)
    missing = sorted(o for o in named if o not in every_help)
    assert not missing, f"README names options no command has: {missing}"
