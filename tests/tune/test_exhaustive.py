"""Exhaustive sweeps: every config measured once, cached, resumable."""

import json

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.tune import exhaustive
from rltriton_tune.tune.space import SearchSpace

CPU = torch.device("cpu")
KEY = ProblemKey("discounted_returns", 6, 40)


def test_sweep_measures_every_config_and_caches(tmp_path):
    cache = tmp_path / "t.json"
    spent: dict[str, float] = {}
    table = exhaustive.sweep(KEY, CPU, cache, log=False, stats=spent)
    assert spent["gate_wait_s"] >= 0 and spent["timing_s"] > 0  # where the time went
    labels = {c.label() for c in SearchSpace(KEY, CPU).enumerate()}
    assert set(table) == labels
    assert all(v["device_us"] > 0 for v in table.values())
    assert json.loads(cache.read_text()) == table
    (best,) = exhaustive.best_of(table)
    assert table[best.label()]["device_us"] == min(v["device_us"] for v in table.values())
    assert exhaustive.sweep(KEY, CPU, cache, log=False) == table  # cached: nothing re-run


def test_interrupted_sweep_resumes_from_its_partial_table(tmp_path, monkeypatch):
    cache = tmp_path / "t.json"
    first = next(iter(SearchSpace(KEY, CPU).enumerate()))
    done = {first.label(): {"strategy": first.strategy, "params": first.params,
                            "device_us": 123.0, "error": None}}
    cache.with_suffix(".partial.json").write_text(json.dumps(done))
    seen = []
    real = exhaustive.Evaluator.evaluate

    def spy(self, candidates, *args, **kwargs):
        seen.extend(c.label() for c in candidates)
        return real(self, candidates, *args, **kwargs)

    monkeypatch.setattr(exhaustive.Evaluator, "evaluate", spy)
    table = exhaustive.sweep(KEY, CPU, cache, log=False)
    assert first.label() not in seen and table[first.label()]["device_us"] == 123.0
    assert len(seen) == len(table) - 1
    assert not cache.with_suffix(".partial.json").exists()


def test_best_of_orders_ties_without_comparing_params():
    """Equal times of one strategy (common on fast keys) must not compare param dicts."""
    table = {
        "a": {"strategy": "flat", "params": {"BLOCK_N": 2}, "device_us": 1.5},
        "b": {"strategy": "flat", "params": {"BLOCK_N": 1}, "device_us": 1.5},
        "c": {"strategy": "tiled", "params": {"BLOCK_N": 1}, "device_us": 1.0},
        "d": {"strategy": "split", "params": {}, "device_us": None},
    }
    assert [c.label() for c in exhaustive.best_of(table, 3)] == [
        "tiled(BLOCK_N=1)", "flat(BLOCK_N=1)", "flat(BLOCK_N=2)"]


def test_capped_sweep_returns_a_partial_table_and_resumes(tmp_path, monkeypatch):
    cache = tmp_path / "t.json"
    labels = {c.label() for c in SearchSpace(KEY, CPU).enumerate()}
    monkeypatch.setattr(exhaustive, "BATCH", 2)
    part = exhaustive.sweep(KEY, CPU, cache, log=False, max_seconds=0)
    assert len(part) == 2 and not cache.exists()  # one batch, then stopped
    assert cache.with_suffix(".partial.json").exists()
    assert all(v["device_us"] > 0 for v in part.values())
    table = exhaustive.sweep(KEY, CPU, cache, log=False)  # uncapped: finishes the rest
    assert set(table) == labels and cache.exists()
    assert all(table[k] == v for k, v in part.items())


def test_sweep_with_a_pool_gates_the_next_batch_while_timing_this_one(tmp_path, monkeypatch):
    from rltriton_tune.tune.compile_pool import CompilePool

    monkeypatch.setattr(exhaustive, "POOL_BATCH_PER_WORKER", 2)
    labels = {c.label() for c in SearchSpace(KEY, CPU).enumerate()}
    events = []
    real_start = CompilePool.start
    real_evaluate = exhaustive.Evaluator.evaluate

    def start(self, key, device, candidates, limit=None):
        events.append(("start", len(candidates)))
        return real_start(self, key, device, candidates, limit)

    def evaluate(self, candidates, *args, **kwargs):
        assert kwargs["gated"] is not None and len(kwargs["gated"]) == len(candidates)
        events.append(("time", len(candidates)))
        return real_evaluate(self, candidates, *args, **kwargs)

    monkeypatch.setattr(CompilePool, "start", start)
    monkeypatch.setattr(exhaustive.Evaluator, "evaluate", evaluate)
    with CompilePool(workers=1) as pool:  # batches of 2 configs
        table = exhaustive.sweep(KEY, CPU, tmp_path / "t.json", pool, log=False)
    assert set(table) == labels and all(v["device_us"] > 0 for v in table.values())
    kinds = [kind for kind, _ in events]
    # The second batch is submitted before the first is timed, and so on.
    assert kinds[:3] == ["start", "start", "time"] and kinds.count("time") == kinds.count("start")


def test_finalists_take_every_config_near_the_best_within_bounds():
    def table(times):
        return {f"flat(BLOCK_N={i})": {"strategy": "flat", "params": {"BLOCK_N": i},
                                       "device_us": t} for i, t in enumerate(times)}

    close = table([1.0 + 0.001 * i for i in range(40)] + [None])  # 40 within 25%
    assert len(exhaustive.finalists(close)) == exhaustive.FINALISTS_MAX
    spread = table([1.0, 1.2, 1.3] + [5.0] * 10)  # at least FINALISTS_MIN, best first
    picked = exhaustive.finalists(spread)
    assert len(picked) == exhaustive.FINALISTS_MIN and picked[0].params == {"BLOCK_N": 0}
    assert exhaustive.finalists(table([None, None])) == []


def test_key_of_cache_name_inverts_cache_name_for_every_key_shape():
    keys = [ProblemKey("eligibility_traces", 12, 45000),
            ProblemKey("retrace", 256, 32768, "bfloat16", "time", "trunc", 8),
            ProblemKey("gae", 1, 1, flags="bootstrap+trunc")]
    for key in keys:
        name = exhaustive.cache_name(key, torch.device("cuda"))
        assert exhaustive.key_of_cache_name(name) == key
        partial = name.removesuffix(".json") + ".partial.json"
        assert exhaustive.key_of_cache_name(partial) == key


def test_key_of_cache_name_rejects_other_files():
    with pytest.raises(ValueError, match="sweep table"):
        exhaustive.key_of_cache_name("sweep_log.jsonl")
