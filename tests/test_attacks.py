"""Attacks a new user or an unlucky operator makes, run on CPU in CI.

Bad storage paths, an unwritable profile folder, hostile profile files (huge, deeply
nested, with a huge fingerprint name), concurrent writers, ``kill -9`` during a
write and during ``tune``, hostile ``export`` destinations, and the smaller misuses
(sparse inputs, a reused ``force()``, impossible flags for ``explain``). Every one
must end in one clear line (or a clear exception), a user file left as it was, and
no lost or corrupted profile.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import rltriton_tune as R
from rltriton_tune.call import ProblemKey
from rltriton_tune.cli import main
from rltriton_tune.dispatch.devices import device_fingerprint
from rltriton_tune.tuning_db import (
    SCHEMA,
    Entry,
    Profile,
    load_profiles,
    profile_path,
    read_profile,
    record,
    user_dir,
)
from rltriton_tune.tuning_db.schema import MAX_PROFILE_BYTES, dumps
from rltriton_tune.tuning_db.state import forget_warnings, invalidate_cache

ROOT = Path(__file__).resolve().parents[1]
CPU_FP = device_fingerprint("cpu")
TUNE = ["tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1", "--device", "cpu",
        "--no-progress", "--no-compile-baseline"]


@pytest.fixture(autouse=True)
def _fresh_state():
    invalidate_cache()
    forget_warnings()
    yield
    invalidate_cache()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("rltriton-tune: error: "), err
    return lines[0]


def cli_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))


def cli(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rltriton_tune.cli", *argv], env=cli_env(),
                          capture_output=True, text=True, timeout=240, **kw)


def entry(n: int = 8, t: int = 8, params: dict | None = None, time_us: float = 5.0) -> Entry:
    return Entry(ProblemKey("gae", n, t), "torch", params or {"mode": "doubling"}, time_us,
                 trials=1, date="2026-01-01T00:00:00Z")


# ---------------------------------------------------------------- storage


@pytest.mark.parametrize("storage", ["victim", "", "bogus://x", "sqlite:////nonexistent/dir/x.db",
                                     "sqlite-victim", "folder", "under-a-file",
                                     "postgresql://nobody@127.0.0.1:1/db", "damaged-journal",
                                     "unknown-op-journal", "bad-field-journal"])
def test_bad_storage_is_refused_before_anything_is_written(storage, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("hello\n")
    study = '{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n'
    journals = {"damaged-journal": study + "garbage{\n",
                # an operation of another Optuna version, a field of the wrong type
                "unknown-op-journal": study + '{"op_code": 99, "worker_id": "w"}\n',
                "bad-field-journal": study + '{"op_code": 4, "worker_id": "w", "study_id": 0, '
                                             '"datetime_start": 5}\n'}
    url = {"victim": str(victim), "sqlite-victim": f"sqlite:///{victim}",
           "folder": str(tmp_path), "under-a-file": str(victim / "x.journal")}.get(storage,
                                                                                   storage)
    if storage in journals:
        url = str(tmp_path / f"{storage}.journal")
        Path(url).write_text(journals[storage])
    code, out, err = run(capsys, *TUNE, "--storage", url)
    assert code == 1
    assert "--storage" in one_error_line(err)
    assert victim.read_text() == "hello\n"
    assert not profile_path(CPU_FP).exists()  # nothing measured, nothing recorded


# ---------------------------------------------------------------- unwritable profile folder


@pytest.mark.parametrize("where", ["under-a-file", "a-file"])
@pytest.mark.parametrize("verb", ["tune", "import"])
def test_unwritable_profile_folder_is_one_line_and_exit_1(verb, where, tmp_path, monkeypatch,
                                                          capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    src = tmp_path / "src"
    record(CPU_FP, [entry()], src)
    db = blocker / "db" if where == "under-a-file" else blocker
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(db))
    argv = TUNE if verb == "tune" else ["import", str(profile_path(CPU_FP, src))]
    code, out, err = run(capsys, *argv)
    assert code == 1
    assert "RLTRITON_TUNE_DB" in one_error_line(err)
    assert blocker.read_text() == "x" and "imported" not in out


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_profile_folder_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "ro"
    monkeypatch.setenv("RLTRITON_TUNE_DB", str(folder))
    stored = record(CPU_FP, [entry(n=16)], folder)  # a real profile: clear must fail on it
    before = stored.read_bytes()
    folder.chmod(0o555)
    try:
        code, _, err = run(capsys, *TUNE)
        assert code == 1 and "cannot be written" in one_error_line(err)
        code, out, err = run(capsys, "clear", "--yes", "--all-devices")
        assert code == 1 and "Permission denied" in one_error_line(err)
        assert "removed" not in out
    finally:
        folder.chmod(0o755)
    assert stored.read_bytes() == before


def _read_only_file_system(folder: Path, patch: pytest.MonkeyPatch) -> None:
    """Make every change under ``folder`` fail as on a read-only mount (EROFS), which
    binds root too (folder permissions do not: the test above is skipped as root)."""
    inside = str(folder) + os.sep

    def refuse(real, writes=lambda *a: True):
        def call(path, *args, **kwargs):
            if os.fspath(path).startswith(inside) and writes(*args):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    changes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    patch.setattr(os, "open", refuse(os.open, lambda flags, *_: flags & changes))
    for name in ("mkdir", "unlink", "rmdir", "replace", "rename"):
        patch.setattr(os, name, refuse(getattr(os, name)))


def test_read_only_file_system_is_one_line_and_exit_1_even_as_root(tmp_path, capsys):
    record(CPU_FP, [entry()])
    src = tmp_path / "src"
    record(CPU_FP, [entry(n=16)], src)
    folder = user_dir()
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.MonkeyPatch.context() as patch:
        _read_only_file_system(folder, patch)
        for argv in (TUNE, ["import", str(profile_path(CPU_FP, src))],
                     ["clear", "--yes", "--all-devices"]):
            code, out, err = run(capsys, *argv)
            assert code == 1, (argv, err)
            assert "Read-only file system" in one_error_line(err), argv
            assert "imported" not in out and "removed" not in out
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_tune_results_that_cannot_be_saved_go_to_a_file_the_user_is_told_about(
        monkeypatch, capsys):
    """The folder passes the check before tuning, then refuses the write (a file system
    turned read-only midway)."""
    def refuse(path, text):
        raise PermissionError(13, "Read-only file system", str(path))

    with monkeypatch.context() as patch:
        patch.setattr("rltriton_tune.tuning_db.store.write_atomic", refuse)
        with pytest.warns(RuntimeWarning, match="keeping new entries in memory"):
            code, out, err = run(capsys, *TUNE)
    assert code == 1
    line = one_error_line(err)
    assert "could not save 1 tuned entries" in line and "import" in line
    saved = Path(line.split(" they are in ")[1].split(":")[0])
    try:
        assert set(read_profile(saved).entries) == {"gae|none|float32|env|N=8|T=8"}
        monkeypatch.setenv("RLTRITON_TUNE_DB", str(saved.parent / "fresh-db-for-test"))
        assert run(capsys, "import", str(saved))[0] == 0
    finally:
        saved.unlink()


def test_tune_interrupted_after_a_refused_write_still_saves_what_it_measured(
        monkeypatch, capsys):
    """Ctrl-C after a key's entry could not be written: the entry goes to the file the
    user is told about, as at the end of a run, and the exit is an interruption's."""
    import rltriton_tune.tune.study as study

    def refuse(path, text):
        raise PermissionError(13, "Read-only file system", str(path))

    real, calls = study.run_trials, []

    def interrupted_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr("rltriton_tune.tuning_db.store.write_atomic", refuse)
        patch.setattr(study, "run_trials", interrupted_second)
        with pytest.warns(RuntimeWarning, match="keeping new entries in memory"):
            code, out, err = run(capsys, *TUNE[:4], "8x8,16x16", *TUNE[5:])
    assert code == 130
    line = next(x for x in err.splitlines() if "could not save" in x)
    assert "could not save 1 tuned entries" in line and "import" in line
    saved = Path(line.split(" they are in ")[1].split(":")[0])
    try:
        assert set(read_profile(saved).entries) == {"gae|none|float32|env|N=8|T=8"}
    finally:
        saved.unlink()


