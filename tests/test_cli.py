"""The rltriton-tune CLI on CPU: the whole pipeline, exit codes, concurrent writers."""

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import torch

from rltriton_tune.cli import PRESETS, main

ROOT = Path(__file__).resolve().parents[1]
VERBS = ("doctor", "tune", "show", "bench", "export", "import", "clear")
TINY = ["--device", "cpu", "--no-progress", "--shapes", "8x16,16x8"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def show_json(capsys):
    code, out, _ = run(capsys, "show", "--format", "json")
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    assert exc.value.code == 0
    assert f"usage: rltriton-tune {verb}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    [], ["frobnicate"], ["tune", "--algorithms", "gea"], ["tune", "--shapes", "4096by128"],
    ["tune", "--trials", "0"], ["tune", "--dtypes", "int8"], ["tune", "--layouts", "row"],
    ["show", "--format", "xml"], ["export"], ["bench", "--shapes", "0x8"],
    ["tune", "--devices", "a,b"], ["bench", "--held-out", "5x"],
])
def test_bad_arguments_print_usage_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("verb", ["tune", "bench"])
def test_cuda_without_gpu_is_one_line_and_exit_1(verb, capsys):
    code, out, err = run(capsys, verb, "--device", "cuda")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0]


def test_tune_show_export_clear_import_pipeline(tmp_path, capsys):
    code, out, _ = run(capsys, "tune", "--preset", "quick", "--algorithms",
                       "gae,episodic_prefix_sum", *TINY, "--trials", "3")
    assert code == 0
    assert "gae|none|float32|env|N=8|T=16" in out and "vs loop" in out
    entries = show_json(capsys)
    assert len(entries) == 4
    for e in entries:
        for field in ("algorithm", "N", "T", "dtype", "layout", "flags", "strategy", "params",
                      "device_time_us", "device"):
            assert field in e
        assert e["strategy"] == "torch" and e["device_time_us"] > 0 and e["trials"] == 3
    code, table, _ = run(capsys, "show", "--algorithm", "gae")  # the old spelling still works
    assert code == 0 and "gae" in table and "episodic_prefix_sum" not in table

    exported = tmp_path / "profiles.json"
    assert run(capsys, "export", str(exported))[0] == 0
    assert run(capsys, "clear", "--yes")[0] == 0
    assert show_json(capsys) == []
    code, out, _ = run(capsys, "import", str(exported))
    assert code == 0 and "imported 4 entries" in out
    assert {(e["algorithm"], e["N"], e["T"]) for e in show_json(capsys)} == {
        (e["algorithm"], e["N"], e["T"]) for e in entries}

    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "something else"')
    code, _, err = run(capsys, "import", str(broken))
    assert code == 1 and "broken.json" in err
    assert len(show_json(capsys)) == 4


def test_export_dash_writes_to_stdout_and_import_dash_reads_stdin(tmp_path, monkeypatch,
                                                                 capsys):
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tuning_db import Entry, device_fingerprint, record

    record(device_fingerprint("cpu"), [Entry(ProblemKey("gae", 8, 16), "torch",
                                             {"mode": "loop"}, 3.0)])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("keep")  # a file named "-" is neither asked about nor touched
    code, out, err = run(capsys, "export", "-")
    assert code == 0 and "exported 1 entries to standard output" in err
    assert [e["N"] for e in json.loads(out)["entries"]] == [8]
    assert (tmp_path / "-").read_text() == "keep"
    assert run(capsys, "clear", "--yes")[0] == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(out.encode())))
    code, out, _ = run(capsys, "import", "-")
    assert code == 0 and "imported 1 entries from standard input" in out
    assert [(e["N"], e["T"]) for e in show_json(capsys)] == [(8, 16)]


def test_export_dash_to_a_failing_or_closed_stdout_is_one_error_line(monkeypatch, capsys):
    """`export - >/dev/full` and `export - >&-` end in one line, not a traceback."""
    import errno

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(Full()))
    code, _, err = run(capsys, "export", "-")
    assert code == 1 and "export: standard output: No space left on device" in err
    monkeypatch.setattr(sys, "stdout", None)
    code, _, err = run(capsys, "export", "-")
    assert code == 1 and "export: standard output is closed" in err


def test_import_dash_from_a_closed_stdin_is_one_error_line(monkeypatch, capsys):
    """`import - <&-`: one line, not a traceback."""
    monkeypatch.setattr(sys, "stdin", None)
    code, _, err = run(capsys, "import", "-")
    assert code == 1 and "import: standard input is closed" in err


