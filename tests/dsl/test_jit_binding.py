"""How jit functions take their arguments (dsl/jit.py Parameters): keywords, defaults, *args,
arity errors, methods, nested jit calls, recursion, ndarray subclasses and numpy scalars."""
import threading
import warnings

import numpy as np
import pytest

import dsl

X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.full((2, 3), 0.5, np.float32)


def test_keyword_arguments_bind_to_the_signature():
    f = dsl.jit(lambda x, y: x - y * 2.0)
    want = X - Y * 2
    for got in (f(X, Y), f(X, y=Y), f(x=X, y=Y), f(y=Y, x=X)):
        np.testing.assert_array_equal(got, want)
    assert [v.name for v in f.lower(y=Y, x=X).graph.inputs] == ["x", "y"]


def test_defaults_apply_inside_the_function_and_given_ones_become_inputs():
    @dsl.jit
    def scaled(x, bias=None, scale=2.0):
        y = x * scale
        return y if bias is None else y + bias

    np.testing.assert_array_equal(scaled(X), X * 2)
    np.testing.assert_array_equal(scaled(X, bias=Y), X * 2 + Y)
    np.testing.assert_array_equal(scaled(X, Y), X * 2 + Y)
    assert [v.name for v in scaled.lower(X, bias=Y).graph.inputs] == ["x", "bias"]


def test_keyword_only_var_positional_and_var_keyword_parameters():
    @dsl.jit
    def f(x, *rest, y, **named):
        out = x + y
        for r in rest:
            out = out * r
        for key in sorted(named):
            out = out - named[key]
        return out

    np.testing.assert_array_equal(f(X, Y, Y, y=Y, b=X, a=Y), ((X + Y) * Y * Y) - Y - X)
    with pytest.raises(dsl.InputError, match=r"jit: f\(x, \*rest, y, \*\*named\): missing a required argument: 'y'"):
        f(X)


@pytest.mark.parametrize("call, message", [
    (lambda f: f(X), r"jit: f\(x, y\): missing a required argument: 'y'"),
    (lambda f: f(X, Y, Y), r"jit: f\(x, y\): too many positional arguments"),
    (lambda f: f(X, Y, z=Y), r"jit: f\(x, y\): got an unexpected keyword argument 'z'"),
    (lambda f: f(X, Y, y=Y), r"jit: f\(x, y\): multiple values for argument 'y'"),
])
def test_arity_errors_are_input_errors_naming_the_signature(call, message):
    def f(x, y):
        return x + y
    jitted = dsl.jit(f)
    with pytest.raises(dsl.InputError, match=message):
        call(jitted)
    with pytest.raises(dsl.InputError, match=message):
        call(jitted.lower)


@pytest.mark.parametrize("target", [42, "f", None.__class__, np.zeros(3)])
def test_jit_of_something_that_is_not_a_function(target):
    if callable(target):  # a class is callable: it traces, and its output is not a tensor
        with pytest.raises(dsl.DslError, match="expected tensors computed from its inputs"):
            dsl.jit(target)()
        return
    with pytest.raises(dsl.InputError, match=r"dsl.jit: .* is a (int|str|ndarray); expected a function of tensors"):
        dsl.jit(target)


def test_jit_on_a_method_is_refused_with_advice_and_staticmethods_work():
    class Layer:
        @dsl.jit
        def forward(self, x):
            return x * 2.0

        @staticmethod
        @dsl.jit
        def static(x):
            return x * 3.0

    with pytest.raises(dsl.InputError, match="forward is used as a method of Layer.*@staticmethod"):
        Layer().forward(X)
    np.testing.assert_array_equal(Layer().static(X), X * 3)
    np.testing.assert_array_equal(Layer.static(X), X * 3)


def test_a_jit_function_called_inside_another_is_inlined():
    inner = dsl.jit(lambda x: dsl.relu(x - 2.0))
    outer = dsl.jit(lambda x, y: inner(x) * y + inner(y))
    np.testing.assert_array_equal(outer(X, Y), np.maximum(X - 2, 0) * Y + np.maximum(Y - 2, 0))
    assert outer.executable(X, Y).kernel_count == 1  # one fused graph, not nested programs


def run_with_deadline(fn, seconds: float = 60):
    """fn() on a thread; fails (instead of hanging the suite) if it has not returned in time."""
    outcome = {}

    def work():
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 (handed to the test)
            outcome["error"] = exc

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "deadlock: the call did not return"
    return outcome


@pytest.mark.parametrize("how", ["traced", "concrete"])
def test_a_function_calling_itself_while_traced_is_a_dsl_error_not_a_deadlock(how):
    @dsl.jit
    def again(x):
        return again(x if how == "traced" else np.ones(3, np.float32)) + 1.0

    outcome = run_with_deadline(lambda: again(X))
    assert isinstance(outcome.get("error"), dsl.DslError), outcome
    assert "again calls itself while it is being traced (recursion)" in str(outcome["error"])
    outcome = run_with_deadline(lambda: again.lower(X))  # and lower() as well
    assert isinstance(outcome.get("error"), dsl.DslError), outcome


def test_ndarray_subclasses_are_read_as_arrays_and_masked_arrays_refused():
    f = dsl.jit(lambda x: x * 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # numpy's advice against np.matrix
        matrix = np.asmatrix(X)
    np.testing.assert_array_equal(f(matrix), X * 2)
    assert type(f(matrix)) is np.ndarray
    masked = np.ma.masked_array(X, mask=X > 2)
    with pytest.raises(dsl.InputError, match="argument 0 is a numpy masked array; ONNX tensors have no mask"):
        f(masked)
    with pytest.raises(dsl.InputError, match="numpy masked array"):
        dsl.relu(masked)
    prog = f.lower(X)
    np.testing.assert_array_equal(prog.run({"x": matrix})[0], X * 2)
    with pytest.raises(dsl.InputError, match="input 'x' is a numpy masked array"):
        prog.run({"x": masked})
    with pytest.raises(dsl.InputError, match="input 'x' is a numpy masked array"):
        prog.run({"x": masked}, engine="numpy")


def test_lower_takes_numpy_scalars_like_calls_do():
    f = dsl.jit(lambda x, s: x * s)
    three = np.float32(3)
    np.testing.assert_array_equal(f(X, three), X * 3)
    prog = f.lower(X, three)
    assert str(prog.input_types[1]) == "float[]"
    np.testing.assert_array_equal(prog.run([X, np.array(3, np.float32)])[0], X * 3)


def test_a_trace_that_waits_on_a_thread_calling_the_same_function_on_another_signature_finishes():
    # the lock is per signature: the worker's (4,) trace does not wait on the (2, 3) one in progress
    inner = {}

    @dsl.jit
    def f(a):
        if a.shape == (2, 3):
            worker = threading.Thread(target=lambda: inner.setdefault("out", f(np.ones(4, np.float32))))
            worker.start()
            worker.join(60)
        return a + 1.0

    outcome = run_with_deadline(lambda: f(np.ones((2, 3), np.float32)))
    np.testing.assert_array_equal(outcome["value"], np.full((2, 3), 2, np.float32))
    np.testing.assert_array_equal(inner["out"], np.full(4, 2, np.float32))


def test_object_arrays_are_refused_by_jit_calls():
    with pytest.raises(dsl.DslError, match="argument 0 is an object array holding non-strings"):
        dsl.jit(lambda a: a)(np.array([1, None], dtype=object))
