"""The verbs that read and write profiles: ``show``, ``export``, ``import``, ``clear``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from rltriton_tune.cli.args import PROG, CLIError, resolve_device
from rltriton_tune.cli.output import ask, cell, params_text, table
from rltriton_tune.cli.userdb import writable_db


def _all_entries(algorithms: list[str] | None,
                 fingerprints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from rltriton_tune.tuning_db import load_profiles
    from rltriton_tune.tuning_db.loading import load_many

    # Several devices: each folder read once, not once per fingerprint (see load_many).
    loaded = load_many(fingerprints) if len(fingerprints) > 1 else \
        [load_profiles(fp) for fp in fingerprints]
    out = []
    for fp, profiles in zip(fingerprints, loaded, strict=True):
        for entry in profiles.entries.values():
            if algorithms and entry.key.algorithm not in algorithms:
                continue
            # A hostile profile can hold huge or escaping text anywhere (unknown fields,
            # fingerprint keys and values): every string printed is bounded.
            row = _bounded(entry.to_json())
            row["device"] = cell(str(fp.get("name") or fp.get("kind")), 80)
            row["fingerprint"] = _bounded(fp)
            out.append(row)
    out.sort(key=lambda r: (r["device"], r["algorithm"], r["dtype"], r["layout"], r["flags"],
                            r["N"], r["T"]))
    return out


def _bounded(value: Any, limit: int = 200) -> Any:
    """``value`` (JSON data read from a profile) with every string, keys included, cut to
    ``limit`` printable characters (see :func:`cell`)."""
    if isinstance(value, str):
        return cell(value, limit)
    if isinstance(value, dict):
        return {cell(k, limit): _bounded(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded(v, limit) for v in value]
    return value


def cmd_show(args) -> int:
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import known_fingerprints

    if args.all_devices:
        fingerprints = known_fingerprints()
    else:
        fingerprints = [device_fingerprint(resolve_device(args.device))]
    entries = _all_entries(args.algorithms, fingerprints)
    if args.format == "json":
        print(json.dumps(entries, indent=1))
        return 0
    if not entries:
        print("no tuned entries" + ("" if args.all_devices else
                                    " for this device (--all-devices lists the others)"))
        if not args.all_devices:
            print(*_sibling_note(fingerprints[0]), sep="\n")
        return 0
    rows = [[r["device"], r["algorithm"], f"{r['N']}x{r['T']}" + (f"x{r['A']}" if r["A"] else ""),
             r["dtype"], r["layout"], r["flags"],
             f"{r['strategy']}({params_text(r['params'])})", f"{r['device_time_us']:.2f}",
             str(r.get("trials", "")), r.get("date", "")] for r in entries]
    print(table(["device", "algorithm", "shape", "dtype", "layout", "flags", "choice",
                  "time us", "trials", "date"], rows))
    if not args.all_devices:
        kind = fingerprints[0].get("kind")
        print(f"(time us: {'GPU kernel time' if kind == 'cuda' else 'host wall time'}; "
              "--all-devices lists other devices' entries)")
        print(*_sibling_note(fingerprints[0]), sep="\n")
    return 0


def _sibling_note(fp: dict[str, Any]) -> list[str]:
    """A line naming the sibling GPU whose entries also serve ``fp`` (none if none)."""
    from rltriton_tune.tuning_db.siblings import serving_profiles

    served = serving_profiles(fp)
    borrowed = len(served.sibling_keys)
    if not borrowed:
        return []
    name = cell(str(served.sibling.fingerprint.get("name", "another GPU")), 80)
    return [f"{borrowed} more keys are served by the profile of a sibling GPU, {name} "
            "(--all-devices lists them; `rltriton-tune tune --refresh` measures them here)"]


def cmd_export(args) -> int:
    from rltriton_tune.tuning_db import (
        ExportError,
        ProfileError,
        check_export_destination,
        export_profiles,
        export_text,
    )

    if args.file == "-":
        if sys.stdout is None:
            raise CLIError("export: standard output is closed")
        try:
            text, count = export_text()
        except ProfileError as exc:  # more than a profile may hold
            raise CLIError(f"export: {exc.reason}") from None
        try:
            sys.stdout.flush()
            sys.stdout.buffer.write(text.encode("utf-8"))  # UTF-8 whatever the locale
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # the reader went away: main() stops quietly
        except OSError as exc:  # e.g. a full disk behind the redirection
            raise CLIError(f"export: standard output: {exc.strerror or exc}") from None
        print(f"exported {count} entries to standard output", file=sys.stderr)
        return 0
    try:
        check_export_destination(args.file, overwrite=True)
        if os.path.lexists(args.file) and not args.force \
                and not ask(f"{args.file} exists; replace it?", "--force"):
            print(f"{PROG}: export: {args.file} left as it was", file=sys.stderr)
            return 1
        count = export_profiles(args.file, overwrite=True)
    except ProfileError as exc:  # more than a profile may hold: nothing written
        raise CLIError(f"export: {exc.reason}") from None
    except (ExportError, OSError) as exc:
        raise CLIError(f"export: {exc.strerror or exc}" if not isinstance(exc, ExportError)
                       else f"export: {exc}") from None
    # The name as given may not be encodable on stdout (bytes that are not UTF-8).
    print(f"exported {count} entries to {cell(args.file, 300)}")
    return 0


def cmd_import(args) -> int:
    from rltriton_tune.tuning_db import DB_ENV, ProfileError, WriteError, merge_profiles
    from rltriton_tune.tuning_db.schema import MAX_PROFILE_BYTES, profiles_from_text
    from rltriton_tune.tuning_db.store import read_profiles

    stdin = args.file == "-"
    source = "standard input" if stdin else cell(args.file, 300)
    if stdin and sys.stdin is None:
        raise CLIError("import: standard input is closed")
    try:
        if stdin:
            profiles = profiles_from_text(sys.stdin.buffer.read(MAX_PROFILE_BYTES + 1), source)
        else:
            profiles = read_profiles(Path(args.file))
    except ProfileError as exc:
        where = source if stdin else f"FILE {source}"
        raise CLIError(f"import {where}: {exc.reason}") from None
    total = sum(len(p.entries) for p in profiles)
    writable_db()
    try:
        count = merge_profiles(profiles)
    except WriteError as exc:
        raise CLIError(f"import: {exc}; set {DB_ENV} to another folder to import there") \
            from None
    except ProfileError as exc:  # an entry that cannot be stored: nothing of it is written
        raise CLIError(f"import {source}: {exc.reason}") from None
    print(f"imported {count} entries from {source}")
    if total > count:
        print(f"kept the stored entry of {total - count} key(s) that already had one "
              f"(`{PROG} tune --refresh` re-times stored entries)")
    return 0


def cmd_clear(args) -> int:
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tune.storage import (
        LOCK_SUFFIX,
        StorageError,
        check_journal,
        default_journal,
        delete_studies,
    )
    from rltriton_tune.tuning_db import fingerprint_id, owned_profiles, remove_profile, user_dir

    if args.all_devices:
        ids = None
    elif args.fingerprint:
        ids = set(args.fingerprint)
    else:
        ids = {fingerprint_id(device_fingerprint(resolve_device(args.device)))}
    owned = [(path, fingerprint_id(fp)) for path, fp in owned_profiles(user_dir())
             if ids is None or fingerprint_id(fp) in ids]
    targets = [path for path, _ in owned]
    # The pairs `tune --borrowing` measured for each of those profiles (its factors live in
    # the profile itself): regular files of the name it writes, nothing else.
    evidence = [e for _, fp_id in owned
                if (e := user_dir() / f"borrowing-{fp_id}.jsonl").is_file()
                and not e.is_symlink()]
    journal = default_journal()
    try:
        has_journal = journal.is_file() and check_journal(journal) is not None
    except StorageError:
        has_journal = False  # not ours: left alone
    plan = [f"{p}" + (f" and its lock file {p}.lock" if Path(f"{p}.lock").exists() else "")
            for p in targets] + [str(e) for e in evidence]
    if has_journal:
        locks = [f"{journal}{suffix}" for suffix in (LOCK_SUFFIX, ".lock")
                 if Path(f"{journal}{suffix}").exists()]
        plan.append(" and ".join([str(journal), *locks]) if ids is None else
                    f"the studies of {', '.join(sorted(ids))} in {journal}")
    if not plan:
        print("nothing to clear" + ("" if ids is None else
                                    f" for {', '.join(sorted(cell(i) for i in ids))}"))
        return 0
    print("will delete:")
    for line in plan:
        print(f"  {line}")
    if not args.yes and not ask(f"Delete {'these' if len(plan) > 1 else 'this'}?", "--yes"):
        print("nothing deleted")
        return 1
    removed: list[Path] = []
    try:
        for path in targets:
            removed += remove_profile(path)
        for path in evidence:
            path.unlink(missing_ok=True)
            removed.append(path)
        if has_journal and ids is None:
            for path in (journal, Path(f"{journal}{LOCK_SUFFIX}"), Path(f"{journal}.lock")):
                if path.exists():
                    path.unlink()
                    removed.append(path)
        elif has_journal:
            deleted = delete_studies(journal, ids)
            print(f"deleted {deleted} stud{'y' if deleted == 1 else 'ies'} from {journal}")
    except (OSError, StorageError) as exc:
        raise CLIError(f"clear: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        from rltriton_tune.tuning_db import invalidate_cache

        invalidate_cache()
    print(f"removed {len(removed)} file(s)")
    for path in removed:
        print(f"  {path}")
    return 0