def test_export_and_import_report_a_file_name_stdout_cannot_encode(tmp_path, monkeypatch,
                                                                    capsys):
    """A file name of bytes that are not UTF-8 (kept by Python as lone surrogates) is
    written and read, and the report shows it escaped: it does not fail after the work
    is done."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tuning_db import Entry, device_fingerprint, record

    record(device_fingerprint("cpu"), [Entry(ProblemKey("gae", 8, 16), "torch",
                                             {"mode": "loop"}, 3.0)])
    strict = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", strict)
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9.json")
    assert main(["export", "--force", name]) == 0
    assert main(["import", name]) == 0
    strict.flush()
    shown = strict.buffer.getvalue().decode()
    assert "exported 1 entries to" in shown and "caf\\udce9.json" in shown
    assert "imported 0 entries from" in shown


def test_an_export_past_the_profile_size_limit_is_refused(tmp_path, capsys):
    """Entries too large for a profile file are kept in memory (with a warning), and an
    export of them, which no reader would take, is refused in one line: nothing is
    written."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tuning_db import Entry, device_fingerprint, record
    from rltriton_tune.tuning_db.schema import MAX_PROFILE_BYTES

    big = Entry(ProblemKey("gae", 8, 16), "torch", {"mode": "loop"}, 3.0,
                extra={"notes": "x" * MAX_PROFILE_BYTES})
    with pytest.warns(RuntimeWarning, match="too large"):
        assert record(device_fingerprint("cpu"), [big]) is None
    dest = tmp_path / "out.json"
    for target in (str(dest), "-"):
        code, out, err = run(capsys, "export", "--force", target)
        assert code == 1 and "export: too large" in err and "not written" in err, err
        assert out == ""
    assert not dest.exists()


def test_tune_stopped_by_max_seconds_records_nothing_partial_and_resumes(capsys):
    argv = ["tune", "--algorithms", "gae,discounted_returns", "--device", "cpu",
            "--no-progress", "--shapes", "8x8", "--trials", "3"]
    code, out, err = run(capsys, *argv, "--max-seconds", "0.000001")
    assert code == 0
    assert "--max-seconds reached; 2 key(s) resume" in err and "gae|none" in err
    assert show_json(capsys) == []  # no entry from a study short of its budget
    # Studies are opened when their key's turn comes: only the first (opened up front to
    # check the storage) exists after a run stopped at once.
    from rltriton_tune.tune.storage import default_journal, open_storage

    names = optuna.get_all_study_names(open_storage(str(default_journal())))
    assert len(names) == 1 and "gae" in names[0]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "resume" not in err
    assert sorted((e["algorithm"], e["trials"]) for e in show_json(capsys)) == [
        ("discounted_returns", 3), ("gae", 3)]


def test_a_resumed_tune_skips_keys_at_their_budget_with_an_entry(capsys, monkeypatch):
    """The same arguments again after a run that finished some keys: their studies are at
    their trial budget and their entries are recorded, so they are skipped (nothing timed
    again, nothing listed as left to do), and the run goes on with the rest."""
    from rltriton_tune.tune import study as study_module

    argv = ["tune", "--algorithms", "gae,discounted_returns", "--device", "cpu",
            "--no-progress", "--shapes", "8x8", "--trials", "3"]
    assert run(capsys, *argv, "--algorithms", "gae")[0] == 0
    finalized = []
    real = study_module.finalize
    monkeypatch.setattr(study_module, "finalize",
                        lambda study, key, *a, **k: finalized.append(key.algorithm)
                        or real(study, key, *a, **k))
    code, out, err = run(capsys, *argv)
    assert code == 0 and finalized == ["discounted_returns"]
    assert "1 key(s) already tuned to their trial budget" in err and "resume" not in err
    code, out, err = run(capsys, *argv, "--max-seconds", "0.000001")
    assert code == 0 and "resume" not in err  # every key has its entry: none left
    assert "2 key(s) not reached before --max-seconds have an entry" in err
    code, out, err = run(capsys, *argv)
    assert code == 0 and "2 key(s) already tuned" in err and finalized == ["discounted_returns"]


def test_interrupted_tune_resumes_to_the_budget(capsys):
    argv = ["tune", "--algorithms", "discounted_returns", "--device", "cpu", "--no-progress",
            "--shapes", "8x8"]
    assert run(capsys, *argv, "--trials", "3")[0] == 0
    assert run(capsys, *argv, "--trials", "6")[0] == 0
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tune.storage import default_journal, open_storage
    from rltriton_tune.tune.study import study_name

    name = study_name(ProblemKey("discounted_returns", 8, 8), torch.device("cpu"))
    study = optuna.load_study(study_name=name, storage=open_storage(str(default_journal())))
    assert len(study.get_trials()) == 6
    assert show_json(capsys)[0]["trials"] == 6


