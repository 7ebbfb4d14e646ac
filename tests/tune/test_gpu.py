"""The tuner on a real GPU: Triton strategies, CUDA-graph timing, baselines, isolation."""

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import STRATEGY_NAMES
from rltriton_tune.tune.isolated import IsolatedEvaluator
from rltriton_tune.tune.measure import Bench, copies_needed
from rltriton_tune.tune.space import SearchSpace
from rltriton_tune.tune.study import tune

pytestmark = pytest.mark.gpu
KEY = ProblemKey("gae", 4096, 32)


def test_cuda_timing_rotates_inputs_past_l2_and_is_stable():
    device = torch.device("cuda")
    assert copies_needed(KEY, device) * 16 * KEY.n * KEY.t > 60 * 2**20
    space = SearchSpace(KEY, device)
    assert set(space.names()) <= set(STRATEGY_NAMES)
    cand = space.starting_points(None)[0]
    launcher = space.strategies[cand.strategy].prepare(KEY, cand.params)
    bench = Bench(KEY, device)
    a, b = bench.time(launcher, 0.1), bench.time(launcher, 0.1)
    assert 0.3 < a.device_us < 1000 and a.host_us > 0
    assert abs(a.device_us - b.device_us) / a.device_us < 0.3


def test_quick_timing_agrees_with_full_timing_at_a_fraction_of_the_inputs():
    import math

    from rltriton_tune.tune.measure import QUICK_COPIES

    device = torch.device("cuda")
    key = ProblemKey("gae", 4096, 512)  # 16 MB a call: both benches rotate past L2
    cand = SearchSpace(key, device).starting_points(None)[0]
    launcher = SearchSpace(key, device).strategies[cand.strategy].prepare(key, cand.params)
    full, quick = Bench(key, device), Bench(key, device, quick=True)
    assert len(quick.calls) <= QUICK_COPIES
    a, b = full.time(launcher, 0.1), quick.time(launcher, 0.01)
    assert math.isnan(b.host_us) and b.device_us > 0
    assert abs(a.device_us - b.device_us) / a.device_us < 0.2


def test_pipelined_sweep_on_cuda_times_every_searched_config(tmp_path):
    from rltriton_tune.tune.compile_pool import CompilePool
    from rltriton_tune.tune.exhaustive import sweep

    device = torch.device("cuda")
    key = ProblemKey("discounted_returns", 64, 8)
    labels = {c.label() for c in SearchSpace(key, device).enumerate()}
    with CompilePool(workers=4) as pool:
        table = sweep(key, device, tmp_path / "t.json", pool, log=False)
    assert set(table) == labels
    assert all(v["device_us"] and v["device_us"] > 0 for v in table.values()), \
        [v["error"] for v in table.values() if v["error"]][:3]


def test_tune_on_cuda_records_triton_choice_and_baselines(tmp_path):
    result = tune(KEY, "cuda", trials=8, storage=str(tmp_path / "s.journal"))
    entry = result.entry
    assert entry is not None and entry.strategy in STRATEGY_NAMES
    assert "flat_heuristic" in entry.baselines
    assert entry.device_time_us <= entry.baselines["flat_heuristic"] * 1.1


def test_isolated_evaluation_on_cuda():
    device = torch.device("cuda")
    space = SearchSpace(KEY, device)
    cands = space.starting_points(None)[:2]
    outs = IsolatedEvaluator(KEY, device, time_budget_s=0.05).evaluate(cands)
    assert all(o.ok for o in outs), [o.error for o in outs]


def test_compile_pool_gates_triton_configs_in_worker_processes():
    from rltriton_tune.tune.compile_pool import CompilePool
    from rltriton_tune.tune.space import Candidate

    device = torch.device("cuda")
    good = SearchSpace(KEY, device).starting_points(None)[:2]
    bad = Candidate("flat", {"BLOCK_N": 3})  # not a power of two: rejected by validate
    with CompilePool(workers=2) as pool:
        results = pool.check(KEY, device, [*good, bad])
    assert results[:2] == [None, None]
    assert "BLOCK_N" in results[2]


def test_eager_timing_measures_device_time_not_launch_overhead():
    """The fallback for uncapturable launchers agrees with CUDA-graph timing even where
    the host's launch overhead exceeds the kernel's device time."""
    from rltriton_tune.tune.measure import _time_cuda_eager, time_cuda

    device = torch.device("cuda")
    key = ProblemKey("gae", 4096, 512)
    space = SearchSpace(key, device)
    cand = space.starting_points(None)[0]
    launcher = space.strategies[cand.strategy].prepare(key, cand.params)
    bench = Bench(key, device)
    graph = time_cuda(launcher, bench.calls, device, 0.1)
    eager = _time_cuda_eager(launcher, bench.calls, device, 0.1)
    assert abs(eager.device_us - graph.device_us) / graph.device_us < 0.25
    assert eager.host_us >= eager.device_us
