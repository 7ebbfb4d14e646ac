"""``rltriton-tune tune``: the grid or recorded keys, ``--refresh`` and ``--borrowing``."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from rltriton_tune.cli.args import PRESETS, PROG, CLIError, keys_of, resolve_device
from rltriton_tune.cli.output import cell, params_text, speedup, table, time_header
from rltriton_tune.cli.userdb import missing_keys, save_unsaved, writable_db
from rltriton_tune.tune.baselines import COMPILE, COMPILE_DOUBLING, best_compile
from rltriton_tune.tune.keys import coverage_order


def _add_row(rows: list[list[str]], errors: list[str], key: Any, entry: Any, trials: int,
             failed: int, error: str | None = None, kept: bool = False) -> None:
    """One line of tune's closing table, or the reason the key has none."""
    if error is not None:
        errors.append(f"{key.as_text()}: {error}")
        return
    if entry is None:
        errors.append(f"{key.as_text()}: no candidate passed ({failed} of {trials} trials failed)")
        return
    base = entry.baselines
    rows.append([key.as_text(), f"{entry.strategy}({params_text(entry.params)})"
                 + (" (stored, kept)" if kept else ""),
                 f"{entry.device_time_us:.2f}",
                 speedup(entry.device_time_us, base.get("flat_heuristic")),
                 speedup(entry.device_time_us, best_compile(base)),
                 speedup(entry.device_time_us, base.get("torch_loop")),
                 f"{trials - failed}/{trials}"])


def cmd_tune(args) -> int:
    deadline = None if args.max_seconds is None else time.monotonic() + args.max_seconds
    devices = [resolve_device(d) for d in args.devices] if args.devices else None
    device = devices[0] if devices else resolve_device(args.device)
    try:
        return _tune(args, devices, device, deadline)
    except KeyboardInterrupt:
        _save_unsaved_on_interrupt(devices or [device])
        raise


def _save_unsaved_on_interrupt(devices: list[Any]) -> None:
    """Ctrl-C or SIGTERM: the entries this run measured that only live in memory (their
    profile could not be written) go to a temporary file the user is told about, as at
    the end of a run; the process would otherwise lose them."""
    for device in devices:
        try:
            line = save_unsaved(device)
        except Exception:  # noqa: BLE001 - the interruption is what the caller reports
            continue
        if line:
            print(f"{PROG}: error: {line}", file=sys.stderr)