# ---------------------------------------------------------------- hostile profiles


def _valid_profile_beside(tmp_hostile: Path) -> None:
    record(CPU_FP, [entry(params={"mode": "loop"})])
    tmp_hostile.parent.mkdir(parents=True, exist_ok=True)


@pytest.mark.parametrize("kind", ["huge", "nested"])
def test_hostile_profile_is_reported_and_skipped_everywhere(kind, tmp_path, capsys):
    hostile = user_dir() / "zz-hostile.json"
    _valid_profile_beside(hostile)
    if kind == "huge":
        body = {"schema": SCHEMA, "version": 1, "fingerprint": CPU_FP, "entries": [],
                "padding": "x" * (MAX_PROFILE_BYTES + 1)}
        hostile.write_text(json.dumps(body))
        reason = "too large"
    else:
        hostile.write_text("[" * 200_000 + "]" * 200_000)
        reason = "nested deeper"
    with pytest.warns(RuntimeWarning, match=reason):
        loaded = load_profiles(CPU_FP)
    assert any(r.path == hostile and not r.used and reason in r.reason for r in loaded.reports)
    # The valid profile beside it still serves calls: nothing else is switched off.
    assert loaded.entries["gae|none|float32|env|N=8|T=8"].params == {"mode": "loop"}
    assert R.explain("gae", 8, 8, device="cpu").source.startswith("profile")
    for argv in (["doctor"], ["show"], ["show", "--format", "json", "--all-devices"],
                 ["export", str(tmp_path / "out.json")]):
        code, out, err = run(capsys, *argv)
        assert code == 0 and "Traceback" not in err, argv
    code, _, err = run(capsys, "import", str(hostile))
    assert code == 1 and reason in one_error_line(err)


