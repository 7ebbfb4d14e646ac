"""Decision order: forced > own entry > borrowed entry > built-in rules > torch fallback."""

from __future__ import annotations

import warnings

import pytest
import torch

from rltriton_tune.call import ProblemKey
from rltriton_tune.dispatch import FallbackWarning, explain, lookup, rules
from rltriton_tune.dispatch import decide as decide_module
from rltriton_tune.dispatch.decide import decide
from rltriton_tune.dispatch.devices import device_fingerprint
from rltriton_tune.tuning_db import Profile
from rltriton_tune.tuning_db.schema import dumps

FAKE_GPU = torch.device("cuda", 0)
FAKE_FP = {"kind": "cuda", "name": "Fake GPU", "capability": "9.0", "sm_count": 132, "abi": 1}


def key(n, t, **kw):
    return ProblemKey("gae", n, t, **kw)


def test_exact_profile_entry_wins(profiles, fake_gpu):
    path = profiles.write(FAKE_FP, [(key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16}),
                                    (key(4096, 64), "flat", {"BLOCK_N": 2})])
    d = decide(key(4096, 32), FAKE_GPU)
    assert (d.strategy, d.params["BLOCK_N"], d.params["BLOCK_T"]) == ("tiled", 4, 16)
    assert (d.origin, d.entry, d.path) == ("profile", key(4096, 32).as_text(), str(path))
    assert d.source == f"profile:{path}"


