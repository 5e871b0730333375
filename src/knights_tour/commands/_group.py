"""The click group class of ``ktour``: commands imported on first use, named in a table.

Click's "lazily loading subcommands" pattern: :class:`LazyGroup` gets a table
``name -> ("module:attribute", summary)``, lists the names and their summaries for ``--help``
from it without importing anything, and imports a command's module only when that command
runs. The table itself is ``knights_tour.cli.COMMANDS``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any

import click

PACKAGE = "knights_tour.commands"
"""Where a table's ``module`` names are looked up (``"solve:solve"`` means
``knights_tour.commands.solve.solve``)."""


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use.

    Parameters
    ----------
    lazy_commands : Mapping[str, tuple[str, str]]
        Command name -> (``"module:attribute"`` of its click command, ``module`` relative to
        :data:`PACKAGE`; the first sentence of its help, shown by ``--help``).
    **kwargs
        As for :class:`click.Group`.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy_commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy_commands:
            return None
        module, _, attr = self.lazy_commands[cmd_name][0].partition(":")
        return getattr(importlib.import_module(f"{PACKAGE}.{module}"), attr)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but a mistyped command name gets a suggestion: ``No such command
        'stauts'. Did you mean 'status'?`` (closest names by :mod:`difflib`)."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            name = click.utils.make_str(args[0]) if args else ""
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3, cutoff=0.6)
            if not close or name in self.lazy_commands:
                raise
            choices = " or ".join(f"'{c}'" for c in close)
            raise click.UsageError(
                f"No such command '{name}'. Did you mean {choices}?", ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # cut the way click cuts a command's help for a listing (through its public API: the
        # helper it uses is private from click 8.5)
        rows = [
            (name, click.Command(None, help=self.lazy_commands[name][1]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
