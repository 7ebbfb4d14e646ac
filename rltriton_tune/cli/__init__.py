"""The ``rltriton-tune`` command: doctor, tune, show, bench, export, import, clear.

Argument errors print usage and exit 2 (argparse); any other problem (a device
that is not there, a storage or folder that cannot be used, results that could
not be saved) prints one line on stderr and exits 1. No verb ends in a traceback.

``args`` holds the grammar, ``output`` what is printed, ``userdb`` the user's
profile folder; each verb has its module (``tuning`` for ``tune``, ``profiles``
for ``show``, ``export``, ``import`` and ``clear``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from rltriton_tune.cli.args import PRESETS, PROG, CLIError, DeviceError, build_parser
from rltriton_tune.cli.bench import cmd_bench
from rltriton_tune.cli.doctor import cmd_doctor
from rltriton_tune.cli.profiles import cmd_clear, cmd_export, cmd_import, cmd_show
from rltriton_tune.cli.tuning import cmd_tune

__all__ = ["PRESETS", "VERBS", "build_parser", "main"]

VERBS = {"doctor": cmd_doctor, "tune": cmd_tune, "show": cmd_show, "export": cmd_export,
         "import": cmd_import, "clear": cmd_clear, "bench": cmd_bench}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rltriton-tune`` console script."""
    args = build_parser().parse_args(argv)
    try:
        from rltriton_tune import dispatch

        dispatch.reset()  # a run reads the environment as it is when the run starts
        return VERBS[args.verb](args)
    except ValueError as exc:  # the environment cannot be read (e.g. a junk boolean)
        if not str(exc).startswith("RLTRITON_TUNE_"):
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (DeviceError, CLIError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted (studies resume on the next run)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``show --format json | head``): stop quietly. Point stdout
        # at /dev/null so the interpreter's final flush cannot fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
