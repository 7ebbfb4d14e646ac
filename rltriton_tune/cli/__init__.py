"""The ``rltriton-tune`` command: doctor, tune, show, bench, export, import, clear.

Argument errors print usage and exit 2 (argparse); any other problem (a device
that is not there, a storage or folder that cannot be used, results that could
not be saved) prints one line on stderr and exits 1. No verb ends in a traceback.
Ctrl-C and SIGTERM (how a job scheduler stops a run) end a verb the same way: what
was measured is kept, worker processes are ended, and the exit status is 130 or 143.

``args`` holds the grammar, ``output`` what is printed, ``userdb`` the user's
profile folder; each verb has its module (``tuning`` for ``tune``, ``profiles``
for ``show``, ``export``, ``import`` and ``clear``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from rltriton_tune.cli.args import PRESETS, PROG, CLIError, DeviceError, build_parser
from rltriton_tune.cli.bench import cmd_bench
from rltriton_tune.cli.doctor import cmd_doctor
from rltriton_tune.cli.profiles import cmd_clear, cmd_export, cmd_import, cmd_show
from rltriton_tune.cli.tuning import cmd_tune
from rltriton_tune.settings import ENV_RECORD

__all__ = ["PRESETS", "VERBS", "build_parser", "main"]

VERBS = {"doctor": cmd_doctor, "tune": cmd_tune, "show": cmd_show, "export": cmd_export,
         "import": cmd_import, "clear": cmd_clear, "bench": cmd_bench}


class Terminated(KeyboardInterrupt):
    """SIGTERM during a verb, raised in the main thread like Ctrl-C's KeyboardInterrupt so
    that the same clean-up runs (Python's default for SIGTERM is to end at once: a tuning
    run's compile workers would be left running)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while a verb runs, where the process left it at
    its default and this is the main thread (a host program's own handler stays)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rltriton-tune`` console script."""
    args = build_parser().parse_args(argv)
    # The tools' own calls (bench's timed calls, tuning's checks) are not a workload:
    # with RLTRITON_TUNE_RECORD set they would count into the user's record.
    recording = os.environ.pop(ENV_RECORD, None)
    try:
        from rltriton_tune import dispatch

        dispatch.reset()  # a run reads the environment as it is when the run starts
        with _sigterm_interrupts():
            return VERBS[args.verb](args)
    except ValueError as exc:  # the environment cannot be read (e.g. a junk boolean)
        if not str(exc).startswith("RLTRITON_TUNE_"):
            raise
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (DeviceError, CLIError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        stopped = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"{PROG}: {stopped} (studies resume on the next run)", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except BrokenPipeError:
        # The reader went away (``show --format json | head``): stop quietly. Point stdout
        # at /dev/null so the interpreter's final flush cannot fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    finally:
        if recording is not None:
            os.environ[ENV_RECORD] = recording
