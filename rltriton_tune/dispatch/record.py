"""Workload recording (``RLTRITON_TUNE_RECORD=FILE``): the keys that missed the database.

The anchor is PyTorch TunableOp's record-untuned, tune-offline workflow: run the
training with recording on, then ``rltriton-tune tune --from-record FILE`` tunes
exactly the recorded keys, most-called first, and the next run finds them.

A key is recorded when its decision did not come from its own profile entry
(borrowed, rules, fallback). Its calls are counted by a thin wrapper around its
launcher (and around the launcher's bound launch, which the usual call's fast path
takes), so keys that hit the database pay nothing and recorded ones one increment a
call. Counts are merged into FILE (summed with what is there, under
a file lock, written atomically) every :data:`FLUSH_EVERY_S` seconds by a daemon
thread, so a run stopped without its exit handlers (SIGTERM, SIGKILL: how clusters
preempt) loses at most that much; at exit (after a flush already under way, which
the exit would otherwise cut short); and, in a ``multiprocessing`` child, which ends
without the exit handlers, when the child's work returns and every
:data:`CHILD_FLUSH_EVERY_S` seconds (a pool's workers are terminated, not returned
from, when its ``with`` block ends). The file
holds at most :data:`MAX_KEYS` keys; the least-called are dropped beyond that. A
forked child starts counting from zero, so nothing is counted twice. A path that
exists and is not a regular file (a FIFO, device or folder) is never opened:
recording stops, with one warning naming the variable, and the run goes on.
"""

from __future__ import annotations

import atexit
import json
import os
import stat
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from rltriton_tune.call import ProblemKey

SCHEMA = "rltriton-tune-workload"
VERSION = 1
MAX_KEYS = 4096
#: Largest record file read (MAX_KEYS rows take about 1 MiB).
MAX_BYTES = 16 << 20
FLUSH_EVERY_S = 30.0
#: The flush interval in a ``multiprocessing`` child: a ``Pool`` used as a context manager
#: terminates its workers (SIGTERM, no exit handlers) when its block ends. A flush with
#: nothing new to write does no I/O.
CHILD_FLUSH_EVERY_S = 2.0


class RecordError(ValueError):
    """A workload file that cannot be read; ``str()`` names the file and the problem."""


class NotRegular(RecordError):
    """The record path is a FIFO, device, socket or folder: never opened (a FIFO would
    block the flush until a writer came)."""


class Recorder:
    """Call counts of the keys that missed the database, merged into one file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock = threading.Lock()
        #: (key text, fingerprint JSON) -> [calls counted in this process, decision origin,
        #: calls already merged into the file]. Only the calls write the count; a flush
        #: (the flusher thread's too) moves the merged mark, so no call is lost to it.
        self.counts: dict[tuple[str, str], list] = {}
        #: Held through a whole flush, so that one (the exit's) waits for another (the
        #: flusher thread's) to finish writing instead of finding nothing pending and
        #: letting the process end in the middle of the write.
        self.flushing = threading.Lock()
        self.warned = False
        #: Set when the path is not a regular file: nothing is counted or written any more.
        self.refused = False
        #: Whether this process has its flusher thread and child-exit flush (see
        #: :meth:`_arm`); cleared in a forked child, which has neither.
        self.armed = False
        #: Set by :meth:`close`: the flusher thread ends.
        self.closed = threading.Event()
        atexit.register(self.flush)

    def wrap(self, launcher: Callable, key: ProblemKey, fingerprint: dict[str, Any],
             origin: str) -> Callable:
        """``launcher``, counting its calls for ``key``."""
        if self.refused:
            return launcher
        fp_text = json.dumps(fingerprint, sort_keys=True)
        with self.lock:
            cell = self.counts.setdefault((key.as_text(), fp_text), [0, origin, 0])
            cell[0] += 1  # the call that missed

        def counted(call: Any) -> Any:
            cell[0] += 1
            if not self.armed:  # a forked child's first call
                self._arm()
            return launcher(call)

        bind = getattr(launcher, "bind", None)
        if bind is not None:
            # The usual call's fast path launches through the launcher's bound launch
            # (``hot_path``), not through the launcher: count those launches too, so that
            # recording keeps that path. A bound launch that declines returns None, and the
            # call then goes through ``counted``: counted once either way.
            def counted_bind(*args: Any, **kwargs: Any) -> Callable[..., Any] | None:
                go = bind(*args, **kwargs)
                if not go:
                    return go

                def counted_go(*inputs: Any) -> Any:
                    out = go(*inputs)
                    if out is not None:
                        cell[0] += 1
                        if not self.armed:
                            self._arm()
                    return out

                return counted_go

            counted.bind = counted_bind  # type: ignore[attr-defined]
        if not self.armed:
            self._arm()
        return counted

    def _arm(self) -> None:
        """Start this process's flusher thread, and have a ``multiprocessing`` child flush
        when its work returns (it ends with ``os._exit``, past the exit handlers). Done on
        first use in each process: a child's start-up clears the finalizers registered
        before it."""
        import multiprocessing
        from multiprocessing import util

        self.armed = True
        util.Finalize(None, self.flush, exitpriority=10)
        every = FLUSH_EVERY_S if multiprocessing.parent_process() is None \
            else CHILD_FLUSH_EVERY_S
        threading.Thread(target=self._flush_every, args=(self.closed, every),
                         name="rltriton-tune-record", daemon=True).start()

    def _flush_every(self, closed: threading.Event, every: float) -> None:
        while not closed.wait(every) and not self.refused:
            self.flush()

    def close(self) -> None:
        """Flush, and end the flusher thread (the process state is being replaced)."""
        self.closed.set()
        self.flush()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()
        self.flushing = threading.Lock()
        self.closed = threading.Event()
        self.armed = False
        for cell in self.counts.values():
            cell[2] = cell[0]  # the parent's calls are the parent's to merge

    def flush(self) -> None:
        """Merge the counts into the file; on failure warn once and keep counting."""
        with self.flushing:
            self._flush()

    def _flush(self) -> None:
        with self.lock:
            pending, origins = {}, {}
            for k, cell in self.counts.items():
                calls = cell[0]
                pending[k], origins[k], cell[2] = calls - cell[2], cell[1], calls
        if not any(pending.values()):
            return
        try:
            merge_into(self.path, pending, origins)
        except NotRegular as exc:
            self._refuse(exc)
        except (OSError, RecordError, ValueError) as exc:
            with self.lock:  # give the counts back for the next try
                for k, n in pending.items():
                    self.counts[k][2] -= n
            if not self.warned:
                self.warned = True
                from rltriton_tune.state import warn_once

                warn_once("record", f"rltriton-tune: cannot write the workload record "
                          f"{self.path} ({exc}); counts are kept in memory",
                          RuntimeWarning, stacklevel=2)

    def _refuse(self, exc: NotRegular) -> None:
        """Stop recording for good, warning once: the path can never take the record."""
        from rltriton_tune.settings import ENV_RECORD
        from rltriton_tune.state import warn_once

        with self.lock:
            self.refused = True
            self.counts.clear()
        warn_once("record-path", f"rltriton-tune: {ENV_RECORD}={self.path} {exc}; the workload "
                  "is not recorded (give it a regular file's path)", RuntimeWarning,
                  stacklevel=3)


def check_regular(path: Path) -> None:
    """Raise :class:`NotRegular` when ``path`` exists and is not a regular file (a
    symlink is followed); a stat only, so a FIFO or device is never opened."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular("is not a regular file")


