"""Decision order: exact profile entry > nearest tuned entry > heuristic > torch fallback."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import FallbackWarning, explain
from rltriton_tune.dispatch import decide as decide_module
from rltriton_tune.dispatch.decide import decide
from rltriton_tune.dispatch.fingerprint import device_fingerprint

FAKE_GPU = torch.device("cuda", 0)
FAKE_FP = {"kind": "cuda", "name": "Fake GPU", "capability": "9.0", "sm_count": 132,
           "triton": "3.6", "abi": 1}


def key(n, t, **kw):
    return ProblemKey("gae", n, t, **kw)


@pytest.fixture
def wide_radius(monkeypatch):
    """Reuse entries up to log2 distance 2, whichever rule covers them, so lookup logic can
    be tested on coarse grids."""
    monkeypatch.setattr(decide_module, "MAX_DISTANCE", 2.0)
    monkeypatch.setattr(decide_module, "_rule_split", lambda *args: ())


def test_exact_profile_entry_wins(profiles, fake_gpu):
    path = profiles.write(FAKE_FP, [(key(4096, 32), "tiled", {"BLOCK_N": 8, "BLOCK_T": 16})])
    d = decide(key(4096, 32), FAKE_GPU)
    assert d.strategy == "tiled"
    assert d.params == {"BLOCK_N": 8, "BLOCK_T": 16, "num_warps": 4}  # completed from defaults
    assert d.source == f"profile:{path}"


def test_profile_for_another_fingerprint_is_not_used(profiles, fake_gpu):
    other = {**FAKE_FP, "name": "Other GPU"}
    profiles.write(other, [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    assert decide(key(4096, 32), FAKE_GPU).source == "heuristic"


def test_nearest_entry_is_revalidated_for_the_new_shape(profiles, fake_gpu, wide_radius):
    # Nearest (distance 1) has BLOCK_N=64 > N=32: invalid, skipped; next one is used.
    near = (key(64, 128), "tiled", {"BLOCK_N": 64, "BLOCK_T": 64})
    farther = (key(16, 256), "flat", {"BLOCK_N": 16, "num_warps": 1})
    path = profiles.write(FAKE_FP, [near, farther])
    d = decide(key(32, 128), FAKE_GPU)
    assert d.strategy == "flat"
    assert d.params == {"BLOCK_N": 16, "num_warps": 1}
    assert d.source == f"nearest:{key(16, 256).as_text()}@{path}"


def test_nearest_prefers_the_closest_valid_entry(profiles, fake_gpu, wide_radius):
    profiles.write(FAKE_FP, [(key(64, 64), "flat", {"BLOCK_N": 1}),
                            (key(128, 128), "tiled", {"BLOCK_N": 2})])
    d = decide(key(128, 64), FAKE_GPU)  # distance 1 to both; tie broken by key text
    assert d.source.startswith("nearest:")
    d = decide(key(128, 100), FAKE_GPU)  # closer to T=128
    assert d.strategy == "tiled" and key(128, 128).as_text() in d.source


def test_nearest_ignores_far_entries_and_other_families(profiles, fake_gpu, wide_radius):
    profiles.write(FAKE_FP, [
        (key(4096, 2048), "flat", {"BLOCK_N": 1}),               # 16x away in T
        (key(4096, 32, dtype="float16"), "flat", {"BLOCK_N": 1}),  # other dtype
        (key(4096, 32, flags="trunc"), "flat", {"BLOCK_N": 1}),    # other flags
        (ProblemKey("vtrace", 4096, 32), "flat", {"BLOCK_N": 1}),  # other algorithm
    ])
    d = decide(key(4096, 128), FAKE_GPU)
    assert d.source == "heuristic"


def test_nearest_entry_across_a_rule_boundary_is_skipped(profiles, fake_gpu):
    # 256x2048 is one flat row of 16 warps; at 290x2300 (a 4096-step tile, over 2 rows a
    # SM) V-trace's rules take a chunk loop, so the entry's evidence does not carry over.
    vtrace = ProblemKey("vtrace", 256, 2048)
    profiles.write(FAKE_FP, [(vtrace, "flat", {"BLOCK_N": 1, "num_warps": 16})])
    d = decide(ProblemKey("vtrace", 290, 2300), FAKE_GPU)
    assert d.source == "heuristic"
    assert d.strategy == "tiled"


def test_nearest_entry_within_a_rule_is_reused(profiles, fake_gpu):
    gae = ProblemKey("gae", 256, 2048)
    path = profiles.write(FAKE_FP, [(gae, "flat", {"BLOCK_N": 1, "num_warps": 32})])
    d = decide(ProblemKey("gae", 200, 2500), FAKE_GPU)  # one flat row under both
    assert d.source == f"nearest:{gae.as_text()}@{path}"
    assert d.params["num_warps"] == 32


@pytest.mark.parametrize(("flat_us", "reused"), [(1.10, True), (1.02, False), (None, True)])
def test_nearest_entry_needs_a_margin_over_its_flat_baseline(profiles, fake_gpu, flat_us,
                                                            reused):
    """An entry only 2% ahead of the flat heuristic where it was tuned is not evidence for
    the shapes around it (NEAREST_MIN_MARGIN); one without that baseline is kept."""
    from rltriton_tune.tuning_db.schema import Entry

    gae = ProblemKey("gae", 256, 2048)
    entry = Entry(key=gae, strategy="flat", params={"BLOCK_N": 1, "num_warps": 32},
                  device_time_us=1.0,
                  baselines={} if flat_us is None else {"flat_heuristic": flat_us})
    profiles.write(FAKE_FP, [entry])
    d = decide(ProblemKey("gae", 200, 2500), FAKE_GPU)
    assert d.source.startswith("nearest:") is reused
    assert decide(gae, FAKE_GPU).source.startswith("profile:")  # its own key: always


def test_nearest_entry_the_rules_cannot_place_is_skipped():
    from types import SimpleNamespace

    from rltriton_tune.dispatch.decide import exact_or_nearest
    from rltriton_tune.kernels import strategies

    entry = SimpleNamespace(strategy="flat", params={"BLOCK_N": 1, "num_warps": 4},
                            device_time_us=1.0)
    near = key(256, 2048)
    profiles = SimpleNamespace(entries={near.as_text(): entry}, sources={})

    def rules(k, sm_count):
        if k == near:
            raise ValueError("a rule that fails on the entry's shape")
        return [("flat", {"BLOCK_N": 1}, "")]

    target = key(240, 2048)
    assert exact_or_nearest(target, profiles, strategies()) is not None  # no rules check
    assert exact_or_nearest(target, profiles, strategies(), 132, rules) is None


def test_exact_entry_with_invalid_params_falls_through(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(8, 64), "tiled", {"BLOCK_N": 64})])  # invalid: 64 > 8
    assert decide(key(8, 64), FAKE_GPU).source == "heuristic"


def test_entry_for_unavailable_strategy_is_skipped(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(256, 64), "no_such_strategy", {"x": 1})])
    assert decide(key(256, 64), FAKE_GPU).source == "heuristic"


@pytest.mark.parametrize(("n", "t", "layout", "strategy", "params"), [
    (4096, 8, "env", "flat", {"BLOCK_N": 16, "num_warps": 4}),
    (4096, 32, "env", "flat", {"BLOCK_N": 16, "num_warps": 4}),
    (1024, 64, "env", "flat", {"BLOCK_N": 4, "num_warps": 4}),     # half tile below 8192 rows
    (256, 128, "env", "flat", {"BLOCK_N": 2, "num_warps": 4}),
    (600, 250, "env", "flat", {"BLOCK_N": 1, "num_warps": 4}),
    (12000, 160, "env", "flat", {"BLOCK_N": 2, "num_warps": 4}),   # full tile from 8192 rows
    (9500, 40, "env", "flat", {"BLOCK_N": 8, "num_warps": 4}),     # 33-64 steps: 512 tile
    (40000, 20, "env", "flat", {"BLOCK_N": 16, "num_warps": 4}),   # many rows, T <= 32
    (100000, 12, "env", "flat", {"BLOCK_N": 32, "num_warps": 8}),  # 512-element tile
    (50000, 8, "env", "flat", {"BLOCK_N": 64, "num_warps": 8}),    # 5-8 steps: 8 warps
    (80000, 3, "env", "flat", {"BLOCK_N": 128, "num_warps": 4}),   # up to 4 steps: 4
    (4096, 512, "env", "flat", {"BLOCK_N": 1, "num_warps": 4}),
    (256, 2048, "env", "flat", {"BLOCK_N": 1}),
    (32768, 2048, "env", "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1}),
    (24, 12000, "env", "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 1}),
    (16, 32768, "env", "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 1}),
    (12, 45000, "env", "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 1}),
    (64, 32768, "env", "lookback", {"BLOCK_N": 1, "BLOCK_T": 2048, "num_warps": 1}),
    (16, 131072, "env", "lookback", {"BLOCK_N": 1, "BLOCK_T": 2048, "num_warps": 1}),
    (32768, 8, "time", "sequential", {}),
    (20000, 100, "time", "flat", {"BLOCK_N": 16, "num_warps": 4}),
    (12000, 160, "time", "tiled", {"BLOCK_N": 16, "BLOCK_T": 64, "num_warps": 2}),
    (4096, 500, "time", "tiled", {"BLOCK_N": 8, "BLOCK_T": 128, "num_warps": 4}),
    (1500, 1500, "time", "tiled", {"BLOCK_N": 8, "BLOCK_T": 128, "num_warps": 8}),
    (48, 6000, "time", "flat", {"BLOCK_N": 1}),                    # fewer rows than SMs
    (16, 32768, "time", "split", {}),
])
def test_heuristic_follows_the_h200_table(profiles, fake_gpu, n, t, layout, strategy, params):
    d = decide(key(n, t, layout=layout), FAKE_GPU)
    assert d.source == "heuristic"
    assert d.strategy == strategy
    assert params.items() <= d.params.items()


def test_heuristic_rows_never_exceed_the_rows_there_are(profiles, fake_gpu):
    # The T<=512 rule wants 512 / 8 = 64 rows per program, capped at 16, then at N=8.
    d = decide(key(8, 8), FAKE_GPU)
    assert d.strategy == "flat" and d.params["BLOCK_N"] == 8


def test_cpu_without_profile_uses_fallback_defaults():
    d = decide(key(64, 32), "cpu")
    assert d.strategy == "torch"
    assert d.source == "fallback:cpu"


def test_cpu_profile_chooses_among_cpu_strategies(profiles, wide_radius):
    from rltriton_tune.dispatch import registry

    impl = registry.torch_strategies()["torch"]
    k = key(64, 32)
    params = impl.validate(k, {**impl.default_params(k), "mode": "chunked"})
    path = profiles.write(device_fingerprint("cpu"), [(k, "torch", params),
                                                     (key(64, 20), "tiled", {"BLOCK_N": 1})])
    d = decide(k, "cpu")
    assert (d.strategy, d.params, d.source) == ("torch", params, f"profile:{path}")
    # A Triton entry in a CPU profile is never chosen for CPU tensors.
    assert decide(key(64, 20), "cpu").source.startswith("nearest:")


def test_gpu_without_triton_falls_back_with_one_warning(profiles, fake_gpu, monkeypatch):
    monkeypatch.setattr(decide_module, "_gpu_unavailable_reason",
                        lambda k, d: "Triton is not installed")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = decide(key(64, 32), FAKE_GPU)
        second = decide(key(128, 32), FAKE_GPU)
    assert first.source == second.source == "fallback:Triton is not installed"
    assert first.strategy == "torch"
    assert sum(issubclass(w.category, FallbackWarning) for w in caught) == 1


def test_other_device_types_fall_back_to_torch():
    with pytest.warns(FallbackWarning, match="served by torch"):
        d = decide(key(64, 32), torch.device("mps"))
    assert (d.strategy, d.source) == ("torch", "fallback:device type 'mps' is served by torch")


def test_capability_below_7_is_refused(monkeypatch):
    from rltriton_tune.dispatch import registry

    monkeypatch.setattr(registry, "triton_ok", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (6, 1))
    reason = decide_module._gpu_unavailable_reason(key(64, 32), FAKE_GPU)
    assert reason == "compute capability 6.1 < 7.0 (unsupported by Triton)"


def test_explain_reports_sources(profiles, fake_gpu):
    path = profiles.write(FAKE_FP, [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    assert explain("gae", 4096, 32, device=FAKE_GPU).source == f"profile:{path}"
    assert explain("gae", 4096, 30, device=FAKE_GPU).source.startswith("nearest:")
    assert explain("gae", 256, 8, device=FAKE_GPU).source == "heuristic"
    assert explain("gae", 64, 32, device="cpu").source == "fallback:cpu"


def test_explain_builds_the_same_key_as_a_call():
    d = explain("retrace", 8, 16, A=4, device="cpu")
    assert d.key == ProblemKey("retrace", 8, 16, flags="trunc", a=4)
    d = explain("gae", 8, 16, flags="bootstrap+trunc", layout="time", dtype="bfloat16",
                device="cpu")
    assert d.key == ProblemKey("gae", 8, 16, "bfloat16", "time", "bootstrap+trunc")
    assert explain("episodic_prefix_sum", 8, 16, flags=["starts_at", "seed"],
                   device="cpu").key.flags == "seed+starts_at"


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"algorithm": "gea"}, ValueError, "unknown algorithm 'gea'"),
    ({"N": 0}, ValueError, "N must be >= 1"),
    ({"T": 2.5}, TypeError, "T must be an int"),
    ({"dtype": "int32"}, ValueError, "unknown dtype 'int32'"),
    ({"layout": "row"}, ValueError, "unknown layout 'row'"),
    ({"flags": "seed"}, ValueError, r"flags \['seed'\] are not valid for 'gae'"),
    ({"A": 3}, ValueError, "A .action count. applies only to 'retrace'"),
    ({"algorithm": "retrace", "A": 0}, ValueError, "A must be >= 1"),
    ({"device": "gpu7"}, ValueError, "device 'gpu7' is not a valid torch device"),
])
def test_explain_rejects_bad_arguments(kwargs, error, match):
    args = {"algorithm": "gae", "N": 8, "T": 8, "device": "cpu", **kwargs}
    with pytest.raises(error, match=match):
        explain(args.pop("algorithm"), args.pop("N"), args.pop("T"), **args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_explain_on_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA is not available"):
        explain("gae", 8, 8, device="cuda")


def test_a_shape_that_failed_to_launch_uses_the_fallback(profiles, fake_gpu):
    decide_module.mark_failed(key(64, 32), FAKE_GPU, "CompilationError: boom")
    with pytest.warns(FallbackWarning):
        d = decide(key(64, 32), FAKE_GPU)
    assert d.strategy == "torch"
    assert d.source == "fallback:Triton failed on first launch: CompilationError: boom"
    assert decide(key(64, 64), FAKE_GPU).source == "heuristic"  # other shapes unaffected


def test_gpu_fallback_warnings_share_one_budget(profiles, fake_gpu, monkeypatch):
    from rltriton_tune.dispatch import registry

    decide_module.mark_failed(key(64, 32), FAKE_GPU, "CompilationError: boom")
    monkeypatch.setattr(registry, "triton_strategies", lambda: {})  # no valid Triton config
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decide(key(64, 32), FAKE_GPU)
        decide(key(64, 64), FAKE_GPU)
        decide(key(64, 32), torch.device("mps"))
    assert sum(issubclass(w.category, FallbackWarning) for w in caught) == 1


def test_heuristic_tiles_count_retraces_actions():
    from rltriton_tune.call import ProblemKey
    from rltriton_tune.dispatch.heuristic import candidates

    gae = candidates(ProblemKey("gae", 4096, 32), 132)[0]
    retrace = candidates(ProblemKey("retrace", 4096, 32, flags="trunc", a=8), 132)[0]
    assert gae[:2] == ("flat", {"BLOCK_N": 16, "num_warps": 4})
    assert retrace[:2] == ("flat", {"BLOCK_N": 1, "num_warps": 1})  # 32 * 8 elements


@pytest.mark.parametrize(("n", "t", "a", "strategy", "params"), [
    (32768, 32, 8, "flat", {"BLOCK_N": 1, "num_warps": 1}),     # 256 tile elements: 1 warp
    (777, 77, 8, "flat", {"BLOCK_N": 1, "num_warps": 4}),       # 128 * 8 = 1024: 4 warps
    (1000, 200, 3, "flat", {"BLOCK_N": 1, "num_warps": 4}),     # 256 * 4 = 1024
    (32768, 2048, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # many rows
    (6000, 3000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),   # >= 8 per SM
    (2000, 7000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),
    (1000, 3000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # 2048-4096
    (300, 3600, 8, "lookback", {"BLOCK_T": 256, "num_warps": 1}),  # ... under 4 rows per SM
    (450, 2400, 8, "lookback", {"BLOCK_T": 256, "num_warps": 1}),
    (2500, 1300, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # 2048 tile
    (1800, 900, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # 1024 tile
    (900, 1000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # < 2^20 too
    (528, 1000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # 4 rows a SM
    (527, 1000, 8, "lookback", {"BLOCK_T": 128, "num_warps": 1}),             # under that
    (16, 32768, 8, "lookback", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1}),  # long rows
    (48, 6000, 8, "lookback", {"BLOCK_T": 256, "num_warps": 1}),  # shorter: 256-step chunks
    (100, 3000, 8, "lookback", {"BLOCK_T": 256, "num_warps": 1}),  # T > 512, N*T <= 2^20
    (350, 1300, 8, "lookback", {"BLOCK_T": 128, "num_warps": 1}),  # >= 8 chunks a row
    (900, 400, 8, "flat", {"BLOCK_N": 1, "num_warps": 4}),      # < 8 rows per SM: <= 4 warps
    (5000, 75, 8, "flat", {"BLOCK_N": 1, "num_warps": 2}),      # many rows, short: 512 a warp
    (9500, 40, 8, "flat", {"BLOCK_N": 1, "num_warps": 1}),      # many rows, <= 64: 512 a warp
    (1800, 220, 8, "flat", {"BLOCK_N": 1, "num_warps": 4}),     # 256-step tiles: at most 4
    (4096, 512, 8, "flat", {"BLOCK_N": 1, "num_warps": 4}),     # 512 * 8 / 256, at most 4
    (1300, 300, 8, "flat", {"BLOCK_N": 1, "num_warps": 4}),
    (20000, 40, 8, "flat", {"BLOCK_N": 1, "num_warps": 1}),     # 33-64 steps: one row
    (70000, 10, 8, "flat", {"BLOCK_N": 4, "num_warps": 1}),     # 4 rows x 16 steps, one warp
    (32768, 8, 8, "flat", {"BLOCK_N": 4, "num_warps": 1}),
    (20000, 3, 8, "flat", {"BLOCK_N": 8, "num_warps": 1}),      # 4 x 4 x 8 < 256 elements
    (20000, 4, 8, "flat", {"BLOCK_N": 8, "num_warps": 1}),      # at most 8 rows
    (20000, 1, 8, "flat", {"BLOCK_N": 32, "num_warps": 1}),     # 1-2 steps: 32 rows
    (20000, 2, 3, "flat", {"BLOCK_N": 32, "num_warps": 1}),
    (9, 2, 8, "flat", {"BLOCK_N": 16, "num_warps": 1}),         # at most next_pow2(N)
    (40000, 20, 8, "flat", {"BLOCK_N": 2, "num_warps": 1}),     # 17-24 steps: 2 rows
    (70000, 24, 8, "flat", {"BLOCK_N": 2, "num_warps": 1}),
    (20000, 28, 8, "flat", {"BLOCK_N": 1, "num_warps": 1}),     # 25-32 steps: one row
    (20000, 16, 2, "flat", {"BLOCK_N": 8, "num_warps": 1}),     # few actions: 8 x 16 x 2
    (20000, 1, 16, "flat", {"BLOCK_N": 32, "num_warps": 1}),    # 16 actions: <= 512 elements
    (20000, 2, 12, "flat", {"BLOCK_N": 16, "num_warps": 1}),    # 16 x 2 x 16 = 512
    # 17-24 actions (Atari's 18): their own rules.
    (20000, 2, 18, "flat", {"BLOCK_N": 16, "num_warps": 1}),    # 16 x 2 x 32 = 1024
    (16384, 10, 18, "flat", {"BLOCK_N": 2, "num_warps": 1}),    # 2 x 16 x 32
    (2048, 5, 24, "flat", {"BLOCK_N": 4, "num_warps": 1}),      # 4 x 8 x 32
    (4000, 40, 18, "flat", {"BLOCK_N": 4, "num_warps": 4}),     # many rows: 256-step tile
    (12000, 100, 17, "flat", {"BLOCK_N": 2, "num_warps": 4}),
    (1000, 40, 18, "flat", {"BLOCK_N": 1, "num_warps": 2}),     # few rows: 1024 a warp
    (300, 200, 18, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    (2000, 300, 18, "flat", {"BLOCK_N": 1, "num_warps": 16}),
    (100, 600, 18, "flat", {"BLOCK_N": 1, "num_warps": 16}),    # 513-1024 steps, few rows
    (40, 3000, 18, "lookback", {"BLOCK_T": 256, "num_warps": 2}),
    (16, 5000, 18, "lookback", {"BLOCK_T": 256, "num_warps": 2}),
    (1500, 800, 18, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # 4 rows a SM
    (100000, 128, 18, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # 2^23+
    (100, 600, 16, "lookback", {"BLOCK_T": 128, "num_warps": 1}),  # 16: the A=8 rules
    (4000, 40, 24, "flat", {"BLOCK_N": 4, "num_warps": 4}),     # 24 and 25: the boundary
    (4000, 40, 25, "flat", {"BLOCK_N": 1, "num_warps": 1}),
    # 25+ actions (many_actions): tiles counted in row elements, next_pow2(T) x next_pow2(A),
    # warps and look-back chunks in loaded elements, steps x A.
    (20000, 4, 32, "flat", {"BLOCK_N": 8, "num_warps": 1}),     # rows of 32 steps in all
    (30000, 3, 32, "flat", {"BLOCK_N": 8, "num_warps": 1}),
    (12000, 10, 32, "flat", {"BLOCK_N": 2, "num_warps": 1}),
    (20000, 1, 64, "flat", {"BLOCK_N": 32, "num_warps": 2}),    # a warp per 1024 loaded
    (6000, 20, 48, "flat", {"BLOCK_N": 1, "num_warps": 1}),     # 32 x 48: one warp
    (15000, 4, 64, "flat", {"BLOCK_N": 8, "num_warps": 2}),
    (20000, 12, 64, "flat", {"BLOCK_N": 2, "num_warps": 2}),
    (6000, 50, 32, "flat", {"BLOCK_N": 1, "num_warps": 2}),
    (500, 120, 64, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    (700, 150, 32, "flat", {"BLOCK_N": 1, "num_warps": 8}),     # 8192 elements, < 8 a SM
    (3000, 200, 32, "tiled", {"BLOCK_N": 1, "BLOCK_T": 128, "num_warps": 4}),  # >= 8 a SM
    (2500, 500, 32, "tiled", {"BLOCK_N": 1, "BLOCK_T": 128, "num_warps": 4}),  # 16384
    (800, 200, 64, "tiled", {"BLOCK_N": 1, "BLOCK_T": 128, "num_warps": 4}),
    (1200, 400, 100, "tiled", {"BLOCK_N": 1, "BLOCK_T": 64, "num_warps": 4}),  # 8192 a chunk
    (20000, 20, 1000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 8, "num_warps": 4}),
    (400, 300, 32, "lookback", {"BLOCK_T": 128, "num_warps": 1}),  # under 4 rows a SM
    (100, 600, 25, "lookback", {"BLOCK_T": 64, "num_warps": 1}),   # 500 programs: 64 steps
    (40, 1500, 64, "lookback", {"BLOCK_T": 64, "num_warps": 1}),
    (20, 6000, 32, "lookback", {"BLOCK_T": 128, "num_warps": 1}),
    (70, 2500, 48, "lookback", {"BLOCK_T": 128, "num_warps": 1}),   # 1400 programs
    (10, 8000, 100, "lookback", {"BLOCK_T": 64, "num_warps": 1}),   # 630 programs
    (12, 20000, 32, "lookback", {"BLOCK_T": 128, "num_warps": 1}),  # 7+ programs a SM:
    (30, 9000, 32, "lookback", {"BLOCK_T": 128, "num_warps": 1}),   # 128 steps
    (10, 12000, 128, "lookback", {"BLOCK_T": 128, "num_warps": 1}),  # at any action count
    (6, 30000, 64, "lookback", {"BLOCK_T": 128, "num_warps": 1}),
    (3, 4, 8, "flat", {"BLOCK_N": 4, "num_warps": 1}),          # no more rows than there are
    (256, 32768, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),  # long T
    (1000, 5000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),  # 8192 tile
    (1500, 3500, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),  # many rows
    (3000, 5000, 8, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 4}),   # many rows
])
def test_heuristic_for_per_action_estimators(n, t, a, strategy, params):
    from rltriton_tune.dispatch.heuristic import candidates
    from rltriton_tune.kernels import strategies

    name, overrides, why = candidates(ProblemKey("retrace", n, t, flags="trunc", a=a), 132)[0]
    assert name == strategy and why
    impl = strategies()[name]
    full = impl.validate(ProblemKey("retrace", n, t, flags="trunc", a=a),
                         {**impl.default_params(ProblemKey("retrace", n, t, a=a)), **overrides})
    assert params.items() <= full.items()


@pytest.mark.parametrize(("algorithm", "n", "t", "strategy", "params"), [
    # Look-back chunks by class. Forward scans: 1024-2048 steps, at least 12 a row.
    ("eligibility_traces", 12, 45000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 2048}),
    ("eligibility_traces", 40, 9000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024}),
    ("episodic_prefix_sum", 10, 20000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024}),
    # GAE (reads values[t+1]): 1024-2048 steps, at least 6 a row and 3 programs per SM.
    ("gae", 12, 45000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024}),   # 264 programs
    ("gae", 64, 32768, "lookback", {"BLOCK_N": 1, "BLOCK_T": 2048}),   # 1024 programs
    ("gae", 40, 9000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024}),    # the shortest
    ("gae", 5, 300000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 2048}),
    # Lambda and discounted returns: 6 programs per SM from 1024 down to 512 steps; two
    # rows of 1024 steps (2 warps) from 6 rows of 30000 steps.
    ("discounted_returns", 40, 9000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 512}),
    ("discounted_returns", 5, 300000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024}),
    ("discounted_returns", 4, 45000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 512}),
    ("discounted_returns", 12, 45000, "lookback",
     {"BLOCK_N": 2, "BLOCK_T": 1024, "num_warps": 2}),
    ("lambda_returns", 96, 30000, "lookback", {"BLOCK_N": 2, "BLOCK_T": 1024, "num_warps": 2}),
    ("lambda_returns", 48, 20000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 1024}),
    # V-trace (7 values a step): 512-step chunks, two rows from 4 rows; half tiles up to
    # 8192 rows.
    ("vtrace", 40, 9000, "lookback", {"BLOCK_N": 2, "BLOCK_T": 512, "num_warps": 2}),
    ("vtrace", 5, 300000, "lookback", {"BLOCK_N": 2, "BLOCK_T": 512, "num_warps": 2}),
    ("vtrace", 3, 500000, "lookback", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 1}),
    ("vtrace", 1800, 220, "flat", {"BLOCK_N": 1, "num_warps": 4}),
    ("gae", 1800, 220, "flat", {"BLOCK_N": 2, "num_warps": 4}),
    ("discounted_returns", 5000, 75, "flat", {"BLOCK_N": 4, "num_warps": 4}),
    # One flat row of 1024-4096 steps: 8 warps; 16 (rl-triton's) for 2048-4096-step tiles
    # up to 3 x 2048 tile elements per SM; V-trace 8, and 16 from 4096-step tiles.
    ("vtrace", 350, 1300, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    ("gae", 350, 1300, "flat", {"BLOCK_N": 1, "num_warps": 16}),     # 350 * 2048 <= 3 * 2048 * 132
    ("gae", 450, 1100, "flat", {"BLOCK_N": 1, "num_warps": 8}),      # past that
    ("lambda_returns", 396, 2000, "flat", {"BLOCK_N": 1, "num_warps": 16}),  # 3 rows a SM
    ("lambda_returns", 397, 2000, "flat", {"BLOCK_N": 1, "num_warps": 8}),   # one more
    ("eligibility_traces", 198, 4000, "flat", {"BLOCK_N": 1, "num_warps": 16}),  # 1.5 a SM
    ("eligibility_traces", 199, 4000, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    ("gae", 600, 700, "flat", {"BLOCK_N": 1, "num_warps": 8}),       # 1024-step tile
    ("discounted_returns", 100, 3000, "flat", {"BLOCK_N": 1, "num_warps": 16}),
    ("gae", 300, 2800, "flat", {"BLOCK_N": 1, "num_warps": 8}),      # 300 * 4096 > 6144 * 132
    ("vtrace", 100, 3000, "flat", {"BLOCK_N": 1, "num_warps": 16}),
    # V-trace rows of 2049-3072 steps from 2 rows per SM: the mid-long chunk loop.
    ("vtrace", 300, 2800, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
    ("vtrace", 264, 2100, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
    ("vtrace", 263, 2100, "flat", {"BLOCK_N": 1, "num_warps": 16}),      # under 2 a SM
    ("vtrace", 700, 3073, "flat", {"BLOCK_N": 1, "num_warps": 16}),      # tile 3/4+ full
    ("vtrace", 700, 2500, "tiled", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("gae", 100, 5000, "flat", {"BLOCK_N": 1}),  # few rows, 8192-step tile: rl-triton warps
    ("gae", 1200, 90, "flat", {"BLOCK_N": 2, "num_warps": 4}),
    # Many rows of 17-32 steps: V-trace 8 warps, the lighter estimators 4; 9-16 steps: 8;
    # 33-64 steps: the 512-element tile (8 rows, 4 warps) for every estimator.
    ("vtrace", 20000, 28, "flat", {"BLOCK_N": 16, "num_warps": 8}),
    ("vtrace", 15000, 36, "flat", {"BLOCK_N": 8, "num_warps": 4}),
    ("gae", 12000, 50, "flat", {"BLOCK_N": 8, "num_warps": 4}),
    ("discounted_returns", 40000, 20, "flat", {"BLOCK_N": 16, "num_warps": 4}),
    ("episodic_prefix_sum", 70000, 10, "flat", {"BLOCK_N": 32, "num_warps": 8}),
    # At least 2^23 steps in at most 4096 rows: 512-step chunks with 4 warps for light
    # estimators, 1024 with 8 warps and 3 stages for the others.
    ("eligibility_traces", 3000, 5000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("gae", 3000, 5000, "tiled",
     {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8, "num_stages": 3}),
    ("vtrace", 4096, 2048, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
    # 2^20 to 2^23 steps in rows of over 2048 steps: backward estimators loop over chunks
    # once rows pass 4096 steps (512 steps, 4 warps from 6 rows per SM, V-trace 4; 1024
    # steps, 8 warps below); otherwise one flat row, 8 warps (V-trace 16).
    ("gae", 1000, 5000, "tiled",
     {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4, "num_stages": 3}),
    ("gae", 700, 6000, "tiled",
     {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8, "num_stages": 3}),
    ("vtrace", 550, 7500, "tiled", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("vtrace", 400, 6000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
    ("discounted_returns", 400, 6000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024}),
    ("eligibility_traces", 700, 6000, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    # GAE (reads values[t+1]) loops over chunks in the 2049-4096-step band too, from 4
    # rows per SM: 1024 steps with 8 warps, 512 with 4 from 6 rows, 256 with 1 from 16.
    ("gae", 1500, 3500, "tiled", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("gae", 600, 4000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
    ("gae", 3000, 2200, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1}),
    ("gae", 500, 3000, "flat", {"BLOCK_N": 1, "num_warps": 8}),          # under 4 a SM
    ("gae", 527, 3000, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    ("gae", 528, 3000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 1024, "num_warps": 8}),
    ("gae", 2111, 3000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("gae", 2112, 3000, "tiled", {"BLOCK_N": 1, "BLOCK_T": 256, "num_warps": 1}),
    ("gae", 3000, 2048, "flat", {"BLOCK_N": 1, "num_warps": 8}),          # 2048-step tile
    ("lambda_returns", 1500, 3500, "flat", {"BLOCK_N": 1, "num_warps": 8}),
    ("vtrace", 2500, 2500, "tiled", {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 4}),
    ("vtrace", 1500, 3500, "flat", {"BLOCK_N": 1, "num_warps": 16}),
    ("lambda_returns", 150, 4000, "flat", {"BLOCK_N": 1, "num_warps": 16}),  # few a SM
    ("gae", 2000, 2000, "flat", {"BLOCK_N": 1, "num_warps": 8}),            # 2048-step rows
])
def test_heuristic_scales_with_the_work_per_step(algorithm, n, t, strategy, params):
    from rltriton_tune.dispatch.heuristic import candidates

    name, overrides, _ = candidates(ProblemKey(algorithm, n, t), 132)[0]
    assert name == strategy
    assert params.items() <= overrides.items()


def test_neighbour_loop_is_only_for_light_backward_estimators_reading_a_neighbour():
    from rltriton_tune.dispatch.heuristic import neighbour_loop

    assert neighbour_loop(ProblemKey("gae", 1500, 3500), 132) is not None
    assert neighbour_loop(ProblemKey("gae", 1500, 3500, layout="time"), 132) is None
    assert neighbour_loop(ProblemKey("gae", 1500, 5000), 132) is None     # 8192-step tile
    assert neighbour_loop(ProblemKey("gae", 100, 3500), 132) is None      # under 4 a SM
    for algorithm in ("vtrace", "lambda_returns", "discounted_returns",  # heavy, no neighbour
                      "eligibility_traces", "episodic_prefix_sum"):      # forward
        assert neighbour_loop(ProblemKey(algorithm, 1500, 3500), 132) is None
    assert neighbour_loop(ProblemKey("retrace", 1500, 3500, flags="trunc", a=8), 132) is None


def test_lookback_classes_follow_what_an_estimator_reads_a_step():
    from rltriton_tune.dispatch.heuristic import lookback_class

    assert lookback_class(ProblemKey("eligibility_traces", 8, 20000)) == "forward"
    assert lookback_class(ProblemKey("gae", 8, 20000)) == "backward_neighbour"  # values[t+1]
    assert lookback_class(ProblemKey("lambda_returns", 8, 20000)) == "backward"
    assert lookback_class(ProblemKey("discounted_returns", 8, 20000, flags="trunc")) == \
        "backward"
    assert lookback_class(ProblemKey("vtrace", 8, 20000)) == "heavy"


@settings(max_examples=300, deadline=None)
@given(algorithm=st.sampled_from(["gae", "vtrace", "lambda_returns", "discounted_returns",
                                  "eligibility_traces", "episodic_prefix_sum"]),
       n=st.integers(1, 131), t=st.integers(8192, 1 << 20), sms=st.sampled_from([8, 66, 132]))
def test_lookback_chunk_is_the_longest_its_rule_allows(algorithm, n, t, sms):
    from rltriton_tune.dispatch.heuristic import LOOKBACK_RULES, lookback_class, lookback_params

    key = ProblemKey(algorithm, n, t)
    rule = LOOKBACK_RULES[lookback_class(key)]
    params = lookback_params(key, sms)
    if params["BLOCK_N"] == 2:  # the two-row regime
        assert rule.two_rows and n >= rule.two_rows[0] and t >= rule.two_rows[1]
        assert params == {"BLOCK_N": 2, "BLOCK_T": rule.two_row_chunk, "num_warps": 2}
        return
    chunk = params["BLOCK_T"]
    assert params == {"BLOCK_N": 1, "BLOCK_T": chunk, "num_warps": 1}
    assert rule.shortest <= chunk <= rule.longest and chunk & (chunk - 1) == 0

    def enough(c: int) -> bool:
        return t >= rule.chunks_a_row * c and n * -(-t // c) >= rule.programs_per_sm * sms

    assert chunk == rule.shortest or enough(chunk)         # it meets both floors ...
    assert chunk == rule.longest or not enough(2 * chunk)  # ... and a longer one would not


def test_step_streams_counts_per_step_values_not_bytes():
    from rltriton_tune.dispatch.heuristic import step_streams

    assert step_streams(ProblemKey("eligibility_traces", 3, 100)) == 3
    assert step_streams(ProblemKey("gae", 3, 100, dtype="bfloat16")) == 4
    assert step_streams(ProblemKey("gae", 3, 100, flags="trunc")) == 5
    assert step_streams(ProblemKey("vtrace", 3, 100)) == 7


def test_transfer_alternatives_are_the_next_nearest_entries(profiles, fake_gpu):
    from rltriton_tune.dispatch.decide import transfer_alternatives

    profiles.write(FAKE_FP, [(key(256, 128), "flat", {"BLOCK_N": 1}),       # distance 0.36
                            (key(256, 32), "tiled", {"BLOCK_N": 2}),        # distance 1.64
                            (key(512, 128), "flat", {"BLOCK_N": 4}),        # distance 1.06
                            (key(1024, 128), "flat", {"BLOCK_N": 8})])      # 2.03: too far
    query = key(256, 100)
    assert key(256, 128).as_text() in decide(query, FAKE_GPU).source  # dispatch takes nearest
    found = transfer_alternatives(query, FAKE_GPU)
    assert [d.source.split("@")[0] for d in found] == [
        f"nearest:{key(512, 128).as_text()}", f"nearest:{key(256, 32).as_text()}"]
    assert [d.strategy for d in found] == ["flat", "tiled"]
    # With an exact entry, dispatch uses it and the alternatives start at the nearest other.
    exact = transfer_alternatives(key(256, 128), FAKE_GPU, count=1)
    assert [d.source.split("@")[0] for d in exact] == [f"nearest:{key(512, 128).as_text()}"]


def test_nearest_entry_tuned_for_another_regime_is_not_reused(profiles, fake_gpu, wide_radius):
    from rltriton_tune.dispatch.decide import transfer_alternatives

    calls = []

    def transfer(source, target, params):  # "tiled" configs move to flat with 4 rows
        calls.append((source, target, dict(params)))
        return "flat", {"BLOCK_N": 4, "num_warps": params["num_warps"]}

    fake_gpu["tiled"].transfer = transfer
    tuned = {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 4}
    profiles.write(FAKE_FP, [(key(4096, 32), "tiled", tuned)])
    # The strategy would change the entry's config for this shape: dispatch does not
    # reuse it and falls back on the built-in rules.
    d = decide(key(3000, 40), FAKE_GPU)
    assert d.source == "heuristic"
    assert calls and calls[0] == (key(4096, 32), key(3000, 40), tuned)
    # The bench's survey still offers the entry, moved and as tuned.
    found = transfer_alternatives(key(3000, 40), FAKE_GPU)
    assert [(a.strategy, a.params) for a in found] == [
        ("flat", {"BLOCK_N": 4, "num_warps": 4}), ("tiled", tuned)]
    assert "moved to this shape" in found[0].detail
    assert found[1].source.startswith(f"unmoved:{key(4096, 32).as_text()}@")


def test_nearest_entry_whose_config_applies_unchanged_is_reused(profiles, fake_gpu, wide_radius):
    fake_gpu["tiled"].transfer = lambda source, target, params: ("tiled", dict(params))
    tuned = {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 4}
    profiles.write(FAKE_FP, [(key(4096, 32), "tiled", tuned),
                             (key(3000, 400), "flat", {"BLOCK_N": 1})])
    d = decide(key(3000, 40), FAKE_GPU)
    assert (d.strategy, d.params) == ("tiled", tuned)
    assert d.source.startswith(f"nearest:{key(4096, 32).as_text()}@")
    assert "re-validated" in d.detail


@pytest.mark.parametrize("result", [ValueError("boom"), ZeroDivisionError("num_warps=0"),
                                    ("flat", {"BLOCK_N": 8192}), ("no_such_strategy", {})])
def test_a_move_that_fails_keeps_the_config_as_tuned(profiles, fake_gpu, result, wide_radius):
    def transfer(source, target, params):
        if isinstance(result, Exception):
            raise result
        return result

    fake_gpu["tiled"].transfer = transfer
    profiles.write(FAKE_FP, [(key(4096, 32), "tiled", {"BLOCK_N": 16, "BLOCK_T": 32})])
    d = decide(key(3000, 40), FAKE_GPU)  # BLOCK_N=8192 > N: invalid, like an unknown name
    assert (d.strategy, d.params) == ("tiled", {"BLOCK_N": 16, "BLOCK_T": 32, "num_warps": 4})
    assert "re-validated" in d.detail


def test_entries_are_reused_within_half_a_doubling_only(profiles, fake_gpu):
    from rltriton_tune.dispatch.decide import transfer_alternatives

    profiles.write(FAKE_FP, [(key(4096, 32), "tiled", {"BLOCK_N": 16, "BLOCK_T": 32})])
    assert decide(key(3500, 30), FAKE_GPU).source.startswith("nearest:")  # distance 0.24
    assert decide(key(4096, 22), FAKE_GPU).source == "heuristic"  # 0.54: the heuristic
    assert decide(key(2900, 25), FAKE_GPU).source == "heuristic"  # 0.61
    assert decide(key(3500, 36), FAKE_GPU).source == "heuristic"  # 0.28, but 64-step rows
    # The bench still measures the entry's config there (up to distance 2).
    (alt,) = transfer_alternatives(key(2900, 25), FAKE_GPU)
    assert alt.source.startswith(f"nearest:{key(4096, 32).as_text()}@")


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ["gae", "retrace", "episodic_prefix_sum"])
def test_heuristic_first_rule_is_valid_everywhere(algorithm, layout):
    """Every rule's config validates for the key it is chosen for (no silent fall-through
    to the generic tail), over sizes from one row or step to 2^20."""
    from rltriton_tune.dispatch.heuristic import candidates
    from rltriton_tune.kernels import strategies

    sizes = [1, 3, 16, 77, 132, 1000, 4096, 70000, 1 << 20]
    for n in sizes:
        for t in sizes:
            k = ProblemKey(algorithm, n, t, layout=layout,
                           flags="trunc" if algorithm == "retrace" else "none",
                           a=8 if algorithm == "retrace" else 0)
            name, overrides, why = candidates(k, 132)[0]
            impl = strategies()[name]
            try:
                impl.validate(k, {**impl.default_params(k), **overrides})
            except Exception as exc:  # noqa: BLE001 - report the key and rule
                pytest.fail(f"{k.as_text()}: {name} {overrides} ({why}): {exc}")
