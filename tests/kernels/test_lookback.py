"""The look-back strategy's two ways to a chunk's carry, under the interpreter.

The interpreter runs programs one after another, so each predecessor has already
published its inclusive value; with inclusive values switched off every program
composes all its predecessors' aggregates instead, the path that concurrent
programs on a GPU take.
"""

import pytest

from rltriton_tune.call import ProblemKey
from rltriton_tune.kernels import lookback

from .cases import FLAG_SETS, check_outputs, expected, make_call


@pytest.mark.parametrize("algorithm", sorted(FLAG_SETS))
@pytest.mark.parametrize("layout", ["env", "time"])
def test_carry_from_aggregates_only(algorithm, layout, monkeypatch):
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", False)
    key = ProblemKey(algorithm, 3, 29, "float32", layout, FLAG_SETS[algorithm][-1],
                     a=4 if algorithm == "retrace" else 0)
    call, kwargs = make_call(key, seed=3)
    params = {"BLOCK_N": 2, "BLOCK_T": 4, "num_warps": 1}  # 8 chunks per row block
    outs = lookback.LookbackStrategy().prepare(key, params)(call)
    check_outputs(outs, expected(algorithm, kwargs), call, f"aggregates only {key.as_text()}")


@pytest.mark.parametrize("publish_inclusive", [True, False])
@pytest.mark.parametrize("window", [256, 32, 4])
@pytest.mark.parametrize("ticket_order", [False, True])
def test_many_chunks_one_row(publish_inclusive, window, ticket_order, monkeypatch):
    """50 chunks: with a window of 4 the aggregates are composed over 12 windows, with one
    of 32 over two; a window of 256 holds them all (no inclusive values published then).
    Chunks come from the program index or from tickets: the same results."""
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", publish_inclusive)
    monkeypatch.setattr(lookback, "LOOK_WINDOW", window)
    monkeypatch.setattr(lookback, "TICKET_ORDER", ticket_order)
    key = ProblemKey("gae", 1, 400, "float32", "env", "bootstrap+trunc")
    call, kwargs = make_call(key, seed=5)
    outs = lookback.LookbackStrategy().prepare(key, {"BLOCK_T": 8, "num_warps": 1})(call)
    check_outputs(outs, expected("gae", kwargs), call, "50 chunks")


@pytest.mark.parametrize("algorithm", ["vtrace", "eligibility_traces"])
def test_one_launcher_many_launches(algorithm, monkeypatch):
    """The words buffer is zeroed once: later launches tell their words from stale ones
    by the epoch, on new inputs each time."""
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", False)
    monkeypatch.setattr(lookback, "LOOK_WINDOW", 2)
    monkeypatch.setattr(lookback, "MAX_SPINS", 64)  # a stale flag taken as fresh: NaN, fast
    key = ProblemKey(algorithm, 5, 45, "float32", "env", FLAG_SETS[algorithm][-1])
    launcher = lookback.LookbackStrategy().prepare(key, {"BLOCK_N": 2, "BLOCK_T": 8,
                                                         "num_warps": 1})
    for seed in range(3):
        call, kwargs = make_call(key, seed=seed)
        check_outputs(launcher(call), expected(algorithm, kwargs), call, f"launch {seed}")


def test_tickets_buffer_is_kept_and_zeroed_once():
    import torch

    tickets = lookback.Tickets(7)
    first = tickets.buffer(torch.device("cpu"))
    assert first.dtype == torch.int64 and first.tolist() == [0] * 7
    first[0] = 12
    assert tickets.buffer(torch.device("cpu")) is first  # not re-zeroed: epochs continue


def test_every_triton_strategy_is_searched():
    import torch

    from rltriton_tune.kernels import STRATEGY_NAMES, strategies
    from rltriton_tune.tune.space import search_strategies

    assert all(s.searchable for s in strategies().values())
    assert set(search_strategies(torch.device("cuda"))) == set(STRATEGY_NAMES)


@pytest.mark.gpu
def test_one_launcher_on_two_streams_and_in_a_graph():
    """Launches on alternating streams are ordered (they share the words buffer), and a
    captured graph replays on it as well, each with the right results."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    device = torch.device("cuda")
    key = ProblemKey("gae", 16, 40000, "float32", "env", "trunc")
    launcher = lookback.LookbackStrategy().prepare(key, {"BLOCK_T": 256, "num_warps": 4})
    streams = [torch.cuda.Stream(device), torch.cuda.Stream(device)]
    for i in range(6):
        call, kwargs = make_call(key, seed=i, device=device)
        with torch.cuda.stream(streams[i % 2]):
            outs = launcher(call)
        torch.cuda.synchronize(device)
        check_outputs(outs, expected("gae", kwargs), call, f"launch {i}")
    call, kwargs = make_call(key, seed=9, device=device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = launcher(call)
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize(device)
        check_outputs(outs, expected("gae", kwargs), call, "graph replay")


@pytest.mark.parametrize("params", [{"BLOCK_N": 2, "num_warps": 4},
                                    {"BLOCK_N": 4, "num_warps": 16}])
def test_more_warps_than_rows_is_rejected(params):
    """1 < BLOCK_N < num_warps gave wrong carries on the H200 (see the module docstring)."""
    from rltriton_tune.strategy import InvalidConfig

    with pytest.raises(InvalidConfig, match="more warps than rows"):
        lookback.LookbackStrategy().validate(ProblemKey("gae", 16, 32768),
                                             dict(params, BLOCK_T=128))


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["gae", "eligibility_traces"])
@pytest.mark.parametrize("params", [
    {"BLOCK_N": 2, "BLOCK_T": 128, "num_warps": 2}, {"BLOCK_N": 2, "BLOCK_T": 1024, "num_warps": 2},
    {"BLOCK_N": 4, "BLOCK_T": 128, "num_warps": 4}, {"BLOCK_N": 4, "BLOCK_T": 512, "num_warps": 4},
    {"BLOCK_N": 8, "BLOCK_T": 64, "num_warps": 8}, {"BLOCK_N": 1, "BLOCK_T": 512, "num_warps": 16},
])
def test_valid_multi_warp_configs_stay_exact_over_many_launches(algorithm, params):
    """The edge of the valid region (as many warps as rows, or one row): the wrong carries
    of the rejected configs showed in a few elements of 10^5, so each config runs 40
    launches."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    device = torch.device("cuda")
    for key in (ProblemKey(algorithm, 16, 32768), ProblemKey(algorithm, 32, 2048)):
        launcher = lookback.LookbackStrategy().prepare(key, params)
        call, kwargs = make_call(key, seed=3, device=device)
        want = expected(algorithm, kwargs)
        for i in range(40):
            outs = launcher(call)
            torch.cuda.synchronize(device)
            check_outputs(outs, want, call, f"{key.as_text()} launch {i}")


