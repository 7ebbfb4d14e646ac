"""Profile data model and its JSON form (documented in ``SCHEMA.md``).

Parsing is strict about what this version needs (types, ranges, the schema name
and major version) and lenient about what it does not know (extra fields are
kept in ``Entry.extra`` / ignored at the top level), so an older package can
read, merge and rewrite a profile written by a newer one of the same version.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rltriton_tune.algorithms import ALGORITHMS, FLAG_NAMES, STARTS_AT
from rltriton_tune.call import DTYPES_BY_NAME, LAYOUTS, ProblemKey, flags_string, parse_flags

SCHEMA = "rltriton-tune-profile"
SCHEMA_VERSION = 1

#: Largest profile file read (bytes): a profile of every key of the full preset on every
#: dtype and layout is well under 1 MB, so a bigger file is not one this package wrote.
MAX_PROFILE_BYTES = 16 * 2**20
#: Deepest JSON nesting a profile may have (a bundle of profiles with entries holding
#: params and runner-up objects is 7 deep); anything deeper is rejected as corrupt.
MAX_DEPTH = 16

_KNOWN_FLAGS = frozenset(FLAG_NAMES.values()) | {STARTS_AT}
_KEY_FIELDS = ("algorithm", "N", "T", "A", "dtype", "layout", "flags")
_ENTRY_FIELDS = _KEY_FIELDS + (
    "strategy", "params", "device_time_us", "runner_up", "baselines", "trials", "date",
    "software",
)


#: Longest reason a :class:`ProfileError` carries: reasons quote values read from the file,
#: and they reach training logs as warnings.
REASON_WIDTH = 300


def printable(text: Any, limit: int) -> str:
    """``text`` on one line and at most ``limit`` characters (an ellipsis marks a cut);
    control characters (a terminal escape read from a profile, say) shown escaped."""
    text = " ".join(str(text).split())
    if not text.isprintable():
        text = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


class ProfileError(ValueError):
    """A profile file or entry that cannot be used; ``reason`` says why, without the path
    (bounded and printable: it quotes what the file holds)."""

    def __init__(self, reason: str, path: Path | str | None = None) -> None:
        reason = printable(reason, REASON_WIDTH)
        self.reason = reason
        self.path = Path(path) if path is not None else None
        super().__init__(f"{path}: {reason}" if path is not None else reason)


class UnsupportedVersion(ProfileError):
    """A profile written for a newer schema major version: readable by a newer package only."""


class TooLarge(ProfileError):
    """A profile text over :data:`MAX_PROFILE_BYTES`: never written, since no reader would
    take it (see :func:`sized_dumps`)."""


def utc_now() -> str:
    """The current time as ISO-8601 UTC with second resolution, e.g. ``2026-11-30T01:02:03Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_date(text: str) -> datetime | None:
    """Parse an ISO-8601 date (naive means UTC); ``None`` for an empty string."""
    if not text:
        return None
    stamp = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