def test_profile_for_another_architecture_is_not_used(profiles, fake_gpu):
    profiles.write({**FAKE_FP, "name": "Other GPU", "capability": "8.0"},
                   [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    profiles.write({**FAKE_FP, "abi": 2}, [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    assert decide(key(4096, 32), FAKE_GPU).origin == "rules"


def test_a_sibling_gpus_profile_serves_before_the_rules(profiles, fake_gpu):
    """A GPU of the same architecture measured the key: its config is borrowed, and the
    decision says so (the workload record counts it as a miss)."""
    path = profiles.write({**FAKE_FP, "name": "Fake Sibling GPU", "sm_count": 114},
                          [(key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16})])
    d = decide(key(4096, 32), FAKE_GPU)
    assert (d.origin, d.strategy, d.entry, d.path) == (
        "borrowed", "tiled", key(4096, 32).as_text(), str(path))
    assert "of a sibling GPU's profile (differs in gpu;" in d.detail
    assert decide(key(2048, 32), FAKE_GPU).origin == "borrowed"


def test_this_gpus_own_entry_wins_over_a_siblings(profiles, fake_gpu):
    profiles.write({**FAKE_FP, "name": "Fake Sibling GPU"},
                   [(key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16}),
                    (key(256, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16})])
    profiles.write(FAKE_FP, [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    own = decide(key(4096, 32), FAKE_GPU)
    assert (own.origin, own.strategy) == ("profile", "flat")
    other = decide(key(256, 32), FAKE_GPU)
    assert (other.origin, other.strategy, other.entry) == (
        "borrowed", "tiled", key(256, 32).as_text())


def test_a_siblings_entry_ranks_between_this_gpus_near_and_far_entries(profiles, fake_gpu):
    """A sibling's entry at the key itself loses to this GPU's own entry of another flag
    set at the same shape (1.03x), and wins over its own entry a shape step away (1.15x)."""
    profiles.write({**FAKE_FP, "name": "Fake Sibling GPU"},
                   [(key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16}),
                    (key(1024, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16})])
    profiles.write(FAKE_FP, [(key(1024, 32, flags="last_value"), "flat", {"BLOCK_N": 2}),
                             (key(2048, 32), "split", {"BLOCK_N": 2})])
    near = decide(key(1024, 32), FAKE_GPU)
    assert (near.origin, near.strategy) == ("borrowed", "flat")
    far = decide(key(4096, 32), FAKE_GPU)
    assert (far.strategy, far.entry) == ("tiled", key(4096, 32).as_text())
    assert "sibling GPU's profile (differs in gpu;" in far.detail
    assert decide(key(2048, 32), FAKE_GPU).origin == "profile"


def test_measured_factors_near_one_keep_a_near_siblings_entry_above_a_far_own_one(
        profiles, fake_gpu):
    """The sibling penalty scales with the profile's measured factors: where a shape step
    costs 1.1% (the H200's measurement), this GPU's own entry nine steps away must not
    outrank a sibling's entry one step away, and the order near own < sibling at the key
    < own a step away still holds."""
    from rltriton_tune.tuning_db.store import record_borrowing

    sibling = {**FAKE_FP, "name": "Fake Sibling GPU"}
    profiles.write(sibling, [(key(128, 4096, layout="time"), "tiled",
                              {"BLOCK_N": 4, "BLOCK_T": 16}),
                             (key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16})])
    record_borrowing(sibling, {"shape": 1.0113, "flags": 1.0007, "dtype": 1.0003,
                               "layout": 1.0166})
    profiles.write(FAKE_FP, [(key(4096, 512, layout="time"), "flat", {"BLOCK_N": 2}),
                             (key(4096, 32, flags="last_value"), "flat", {"BLOCK_N": 2}),
                             (key(2048, 32), "split", {"BLOCK_N": 2})])
    far = decide(key(60, 3000, layout="time"), FAKE_GPU)
    assert (far.strategy, far.entry) == ("tiled", key(128, 4096, layout="time").as_text())
    assert "sibling GPU's profile" in far.detail
    near = decide(key(4096, 32), FAKE_GPU)
    assert (near.strategy, near.entry) == ("flat", key(4096, 32, flags="last_value").as_text())
    assert lookup.sibling_factor(lookup.DEFAULT_FACTORS) == pytest.approx(1.0989, abs=1e-4)
    # Factors that cannot order the three (a measured shape step beside the default
    # dtype factor; no shape cost at all): half a shape step.
    mixed = {**lookup.DEFAULT_FACTORS, "shape": 1.0113, "flags": 1.0007}
    assert lookup.sibling_factor(mixed) == pytest.approx(1.0113 ** 0.5)
    assert lookup.sibling_factor({**mixed, "shape": 1.0}) == 1.0
    assert decide(key(1024, 32), FAKE_GPU).entry == key(2048, 32).as_text()

def test_sibling_profiles_can_be_turned_off(profiles, fake_gpu, monkeypatch):
    from rltriton_tune import dispatch

    profiles.write({**FAKE_FP, "name": "Fake Sibling GPU"},
                   [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    monkeypatch.setenv("RLTRITON_TUNE_SIBLINGS", "0")
    dispatch.reset()
    assert decide(key(4096, 32), FAKE_GPU).origin == "rules"


def test_profile_measured_under_another_triton_is_used(fake_gpu, tmp_path, monkeypatch):
    """The fingerprint names hardware and kernel ABI; a profile written when it also named
    the Triton version (an older file) still serves this device."""
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import Entry

    old = Profile({**FAKE_FP, "triton": "3.1"},
                  {key(4096, 32).as_text(): Entry(key(4096, 32), "flat", {"BLOCK_N": 8}, 2.0,
                                                  software={"triton": "3.1", "torch": "2.4"})})
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "old.json").write_text(dumps(old.to_json()))
    monkeypatch.setenv("RLTRITON_TUNE_SHIPPED_DB", str(folder))
    dispatch.reset()
    d = decide(key(4096, 32), FAKE_GPU)
    assert (d.origin, d.params["BLOCK_N"]) == ("profile", 8)


def test_a_flag_set_without_entries_borrows_the_same_shape(profiles, fake_gpu):
    """``last_value`` calls (what PPO passes) are served by the flags-none entry."""
    profiles.write(FAKE_FP, [(key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16}),
                             (key(4096, 8192), "flat", {"BLOCK_N": 1})])
    d = decide(key(4096, 32, flags="last_value"), FAKE_GPU)
    assert (d.origin, d.entry, d.strategy) == ("borrowed", key(4096, 32).as_text(), "tiled")
    assert "flags" in d.detail and "shape" not in d.detail.split("differs in ")[1].split(";")[0]


def test_another_dtype_of_the_same_shape_beats_a_distant_shape_of_the_same_dtype(
        profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(4096, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16}),
                             (key(64, 4096, dtype="bfloat16"), "flat", {"BLOCK_N": 1})])
    d = decide(key(4096, 32, dtype="bfloat16"), FAKE_GPU)
    assert d.entry == key(4096, 32).as_text()