def test_nested_profile_in_the_way_of_tune_is_moved_aside_and_the_result_recorded(capsys):
    path = profile_path(CPU_FP)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.warns(RuntimeWarning):
        code, out, err = run(capsys, *TUNE)
    assert code == 0, err
    assert "gae|none|float32|env|N=8|T=8" in read_profile(path).entries
    assert len(list(path.parent.glob(f"{path.name}.bad-*"))) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_fifo_at_the_profile_path_is_moved_aside_without_opening_it(join_or_unblock):
    """A write re-reads the profile under its lock: a FIFO there must not be opened (the
    open would block forever, lock held), nor a device read to its end."""
    path = profile_path(CPU_FP)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    done: list = []
    writer = threading.Thread(target=lambda: done.append(record(CPU_FP, [entry()])),
                              daemon=True)
    with pytest.warns(RuntimeWarning, match="not a regular file"):
        writer.start()
        join_or_unblock(writer, path, 30,
                        "record() opened the FIFO at the profile path and blocked")
    assert done == [path]
    assert "gae|none|float32|env|N=8|T=8" in read_profile(path).entries
    (aside,) = path.parent.glob(f"{path.name}.bad-*")
    assert aside.is_fifo()


def test_huge_fingerprint_name_keeps_show_and_doctor_bounded(tmp_path, capsys):
    hostile_fp = dict(CPU_FP, name="A" * 1_000_000)
    src = tmp_path / "hostile.json"
    src.write_text(dumps(Profile(hostile_fp, {e.key.as_text(): e for e in
                                              (entry(n=n) for n in range(1, 30))}).to_json()))
    assert run(capsys, "import", str(src))[0] == 0
    for argv in (["show", "--all-devices"], ["show", "--all-devices", "--format", "json"],
                 ["doctor"]):
        code, out, err = run(capsys, *argv)
        assert code == 0
        assert len(out) < 40_000, (argv, len(out))
        assert max(len(line) for line in out.splitlines()) < 1000, argv


