"""Where Optuna studies live: a journal file beside the profiles, or any storage URL.

The default journal (``<user_dir>/studies.journal``) is locked with an OS file lock
(``<journal>.oslock``), so several processes on one host can share a study and a
process killed with ``kill -9`` releases it at once; an RDB URL such as
``postgresql://...`` lets processes on several hosts share one.

Every storage is checked before anything is written to it: a path must be a new
file, an empty one or an Optuna journal, an ``sqlite:///`` path an SQLite database
or new, and a URL must name a database Optuna can use. A bad one raises
:class:`StorageError` with one line saying why.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import filelock
import optuna
from optuna.storages import InMemoryStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend

JOURNAL_NAME = "studies.journal"
MEMORY = ":memory:"
#: Suffix of the journal's OS lock file.
LOCK_SUFFIX = ".oslock"
#: URL schemes (before any ``+driver``) of the databases Optuna's RDB storage supports.
RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "oracle", "mssql")
#: The first bytes of every SQLite 3 database file.
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: How much of a journal's first line is read to recognise it.
_PEEK_BYTES = 1 << 16


class StorageError(ValueError):
    """A ``--storage`` value that cannot be used; the message is one line saying why."""


class JournalOSLock:
    """The journal's lock as an OS file lock (``filelock``): the kernel releases it when
    the holder dies, so the next process never waits for a dead one (Optuna's own
    open-file lock waits about 30 s before it breaks a stale lock). It has the
    ``acquire``/``release`` pair ``JournalFileBackend`` calls (Optuna's base class for
    journal locks is private)."""

    def __init__(self, journal: Path | str) -> None:
        self._lock = filelock.FileLock(f"{journal}{LOCK_SUFFIX}")

    def acquire(self) -> bool:
        self._lock.acquire()
        return True

    def release(self) -> None:
        self._lock.release()


def default_journal() -> Path:
    """The default study journal path, beside the user's profiles."""
    from rltriton_tune.tuning_db import user_dir

    return Path(user_dir()) / JOURNAL_NAME


