"""benchmarks/peers.py: the smoke run writes one row per cell, peers agree with the
dispatched call's outputs, --resume and --shard split the work."""

from __future__ import annotations

import csv
import importlib.util
import json

import pytest
import torch


def test_smoke_rows_and_peer_agreement(script, tmp_path):
    peers = script("peers")
    argv = ["--smoke", "--output", str(tmp_path), "--estimators", "gae", "vtrace",
            "lambda_returns", "discounted_returns", "retrace", "--layouts", "env", "time"]
    assert peers.main(argv) == 0
    rows = peers.read_rows(tmp_path / "peers.jsonl")
    expected = peers.cells(("gae", "vtrace", "lambda_returns", "discounted_returns", "retrace"),
                           peers.SMOKE_SHAPES, ("float32",), ("env", "time"))
    assert [r["cell"] for r in rows] == [k.as_text() for k in expected]
    for r in rows:
        assert r["device_us"]["dispatched"] > 0 and r["host_us"]["dispatched"] > 0
        assert "rl_triton" in r["errors"]  # needs CUDA: said why, not silently missing
        if r["algorithm"] == "retrace":
            assert "torchrl" not in r["device_us"] and "TorchRL has no" in r["errors"]["torchrl"]
        else:  # TorchRL computes the same numbers on the same inputs, every flag set
            assert r["agree"]["torchrl"] is True, r["cell"]
            assert r["device_us"]["torchrl"] > 0
    flags = {(r["algorithm"], r["flags"]) for r in rows}
    assert ("gae", "last_value") in flags and ("vtrace", "bootstrap+trunc") in flags
    with (tmp_path / "peers.csv").open() as f:
        table = list(csv.DictReader(f))
    assert len(table) == len(rows) and float(table[0]["device_us_dispatched"]) > 0

    # A resumed run measures nothing new; a fresh one replaces the file.
    assert peers.main([*argv, "--resume"]) == 0
    assert len(peers.read_rows(tmp_path / "peers.jsonl")) == len(rows)
    # An update measures the cells asked for again and keeps the rest: readers take the
    # newest row of each cell, in its first place.
    before = {r["cell"]: r for r in rows}
    assert peers.main(["--smoke", "--output", str(tmp_path), "--estimators", "vtrace",
                       "--layouts", "time", "--update"]) == 0
    lines = (tmp_path / "peers.jsonl").read_text().splitlines()
    updated = peers.read_rows(tmp_path / "peers.jsonl")
    assert len(lines) > len(rows) and [r["cell"] for r in updated] == list(before)
    with (tmp_path / "peers.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    last = {json.loads(line)["cell"]: json.loads(line) for line in lines}
    assert all(r == last[r["cell"]] for r in updated)
    assert any(r != before[r["cell"]] for r in updated if "vtrace" in r["cell"])
    assert all(r == before[r["cell"]] for r in updated if "vtrace" not in r["cell"])
    assert peers.main(["--smoke", "--output", str(tmp_path), "--estimators", "gae",
                       "--layouts", "env"]) == 0
    assert {r["algorithm"] for r in peers.read_rows(tmp_path / "peers.jsonl")} == {"gae"}


def test_shards_cover_every_cell_once(script):
    peers = script("peers")
    keys = peers.cells(tuple(peers.FLAG_SETS), peers.OFF_GRID, peers.DTYPES, peers.LAYOUTS)
    parts = [peers.shard(keys, f"{i}/3") for i in range(3)]
    assert sorted(k.as_text() for p in parts for k in p) == sorted(k.as_text() for k in keys)
    assert len({k.as_text() for k in keys}) == len(keys)
    with pytest.raises(SystemExit):
        peers.shard(keys, "3/3")


def test_min_bytes_keeps_the_bandwidth_bound_cells(script):
    peers = script("peers")
    grid = tuple((n, t) for n in peers.GRID_N for t in peers.GRID_T)
    every = peers.cells(("gae",), grid, ("float32",), peers.LAYOUTS)
    large = peers.cells(("gae",), grid, ("float32",), peers.LAYOUTS, min_bytes=64 * 2**20)
    assert large == [k for k in every if peers.data_bytes(k) >= 64 * 2**20]
    assert 0 < len(large) < len(every)
    # Both layouts of each shape, so time-major compares with env-major cell by cell.
    assert {(k.n, k.t, k.flags, "time") for k in large if k.layout == "env"} == {
        (k.n, k.t, k.flags, k.layout) for k in large if k.layout == "time"}


def test_explicit_shapes_name_single_cells(script):
    peers = script("peers")
    assert peers.shape_set("grid") == "grid"
    assert peers.shape_set("32768x128,777X77") == ((32768, 128), (777, 77))
    for bad in ("32768", "ax3", "0x8", ""):
        with pytest.raises(Exception, match="--shapes"):
            peers.shape_set(bad)
    keys = peers.cells(("gae",), peers.shape_set("777x77"), ("float32",), ("env",))
    assert {(k.n, k.t) for k in keys} == {(777, 77)}
    assert {k.flags for k in keys} == {"none", "last_value", "bootstrap+trunc"}


def test_random_shapes_are_unseen_reproducible_and_bounded(script):
    """``random:K:SEED``: odd sizes (no grid or profile entry has one), the same for the
    same seed, other for another, within the bounds and the size cap."""
    peers = script("peers")
    shapes = peers.shape_set("random:40:7")
    assert len(set(shapes)) == 40 and shapes == peers.random_shapes(40, 7)
    assert shapes != peers.random_shapes(40, 8)
    for n, t in (shape for seed in range(200) for shape in peers.random_shapes(12, seed)):
        assert n % 2 == 1 and t % 2 == 1 and n * t <= peers.RANDOM_MAX_ELEMS
        assert peers.RANDOM_N[0] <= n <= peers.RANDOM_N[1] and 1 <= t <= peers.RANDOM_T[1]
    for bad in ("random:0:1", "random:3", "random:x:1"):
        with pytest.raises(Exception, match="--shapes"):
            peers.shape_set(bad)

def test_peers_that_cannot_run_a_cell_say_why(script):
    peers = script("peers")
    cpu = torch.device("cpu")
    key = peers.ProblemKey("gae", 8, peers.TORCHRL_MAX_T * 2)
    found, errors = peers.peer_adapters(key, cpu, peers.PEERS, compile_on_cpu=False)
    assert found == {}
    assert "skipped above T" in errors["torchrl"] and "CUDA" in errors["torch_compile"]
    found, errors = peers.peer_adapters(peers.ProblemKey("retrace", 8, 8, flags="trunc", a=4),
                                        cpu, ("torchrl",), compile_on_cpu=False)
    assert found == {} and "no functional estimator" in errors["torchrl"]


def test_grid_covers_the_flag_sets_users_pass(script):
    peers = script("peers")
    keys = peers.cells(tuple(peers.FLAG_SETS), ((77, 24), (24000, 300)), peers.DTYPES,
                       peers.LAYOUTS)
    seen = {(k.algorithm, k.flags, k.dtype, k.layout) for k in keys}
    assert ("gae", "last_value", "bfloat16", "time") in seen
    assert ("eligibility_traces", "seed", "float32", "env") in seen
    assert ("retrace", "trunc", "float32", "time") in seen
    assert all(peers.data_bytes(k) <= peers.MAX_CELL_BYTES for k in keys)


#: Runs rl-triton's kernels on CPU tensors under the Triton interpreter: ``python -O``
#: drops its ``is_cuda`` asserts. The adapter is asked for as if on CUDA.
_RL_TRITON_CHECK = """
import sys, torch
import peers, peer_adapters
from rltriton_tune.call import ProblemKey
from rltriton_tune.estimators import ESTIMATORS
from rltriton_tune.problems import random_inputs

class Cuda:
    type = "cuda"

bad = []
for algorithm, flag_sets in peers.FLAG_SETS.items():
    for flags in flag_sets:
        for layout in ("env", "time"):
            key = ProblemKey(algorithm, 5, 40, layout=layout, flags=flags,
                             a=peers.RETRACE_A if algorithm == "retrace" else 0)
            kw = peers.as_users_pass(random_inputs(key, "cpu", seed=1))
            ours = ESTIMATORS[algorithm](**kw)
            adapter = peer_adapters.rl_triton_adapter(algorithm, Cuda(), "float32",
                                                      layout == "time")
            theirs = adapter.finish(adapter.run(adapter.prepare(kw)))
            if not peers._agree(ours if isinstance(ours, tuple) else (ours,), theirs,
                                "float32"):
                bad.append(key.as_text())
print(bad)
sys.exit(1 if bad else 0)
"""


def test_rl_triton_adapter_computes_what_we_compute():
    """On the inputs peers.py builds, rl-triton 0.1.3 returns our numbers for every
    estimator, flag set and layout (so its times are for the same work)."""
    pytest.importorskip("rl_triton")
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(root), str(root / "benchmarks"),
                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-O", "-c", _RL_TRITON_CHECK], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_torch_compile_peer_agrees_and_records_its_faster_scan(script):
    """Both compiled scans run (inductor on CPU: tens of seconds) and the faster is kept."""
    peers = script("peers")
    key = peers.ProblemKey("gae", 6, 8, flags="last_value")
    row = peers.measure(key, torch.device("cpu"), ("torch_compile",), 0.01, compile_on_cpu=True)
    us = row["device_us"]
    assert row["agree"]["torch_compile_associative"] is True
    assert row["agree"]["torch_compile_doubling"] is True
    scan = row["torch_compile_scan"]
    assert us["torch_compile"] == us[f"torch_compile_{scan}"] == min(
        us["torch_compile_associative"], us["torch_compile_doubling"])


@pytest.mark.gpu
def test_cuda_cell_against_every_peer(script, tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    peers = script("peers")
    key = peers.ProblemKey("gae", 77, 24, flags="last_value")
    row = peers.measure(key, torch.device("cuda"), peers.PEERS, budget_s=0.05)
    assert row["device_us"]["dispatched"] > 0
    assert row["agree"].get("torch_compile") is True
    # The optional peers agree where installed, and say why where not.
    if importlib.util.find_spec("torchrl") is not None:
        assert row["agree"].get("torchrl") is True
    else:
        assert "not importable" in row["errors"]["torchrl"]
    if peers.rl_triton_version() is not None:
        assert row["agree"]["rl_triton"] is True and row["speedup_rl_triton"] > 0
    else:
        assert "rl_triton" in row["errors"]


def test_a_failing_cell_is_recorded_and_the_run_goes_on(script, tmp_path, monkeypatch):
    peers = script("peers")
    keys = peers.cells(("gae",), ((3, 5),), ("float32",), ("env",))
    real = peers.measure

    def measure(key, *args, **kwargs):
        if key.flags == "last_value":
            raise RuntimeError("CUDA out of memory\nmore")
        return real(key, *args, **kwargs)

    monkeypatch.setattr(peers, "measure", measure)
    rows = list(peers.run(keys, torch.device("cpu"), tmp_path, ("torchrl",), resume=False,
                          max_seconds=60, budget_s=0.01))
    assert [r["flags"] for r in rows] == ["none", "last_value", "bootstrap+trunc"]
    assert rows[1]["errors"] == {"cell": "RuntimeError: CUDA out of memory"}
    assert rows[2]["device_us"]["dispatched"] > 0
    assert len(peers.read_rows(tmp_path / "peers.jsonl")) == 3
    # --resume measures the failed cell again, and only it
    monkeypatch.setattr(peers, "measure", real)
    again = list(peers.run(keys, torch.device("cpu"), tmp_path, ("torchrl",), resume=True,
                           max_seconds=60, budget_s=0.01))
    assert [r["flags"] for r in again] == ["last_value"]
    assert again[0]["device_us"]["dispatched"] > 0 and "cell" not in again[0]["errors"]
    assert [r["flags"] for r in peers.read_rows(tmp_path / "peers.jsonl")] == [
        "none", "last_value", "bootstrap+trunc"]


def test_close_verdicts_are_timed_again_in_the_other_order(script):
    peers = script("peers")
    order: list[str] = []

    def again(times):
        def time_again(name):
            order.append(name)
            return times[name]
        return time_again

    # 5% apart: both timed again, rl-triton first this time, each gets its mean
    us = {"dispatched": 10.0, "rl_triton": 10.5, "torchrl": 99.0}
    rounds = peers.settle_close(us, ("rl_triton", "dispatched"),
                                again({"dispatched": 11.0, "rl_triton": 9.5}))
    assert order == ["rl_triton", "dispatched"]
    assert rounds == {"rl_triton": [10.5, 9.5], "dispatched": [10.0, 11.0]}
    assert us == {"dispatched": 10.5, "rl_triton": 10.0, "torchrl": 99.0}
    # a clear verdict (2x) or a missing time is left alone
    order.clear()
    us = {"dispatched": 5.0, "rl_triton": 10.0}
    assert peers.settle_close(us, ("rl_triton", "dispatched"), again({})) == {}
    assert us == {"dispatched": 5.0, "rl_triton": 10.0} and not order
    assert peers.settle_close({"dispatched": 5.0}, ("rl_triton", "dispatched"),
                              again({})) == {}


def test_rows_of_record_name_the_profile_by_file_not_by_checkout_path(script):
    adapters = script("peer_adapters")
    cut = adapters.portable_source
    assert cut("profile:/home/u/rltriton_tune/tuning_db/profiles/h200.json") == \
        "profile:h200.json"
    assert cut("borrowed:gae|none|float32|env|N=8|T=8@/tmp/db/h200.json") == \
        "borrowed:gae|none|float32|env|N=8|T=8@h200.json"
    for kept in ("fallback:cpu", "rules", "forced", "profile:?", "borrowed:k@?"):
        assert cut(kept) == kept


def test_agreement_fails_on_nan_or_inf_where_the_other_side_has_none(script):
    """A peer returning NaN (or an infinity where we have a number) does not agree: NaN
    compares false with everything, so a difference test alone passed it."""
    peers = script("peers")
    ours = torch.arange(12.0).reshape(3, 4)
    nan = ours.clone()
    nan[1, 2] = float("nan")
    inf = ours.clone()
    inf[0, 0] = float("inf")
    assert not peers._agree((ours,), (torch.full_like(ours, float("nan")),), "float32")
    assert not peers._agree((ours,), (nan,), "float32")
    assert not peers._agree((nan,), (ours,), "float32")
    assert not peers._agree((ours,), (inf,), "float32")
    assert not peers._agree((inf,), (-inf,), "float32")
    largest = inf.clone()
    largest[0, 0] = torch.finfo(torch.float32).max  # finite: not the infinity
    assert not peers._agree((inf,), (largest,), "float32")
    assert not peers._agree((-largest,), (-inf,), "float32")
    # the same NaN and infinities in the same places, the rest within tolerance: agree
    assert peers._agree((nan,), (nan + 1e-6,), "float32")
    assert peers._agree((inf,), (inf.clone(),), "float32")
    assert not peers._agree((ours,), (ours + 1.0,), "float32")


def test_resume_takes_each_cell_s_newest_row_on_this_device_and_software(script, tmp_path):
    """A cell whose newest row records a failure is measured again, even after an older
    good row; a cell whose newest row is of another device or software too."""
    peers = script("peers")
    context = {"device_name": "GPU", "torch": "2", "triton": "3", "rl_triton": "0.1.3"}
    good = {**context, "cell": "a", "errors": {}}
    failed = {**context, "cell": "a", "errors": {"cell": "out of memory"}}
    other = {**context, "cell": "b", "torch": "1"}

    def done(*rows):
        path = tmp_path / "peers.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return peers._done_cells(peers.read_rows(path), context)

    assert done(good) == {"a"}
    assert done(good, failed) == set()
    assert done(failed, good) == {"a"}
    assert done(other) == set()