def test_the_other_layout_is_borrowed_only_when_nothing_else_is_there(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(4096, 32, layout="time"), "sequential", {"BLOCK_N": 64}),
                             (key(1024, 128), "flat", {"BLOCK_N": 2})])
    assert decide(key(4096, 32), FAKE_GPU).entry == key(1024, 128).as_text()
    assert decide(key(8, 8), FAKE_GPU).entry == key(1024, 128).as_text()


def test_the_layout_partitions_borrowing_whatever_the_measured_factor(fake_gpu, tmp_path,
                                                                       monkeypatch):
    """A profile measuring the layout as nearly free (1.017, as the shipped H200 one did)
    still serves a time-major key from a distant time-major entry before the env-major
    entry of its own shape; with no time-major entry, the env-major one serves."""
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import Entry

    folder = tmp_path / "shipped"
    folder.mkdir()
    env_same_shape = key(4096, 8192)
    time_far = key(32768, 2048, layout="time")
    for entries, expected in (((env_same_shape, time_far), time_far),
                              ((env_same_shape,), env_same_shape)):
        profile = Profile(FAKE_FP, {k.as_text(): Entry(k, "flat", {"BLOCK_N": 1}, 1.0)
                                    for k in entries},
                          borrowing={"layout": 1.017, "shape": 1.011})
        (folder / "p.json").write_text(dumps(profile.to_json()))
        monkeypatch.setenv("RLTRITON_TUNE_SHIPPED_DB", str(folder))
        dispatch.reset()
        assert decide(key(4096, 8192, layout="time"), FAKE_GPU).entry == expected.as_text()


def test_nearest_shape_wins_among_entries_of_the_same_family(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(4096, 32), "flat", {"BLOCK_N": 4}),
                             (key(4096, 512), "flat", {"BLOCK_N": 2}),
                             (key(256, 32), "flat", {"BLOCK_N": 8})])
    assert decide(key(4096, 64), FAKE_GPU).entry == key(4096, 32).as_text()
    assert decide(key(4096, 300), FAKE_GPU).entry == key(4096, 512).as_text()
    assert decide(key(200, 40), FAKE_GPU).entry == key(256, 32).as_text()


def test_steps_count_by_the_span_kernels_cover_them_with(profiles, fake_gpu):
    """T = 150 runs 256-step tiles: the 256-step entry serves it though 128 is nearer in
    log2 T. Entries a span away on either side tie; the nearer in log2 T serves."""
    profiles.write(FAKE_FP, [(key(256, 128), "flat", {"BLOCK_N": 2}),
                             (key(512, 256), "flat", {"BLOCK_N": 1}),
                             (key(2048, 512), "flat", {"BLOCK_N": 1}),
                             (key(2048, 2048), "flat", {"BLOCK_N": 1})])
    assert lookup.distance(key(333, 150), key(333, 256)) == 0
    assert decide(key(333, 150), FAKE_GPU).entry == key(512, 256).as_text()
    assert decide(key(2048, 1000), FAKE_GPU).entry == key(2048, 512).as_text()
    assert decide(key(2048, 1500), FAKE_GPU).entry == key(2048, 2048).as_text()


def test_a_borrowed_config_invalid_at_the_new_shape_is_skipped(profiles, fake_gpu):
    # The fake strategies reject BLOCK_N > N: 64 rows cannot serve a 16-row key.
    profiles.write(FAKE_FP, [(key(4096, 32), "flat", {"BLOCK_N": 64}),
                             (key(8, 4096), "flat", {"BLOCK_N": 8})])
    d = decide(key(16, 32), FAKE_GPU)
    assert (d.entry, d.params["BLOCK_N"]) == (key(8, 4096).as_text(), 8)