@dataclass
class Entry:
    """The tuned choice for one problem key, with the evidence that chose it."""

    key: ProblemKey
    strategy: str
    params: dict[str, Any]
    device_time_us: float
    runner_up: dict[str, Any] | None = None
    baselines: dict[str, float] = field(default_factory=dict)
    trials: int = 0
    date: str = ""
    #: Software the measurement ran under, e.g. ``{"torch": "2.11", "triton": "3.6"}``.
    software: dict[str, str] = field(default_factory=dict)
    #: Fields this version does not know, kept so a rewrite does not drop them.
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object (field order as documented in SCHEMA.md)."""
        k = self.key
        out: dict[str, Any] = {
            "algorithm": k.algorithm, "N": k.n, "T": k.t, "A": k.a,
            "dtype": k.dtype, "layout": k.layout, "flags": k.flags,
            "strategy": self.strategy, "params": dict(self.params),
            "device_time_us": self.device_time_us, "runner_up": self.runner_up,
            "baselines": dict(self.baselines), "trials": self.trials, "date": self.date,
        }
        if self.software:
            out["software"] = dict(self.software)
        out.update({name: value for name, value in self.extra.items() if name not in out})
        return out

    @classmethod
    def from_json(cls, d: Any) -> Entry:
        """Build an entry from its JSON object; raise :class:`ProfileError` on bad data."""
        if not isinstance(d, dict):
            raise ProfileError(f"entry must be a JSON object, got {type(d).__name__}")
        for name in ("algorithm", "N", "T", "dtype", "layout", "flags",
                     "strategy", "params", "device_time_us"):
            if name not in d:
                raise ProfileError(f"entry is missing field {name!r}")
        algorithm = _text(d, "algorithm")
        if algorithm not in ALGORITHMS:
            raise ProfileError(f"entry field 'algorithm': unknown algorithm {algorithm!r}")
        dtype = _text(d, "dtype")
        if dtype not in DTYPES_BY_NAME:
            raise ProfileError(f"entry field 'dtype': unknown dtype {dtype!r}")
        layout = _text(d, "layout")
        if layout not in LAYOUTS:
            raise ProfileError(f"entry field 'layout': must be one of {LAYOUTS}, got {layout!r}")
        flags = _text(d, "flags")
        unknown = parse_flags(flags) - _KNOWN_FLAGS
        if unknown or flags == "":
            raise ProfileError(f"entry field 'flags': unknown flag(s) in {flags!r}")
        flags = flags_string(parse_flags(flags))  # canonical order, as dispatch spells it
        key = ProblemKey(algorithm=algorithm, n=_int(d, "N", 1), t=_int(d, "T", 1),
                         dtype=dtype, layout=layout, flags=flags, a=_int(d, "A", 0, default=0))
        strategy = _text(d, "strategy")
        if not strategy:
            raise ProfileError("entry field 'strategy' must not be empty")
        date = d.get("date", "")
        if not isinstance(date, str):
            raise ProfileError(f"entry field 'date' must be a string, got {date!r}")
        try:
            parse_date(date)
        except ValueError:
            raise ProfileError(f"entry field 'date' is not ISO-8601: {date!r}") from None
        software = d.get("software") or {}
        if not isinstance(software, dict) or not all(
                isinstance(n, str) and isinstance(v, str) for n, v in software.items()):
            raise ProfileError("entry field 'software' must be an object of version strings")
        baselines = d.get("baselines") or {}
        if not isinstance(baselines, dict):
            raise ProfileError("entry field 'baselines' must be an object")
        return cls(
            key=key,
            strategy=strategy,
            params=_params(d["params"], "params"),
            device_time_us=_time(d["device_time_us"], "device_time_us"),
            runner_up=_runner_up(d.get("runner_up")),
            baselines={str(n): _time(v, f"baselines.{n}") for n, v in baselines.items()},
            trials=_int(d, "trials", 0, default=0),
            date=date,
            software=dict(software),
            extra={n: v for n, v in d.items() if n not in _ENTRY_FIELDS},
        )


def sort_key(entry: Entry) -> tuple[Any, ...]:
    """File order: grouped by family, then by N and T numerically (stable diffs)."""
    k = entry.key
    return (k.algorithm, k.flags, k.dtype, k.layout, k.a, k.n, k.t)


@dataclass
class Profile:
    """The entries measured on one device fingerprint, and the file they came from."""

    fingerprint: dict[str, Any]
    entries: dict[str, Entry] = field(default_factory=dict)
    path: Path | None = None
    #: Measured slowdown of borrowing an entry across each key dimension (SCHEMA.md,
    #: "Borrowing factors"); empty when not measured.
    borrowing: dict[str, float] = field(default_factory=dict)
    #: Top-level fields this version does not know, written back as they were read.
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "fingerprint": dict(self.fingerprint),
        }
        if self.borrowing:
            out["borrowing"] = dict(self.borrowing)
        out.update((k, v) for k, v in self.extra.items() if k not in out and k != "entries")
        out["entries"] = [e.to_json() for e in sorted(self.entries.values(), key=sort_key)]
        return out


def dumps(document: dict[str, Any]) -> str:
    """Human-readable, diffable JSON text (rejects NaN/infinity, which JSON lacks)."""
    return json.dumps(document, indent=1, allow_nan=False, ensure_ascii=False) + "\n"


def sized_dumps(document: dict[str, Any], path: Path | str | None = None) -> str:
    """:func:`dumps` of a document to be written as a profile file or bundle; raises
    :class:`TooLarge` where the text exceeds :data:`MAX_PROFILE_BYTES`, which every reader
    refuses (a profile written past it would be unusable, and moved aside by the next
    write)."""
    text = dumps(document)
    size = len(text.encode("utf-8"))
    if size > MAX_PROFILE_BYTES:
        raise TooLarge(f"{too_large(size)}; not written", path)
    return text


def profiles_from_text(text: str | bytes, path: Path | str | None = None) -> list[Profile]:
    """Parse a profile file or an export bundle into profiles; raise :class:`ProfileError`
    (also for a text over :data:`MAX_PROFILE_BYTES` or nested deeper than :data:`MAX_DEPTH`)."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_PROFILE_BYTES:
        raise ProfileError(too_large(size), path)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ProfileError(f"corrupt: not UTF-8 text ({err.reason} at byte {err.start})",
                               path) from None
    if not text.strip():
        raise ProfileError("empty file (truncated?)", path)
    try:
        document = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as err:
        if err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string"):
            raise ProfileError(f"truncated: JSON ends early at line {err.lineno}", path) from None
        raise ProfileError(f"corrupt: invalid JSON at line {err.lineno} column {err.colno}: "
                           f"{err.msg}", path) from None
    except ValueError as err:
        raise ProfileError(f"corrupt: {err}", path) from None
    except RecursionError:
        raise ProfileError(f"corrupt: JSON nested deeper than {MAX_DEPTH} levels", path) from None
    if _depth_exceeds(document, MAX_DEPTH):
        raise ProfileError(f"corrupt: JSON nested deeper than {MAX_DEPTH} levels", path)
    if ("\\u" in text or not text.isascii()) and _has_lone_surrogate(document):
        # JSON can escape half of a UTF-16 pair; such a string cannot be written back as
        # UTF-8, so every later save of the profile would fail.
        raise ProfileError("corrupt: a string holds a lone UTF-16 surrogate escape", path)
    if not isinstance(document, dict):
        raise ProfileError(f"foreign file: top level is a JSON {type(document).__name__}, "
                           "not an object", path)
    _check_header(document, path)
    if "profiles" in document and "fingerprint" not in document:
        bodies = document["profiles"]
        if not isinstance(bodies, list):
            raise ProfileError("field 'profiles' must be a list", path)
    else:
        bodies = [document]
    return [_profile_body(body, i, path, len(bodies) > 1) for i, body in enumerate(bodies)]