def _tune(args, devices: list[Any] | None, device: Any, deadline: float | None) -> int:
    from tqdm import tqdm

    from rltriton_tune.tune.compile_pool import compile_pool_for
    from rltriton_tune.tune.space import SearchSpace
    from rltriton_tune.tune.storage import StorageError, open_storage
    from rltriton_tune.tune.study import (
        finalize,
        finished_trials,
        open_study,
        run_trials,
        tightest,
    )
    from rltriton_tune.tuning_db import Entry

    preset = PRESETS[args.preset]
    trials = args.trials or preset["trials"]
    writable_db()  # before any work: results that cannot be saved are not worth measuring
    if args.refresh:
        return _refresh(args, devices or [device], deadline)
    if args.borrowing:
        return _measure_borrowing(device, args.algorithms)
    if args.from_record is not None:
        from rltriton_tune.dispatch.devices import device_fingerprint
        from rltriton_tune.tune.keys import record_keys

        try:
            keys = record_keys(args.from_record, device_fingerprint(device))
        except (OSError, ValueError) as exc:
            print(f"{PROG}: --from-record: {exc}", file=sys.stderr)
            return 1
        recorded = len(keys)
        keys = [k for k in keys if k.algorithm in args.algorithms]
        if not keys:
            which = "" if not recorded else " of the --algorithms asked for"
            print(f"{PROG}: {cell(args.from_record, 300)} records no key{which} for this "
                  "device; nothing to tune")
            return 0
    else:
        keys = coverage_order(keys_of(args))
    missing = missing_keys(keys, device)
    # Keys with an entry measured on this stack in the user's profile: when their study
    # has reached its trial budget too, a resumed run (the same arguments after a
    # --max-seconds stop) skips them instead of timing their finalists again.
    entered = {k.as_text() for k in keys} - {k.as_text() for k in missing}

    def done_earlier(key: Any, study: Any) -> bool:
        """Whether ``key``'s study is at its trial budget and its entry is recorded."""
        return key.as_text() in entered and len(finished_trials(study)) >= trials
    if args.missing_only:
        keys = missing
        if not keys:
            print("nothing left to tune: every key has an entry measured on this stack")
            return 0
    where = "--storage" if args.storage is not None else "study journal"

    def open_key(key: Any) -> tuple[Any, Any]:
        """The key's search space and study, opened when its turn comes: opening every
        study up front costs time that grows with the square of the key count in a
        journal, and a run cut short by --max-seconds never needs the rest."""
        space = SearchSpace(key, device)
        try:
            return space, open_study(key, device, args.storage, trials=trials,
                                     seed=args.seed, space=space)
        except StorageError as exc:
            raise CLIError(f"{where}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a database that refuses the study
            text = str(exc).strip().splitlines()
            hint = ("; a damaged journal can be moved aside (studies start afresh)"
                    if isinstance(exc, ValueError) else "")
            raise CLIError(f"{where}: cannot open the studies ({type(exc).__name__}: "
                           f"{text[0][:300] if text else ''}){hint}") from None

    try:
        open_storage(args.storage)  # checked before anything is written to it
    except StorageError as exc:
        raise CLIError(f"{where}: {exc}") from None
    parallel = bool(devices and len(devices) > 1)
    done_before: list[str] = []  # study at its budget and entry recorded: nothing to do
    # Workers share the studies: each is created and seeded once, here, before they start
    # (with --seed, whichever worker reaches a key first). One device opens each study
    # when its key's turn comes, the first one here: a storage that refuses studies fails
    # before any work.
    for key in keys if parallel else keys[:1]:
        _, study = open_key(key)
        if parallel and done_earlier(key, study):
            done_before.append(key.as_text())  # at its budget, entry recorded: no work
    keys = [k for k in keys if k.as_text() not in done_before]
    bar = tqdm(total=len(keys) * trials, desc="tuning", unit="trial", disable=args.no_progress,
               file=sys.stderr)
    errors: list[str] = []
    incomplete: list[str] = []  # stopped by --max-seconds: the next run resumes them
    served: list[str] = []  # not reached before --max-seconds, but with an entry already
    rows: list[list[str]] = []
    skip = (COMPILE, COMPILE_DOUBLING) if args.no_compile_baseline else ()
    if parallel:
        from rltriton_tune.tune.parallel import run_workers

        summaries: dict[str, dict[str, Any]] = {}

        def on_event(kind: str, payload: Any) -> None:
            bar.update(kind == "trial")
            if kind == "finalized":
                summaries[payload["key"]] = payload

        if keys:  # every key may be at its budget with its entry (done_before)
            errors += run_workers(keys, [str(d) for d in devices], trials=trials,
                                  timeout_s=args.timeout, storage=args.storage,
                                  isolate=args.isolate, seed=args.seed,
                                  compile_workers=args.compile_workers, skip=skip,
                                  max_seconds=args.max_seconds, on_event=on_event)
        bar.close()
        for key in keys:
            summary = summaries.get(key.as_text(), {"error": "no worker finalized it"})
            if summary.get("incomplete"):
                incomplete.append(f"{key.as_text()}: {summary['incomplete']}")
                continue
            entry = Entry.from_json(summary["entry"]) if summary.get("entry") else None
            _add_row(rows, errors, key, entry, summary.get("trials", 0),
                     summary.get("failed", 0), summary.get("error"))
    else:
        finalized: list[tuple[Any, Any, Any, Any]] = []
        with compile_pool_for(device, args.compile_workers, args.isolate) as pool:
            for key in keys:
                bar.set_postfix_str(key.as_text())
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    if key.as_text() in entered:
                        served.append(key.as_text())
                    else:
                        incomplete.append(f"{key.as_text()}: not started")
                    continue
                try:
                    space, study = open_key(key)
                except CLIError as exc:  # e.g. a database gone mid-run: the other keys go on
                    _add_row(rows, errors, key, None, 0, 0, str(exc))
                    continue
                if done_earlier(key, study):
                    done_before.append(key.as_text())
                    continue
                try:
                    run_trials(key, device, trials=trials, timeout_s=tightest(args.timeout, left),
                               study=study, isolate=args.isolate, seed=args.seed,
                               space=space, pool=pool, on_trial=lambda _t: bar.update(1))
                    done = len(finished_trials(study))
                    if done < trials:
                        incomplete.append(f"{key.as_text()}: {done} of {trials} trials")
                        continue
                    result = finalize(study, key, device, space=space,
                                      isolate=args.isolate, seed=args.seed, skip=skip,
                                      pool=pool)
                except Exception as exc:  # noqa: BLE001 - one bad key must not stop the rest
                    _add_row(rows, errors, key, None, 0, 0, f"{type(exc).__name__}: {exc}")
                    continue
                finalized.append((key, space, study, result))
        bar.close()
        for key, space, study, result in finalized:
            if result.entry is not None and (deadline is None or time.monotonic() < deadline):
                result = _against_later_siblings(key, space, study, result, device, args, skip)
            _add_row(rows, errors, key, result.entry, result.trials, result.failed,
                     kept=result.kept_stored)
    print(table(["key", "choice", time_header(device), "vs flat", "vs compile", "vs loop",
                  "ok trials"], rows))
    for err in errors:
        print(f"{PROG}: warning: {err}", file=sys.stderr)
    if done_before:
        print(f"{PROG}: {len(done_before)} key(s) already tuned to their trial budget, with "
              f"an entry measured on this stack: skipped (`{PROG} tune --refresh` re-times "
              "entries)", file=sys.stderr)
    if served:
        print(f"{PROG}: {len(served)} key(s) not reached before --max-seconds have an entry "
              "measured on this stack already", file=sys.stderr)
    if incomplete:
        limit = "--max-seconds" if deadline is not None and time.monotonic() >= deadline \
            else "--timeout"
        print(f"{PROG}: {limit} reached; {len(incomplete)} key(s) resume on the next run "
              "with the same arguments:", file=sys.stderr)
        for line in incomplete:
            print(f"  {line}", file=sys.stderr)
    lost = [line for d in (devices or [device]) if (line := save_unsaved(d))]
    if lost:
        raise CLIError("; ".join(lost))
    return 0 if rows or ((incomplete or done_before or served) and not errors) else 1


def _against_later_siblings(key: Any, space: Any, study: Any, result: Any, device: Any,
                            args: Any, skip: tuple[str, ...]) -> Any:
    """``result``, or the result of one more final round of ``key`` against the seeds it
    would get now and its study never tried (winners found later in this run): recorded
    only when one of those configs beats the first round's winner. Its baselines are the
    first round's (measured on the same inputs, seconds earlier)."""
    from rltriton_tune.tune.study import finalize, fingerprint_of, make_entry, untried_related
    from rltriton_tune.tuning_db import record

    if result.best is None:
        return result
    try:
        extra = untried_related(study, key, device, space)
        if not extra:
            return result
        again = finalize(study, key, device, space=space, isolate=args.isolate,
                         seed=args.seed, skip=skip, extra=[result.best.candidate, *extra],
                         record=False, measure_baselines=False)
        # Only a config from outside the study may replace the entry: the study's own
        # finalists were already weighed in the first round.
        if again.best is None or again.best.candidate.label() not in {
                c.label() for c in extra}:
            return result
        again.baselines = dict(result.baselines)
        again.entry = make_entry(again)
        record(fingerprint_of(device), [again.entry])
    except Exception:  # noqa: BLE001 - e.g. a storage gone mid-run: the first round stands
        return result
    return again


def _measure_borrowing(device: Any, algorithms: list[str]) -> int:
    import filelock

    from rltriton_tune.dispatch.decide import usable_strategies
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.borrowing import factors, measure
    from rltriton_tune.tuning_db import (
        DB_ENV,
        ProfileError,
        fingerprint_id,
        load_profiles,
        user_dir,
    )
    from rltriton_tune.tuning_db.store import record_borrowing, write_atomic

    fp = device_fingerprint(device)
    profiles = load_profiles(fp)  # this GPU's own entries: the factors are for its profile
    usable, reason = usable_strategies(device)
    if profiles is None or reason is not None:
        print(f"{PROG}: no usable profile on {device} ({reason or 'none loaded'})",
              file=sys.stderr)
        return 1
    subset = dataclasses.replace(profiles, index={}, entries={
        t: e for t, e in profiles.entries.items() if e.key.algorithm in algorithms})
    rows = measure(subset, device, usable)
    if not rows:
        print(f"{PROG}: no pair of entries to compare on {device}", file=sys.stderr)
        return 1
    found = factors(rows)
    # The factors are printed first: a profile or folder that refuses the write does
    # not lose the measurement.
    print(table(["dimension", "pairs", "mean slowdown"],
                 [[d, str(sum(r["dimension"] == d for r in rows)), f"{f:.3f}x"]
                  for d, f in found.items()]))
    evidence = user_dir() / f"borrowing-{fingerprint_id(fp)}.jsonl"
    try:
        evidence.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(evidence, "".join(json.dumps(r) + "\n" for r in rows))
        path = record_borrowing(fp, found)
    except ProfileError as exc:  # a newer schema's profile in the way, or one too large
        raise CLIError(f"tune --borrowing: cannot store the factors above: "
                       f"{cell(exc.path, 300)}: {exc.reason}") from None
    except (OSError, filelock.Timeout) as exc:
        raise CLIError(f"tune --borrowing: cannot store the factors above in "
                       f"{cell(evidence.parent, 300)}: {getattr(exc, 'strerror', None) or exc}"
                       f"; set {DB_ENV} to a writable folder") from None
    print(f"stored in {cell(path, 300)}; the pairs measured are in {cell(evidence, 300)}")
    return 0


def _refresh_progress(done: Any) -> None:
    """One line on stderr per entry refreshed (a run cut short still shows its work)."""
    what = "no config works" if done.new is None else (
        "replaced" if done.replaced else "kept")
    from rltriton_tune.dispatch.lookup import OFF_GRID_FIELDS

    for field, side in zip(OFF_GRID_FIELDS, ("below", "beyond"), strict=True):
        off = None if done.new is None else done.new.extra.get(field)
        if isinstance(off, dict):
            what += (f"; partly filled spans {side}: {off.get('strategy')}"
                     f"({params_text(off.get('params', {}))})")
    took = "" if done.seconds is None else f" ({done.seconds:.1f} s)"
    print(f"refreshed {done.key.as_text()}: {what}{took}", file=sys.stderr, flush=True)


def _refresh(args, devices: list[Any], deadline: float | None = None) -> int:
    """``tune --refresh``: re-time the stored entries of each device on this stack. Past
    ``deadline`` (``--max-seconds``) no further entry is started; what was refreshed is
    saved, and ``--missing-only`` picks up the rest."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.compile_pool import compile_pool_for
    from rltriton_tune.tune.keys import flag_sets
    from rltriton_tune.tune.neighbours import neighbourhood_texts
    from rltriton_tune.tune.refresh import REFRESH_VERSION, entries_to_refresh, refresh
    from rltriton_tune.tuning_db.fingerprint import software_versions
    from rltriton_tune.tuning_db.siblings import serving_profiles

    rows: list[list[str]] = []
    errors: list[str] = []
    shapes, dtypes, layouts = set(args.shapes or ()), set(args.dtypes), set(args.layouts)
    here = software_versions()
    refreshed_already: set[str] = set()  # entries --missing-only skips: refreshed here

    def wanted_on(device: Any) -> Callable[[Any], bool]:
        """--shapes (with --dtypes, --layouts) picks entries; --missing-only skips those
        already refreshed on this software stack and this GPU (a sibling GPU's entries
        are refreshed whatever their stack) by the current refresh for the key's current
        neighbourhood: an entry refreshed by an earlier version of the refresh (its
        ``refreshed`` field below ``tune.refresh.REFRESH_VERSION``; ``true`` before
        versions) or whose config was chosen for other companions (its ``neighbourhood``
        field, absent before companions existed) is refreshed again."""
        borrowed = serving_profiles(device_fingerprint(device)).sibling_keys

        def done(entry: Any) -> bool:
            version = entry.extra.get("refreshed")
            return (entry.software == here and isinstance(version, int)
                    and version >= REFRESH_VERSION and entry.key.as_text() not in borrowed
                    and entry.extra.get("neighbourhood") == neighbourhood_texts(entry.key))

        def wanted(entry: Any) -> bool:
            key = entry.key
            if shapes and not ((key.n, key.t) in shapes and key.dtype in dtypes
                               and key.layout in layouts):
                return False
            if args.flags and key.flags not in flag_sets(key.algorithm, args.flags):
                return False
            if args.missing_only and done(entry):
                refreshed_already.add(key.as_text())
                return False
            return True
        return wanted
    left = 0
    for device in devices:
        wanted = wanted_on(device)
        todo = len(entries_to_refresh(device, args.algorithms, wanted))
        with compile_pool_for(device, args.compile_workers, args.isolate) as pool:
            done_here = refresh(device, args.algorithms, isolate=args.isolate, seed=args.seed,
                                wanted=wanted, on_entry=_refresh_progress, deadline=deadline,
                                pool=pool)
        left += todo - len(done_here)
        for done in done_here:
            if done.new is None:
                errors.append(f"{done.key.as_text()}: kept as stored: {done.error}")
                continue
            rows.append([done.key.as_text(),
                         f"{done.old.strategy}({params_text(done.old.params)})",
                         f"{done.old.device_time_us:.2f}",
                         f"{done.new.strategy}({params_text(done.new.params)})",
                         f"{done.new.device_time_us:.2f}",
                         "replaced" if done.replaced else "kept"])
        lost = save_unsaved(device)
        if lost:
            raise CLIError(lost)
    if rows:
        unit = time_header(devices[0])
        print(table(["key", "stored", f"stored {unit}", "choice", f"now {unit}", "result"],
                     rows))
    elif not left and refreshed_already:
        print("nothing left to refresh: every entry asked for is refreshed on this stack")
    elif not left:
        print("no stored entries to refresh")
    for err in errors:
        print(f"{PROG}: warning: {err}", file=sys.stderr)
    if left:
        print(f"{PROG}: --max-seconds reached; {left} entr{'y' if left == 1 else 'ies'} left "
              "to refresh (run again with --missing-only)", file=sys.stderr)
    return 0 if rows or left or not errors else 1
