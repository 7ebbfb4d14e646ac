"""Merge measured entries into a shipped profile, keeping the faster entry per key.

Input: ``rltriton-tune show --format json`` output (or a profile file) from a GPU
run. Only entries whose fingerprint matches the shipped profile's are taken,
and only configs the current kernels still accept. Unlike ``import`` (newest
entry wins), a key keeps whichever entry measured faster, so a short tuning run
never replaces a better sweep result.

    python benchmarks/ship_entries.py benchmarks/results/tuner/tune_default_h200_entries.json \
        --method optuna
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from rltriton_tune.kernels import strategies  # noqa: E402
from rltriton_tune.strategy import InvalidConfig  # noqa: E402
from rltriton_tune.tuning_db import Entry, shipped_dir  # noqa: E402
from rltriton_tune.tuning_db.schema import canonical_fingerprint, dumps  # noqa: E402
from rltriton_tune.tuning_db.store import read_profile, write_atomic  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("entries", type=Path, help="show --format json output or a profile file")
    p.add_argument("--method", help="provenance for entries without one (e.g. optuna)")
    p.add_argument("--replace", action="store_true",
                   help="take every entry, faster or not than the recorded one (for entries "
                   "measured side by side with the current entry's config, e.g. "
                   "entries_from_bench.py output: recorded times of other sessions differ)")
    p.add_argument("--profile", type=Path, help="shipped profile file (default: the one "
                   "in the package's profiles folder matching the entries' fingerprint)")
    args = p.parse_args(argv)
    data = json.loads(args.entries.read_text())
    if isinstance(data, dict):  # a profile file: one fingerprint for all its entries
        entries = data["entries"]
        rows = [{**r, "fingerprint": data["fingerprint"]}
                for r in (entries.values() if isinstance(entries, dict) else entries)]
    else:
        rows = data
    impls = strategies()
    path = args.profile
    if path is None:
        fps = {canonical_fingerprint(r["fingerprint"]) for r in rows if "fingerprint" in r}
        files = [f for f in shipped_dir().glob("*.json")
                 if canonical_fingerprint(read_profile(f).fingerprint) in fps]
        if len(files) != 1:
            p.error(f"expected one shipped profile for the entries' fingerprint, found {files}")
        path = files[0]
    profile = read_profile(path)
    ours = canonical_fingerprint(profile.fingerprint)
    taken = skipped = 0
    for row in rows:
        if "fingerprint" in row and canonical_fingerprint(row["fingerprint"]) != ours:
            continue
        row = {k: v for k, v in row.items() if k not in ("device", "fingerprint")}
        if row.get("method") is None and args.method:
            row["method"] = args.method
        entry = Entry.from_json(row)
        try:
            impls[entry.strategy].validate(entry.key, entry.params)
        except (KeyError, InvalidConfig):
            skipped += 1
            continue
        text = entry.key.as_text()
        current = profile.entries.get(text)
        if current is None or args.replace or entry.device_time_us < current.device_time_us:
            profile.entries[text] = entry
            taken += 1
    write_atomic(path, dumps(profile.to_json()))
    print(f"{path}: {taken} entries taken, {skipped} skipped (config no longer valid), "
          f"{len(profile.entries)} in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
