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
        return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
    return journal_storage(url)