def read_record(path: Path | str) -> list[dict[str, Any]]:
    """The rows of a workload file, most-called first: ``key`` (text), ``fingerprint``
    (dict), ``calls``, ``origin``. Raises :class:`RecordError` for a foreign file."""
    path = Path(path)
    try:
        check_regular(path)  # a FIFO would block the read, a device never end it
    except NotRegular:
        raise RecordError(f"{path}: not a workload record (not a regular file)") from None
    with open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise RecordError(f"{path}: not a workload record (over {MAX_BYTES >> 20} MiB)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"{path}: not a workload record (not UTF-8 text)") from None
    if not text.strip():
        return []
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise RecordError(f"{path}: not a workload record (invalid JSON)") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise RecordError(f"{path}: not a workload record (schema is not {SCHEMA!r})")
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version > VERSION:
        # a newer package's record (merging into it would write it back as this version)
        raise RecordError(f"{path}: workload record version {version!r} is not supported "
                          f"(this package reads version {VERSION} and older)")
    rows = document.get("keys")
    if not isinstance(rows, list):
        raise RecordError(f"{path}: field 'keys' must be a list")
    out = []
    for i, row in enumerate(rows):
        try:
            key, calls, fp = row["key"], row["calls"], row["fingerprint"]
            if not isinstance(key, str) or not isinstance(fp, dict) or not fp \
                    or isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
                raise ValueError
            parsed = ProblemKey.from_text(key)
            if parsed.n < 1 or parsed.t < 1:  # calls without steps or rows miss nothing
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise RecordError(f"{path}: row {i} is malformed") from None
        out.append({"key": row["key"], "fingerprint": fp, "calls": calls,
                    "origin": str(row.get("origin", ""))})
    out.sort(key=lambda r: (-r["calls"], r["key"]))
    return out


def merge_into(path: Path, counts: dict[tuple[str, str], int],
               origins: dict[tuple[str, str], str]) -> None:
    """Add ``counts`` to the file at ``path`` (created if missing), under a file lock."""
    import filelock

    from rltriton_tune.tuning_db.store import write_atomic

    check_regular(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{path}.lock", timeout=10):
        check_regular(path)  # again under the lock, right before the read
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            with suppress(OSError):  # left by a writer that died: only writers make these
                stale.unlink()
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        if path.exists():
            for row in read_record(path):
                merged[(row["key"], json.dumps(row["fingerprint"], sort_keys=True))] = row
        for k, n in counts.items():
            row = merged.setdefault(k, {"key": k[0], "fingerprint": json.loads(k[1]),
                                        "calls": 0, "origin": origins.get(k, "")})
            row["calls"] += n
            row["origin"] = origins.get(k, row["origin"])
        rows = sorted(merged.values(), key=lambda r: (-r["calls"], r["key"]))[:MAX_KEYS]
        text = json.dumps({"schema": SCHEMA, "version": VERSION, "keys": rows}, indent=1)
        write_atomic(path, text + "\n")