def test_sigterm_ends_a_verb_like_ctrl_c_and_restores_the_default(capsys, monkeypatch):
    """SIGTERM (a scheduler stopping the job) raises in the verb as Ctrl-C does, so its
    clean-up runs (a tuning run's compile workers are killed, what it measured kept); the
    process's own default is back afterwards, and a handler the host set is left alone."""
    import signal

    from rltriton_tune import cli

    seen = []

    def stopped_midway(args):
        os.kill(os.getpid(), signal.SIGTERM)
        seen.append("not reached")
        return 0

    monkeypatch.setitem(cli.VERBS, "doctor", stopped_midway)
    code, _, err = run(capsys, "doctor")
    assert code == 143 and "terminated" in err and seen == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    def host(signum, frame):
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, host)
    try:
        assert run(capsys, "doctor")[0] == 0
        assert seen == [signal.SIGTERM, "not reached"]  # the host handled it, the verb went on
        assert signal.getsignal(signal.SIGTERM) is host
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_bench_on_cpu_writes_markdown_json_and_png(tmp_path, capsys):
    out_dir = tmp_path / "bench"
    code, out, _ = run(capsys, "bench", "--algorithms", "gae,vtrace", "--shapes", "8x8,16x8",
                       "--device", "cpu", "--output", str(out_dir))
    assert code == 0
    report = json.loads((out_dir / "bench.json").read_text())
    assert len(report["rows"]) == 4
    for row in report["rows"]:
        assert {"dispatched", "torch_loop", "torch_chunked", "torch_doubling"} <= set(
            row["device_us"])
        assert all(v > 0 for v in row["device_us"].values())
    md = (out_dir / "bench.md").read_text()
    assert "| gae | 8 x 8 |" in md and "torch_doubling" in md
    for alg in ("gae", "vtrace"):
        png = out_dir / f"bench_{alg}.png"
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_tools_own_calls_are_not_recorded(tmp_path, capsys, monkeypatch):
    """bench times public calls; with RLTRITON_TUNE_RECORD set they would lead the user's
    workload record. The command runs without recording and puts the variable back."""
    record_path = tmp_path / "calls.json"
    monkeypatch.setenv("RLTRITON_TUNE_RECORD", str(record_path))
    assert run(capsys, "bench", "--algorithms", "gae", "--shapes", "9x9", "--budget", "0.005",
               "--device", "cpu", "--output", str(tmp_path / "bench"))[0] == 0
    from rltriton_tune import dispatch

    dispatch.reset()  # the recorder, had there been one, flushes here
    assert not record_path.exists()
    assert os.environ["RLTRITON_TUNE_RECORD"] == str(record_path)


def test_bench_saves_every_row_and_resumes_where_it_stopped(tmp_path, capsys, monkeypatch):
    out_dir = tmp_path / "bench"
    argv = ["bench", "--algorithms", "gae", "--shapes", "8x8,16x8,4x4", "--budget", "0.005",
            "--device", "cpu", "--output", str(out_dir)]
    calls = []

    def dies_on_third(key, device, seed=0, budget_s=0.1):
        calls.append((key.n, key.t))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the run is cut short during the third row
        return 1.0

    monkeypatch.setattr("rltriton_tune.tune.bench.time_public", dies_on_third)
    assert run(capsys, *argv, "--resume")[0] == 130
    saved = json.loads((out_dir / "bench.json").read_text())
    assert [(r["N"], r["T"]) for r in saved["rows"]] == [(8, 8), (16, 8)]

    saved["rows"][0]["full_call_us"] = 12345.0  # marks a row that must be kept, not re-run
    saved["rows"][1]["params"] = {"mode": "not-what-dispatch-chooses"}  # must be re-measured
    (out_dir / "bench.json").write_text(json.dumps(saved))
    calls.clear()
    monkeypatch.setattr("rltriton_tune.tune.bench.time_public",
                        lambda key, *a, **k: calls.append((key.n, key.t)) or 2.0)
    assert run(capsys, *argv, "--resume")[0] == 0
    rows = json.loads((out_dir / "bench.json").read_text())["rows"]
    assert calls == [(16, 8), (4, 4)]
    assert [r["full_call_us"] for r in rows] == [12345.0, 2.0, 2.0]

    calls.clear()  # without --resume every row is measured again
    assert run(capsys, *argv)[0] == 0
    assert calls == [(8, 8), (16, 8), (4, 4)]