def too_large(size: int) -> str:
    """The reason given for a file over :data:`MAX_PROFILE_BYTES`."""
    return (f"too large: {size / 2**20:.1f} MB (profiles are at most "
            f"{MAX_PROFILE_BYTES // 2**20} MB)")


def _depth_exceeds(document: Any, limit: int) -> bool:
    """Whether ``document`` nests lists/objects more than ``limit`` deep (iterative, so a
    hostile file cannot exhaust the stack here)."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = (value.values() if isinstance(value, dict)
                    else value if isinstance(value, list) else None)
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return False


def bundle_to_json(profiles: list[Profile]) -> dict[str, Any]:
    """Several profiles in one export file (see SCHEMA.md, "Export bundles")."""
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "profiles": [{k: v for k, v in p.to_json().items() if k not in ("schema", "version")}
                     for p in profiles],
    }


def canonical_fingerprint(fp: Any, argument: str = "fp") -> str:
    """Canonical JSON text of a fingerprint (the equality used everywhere); validates it."""
    if not isinstance(fp, dict) or not fp:
        raise ProfileError(f"{argument} must be a non-empty dict, got {fp!r}")
    for name, value in fp.items():
        if not isinstance(name, str):
            raise ProfileError(f"{argument} keys must be strings, got {name!r}")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise ProfileError(f"{argument}[{name!r}] must be a JSON scalar, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ProfileError(f"{argument}[{name!r}] must be finite, got {value!r}")
    return json.dumps(fp, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _check_header(document: dict[str, Any], path: Path | str | None) -> None:
    schema = document.get("schema")
    if schema != SCHEMA:
        raise ProfileError(f"foreign schema {schema!r} (expected {SCHEMA!r})", path)
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ProfileError(f"field 'version' must be a positive integer, got "
                           f"{_short(version)}", path)
    if version > SCHEMA_VERSION:
        raise UnsupportedVersion(f"schema version {_short(version)} unsupported (this "
                                 f"rltriton-tune reads version {SCHEMA_VERSION}; upgrade it)",
                                 path)


def _profile_body(body: Any, index: int, path: Path | str | None, many: bool) -> Profile:
    where = f"profile {index}: " if many else ""
    if not isinstance(body, dict):
        raise ProfileError(f"{where}must be a JSON object", path)
    if "fingerprint" not in body:
        raise ProfileError(f"{where}missing field 'fingerprint'", path)
    try:
        canonical_fingerprint(body["fingerprint"], "fingerprint")
    except ProfileError as err:
        raise ProfileError(where + err.reason, path) from None
    raw = body.get("entries")
    if not isinstance(raw, list):
        raise ProfileError(f"{where}field 'entries' must be a list", path)
    entries: dict[str, Entry] = {}
    for i, item in enumerate(raw):
        try:
            entry = Entry.from_json(item)
        except ProfileError as err:
            raise ProfileError(f"{where}entry {i}: {err.reason}", path) from None
        text = entry.key.as_text()
        if text in entries:
            raise ProfileError(f"{where}entry {i}: duplicate key {text}", path)
        entries[text] = entry
    return Profile(fingerprint=dict(body["fingerprint"]), entries=entries,
                   path=Path(path) if path is not None else None,
                   borrowing=_borrowing(body.get("borrowing"), where, path),
                   extra={k: v for k, v in body.items() if k not in _TOP_LEVEL})


#: The top-level fields of a profile this version reads.
_TOP_LEVEL = ("schema", "version", "fingerprint", "borrowing", "entries")


def _borrowing(value: Any, where: str, path: Path | str | None) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProfileError(f"{where}field 'borrowing' must be an object", path)
    out = {}
    for name, factor in value.items():
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
                or not 1 <= factor <= MAX_FACTOR:
            raise ProfileError(f"{where}field 'borrowing.{name}' must be a number in "
                               f"[1, {MAX_FACTOR:g}], got {_short(factor)}", path)
        out[str(name)] = float(factor)
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent, refused where it overflows a float: the
    infinity it would read as cannot be written back (JSON has none)."""
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 24 else f"{text[:12]}...{text[-8:]}"
        raise ValueError(f"number {shown} is beyond float range")
    return value