def test_epoch_tags_wrap_around(monkeypatch):
    """Tags are the epoch's low 32 bits: launches on both sides of the wrap (epoch 2^30)
    tell fresh words from the previous launch's, whose tags sit just below 2^32."""
    monkeypatch.setattr(lookback, "PUBLISH_INCLUSIVE", False)
    monkeypatch.setattr(lookback, "LOOK_WINDOW", 2)
    monkeypatch.setattr(lookback, "MAX_SPINS", 64)  # a stale word taken as fresh: NaN, fast
    key = ProblemKey("gae", 3, 40, "float32", "env", "trunc")
    launcher = lookback.LookbackStrategy().prepare(key, {"BLOCK_N": 2, "BLOCK_T": 8,
                                                         "num_warps": 1})
    call, kwargs = make_call(key, seed=0)
    launcher(call)  # allocates the buffer (epoch 0)
    buffer = launcher.tickets.buffer(call.tensors["rewards"].device)
    programs = 2 * 5  # 2 row blocks x 5 chunks
    buffer[0] = programs * ((1 << 30) - 1)  # the next launch is epoch 2^30 - 1
    for seed in range(1, 4):
        call, kwargs = make_call(key, seed=seed)
        check_outputs(launcher(call), expected("gae", kwargs), call, f"launch {seed}")
    assert int(buffer[0]) == programs * ((1 << 30) + 2)


class FakeStream:
    """A CUDA stream stand-in that records which streams it was made to wait for."""

    def __init__(self, name):
        self.name, self.waited = name, []

    def wait_stream(self, other):
        self.waited.append(other.name)


@pytest.fixture
def fake_cuda(monkeypatch):
    """Tickets on a "cuda" device, with the stream and capture state set by the test
    (buffers are CPU tensors)."""
    import torch

    state = {"stream": FakeStream("a"), "capturing": False}
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: state["stream"])
    monkeypatch.setattr(lookback, "current_stream", lambda index: id(state["stream"]))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: state["capturing"])
    tickets = lookback.Tickets(5)
    tickets._zeros = lambda device: torch.zeros(5, dtype=torch.int64)
    return tickets, state, torch.device("cuda", 0)


def test_tickets_order_launches_on_different_streams(fake_cuda):
    """A launch on another stream than the previous one waits for that stream first; on
    the same stream it does not; the buffer is kept (its epochs continue)."""
    tickets, state, cuda = fake_cuda
    a, b = state["stream"], FakeStream("b")
    first = tickets.buffer(cuda)
    first[0] = 3
    assert tickets.buffer(cuda) is first and a.waited == []
    state["stream"] = b
    assert tickets.buffer(cuda) is first and b.waited == ["a"]
    state["stream"] = a
    assert tickets.buffer(cuda) is first and a.waited == ["b"]
    assert int(first[0]) == 3


def test_tickets_during_graph_capture(fake_cuda):
    """While a graph is captured: no wait on the previous stream (the graph replays
    later, in its own stream's order), the stream is not remembered, and a device
    without a buffer gets fresh zeros that are not kept."""
    tickets, state, cuda = fake_cuda
    state["capturing"] = True
    fresh = tickets.buffer(cuda)
    assert fresh.tolist() == [0] * 5
    fresh[0] = 9
    assert tickets.buffer(cuda) is not fresh and not tickets._buffers
    state["capturing"] = False
    kept = tickets.buffer(cuda)         # outside capture: allocated and kept
    assert kept is not fresh and tickets.buffer(cuda) is kept
    state["capturing"], state["stream"] = True, FakeStream("capture")
    assert tickets.buffer(cuda) is kept and state["stream"].waited == []
    state["capturing"], b = False, FakeStream("b")
    state["stream"] = b
    tickets.buffer(cuda)
    assert b.waited == ["a"]            # the captured stream was not recorded


def test_tickets_make_a_stream_object_only_when_the_stream_changes(fake_cuda, monkeypatch):
    """The per-call cost on an unchanged stream is one raw-handle read."""
    import torch

    tickets, state, cuda = fake_cuda
    made = []
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda device=None: made.append(1) or state["stream"])
    for _ in range(5):
        tickets.buffer(cuda)
    assert len(made) == 1
    state["stream"] = FakeStream("b")
    tickets.buffer(cuda)
    tickets.buffer(cuda)
    assert len(made) == 2 and state["stream"].waited == ["a"]
