"""The ``ktour`` command line: the click group, the commands registered on it, and
:func:`main`, which turns every user error into one line and an :class:`ExitCode`.

The commands live in :mod:`knights_tour.commands` (one module per family); each is imported
when it is run (or listed by ``--help``), so ``ktour solve`` does not load Celery or Redis.
:func:`main` takes an argument list and returns the exit code, so tests call it in-process.
The exit codes are documented on :class:`~knights_tour.commands._shared.ExitCode`.
"""

from __future__ import annotations

import importlib
import sys

import click
from pydantic import ValidationError

from knights_tour.commands._shared import ExitCode, err
from knights_tour.errors import KnightsTourError

COMMANDS: dict[str, str] = {
    "solve": "knights_tour.commands.solve:solve",
    "verify": "knights_tour.commands.solve:verify",
    "run": "knights_tour.commands.batch:run",
    "submit": "knights_tour.commands.batch:submit",
    "collect": "knights_tour.commands.batch:collect",
    "batches": "knights_tour.commands.batch:batches",
    "count": "knights_tour.commands.count:count",
    "draw": "knights_tour.commands.pictures:draw",
    "report": "knights_tour.commands.pictures:report",
    "status": "knights_tour.commands.ops:status",
    "workers": "knights_tour.commands.ops:workers",
    "schedule": "knights_tour.commands.ops:schedule_group",
    "reports": "knights_tour.commands.ops:reports",
}
"""Every ``ktour`` command: name -> ``"module:attribute"`` of its click command."""


class LazyGroup(click.Group):
    """A click group whose commands are imported on first use (click's "lazily loading
    subcommands" pattern), from :data:`COMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="knights-tour", prog_name="ktour")
def cli() -> None:
    """ktour: find knight's tours (or prove there are none), one at a time or in batches."""


def _settings_error(exc: ValidationError) -> str:
    """First problem of a settings ValidationError in words, naming the KT_ variable."""
    first = exc.errors()[0]
    loc = [str(x) for x in first.get("loc", ()) if x]
    name = f"KT_{loc[0].upper()}: " if loc else ""
    msg = str(first.get("msg", exc)).removeprefix("Value error, ")
    value = first.get("input")
    shown = f" (got {value!r})" if loc and isinstance(value, (str, int, float)) else ""
    return f"{name}{msg}{shown}"


def _exit_code(value: int) -> ExitCode | int:
    try:
        return ExitCode(value)
    except ValueError:
        return value


def main(argv: list[str] | None = None) -> ExitCode | int:
    """Run ``ktour`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    Never raises for user errors: a :class:`KnightsTourError`, a click usage error, a settings
    error or an ``OSError`` (e.g. an unwritable ``--out``) becomes one ``ktour: error: ...``
    line on stderr and :attr:`ExitCode.BAD_INPUT`; Ctrl-C gives :attr:`ExitCode.INTERRUPTED`.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name="ktour", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return ExitCode.BAD_INPUT
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        err(f"{exc.format_message()}{hint}")
        return ExitCode.BAD_INPUT
    except click.ClickException as exc:
        err(exc.format_message())
        return _exit_code(exc.exit_code) if exc.exit_code else ExitCode.BAD_INPUT
    except click.exceptions.Exit as exc:
        return _exit_code(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("ktour: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except KnightsTourError as exc:
        err(str(exc))
        return ExitCode.BAD_INPUT
    except ValidationError as exc:  # KT_ settings that do not parse (knights_tour.settings)
        err(f"invalid configuration: {_settings_error(exc)}")
        return ExitCode.BAD_INPUT
    except OSError as exc:
        err(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
        return ExitCode.BAD_INPUT
    return _exit_code(rv) if isinstance(rv, int) else ExitCode.OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