def test_a_call_of_another_shape_takes_the_entrys_off_grid_config(profiles, fake_gpu):
    """An entry that records an off-grid config (the one that served the odd shapes
    below its key best) gives it to calls of other shapes whose steps fill less than
    three quarters of their power-of-two span; calls at its own shape, with other flags,
    and calls whose steps fill their span take its own config. A broken or foreign
    ``off_grid`` field, or an off-grid config that cannot serve the call, leaves the
    entry's own config."""
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import Entry

    off = {"strategy": "tiled", "params": {"BLOCK_N": 1, "BLOCK_T": 16},
           "companions": {key(2457, 1229).as_text(): 47.1}}
    profiles.write(FAKE_FP, [Entry(key(4096, 2048), "flat", {"BLOCK_N": 1}, 80.3,
                                   extra={"off_grid": off})])
    odd = decide(key(4745, 1047), FAKE_GPU)
    assert (odd.origin, odd.strategy, odd.params["BLOCK_T"]) == ("borrowed", "tiled", 16)
    assert "its off-grid config for calls with at most its steps (off_grid)" in odd.detail
    same_shape = decide(key(4096, 2048, flags="last_value"), FAKE_GPU)
    assert (same_shape.origin, same_shape.strategy) == ("borrowed", "flat")
    assert "off-grid" not in same_shape.detail
    assert decide(key(4096, 2048), FAKE_GPU).strategy == "flat"  # its own key
    for t, partial in ((1535, True), (1536, False), (1843, False)):  # 0.75 of 2048: 1536
        d = decide(key(5121, t), FAKE_GPU)
        assert (d.strategy == "tiled") is partial, t
    # an off-grid config that failed in this process: the entry's own config serves
    decide_module.mark_failed(FAKE_GPU, odd.strategy, odd.params, "fake compile error")
    again = decide(key(4745, 1047), FAKE_GPU)
    assert (again.origin, again.entry, again.strategy) == (
        "borrowed", key(4096, 2048).as_text(), "flat")
    assert "off-grid" not in again.detail
    for broken in ("tiled", {"strategy": 3, "params": {}}, {"strategy": "tiled"},
                   {"strategy": "warp_specialized", "params": {}},
                   {"strategy": "tiled", "params": {"BLOCK_N": 99999}}):
        profiles.write(FAKE_FP, [Entry(key(4096, 2048), "flat", {"BLOCK_N": 1}, 80.3,
                                       extra={"off_grid": broken})])
        dispatch.reset()
        d = decide(key(4745, 1047), FAKE_GPU)
        assert (d.origin, d.strategy) == ("borrowed", "flat"), broken


def test_calls_beyond_an_entrys_steps_take_the_off_grid_config_of_their_side(
        profiles, fake_gpu):
    """An entry that records an off-grid config for each side of its steps gives calls of
    more steps (partly filling a span above) ``off_grid_beyond`` and the others
    ``off_grid``; None on a side leaves that side the entry's own config. An entry written
    before the sides (no ``off_grid_beyond`` field) serves both from ``off_grid``."""
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import Entry

    def off(block_t):
        return {"strategy": "tiled", "params": {"BLOCK_N": 1, "BLOCK_T": block_t},
                "companions": {}}

    for extra, below, beyond in (
            ({"off_grid": off(16), "off_grid_beyond": off(32)}, 16, 32),
            ({"off_grid": None, "off_grid_beyond": off(32)}, None, 32),
            ({"off_grid": off(16), "off_grid_beyond": None}, 16, None),
            ({"off_grid": off(16)}, 16, 16)):
        profiles.write(FAKE_FP, [Entry(key(4096, 2048), "flat", {"BLOCK_N": 1}, 80.3,
                                       extra=extra)])
        dispatch.reset()
        for call, want in ((key(4745, 1047), below), (key(4097, 2457), beyond),
                           (key(11077, 2799), beyond)):
            d = decide(call, FAKE_GPU)
            assert d.entry == key(4096, 2048).as_text(), (extra, call)
            got = d.params["BLOCK_T"] if d.strategy == "tiled" else None
            assert got == want, (extra, call)
            # the explanation names the call's side and the field that served it:
            # off_grid_beyond only where the entry has it and the call has more steps
            field = ("off_grid_beyond" if call.t > 2048 and "off_grid_beyond" in extra
                     else "off_grid")
            side = "more steps" if call.t > 2048 else "at most its steps"
            assert (f"for calls with {side} ({field})" in d.detail) is (want is not None), (
                extra, call, d.detail)
        assert decide(key(4096, 2048), FAKE_GPU).strategy == "flat"
        assert decide(key(4096, 3583), FAKE_GPU).strategy == "flat"  # fills its span