def test_bench_with_oracle_and_held_out_shapes(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("rltriton_tune.tune.bench.HELD_OUT_SHAPES", [(5, 7), (3, 13)])
    out_dir = tmp_path / "bench"
    code, _, _ = run(capsys, "bench", "--algorithms", "gae", "--shapes", "8x8", "--held-out",
                     "--oracle", "--budget", "0.005", "--layouts", "time", "--device", "cpu",
                     "--output", str(out_dir))
    assert code == 0
    rows = json.loads((out_dir / "bench.json").read_text())["rows"]
    assert [(r["N"], r["T"], r["held_out"], r["layout"]) for r in rows] == [
        (8, 8, False, "time"), (5, 7, True, "time"), (3, 13, True, "time")]
    for row in rows:
        # The oracle is the fastest of the sweep's best configs and the dispatched one,
        # measured together (and, when another config won, both again head to head), so
        # the dispatched time is never below it.
        mine = row.get("oracle_dispatched_us", row["device_us"]["dispatched"])
        assert row["oracle_us"] <= mine
        assert row["vs_oracle"] >= 1.0 and row["oracle"].startswith("torch(")
        assert row["full_call_us"] > 0
    assert len(list((out_dir / "oracle").glob("exhaustive_gae_*_cpu.json"))) == 3
    md = (out_dir / "bench.md").read_text()
    assert "## Tuning grid" in md and "## Held-out shapes" in md and "| gae | 5 x 7 |" in md
    assert (out_dir / "bench_gae_time.png").exists()  # held-out rows stay out of heatmaps


def test_bench_held_out_shapes_can_be_given(tmp_path, capsys):
    out_dir = tmp_path / "bench"
    code, _, _ = run(capsys, "bench", "--algorithms", "discounted_returns", "--shapes", "8x8",
                     "--held-out", "5x7,3x13", "--budget", "0.005", "--device", "cpu",
                     "--output", str(out_dir))
    assert code == 0
    rows = json.loads((out_dir / "bench.json").read_text())["rows"]
    assert [(r["N"], r["T"], r["held_out"]) for r in rows] == [
        (8, 8, False), (5, 7, True), (3, 13, True)]


@pytest.mark.parametrize("content", ["[1]", "3", "not json"])
def test_bench_resume_and_compile_from_take_only_a_report(tmp_path, capsys, content):
    """A ``bench.json`` to resume from, or a ``--compile-from`` file, that is not a bench
    report: a warning, and every row measured, never a traceback."""
    out_dir = tmp_path / "bench"
    out_dir.mkdir()
    (out_dir / "bench.json").write_text(content)
    other = tmp_path / "other.json"
    other.write_text(content)
    code, _, err = run(capsys, "bench", "--algorithms", "discounted_returns", "--shapes", "8x8",
                       "--budget", "0.005", "--device", "cpu", "--output", str(out_dir),
                       "--resume", "--compile-from", str(other))
    assert code == 0
    assert "cannot resume from" in err and "--compile-from" in err
    assert [r["N"] for r in json.loads((out_dir / "bench.json").read_text())["rows"]] == [8]


@pytest.mark.parametrize("value", ["torch:mode=bogus", "torch:mode=chunked,chunk=1"])
def test_an_invalid_forced_config_in_the_environment_is_one_line_naming_it(
        capsys, monkeypatch, value):
    monkeypatch.setenv("RLTRITON_TUNE_FORCE", value)
    code, _, err = run(capsys, "doctor")
    assert code == 2
    assert err.startswith("rltriton-tune: error: RLTRITON_TUNE_FORCE: forced config torch")
    assert "Traceback" not in err


def test_export_over_a_file_keeps_its_permissions(tmp_path, capsys):
    assert run(capsys, "tune", "--preset", "quick", "--algorithms", "gae", *TINY)[0] == 0
    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    os.chmod(mine, 0o600)
    assert run(capsys, "export", str(mine), "--force")[0] == 0
    assert mine.stat().st_mode & 0o777 == 0o600 and json.loads(mine.read_text())["entries"]


def test_doctor_reports_fingerprint_profiles_and_decisions(capsys):
    code, out, _ = run(capsys, "doctor")
    assert code == 0
    for text in ("torch", "triton", "fingerprint", "profile files", "retrace", "fallback: cpu"):
        assert text in out
    from rltriton_tune.kernels.native_launch import describe

    assert f"launch        {describe()}" in out  # how launches reach the GPU here


def test_presets_are_sized_as_documented():
    quick, default = PRESETS["quick"], PRESETS["default"]
    assert len(quick["shapes"]) <= 3 and quick["trials"] <= 10
    assert len(default["shapes"]) < len(PRESETS["full"]["shapes"])


def test_four_concurrent_tune_processes_lose_no_entry(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    algorithms = ["gae", "lambda_returns", "discounted_returns", "eligibility_traces"]
    procs = [subprocess.Popen([sys.executable, "-m", "rltriton_tune.cli", "tune", "--algorithms",
                               alg, "--device", "cpu", "--no-progress", "--shapes", "8x8,8x16",
                               "--trials", "2"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for alg in algorithms]
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    shown = subprocess.run([sys.executable, "-m", "rltriton_tune.cli", "show", "--format",
                            "json"], env=env, capture_output=True, text=True, check=True)
    entries = json.loads(shown.stdout)
    assert sorted((e["algorithm"], e["T"]) for e in entries) == sorted(
        (alg, t) for alg in algorithms for t in (8, 16))


def test_version(capsys):
    from rltriton_tune import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"rltriton-tune {__version__}"


def _record_for_show():
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tuning_db import Entry, device_fingerprint, record

    mine = device_fingerprint(None)
    other = {"kind": "cuda", "name": "Some Other GPU", "capability": "8.0", "abi": 1}
    for fp in (mine, other):
        record(fp, [Entry(ProblemKey(alg, 8, 8), "torch", {"mode": "loop"}, 3.0)
                    for alg in ("gae", "vtrace", "discounted_returns")])


def test_show_takes_algorithms_like_tune_and_lists_this_device_by_default(capsys):
    _record_for_show()
    code, out, _ = run(capsys, "show", "--algorithms", "gae,vtrace", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert sorted(r["algorithm"] for r in rows) == ["gae", "vtrace"]
    assert {r["device"] for r in rows} != {"Some Other GPU"} and len(rows) == 2
    code, out, _ = run(capsys, "show", "--algorithm", "gae", "--all-devices", "--format", "json")
    assert sorted(r["device"] for r in json.loads(out))[-1] == "Some Other GPU"
    assert len(json.loads(out)) == 2
    code, table, _ = run(capsys, "show")
    assert "Some Other GPU" not in table and "--all-devices" in table
    assert max(len(line) for line in table.splitlines()) < 200


def test_show_all_devices_reads_each_profile_file_once(capsys, monkeypatch):
    """Not once per fingerprint: with 3000 profiles of other devices in the folder, one
    load per fingerprint (each reading every file) took over 5 minutes."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.tuning_db import Entry, loading, record, user_dir

    devices = [{"kind": "cuda", "name": f"GPU {i}", "capability": "8.0", "abi": 1}
               for i in range(12)]
    for fp in devices:
        record(fp, [Entry(ProblemKey("gae", 8, 8), "torch", {"mode": "loop"}, 3.0)])
    reads = []
    real = loading.read_profiles_cached
    monkeypatch.setattr(loading, "read_profiles_cached", lambda p: reads.append(p) or real(p))
    code, out, _ = run(capsys, "show", "--all-devices", "--format", "json")
    assert code == 0
    assert {r["device"] for r in json.loads(out)} >= {fp["name"] for fp in devices}
    mine = [p for p in reads if p.parent == user_dir()]
    assert sorted(mine) == sorted(user_dir().glob("*.json"))  # each file once


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cpu_runs_say_host_time_and_doctor_says_kernels_need_a_gpu(tmp_path, capsys):
    code, out, _ = run(capsys, "tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1",
                       "--device", "cpu", "--no-progress", "--no-compile-baseline")
    assert code == 0 and "host us" in out and "device us" not in out
    code, out, _ = run(capsys, "doctor")
    assert code == 0 and "kernels usable" not in out and "need a CUDA GPU" in out
    out_dir = tmp_path / "bench"
    assert run(capsys, "bench", "--algorithms", "gae", "--shapes", "8x8", "--budget", "0.005",
               "--device", "cpu", "--output", str(out_dir))[0] == 0
    header = (out_dir / "bench.md").read_text().split("\n## ")[0]
    assert "CUDA-graph" not in header and "host wall time" in header


def test_tune_refresh_retimes_stored_entries(capsys):
    code, out, _ = run(capsys, "tune", "--refresh", "--algorithms", "gae", "--device", "cpu")
    assert code == 0 and "no stored entries to refresh" in out
    assert run(capsys, "tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1",
               "--device", "cpu", "--no-progress", "--no-compile-baseline")[0] == 0
    before = show_json(capsys)[0]
    code, out, _ = run(capsys, "tune", "--refresh", "--algorithms", "gae", "--shapes", "16x16",
                       "--device", "cpu")  # --shapes picks which entries: none of them
    assert code == 0 and "no stored entries to refresh" in out
    code, out, _ = run(capsys, "tune", "--refresh", "--algorithms", "gae", "--device", "cpu")
    assert code == 0 and "gae|none|float32|env|N=8|T=8" in out
    assert out.split()[-1] in ("kept", "replaced")
    after = show_json(capsys)[0]
    assert after["refreshed"] >= 2 and after["date"] >= before["date"]
    # --missing-only resumes: the entry was refreshed on this stack
    code, out, _ = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms", "gae",
                       "--device", "cpu")
    assert code == 0 and "nothing left to refresh: every entry asked for is refreshed" in out


def test_refresh_missing_only_redoes_entries_refreshed_without_companions(capsys):
    """An entry marked refreshed on this stack before companions were timed (no
    ``neighbourhood`` field), or for other companions than the key's now, was chosen for
    another neighbourhood: --missing-only refreshes it again, and then skips it."""
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import record
    from rltriton_tune.tuning_db.fingerprint import software_versions

    assert run(capsys, "tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1",
               "--device", "cpu", "--no-progress", "--no-compile-baseline")[0] == 0
    from rltriton_tune.tuning_db.siblings import serving_profiles

    entry = serving_profiles(device_fingerprint("cpu")).entries["gae|none|float32|env|N=8|T=8"]
    old = dataclasses.replace(entry, software=software_versions(),
                              extra={"refreshed": True})
    record(device_fingerprint("cpu"), [old], replace=True)
    code, out, _ = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms", "gae",
                       "--device", "cpu")
    assert code == 0 and "gae|none|float32|env|N=8|T=8" in out
    assert show_json(capsys)[0]["neighbourhood"]
    code, out, _ = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms", "gae",
                       "--device", "cpu")
    assert code == 0 and "nothing left to refresh: every entry asked for is refreshed" in out
    shape_only = {"refreshed": True, "neighbourhood": ["gae|none|float32|env|N=5|T=5"]}
    record(device_fingerprint("cpu"), [dataclasses.replace(old, extra=shape_only)],
           replace=True)
    code, out, _ = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms", "gae",
                       "--device", "cpu")
    assert code == 0 and "gae|none|float32|env|N=8|T=8" in out
    # Refreshed for the key's neighbourhood with every field the refresh writes, but by an
    # earlier version of it (``true``, as files written before versions hold): refreshed
    # again, and then skipped.
    from rltriton_tune.tune.refresh import REFRESH_VERSION

    refreshed = show_json(capsys)[0]
    assert refreshed["refreshed"] == REFRESH_VERSION
    assert refreshed["floor"] is None and refreshed["related"] == 0
    assert "off_grid" in refreshed and refreshed["off_grid"] is None
    fields = {k: v for k, v in refreshed.items()
              if k in ("neighbourhood", "floor", "related", "off_grid")}
    for earlier in (True, REFRESH_VERSION - 1):
        record(device_fingerprint("cpu"),
               [dataclasses.replace(old, extra={**fields, "refreshed": earlier})],
               replace=True)
        code, out, _ = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms",
                           "gae", "--device", "cpu")
        assert code == 0 and "gae|none|float32|env|N=8|T=8" in out
    code, out, _ = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms", "gae",
                       "--device", "cpu")
    assert code == 0 and "nothing left to refresh: every entry asked for is refreshed" in out


def test_tune_says_what_a_cut_short_or_finished_run_leaves(capsys):
    """--missing-only with nothing left exits 0 and says so (a shell loop can run it until
    done); a refresh past --max-seconds reports the entries it left."""
    tune = ("tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1", "--device",
            "cpu", "--no-progress", "--no-compile-baseline")
    assert run(capsys, *tune)[0] == 0
    code, out, _ = run(capsys, *tune, "--missing-only")
    assert code == 0 and "nothing left to tune" in out
    code, out, err = run(capsys, "tune", "--refresh", "--algorithms", "gae", "--device", "cpu",
                         "--max-seconds", "1e-9")
    assert code == 0 and "no stored entries to refresh" not in out
    assert "--max-seconds reached; 1 entry left to refresh" in err
    code, out, err = run(capsys, "tune", "--refresh", "--missing-only", "--algorithms", "gae",
                         "--device", "cpu")
    assert code == 0 and "gae|none|float32|env|N=8|T=8" in out and "left" not in err
    # one progress line per entry, with the seconds it took
    assert re.search(r"refreshed gae\|none\|float32\|env\|N=8\|T=8: (kept|replaced) "
                     r"\(\d+\.\d s\)", err)


def test_flag_sets_that_leave_no_key_are_one_error_line(capsys):
    """'none' joined to a flag is refused by the parser (exit 2); flag sets that none of
    the estimators asked for takes leave no key: one line naming the options (exit 1),
    not an empty table, and not "nothing left to tune" with --missing-only."""
    tune = ("tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1", "--device",
            "cpu", "--no-progress")
    with pytest.raises(SystemExit) as exc:
        main([*tune, "--flags", "none+last_value"])
    assert exc.value.code == 2 and "'none' alone" in capsys.readouterr().err
    for extra in ((), ("--missing-only",)):
        code, out, err = run(capsys, *tune, "--flags", "seed", *extra)
        assert code == 1 and "nothing left" not in out
        assert "no key to run" in err and "--flags" in err and err.count("\n") == 1
    code, out, err = run(capsys, "bench", "--algorithms", "gae", "--shapes", "8x8",
                         "--device", "cpu", "--flags", "seed")
    assert code == 1 and "no key to run" in err


def test_from_record_tunes_the_recorded_keys_of_the_algorithms_asked_for(tmp_path, capsys):
    from rltriton_tune.dispatch import record as workload
    from rltriton_tune.dispatch.devices import device_fingerprint

    path = tmp_path / "calls.json"
    fp = json.dumps(device_fingerprint("cpu"), sort_keys=True)
    keys = {"gae|none|float32|env|N=4|T=9": 5, "discounted_returns|none|float32|env|N=3|T=7": 9}
    workload.merge_into(path, {(k, fp): n for k, n in keys.items()},
                        {(k, fp): "rules" for k in keys})
    tune = ("tune", "--from-record", str(path), "--device", "cpu", "--trials", "1",
            "--no-progress", "--no-compile-baseline")
    code, out, err = run(capsys, *tune, "--algorithms", "gae")
    assert code == 0 and [e["algorithm"] for e in show_json(capsys)] == ["gae"]
    code, out, err = run(capsys, *tune, "--algorithms", "vtrace")
    assert code == 0 and "records no key of the --algorithms asked for" in out


def test_refresh_takes_the_flag_sets_asked_for(capsys):
    assert run(capsys, "tune", "--algorithms", "gae", "--shapes", "8x8", "--trials", "1",
               "--device", "cpu", "--no-progress", "--no-compile-baseline",
               "--flags", "none,last_value")[0] == 0
    code, out, err = run(capsys, "tune", "--refresh", "--algorithms", "gae", "--device", "cpu",
                         "--flags", "last_value")
    assert code == 0 and "gae|last_value|float32|env|N=8|T=8" in out
    assert "gae|none|" not in out and "gae|none|" not in err


def test_doctor_says_when_the_profile_folder_is_not_a_folder(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for path, said in ((blocker, "(not a folder: tune and import cannot write there"),
                       (tmp_path / "new", "(does not exist yet: tune and import create it)")):
        monkeypatch.setenv("RLTRITON_TUNE_DB", str(path))
        code, out, _ = run(capsys, "doctor")
        assert code == 0 and f"user profiles {path} {said}" in out
    assert blocker.read_text() == "x"


def test_doctor_reports_entries_measured_under_other_versions(capsys):
    """A profile measured with another Triton is used, and doctor says so."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import Entry, record

    key = ProblemKey("gae", 4096, 128)
    record(device_fingerprint("cpu"), [Entry(key, "torch", {"mode": "loop"}, 5.0,
                                             software={"torch": "2.4", "triton": "3.1"})])
    code, out, _ = run(capsys, "doctor")
    assert code == 0
    assert "1 entries measured with torch 2.4, triton 3.1; differs in torch, triton" in out
    assert "gae                  torch(mode=loop)  profile: exact entry" in out
    assert "gae+last_value       torch(mode=loop)  borrowed: borrowed from gae|none" in out


def test_parallel_tune_seeds_every_study_before_the_workers_start(capsys, monkeypatch):
    """With several devices the workers share the studies: all of them exist, seeded,
    before the first worker starts (seeded once, whatever worker reaches a key first)."""
    import rltriton_tune.cli.tuning as cli_tuning
    import rltriton_tune.tune.parallel as parallel
    from rltriton_tune.tune.storage import default_journal, open_storage

    monkeypatch.setattr(cli_tuning, "resolve_device", lambda text: torch.device("cpu"))
    seen = {}

    def workers(keys, devices, **kw):
        storage = open_storage(str(default_journal()))
        seen["studies"] = sorted(optuna.get_all_study_names(storage))
        seen["seeded"] = [optuna.load_study(study_name=name, storage=storage)
                          .user_attrs.get("seeded") for name in seen["studies"]]
        return []

    monkeypatch.setattr(parallel, "run_workers", workers)
    run(capsys, "tune", "--algorithms", "gae,discounted_returns", "--shapes", "8x8,8x16",
        "--devices", "0,1", "--trials", "2", "--no-progress")
    assert len(seen["studies"]) == 4 and all(seen["seeded"])


def test_parallel_tune_hands_the_workers_no_key_at_its_budget_with_an_entry(capsys,
                                                                              monkeypatch):
    """The skip of a resumed run holds with several devices too: keys whose study is at
    its budget and whose entry is recorded are not handed to the workers."""
    import rltriton_tune.cli.tuning as cli_tuning
    import rltriton_tune.tune.parallel as parallel

    tune = ("tune", "--shapes", "8x8", "--trials", "2", "--no-progress",
            "--no-compile-baseline")
    assert run(capsys, *tune, "--algorithms", "gae", "--device", "cpu")[0] == 0
    monkeypatch.setattr(cli_tuning, "resolve_device", lambda text: torch.device("cpu"))
    handed = []
    monkeypatch.setattr(parallel, "run_workers",
                        lambda keys, devices, **kw: handed.extend(keys) or [])
    code, out, err = run(capsys, *tune, "--algorithms", "gae,discounted_returns",
                         "--devices", "0,1")
    assert [k.algorithm for k in handed] == ["discounted_returns"]
    assert "1 key(s) already tuned to their trial budget" in err


def test_a_study_that_cannot_open_mid_run_costs_only_its_key(capsys, monkeypatch):
    import rltriton_tune.tune.study as study_mod

    real = study_mod.open_study
    calls = []

    def flaky(key, *a, **kw):
        calls.append(key)
        if key.algorithm == "discounted_returns":
            raise RuntimeError("connection lost")
        return real(key, *a, **kw)

    monkeypatch.setattr(study_mod, "open_study", flaky)
    code, out, err = run(capsys, "tune", "--algorithms", "gae,discounted_returns",
                         "--shapes", "8x8", "--trials", "2", "--device", "cpu",
                         "--no-progress", "--no-compile-baseline")
    assert code == 0 and "gae|none" in out
    assert "discounted_returns" in err and "connection lost" in err
    assert [e["algorithm"] for e in show_json(capsys)] == ["gae"]


def test_table_cells_show_control_characters_escaped():
    """A name read from a hostile profile cannot drive the terminal (colours, a title, a
    cleared screen): its control characters print as escapes."""
    from rltriton_tune.cli.output import cell

    assert cell("abc\x1b[2Jdef\x07") == "abc\\x1b[2Jdef\\x07"
    assert cell("plain  text\nnext") == "plain text next"


def test_entries_that_cannot_serve_here_are_named_by_doctor_and_warned_about(capsys):
    """An entry whose strategy cannot run here or refuses its config is skipped by
    dispatch; doctor names it (it read as used before), and the call that meets one
    warns once for the file, then takes the next choice."""
    import rltriton_tune as rt
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch.devices import device_fingerprint
    from rltriton_tune.tuning_db import Entry, record

    refused = ProblemKey("gae", 6, 7)
    record(device_fingerprint("cpu"), [
        Entry(ProblemKey("gae", 4096, 128), "torch", {"mode": "loop"}, 5.0),
        Entry(refused, "torch", {"mode": "no-such-mode"}, 5.0),
        Entry(ProblemKey("gae", 5, 7), "torch", {"mode": "no-such-mode"}, 5.0),
        Entry(ProblemKey("vtrace", 6, 7), "warp9", {}, 5.0),
        Entry(ProblemKey("gae", 64, 64), "torch", {"mode": "loop"}, 5.0,
              extra={"off_grid": {"strategy": "warp9", "params": {}}}),
        Entry(ProblemKey("gae", 64, 8), "torch", {"mode": "loop"}, 5.0,
              extra={"off_grid": "tiled"}),
        Entry(ProblemKey("gae", 32, 8), "torch", {"mode": "loop"}, 5.0,
              extra={"off_grid": None, "off_grid_beyond": {"strategy": "torch",
                                                           "params": {"mode": "nope"}}}),
        Entry(ProblemKey("gae", 16, 8), "torch", {"mode": "loop"}, 5.0,
              extra={"off_grid": [], "off_grid_beyond": {"strategy": "warp9", "params": {}}})])
    code, out, _ = run(capsys, "doctor")
    assert code == 0
    assert "of which 3 cannot serve a call here" in out
    assert "of which 4 record an off-grid config that cannot serve here" in out
    assert "gae|none|float32|env|N=64|T=64: off_grid: strategy 'warp9' cannot run here" in out
    assert "gae|none|float32|env|N=64|T=8: malformed off_grid field 'tiled'" in out
    assert ("gae|none|float32|env|N=32|T=8: off_grid_beyond: torch refuses config "
            "{'mode': 'nope'}") in out
    assert ("gae|none|float32|env|N=16|T=8: malformed off_grid field []; off_grid_beyond: "
            "strategy 'warp9' cannot run here") in out
    assert "gae|none|float32|env|N=6|T=7: torch refuses config {'mode': 'no-such-mode'}" in out
    assert "vtrace|none|float32|env|N=6|T=7: strategy 'warp9' cannot run here" in out
    x, y = torch.zeros(6, 7), torch.zeros(5, 7)
    with pytest.warns(RuntimeWarning, match="doctor` lists them") as caught:
        first = rt.compute_gae(x, x, x)
        rt.compute_gae(y, y, y)  # another refused entry of the file: no second warning
    assert sum("refuses" in str(w.message) for w in caught) == 1
    assert torch.equal(first, torch.zeros(6, 7))


def test_doctor_reports_a_sibling_gpus_profile(capsys, monkeypatch):
    """On a GPU without a profile, the sibling's file is reported as used, with why, and
    the entry count says how many come from it."""
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch import devices
    from rltriton_tune.tuning_db import Entry, record

    h200 = {"kind": "cuda", "name": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
            "abi": 1}
    h100 = {**h200, "name": "NVIDIA H100 80GB HBM3"}
    record(h200, [Entry(ProblemKey("gae", 4096, 128), "flat", {"BLOCK_N": 4}, 5.0)])
    monkeypatch.setattr(devices, "device_fingerprint", lambda device=None: dict(h100))
    code, out, _ = run(capsys, "doctor")
    assert code == 0
    assert "[used]" in out and "sibling profile: measured on NVIDIA H200" in out
    assert "entries for this device: 1 (1 from a sibling GPU's profile;" in out


def test_show_names_the_sibling_gpu_that_serves_this_one(capsys, monkeypatch):
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch import devices
    from rltriton_tune.tuning_db import Entry, record

    h200 = {"kind": "cuda", "name": "NVIDIA H200", "capability": "9.0", "sm_count": 132,
            "abi": 1}
    record(h200, [Entry(ProblemKey("gae", 4096, 128), "flat", {"BLOCK_N": 4}, 5.0)])
    monkeypatch.setattr(devices, "device_fingerprint",
                        lambda device=None: {**h200, "name": "NVIDIA H100 80GB HBM3"})
    code, out, _ = run(capsys, "show", "--format", "table")
    assert code == 0 and "no tuned entries for this device" in out
    assert "1 more keys are served by the profile of a sibling GPU, NVIDIA H200" in out