def _has_lone_surrogate(document: Any) -> bool:
    """Whether a key or string anywhere in ``document`` holds a lone UTF-16 surrogate."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _text(d: dict[str, Any], name: str) -> str:
    value = d[name]
    if not isinstance(value, str):
        raise ProfileError(f"entry field {name!r} must be a string, got {value!r}")
    return value


#: Largest integer an entry field (N, T, A, trials) may hold: far above any tensor a GPU
#: holds, and small enough that every size computation stays a finite float.
MAX_INT = 2**40
#: Largest borrowing factor (a measured slowdown per dimension; the tuner's are near 1).
MAX_FACTOR = 1000.0


def _int(d: dict[str, Any], name: str, minimum: int, default: int | None = None) -> int:
    value = d.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_INT:
        raise ProfileError(f"entry field {name!r} must be an integer in [{minimum}, 2**40], "
                           f"got {_short(value)}")
    return value


def _short(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (an integer of thousands of digits, say)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 2**64 \
        else f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 60 else text[:57] + "..."


def _time(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not _finite(value) or value < 0:
        raise ProfileError(f"entry field {name!r} must be a finite time >= 0, "
                           f"got {_short(value)}")
    return float(value)


def _finite(value: int | float) -> bool:
    """Whether ``value`` is a finite float or an integer a float holds (JSON integers have
    no bound, and ``math.isfinite`` raises OverflowError past about 1.8e308)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _params(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProfileError(f"entry field {name!r} must be an object, got {value!r}")
    return dict(value)


def _runner_up(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProfileError(f"entry field 'runner_up' must be an object or null, got {value!r}")
    strategy = value.get("strategy")
    if not isinstance(strategy, str) or not strategy:
        raise ProfileError("entry field 'runner_up.strategy' must be a non-empty string")
    out = dict(value)
    out["params"] = _params(value.get("params", {}), "runner_up.params")
    if "device_time_us" in value:
        out["device_time_us"] = _time(value["device_time_us"], "runner_up.device_time_us")
    return out