def test_measured_borrowing_evidence_changes_the_ranking(fake_gpu, tmp_path, monkeypatch):
    """A profile whose measurements say flag sets move the best config (a large factor)
    makes a nearby shape of the same flag set win over the same shape of another."""
    from rltriton_tune import dispatch
    from rltriton_tune.tuning_db import Entry

    entries = {k.as_text(): Entry(k, "flat", {"BLOCK_N": b}, 1.0) for k, b in
               ((key(4096, 32), 4), (key(4096, 64, flags="last_value"), 2))}
    target = key(4096, 32, flags="last_value")
    folder = tmp_path / "shipped"
    folder.mkdir()
    for factor, expected in ((1.01, key(4096, 32)), (2.0, key(4096, 64, flags="last_value"))):
        profile = Profile(FAKE_FP, entries, borrowing={"flags": factor})
        (folder / "p.json").write_text(dumps(profile.to_json()))
        monkeypatch.setenv("RLTRITON_TUNE_SHIPPED_DB", str(folder))
        dispatch.reset()
        assert decide(target, FAKE_GPU).entry == expected.as_text()


def test_entry_for_an_unavailable_strategy_is_skipped(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(4096, 32), "warp_specialized", {}),
                             (key(4096, 64), "flat", {"BLOCK_N": 2})])
    d = decide(key(4096, 32), FAKE_GPU)
    assert (d.origin, d.entry) == ("borrowed", key(4096, 64).as_text())


def test_rules_serve_only_a_gpu_without_entries(profiles, fake_gpu):
    d = decide(key(4096, 32), FAKE_GPU)
    assert d.origin == "rules" and d.source == "rules"
    profiles.write(FAKE_FP, [(ProblemKey("vtrace", 64, 64), "flat", {"BLOCK_N": 1})])
    # Entries of another algorithm are not borrowed: its scan moves other data.
    assert decide(key(4096, 32), FAKE_GPU).origin == "rules"
    profiles.write(FAKE_FP, [(key(64, 64), "flat", {"BLOCK_N": 1})])
    assert decide(key(4096, 32), FAKE_GPU).origin == "borrowed"


@pytest.mark.parametrize("layout", ["env", "time"])
@pytest.mark.parametrize("algorithm", ["gae", "vtrace", "retrace", "lambda_returns",
                                       "discounted_returns", "eligibility_traces",
                                       "episodic_prefix_sum"])
def test_the_first_rule_is_valid_for_the_real_kernels_everywhere(algorithm, layout):
    """Each rule's first candidate validates for the real strategies over a grid of shapes,
    so the rules never fall through to their generic tail on ordinary keys."""
    pytest.importorskip("triton")
    from rltriton_tune.kernels import strategies

    real = dict(strategies())
    for n in (1, 7, 64, 131, 1000, 4096, 65536):
        for t in (1, 5, 32, 300, 2048, 8192, 70000):
            k = ProblemKey(algorithm, n, t, layout=layout, a=8 if algorithm == "retrace" else 0,
                           flags="trunc" if algorithm == "retrace" else "none")
            name, overrides, _ = rules.candidates(k, 132)[0]
            assert lookup.validated(real[name], k, overrides) is not None, (k, name, overrides)