def test_hostile_text_anywhere_in_a_profile_stays_bounded_and_escaped(capsys):
    """Text read from a profile reaches a training log (the warning about a bad file)
    and the terminal (doctor's software lines, show's JSON) cut and with its control
    characters escaped: a 1 MB schema name, escape sequences and 200,000-character
    versions among the entries' software, huge unknown fields and fingerprint keys."""
    folder = user_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a-schema.json").write_text(json.dumps({"schema": "x" * 1_000_000}))
    escape = "\x1b]0;pwned\x07\x1b[2J"
    hostile = [replace(entry(n=n), software={"torch": "A" * 200_000, escape: str(n)},
                       extra={"note": "z" * 100_000}) for n in range(1, 9)]
    fingerprint = dict(CPU_FP, **{"K" * 50_000: 1})
    (folder / "b-hostile.json").write_text(dumps(Profile(fingerprint, {
        e.key.as_text(): e for e in hostile}).to_json()))
    record(CPU_FP, [replace(entry(n=9), software={"torch": "B" * 200_000, escape: "9"})])
    with pytest.warns(RuntimeWarning) as warned:
        load_profiles(CPU_FP)
    assert all(len(str(w.message)) < 1000 for w in warned)
    for argv in (["doctor"], ["show", "--all-devices", "--format", "json"]):
        code, out, err = run(capsys, *argv)
        assert code == 0, argv
        assert "\x1b" not in out + err, argv
        assert len(out) + len(err) < 100_000, (argv, len(out), len(err))
        assert max(len(line) for line in (out + err).splitlines()) < 2_000, argv


# ---------------------------------------------------------------- concurrency and kill -9


def test_concurrent_imports_lose_nothing(tmp_path):
    sources = []
    for i in range(4):
        src = tmp_path / f"src{i}"
        record(CPU_FP, [entry(n=100 + i, t=t) for t in range(1, 6)], src)
        sources.append(profile_path(CPU_FP, src))
    procs = [subprocess.Popen([sys.executable, "-m", "rltriton_tune.cli", "import", str(s)],
                              env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for s in sources]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    assert len(read_profile(profile_path(CPU_FP)).entries) == 20


_WRITER = """
import sys
from pathlib import Path
from rltriton_tune.call import ProblemKey
from rltriton_tune.tuning_db import Entry, record
fp = {"kind": "cuda", "name": "victim", "abi": 1}
print("ready", flush=True)
for i in range(1, 10**6):
    record(fp, [Entry(ProblemKey("gae", i, 8), "flat", {}, 1.0)], Path(sys.argv[1]))
"""


def test_kill_9_during_writes_leaves_a_valid_profile_and_a_free_lock(tmp_path):
    fp = {"kind": "cuda", "name": "victim", "abi": 1}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], env=cli_env(),
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    path = profile_path(fp, tmp_path)
    while not path.exists() or len(read_profile(path).entries) < 20:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    before = len(read_profile(path).entries)
    assert before >= 20
    import filelock

    filelock.FileLock(f"{path}.lock", timeout=0).acquire()  # free at once, no stale holder
    assert record(fp, [entry(n=1, t=1)], tmp_path) == path
    assert len(read_profile(path).entries) == before + 1


