"""codegen.generated_function: the function its source defines, and a traceback through
it shows its own lines even when another function was generated under the same name."""

from __future__ import annotations

import traceback

import pytest

from rltriton_tune.codegen import generated_function


def _failing(message: str):
    return generated_function(["def f(x):", f"    raise ValueError({message!r} + x)"], "f",
                              "<rltriton_tune test codegen>", {})


def test_the_traceback_shows_each_functions_own_source():
    first, second = _failing("first "), _failing("second ")
    for function, words in ((first, "first"), (second, "second")):
        with pytest.raises(ValueError) as caught:
            function("call")
        frames = traceback.extract_tb(caught.value.__traceback__)
        assert words in frames[-1].line


def test_same_source_keeps_its_name():
    a = generated_function(["def g():", "    return 1"], "g", "<rltriton_tune test same>", {})
    b = generated_function(["def g():", "    return 1"], "g", "<rltriton_tune test same>", {})
    assert a.__code__.co_filename == b.__code__.co_filename == "<rltriton_tune test same>"
    c = generated_function(["def g():", "    return 2"], "g", "<rltriton_tune test same>", {})
    assert c.__code__.co_filename != "<rltriton_tune test same>" and c() == 2
