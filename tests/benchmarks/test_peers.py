"""benchmarks/peers.py: the smoke run writes one row per cell, peers agree with the
dispatched call's outputs, --resume and --shard split the work."""

from __future__ import annotations

import csv

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


def test_grid_covers_the_flag_sets_users_pass(script):
    peers = script("peers")
    keys = peers.cells(tuple(peers.FLAG_SETS), ((77, 24), (24000, 300)), peers.DTYPES,
                       peers.LAYOUTS)
    seen = {(k.algorithm, k.flags, k.dtype, k.layout) for k in keys}
    assert ("gae", "last_value", "bfloat16", "time") in seen
    assert ("eligibility_traces", "seed", "float32", "env") in seen
    assert ("retrace", "trunc", "float32", "time") in seen
    assert all(peers.data_bytes(k) <= peers.MAX_CELL_BYTES for k in keys)


def test_rl_triton_adapter_matches_on_the_prefix_sum(script):
    """rl-triton's prefix sum runs on CPU tensors under the Triton interpreter."""
    pytest.importorskip("rl_triton")
    adapters = script("peer_adapters")
    from rltriton_tune import compute_episodic_prefix_sum
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.problems import random_inputs

    for layout in ("env", "time"):
        kw = random_inputs(ProblemKey("episodic_prefix_sum", 3, 9, layout=layout, flags="seed"))
        import rl_triton

        args = {k: adapters._swap_time(v, layout == "time") for k, v in kw.items()
                if k != "time_major"}
        theirs = adapters._swap_time(rl_triton.compute_episodic_prefix_sum(**args),
                                     layout == "time")
        torch.testing.assert_close(theirs, compute_episodic_prefix_sum(**kw))


@pytest.mark.gpu
def test_cuda_cell_against_every_peer(script, tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    peers = script("peers")
    key = peers.ProblemKey("gae", 77, 24, flags="last_value")
    row = peers.measure(key, torch.device("cuda"), peers.PEERS, budget_s=0.05)
    assert row["device_us"]["dispatched"] > 0
    assert row["agree"].get("torchrl") is True
    assert row["agree"].get("torch_compile") is True
    if peers.rl_triton_version() is not None:
        assert row["agree"]["rl_triton"] is True and row["speedup_rl_triton"] > 0