_HOLDER = """
import os, signal, sys
from rltriton_tune.tune.storage import JournalOSLock
JournalOSLock(sys.argv[1]).acquire()
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_journal_lock_of_a_killed_holder_is_free_at_once(tmp_path):
    import filelock

    from rltriton_tune.tune.storage import LOCK_SUFFIX, JournalOSLock

    journal = tmp_path / "studies.journal"
    done = subprocess.run([sys.executable, "-c", _HOLDER, str(journal)], env=cli_env())
    assert done.returncode == -signal.SIGKILL
    filelock.FileLock(f"{journal}{LOCK_SUFFIX}", timeout=0).acquire()  # no 30 s wait
    lock = JournalOSLock(journal)
    assert lock.acquire() is True
    lock.release()


def test_kill_9_during_tune_then_tune_again_records_everything(tmp_path):
    argv = ["tune", "--algorithms", "gae,discounted_returns", "--shapes", "8x8,8x16",
            "--trials", "4", "--device", "cpu", "--no-progress", "--no-compile-baseline"]
    env = cli_env()
    first = subprocess.Popen([sys.executable, "-m", "rltriton_tune.cli", *argv], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = user_dir() / "studies.journal"
    while first.poll() is None and (not journal.exists() or journal.stat().st_size < 4000):
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = cli(*argv)
    assert second.returncode == 0, second.stderr
    shown = json.loads(cli("show", "--format", "json").stdout)
    assert sorted((e["algorithm"], e["T"]) for e in shown) == [
        ("discounted_returns", 8), ("discounted_returns", 16), ("gae", 8), ("gae", 16)]


def test_show_into_a_closed_pipe_ends_quietly():
    record(CPU_FP, [entry(n=n, t=t) for n in range(1, 40) for t in range(1, 6)])
    proc = subprocess.Popen([sys.executable, "-m", "rltriton_tune.cli", "show", "--format",
                             "json"], env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.read(10)
    proc.stdout.close()  # like `| head`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err


# ---------------------------------------------------------------- export, bench, clear


def test_export_refuses_a_symlink_and_keeps_it(tmp_path, capsys):
    target = tmp_path / "target.txt"
    target.write_text("mine")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    code, _, err = run(capsys, "export", str(link), "--force")
    assert code == 1 and "symbolic link" in one_error_line(err)
    assert link.is_symlink() and target.read_text() == "mine"


@pytest.mark.parametrize("dest", ["/dev/null", "folder", "under-a-file"])
def test_export_refuses_non_regular_destinations(dest, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = {"folder": str(tmp_path), "under-a-file": str(blocker / "out.json")}.get(dest, dest)
    code, _, err = run(capsys, "export", path, "--force")
    assert code == 1
    one_error_line(err)
    assert blocker.read_text() == "x"
    if dest == "/dev/null":
        assert Path("/dev/null").is_char_device()


def test_export_asks_before_replacing_a_file(tmp_path, capsys):
    dest = tmp_path / "mine.json"
    dest.write_text("keep me")
    code, _, err = run(capsys, "export", str(dest))  # no terminal to ask on: refused
    assert code == 1 and "--force" in one_error_line(err)
    assert dest.read_text() == "keep me"
    assert run(capsys, "export", str(dest), "--force")[0] == 0
    assert read_profile(dest).entries == {}


def test_bench_output_that_is_a_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "report.txt"
    out.write_text("keep")
    code, _, err = run(capsys, "bench", "--algorithms", "gae", "--shapes", "8x8", "--device",
                       "cpu", "--output", str(out))
    assert code == 1 and "is a file" in one_error_line(err)
    assert out.read_text() == "keep"


def test_clear_asks_and_deletes_only_this_packages_profiles(tmp_path, capsys):
    from rltriton_tune.tuning_db import fingerprint_id

    record(CPU_FP, [entry()])
    folder = user_dir()
    mine = {"run-1701500000.json": '{"step": 1}',
            "my-export.json": profile_path(CPU_FP).read_text(),
            "borrowing-0123456789.jsonl": '{"pair": 1}\n'}  # no profile of that id here
    for name, text in mine.items():
        (folder / name).write_text(text)
    # what `tune --borrowing` wrote beside this profile: deleted with it
    evidence = folder / f"borrowing-{fingerprint_id(CPU_FP)}.jsonl"
    evidence.write_text('{"pair": 2}\n')
    code, out, err = run(capsys, "clear")  # no terminal: refuses, deletes nothing
    assert code == 1 and "--yes" in one_error_line(err)
    assert profile_path(CPU_FP).exists()
    lock = Path(f"{profile_path(CPU_FP)}.lock")
    assert lock.exists() and f"its lock file {lock}" in out   # the plan names all it deletes
    assert str(evidence) in out
    code, out, _ = run(capsys, "clear", "--yes")
    assert code == 0 and str(profile_path(CPU_FP)) in out
    assert not profile_path(CPU_FP).exists() and not evidence.exists()
    assert not Path(f"{profile_path(CPU_FP)}.lock").exists()
    for name, text in mine.items():
        assert (folder / name).read_text() == text


_FIRST_CALL = """
import torch
import rltriton_tune as R
x = torch.ones(2, 3)
forced_loop = R.force("torch", mode="loop")
for forced in (None, None, forced_loop, forced_loop):  # nothing is memoised meanwhile
    try:
        if forced is None:
            R.compute_gae(x, x, torch.zeros_like(x))
        else:
            with forced:
                R.compute_gae(x, x, torch.zeros_like(x))
    except ValueError as exc:
        print(exc)