def test_rules_are_short_and_legible():
    """The built-in rules stay a short default: a handful of named constants."""
    import inspect

    source = inspect.getsource(rules)
    constants = [line for line in source.splitlines()
                 if line and line[0].isupper() and " = " in line]
    assert len(source.splitlines()) < 90 and len(constants) <= 6


def test_cpu_without_profile_uses_fallback_defaults():
    d = decide(key(64, 32), "cpu")
    assert (d.strategy, d.origin, d.source) == ("torch", "fallback", "fallback:cpu")


def test_cpu_profile_chooses_among_cpu_strategies(profiles):
    from rltriton_tune.dispatch import registry

    impl = registry.torch_strategies()["torch"]
    k = key(64, 32)
    params = impl.validate(k, {**impl.default_params(k), "mode": "chunked"})
    path = profiles.write(device_fingerprint("cpu"), [(k, "torch", params),
                                                     (key(64, 20), "tiled", {"BLOCK_N": 1})])
    d = decide(k, "cpu")
    assert (d.strategy, d.params, d.source) == ("torch", params, f"profile:{path}")
    # A Triton entry in a CPU profile is never chosen for CPU tensors.
    d = decide(key(64, 20), "cpu")
    assert (d.origin, d.strategy) == ("borrowed", "torch")


def test_gpu_without_triton_falls_back_with_one_warning(profiles, fake_gpu, monkeypatch):
    monkeypatch.setattr(decide_module, "_gpu_unavailable_reason",
                        lambda d: "Triton is not installed")
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
    reason = decide_module._gpu_unavailable_reason(FAKE_GPU)
    assert reason == "compute capability 6.1 < 7.0 (unsupported by Triton)"


def test_explain_reports_which_entry_served_and_why(profiles, fake_gpu):
    path = profiles.write(FAKE_FP, [(key(4096, 32), "flat", {"BLOCK_N": 2})])
    assert explain("gae", 4096, 32, device=FAKE_GPU).source == f"profile:{path}"
    d = explain("gae", 4096, 30, flags="last_value", device=FAKE_GPU)
    assert d.source == f"borrowed:{key(4096, 32).as_text()}@{path}"
    assert "differs in flags, shape" in d.detail
    assert explain("vtrace", 256, 8, device=FAKE_GPU).source == "rules"
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


def test_a_failed_config_is_skipped_and_the_next_choice_serves(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(64, 32), "tiled", {"BLOCK_N": 4, "BLOCK_T": 16}),
                             (key(64, 64), "flat", {"BLOCK_N": 2})])
    first = decide(key(64, 32), FAKE_GPU)
    decide_module.mark_failed(FAKE_GPU, first.strategy, first.params, "CompilationError: boom")
    d = decide(key(64, 32), FAKE_GPU)
    assert (d.origin, d.entry) == ("borrowed", key(64, 64).as_text())
    # The same config is skipped where another key would borrow it.
    assert decide(key(64, 30), FAKE_GPU).entry == key(64, 64).as_text()


def test_gpu_fallback_warnings_share_one_budget(profiles, fake_gpu, monkeypatch):
    from rltriton_tune.dispatch import registry

    monkeypatch.setattr(registry, "triton_strategies", lambda: {})  # no valid Triton config
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decide(key(64, 32), FAKE_GPU)
        decide(key(64, 64), FAKE_GPU)
        decide(key(64, 32), torch.device("mps"))
    assert sum(issubclass(w.category, FallbackWarning) for w in caught) == 1


def test_borrow_alternatives_are_the_next_entries_to_borrow(profiles, fake_gpu):
    profiles.write(FAKE_FP, [(key(4096, n), "flat", {"BLOCK_N": 1}) for n in (16, 64, 256, 1024)])
    alternatives = decide_module.borrow_alternatives(key(4096, 40), FAKE_GPU, count=2)
    used = decide(key(4096, 40), FAKE_GPU).entry
    assert [d.entry for d in alternatives] != [] and used not in [d.entry for d in alternatives]
    assert len(alternatives) == 2
