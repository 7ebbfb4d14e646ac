"""Tuning database: one versioned JSON profile per device fingerprint.

A profile maps problem keys to the tuned strategy and parameters, with the
evidence (device time, runner-up, baselines, trials, date). Shipped profiles
live in ``profiles/`` inside this package; the user's in ``user_dir()``; user
entries override shipped ones, and a profile for another fingerprint serves only
as a sibling GPU's (``siblings``). Writes are locked, merged and atomic; bad files
(corrupt, foreign, over 16 MB, nested too deeply) are reported and skipped. What the
database promises is written down in ``docs/database.md``.
The file format is documented in ``SCHEMA.md`` next to this module.
"""

from rltriton_tune.tuning_db.exchange import (
    ExportError,
    check_export_destination,
    export_profiles,
    export_text,
    import_profiles,
    known_fingerprints,
    merge_profiles,
)
from rltriton_tune.tuning_db.fingerprint import device_fingerprint, fingerprint_id
from rltriton_tune.tuning_db.loading import FileReport, ProfileSet, load_profiles, loaded_once
from rltriton_tune.tuning_db.locations import DB_ENV, profile_path, shipped_dir, user_dir
from rltriton_tune.tuning_db.schema import (
    SCHEMA,
    SCHEMA_VERSION,
    Entry,
    Profile,
    ProfileError,
    UnsupportedVersion,
)
from rltriton_tune.tuning_db.state import invalidate_cache
from rltriton_tune.tuning_db.store import (
    WriteError,
    clear,
    merge_entries,
    owned_profiles,
    read_profile,
    read_profiles,
    record,
    remove_profile,
)

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "DB_ENV",
    "Entry",
    "Profile",
    "ProfileError",
    "UnsupportedVersion",
    "FileReport",
    "ProfileSet",
    "fingerprint_id",
    "device_fingerprint",
    "user_dir",
    "shipped_dir",
    "profile_path",
    "read_profile",
    "read_profiles",
    "load_profiles",
    "loaded_once",
    "invalidate_cache",
    "record",
    "merge_entries",
    "clear",
    "owned_profiles",
    "remove_profile",
    "WriteError",
    "ExportError",
    "check_export_destination",
    "export_profiles",
    "export_text",
    "import_profiles",
    "merge_profiles",
    "known_fingerprints",
]