try:
    R.explain("gae", 2, 3, device="cpu")
except ValueError as exc:
    print(exc)
"""


def test_a_junk_environment_variable_is_one_cli_line_and_an_error_at_the_first_call():
    env = dict(cli_env(), RLTRITON_TUNE_ONLINE="maybe")
    done = subprocess.run([sys.executable, "-m", "rltriton_tune.cli", "show"], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 2
    assert "RLTRITON_TUNE_ONLINE='maybe' is not a boolean" in one_error_line(done.stderr)
    done = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr  # importing works; each use says what is wrong
    lines = done.stdout.splitlines()
    assert len(lines) == 5 and all("RLTRITON_TUNE_ONLINE='maybe'" in line for line in lines)


def test_negative_compile_workers_is_a_usage_error(capsys):
    for verb in (TUNE, ["bench"]):
        with pytest.raises(SystemExit) as exc:
            main([*verb, "--compile-workers", "-5"])
        assert exc.value.code == 2 and "integer >= 0" in capsys.readouterr().err


# ---------------------------------------------------------------- smaller misuses


def test_explain_rejects_flags_the_estimator_rejects():
    with pytest.raises(ValueError, match="last_value cannot be combined with trunc"):
        R.explain("gae", 8, 8, flags="last_value+trunc")
    with pytest.raises(ValueError, match="not both"):
        R.explain("vtrace", 8, 8, flags="last_value+bootstrap")
    assert R.explain("gae", 8, 8, flags="last_value", device="cpu").strategy


def test_sparse_input_is_a_type_error_naming_the_argument():
    dense = (torch.randn(4, 8), torch.randn(4, 8), torch.zeros(4, 8))
    with pytest.raises(TypeError, match="values must be a dense tensor"):
        R.compute_gae(dense[0], dense[1].to_sparse(), dense[2])
    with pytest.raises(TypeError, match="rewards must be a dense tensor"):
        R.compute_gae(dense[0].to_sparse(), dense[1], dense[2])


def test_a_force_object_can_be_entered_again_and_nested():
    forced = R.force("torch", mode="loop")
    for _ in range(2):
        with forced:
            assert R.explain("gae", 8, 8, device="cpu").source == "forced"
        assert R.explain("gae", 8, 8, device="cpu").source != "forced"
    with forced, forced:
        assert R.explain("gae", 8, 8, device="cpu").source == "forced"
    assert R.explain("gae", 8, 8, device="cpu").source != "forced"