def check_journal(path: Path | str) -> Path:
    """``path`` if it can hold a study journal: a new file in a folder that exists or can
    be created, an empty regular file, or an Optuna journal. Anything else (a user's
    file, a folder, a device, a path under a file) raises :class:`StorageError`;
    nothing is written."""
    path = Path(path)
    if not str(path).strip():
        raise StorageError("the journal path is empty")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        _check_creatable(path)
        return path
    except OSError as err:
        raise StorageError(f"{path}: {err.strerror or err}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StorageError(f"{path} is a folder, not a study journal file")
    if not stat.S_ISREG(info.st_mode):
        raise StorageError(f"{path} is not a regular file")
    if info.st_size == 0:
        return path
    try:
        with open(path, "rb") as f:
            first = f.read(_PEEK_BYTES).split(b"\n", 1)[0]
    except OSError as err:
        raise StorageError(f"{path}: unreadable ({err.strerror or err})") from None
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        record = None
    if not isinstance(record, dict) or "op_code" not in record:
        raise StorageError(f"{path} exists and is not an Optuna study journal; refusing to "
                           "write to it (give a new file name)")
    return path


def _check_creatable(path: Path) -> None:
    """The nearest existing parent of ``path`` must be a folder."""
    for parent in path.parents:
        try:
            info = os.stat(parent)
        except FileNotFoundError:
            continue
        except OSError as err:
            raise StorageError(f"{path}: {err.strerror or err}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise StorageError(f"{path}: {parent} is not a folder")
        return


def journal_storage(path: Path | str) -> JournalStorage:
    """A journal-file storage at ``path`` (checked by :func:`check_journal`; parent
    folders created), locked with :class:`JournalOSLock`."""
    path = check_journal(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        backend = JournalFileBackend(str(path), lock_obj=JournalOSLock(path))  # type: ignore[arg-type]
        return JournalStorage(backend)
    except OSError as err:
        raise StorageError(f"cannot open study journal {path}: {err.strerror or err}") from None
    except (ValueError, KeyError, TypeError, AssertionError) as err:
        # A journal whose later lines are damaged, or hold operations of another Optuna
        # version (an unknown op code fails Optuna's own assertion while it replays).
        raise StorageError(f"study journal {path} is damaged ({type(err).__name__}: "
                           f"{_first_line(err)})") from None


def rdb_url(url: str) -> str:
    """``url`` with a PostgreSQL driver SQLAlchemy can import: a plain ``postgresql://``
    means psycopg 3 to SQLAlchemy 2.1, so fall back to psycopg2 when only it is installed."""
    scheme, sep, rest = url.partition("://")
    if scheme not in ("postgresql", "postgres"):
        return url
    import importlib.util

    if importlib.util.find_spec("psycopg") is None and importlib.util.find_spec("psycopg2"):
        return f"postgresql+psycopg2{sep}{rest}"
    return f"postgresql{sep}{rest}"


def check_rdb_url(url: str) -> str:
    """``url`` if its scheme is a database Optuna supports and, for SQLite, its file is a
    database or new in an existing folder; else :class:`StorageError`."""
    scheme = url.partition("://")[0]
    if scheme.split("+", 1)[0].lower() not in RDB_SCHEMES:
        raise StorageError(f"unknown storage scheme {scheme!r}: use a journal file path, "
                           "journal:PATH, :memory:, sqlite:///PATH or postgresql://...")
    if scheme.split("+", 1)[0].lower() == "sqlite":
        name = url.partition("://")[2].removeprefix("/")
        if name and name != MEMORY:
            path = Path(name)
            if path.is_dir():
                raise StorageError(f"{path} is a folder, not an SQLite database")
            if path.exists() and not path.is_file():
                raise StorageError(f"{path} is not a regular file")
            if path.exists():
                try:
                    with open(path, "rb") as f:
                        head = f.read(len(_SQLITE_MAGIC))
                except OSError as err:
                    raise StorageError(f"{path}: unreadable ({err.strerror or err})") from None
                if head and head != _SQLITE_MAGIC:
                    raise StorageError(f"{path} exists and is not an SQLite database; refusing "
                                       "to write to it")
            elif not path.parent.is_dir():
                raise StorageError(f"{path}: folder {path.parent} does not exist")
    return url


def open_storage(url: str | None = None) -> optuna.storages.BaseStorage:
    """Storage for ``url``: None -> default journal; ``:memory:`` -> in-memory;
    ``journal:PATH``, a ``*.journal`` path or a plain file path -> journal file;
    anything with ``://`` -> Optuna RDB storage (SQLite, PostgreSQL, MySQL).
    Raises :class:`StorageError` (one line) for a storage that cannot be used."""
    if url is None:
        return journal_storage(default_journal())
    if not url.strip():
        raise StorageError("the storage URL is empty")
    if url == MEMORY:
        return InMemoryStorage()
    if url.startswith("journal:"):
        return journal_storage(url.removeprefix("journal:"))
    if "://" in url:
        check_rdb_url(url)
        try:
            return optuna.storages.RDBStorage(rdb_url(url),
                                              engine_kwargs={"pool_pre_ping": True})
        except Exception as err:  # noqa: BLE001 - driver missing, unreachable, refused
            raise StorageError(f"cannot open {url.partition('://')[0]} storage: "
                               f"{type(err).__name__}: {_first_line(err)}") from None
    return journal_storage(url)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else ""


def delete_studies(journal: Path | str, fingerprint_ids: set[str]) -> int:
    """Delete from ``journal`` the studies of the devices named by ``fingerprint_ids``
    (study names end in ``@<fingerprint id>/s<revision>``); returns how many."""
    storage = journal_storage(journal)
    deleted = 0
    for study in storage.get_all_studies():
        _, at, device = study.study_name.rpartition("@")
        if at and device.split("/", 1)[0] in fingerprint_ids:
            optuna.delete_study(study_name=study.study_name, storage=storage)
            deleted += 1
    return deleted
