"""Where Optuna studies live: a journal file beside the profiles, or any storage URL.

The default journal (``<user_dir>/studies.journal``) uses Optuna's file-open
lock, so several processes on one host can share a study; an RDB URL such as
``postgresql://...`` lets processes on several hosts share one.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.storages import InMemoryStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

JOURNAL_NAME = "studies.journal"
MEMORY = ":memory:"


def default_journal() -> Path:
    """The default study journal path, beside the user's profiles."""
    from rltriton_tune.tuning_db import user_dir

    return Path(user_dir()) / JOURNAL_NAME


def journal_storage(path: Path | str) -> JournalStorage:
    """A journal-file storage at ``path`` (parent folders created), with a file lock."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    backend = JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path)))
    return JournalStorage(backend)


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


def open_storage(url: str | None = None) -> optuna.storages.BaseStorage:
    """Storage for ``url``: None -> default journal; ``:memory:`` -> in-memory;
    ``journal:PATH``, a ``*.journal`` path or a plain file path -> journal file;
    anything with ``://`` -> Optuna RDB storage (SQLite, PostgreSQL, MySQL)."""
    if url is None:
        return journal_storage(default_journal())
    if url == MEMORY:
        return InMemoryStorage()
    if url.startswith("journal:"):
        return journal_storage(url.removeprefix("journal:"))
    if "://" in url:
        return optuna.storages.RDBStorage(rdb_url(url), engine_kwargs={"pool_pre_ping": True})
    return journal_storage(url)
