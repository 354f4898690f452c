"""Grade a solution file: the learner's ``autograd.Function``, every gradient element against
tinyattn's backward and finite differences, on every case, with a diagnosis of the known
mistakes and a second-order check.

The grader loads the file, finds its ``autograd.Function`` subclass and, for each case, runs
``Fn.apply(*arguments)`` on float64 tensors that require grad (its output must still be what
the exercise defines), and takes the gradients through autograd,
``autograd.grad(out, inputs, dy)`` for a random upstream gradient ``dy``: that is where the
learner's ``backward`` runs. Each gradient is compared element by element with

* the gradient tinyattn's autograd computes for the exercise's reference (the same
  computation with tinyattn ops), and
* the central finite differences of the reference, one element at a time
  (:func:`tinyattn.gradcheck.central_difference`).

A gradient that disagrees is compared with the gradients each known :class:`Mistake` would
produce, then with general slips (a wrong shape, the opposite sign, a constant factor, zeros),
and the report states the rule, read from tinyattn's own ops (:mod:`.rules`).

When every gradient is right, the learner's backward is differentiated in turn
(:func:`tinyattn.gradgradcheck` of ``Fn.apply``): a backward written in tensor ops is
differentiable (``create_graph=True``), one that goes through numpy is not. The outcome is an
extra line of the report, with the reason; it does not change the grade.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..autograd import Function, enable_grad, grad, no_grad
from ..gradcheck import GradcheckError, central_difference, gradgradcheck
from ..tensor import Tensor
from .exercise import Case, Exercise, Values, reference_gradients
from .rules import rule

RTOL, ATOL = 1e-6, 1e-9
"""An element passes when ``|yours − expected| <= ATOL + RTOL · |expected|`` (float64) ..."""
FD_RTOL, FD_ATOL = 1e-4, 1e-6
"""... and ``|yours − numeric| <= FD_ATOL + FD_RTOL · |numeric|`` (finite differences)."""


class ExerciseFileError(ValueError):
    """The file cannot be graded (missing, not an exercise file)."""


@dataclass
class Grade:
    """The outcome of grading one file: ``passed``, the report ``lines``, the diagnoses, and
    whether the backward is itself differentiable (None when that was not checked)."""

    exercise: str
    passed: bool = True
    lines: list[str] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)
    differentiable: bool | None = None

    def __str__(self) -> str:
        return "\n".join(self.lines)


def _load(path: Path) -> ModuleType:
    """Import the file at ``path`` as a module of its own (not kept in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(f"tinyattn_solution_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError("not a Python source file (its name must end in .py)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def function_class(module: ModuleType, exercise: Exercise, path: str) -> type[Function]:
    """The ``autograd.Function`` subclass the file defines (the stub's name first)."""
    defined = [value for value in vars(module).values()
               if isinstance(value, type) and value.__module__ == module.__name__]
    found = [cls for cls in defined if issubclass(cls, Function)]
    named = [cls for cls in found if cls.__name__ == exercise.function]
    if named or len(found) == 1:
        return (named or found)[0]
    if found:
        raise ExerciseFileError(
            f"exercise check: {path!r} defines several autograd.Function classes "
            f"({', '.join(cls.__name__ for cls in found)}); name yours {exercise.function}")
    if any(cls.__name__ == "Function" and cls.__module__.startswith("torch")
           for value in defined for cls in value.__mro__):
        raise ExerciseFileError(
            f"exercise check: the Function in {path!r} is a torch.autograd.Function: the "
            "grader runs the file with tinyattn, so keep `import tinyattn as torch` (the file "
            "runs under PyTorch unchanged with `import torch`)")
    raise ExerciseFileError(
        f"exercise check: {path!r} has no autograd.Function subclass: it needs "
        f"class {exercise.function}(torch.autograd.Function) with forward and backward "
        "(tinyattn exercise new writes it)")


def check_file(path: str | os.PathLike, exercises: dict[str, Exercise], seed: int = 0) -> Grade:
    """Grade the solution in ``path`` (its ``EXERCISE`` names the exercise)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"exercise check: no file at {str(path)!r}")
    try:
        module = _load(Path(path))
    except Exception as err:  # the learner's file: a syntax error, an import that fails ...
        grade = Grade("?", passed=False)
        grade.lines.append(f"FAILED: {path} could not be imported: {type(err).__name__}: {err}")
        return grade
    name = getattr(module, "EXERCISE", None)
    if name not in exercises:
        raise ExerciseFileError(
            f"exercise check: {str(path)!r} does not name an exercise: it needs a line "
            f"EXERCISE = '<name>' with one of {sorted(exercises)} (tinyattn exercise new "
            "writes it)")
    exercise = exercises[name]
    fn = function_class(module, exercise, str(path))
    grade = Grade(name)
    rng = np.random.default_rng(seed)
    cases = exercise.cases(rng)
    grade.lines.append(f"{name}: {len(cases)} cases of {fn.__name__}.apply on float64 tensors; "
                       "every element of every gradient against tinyattn's backward and "
                       "against finite differences")
    upstream = []
    for number, case in enumerate(cases, 1):
        upstream.append(_grade_case(fn, exercise, case, number, rng, grade))
    if grade.passed:
        grade.lines.append(_second_order(fn, exercise, cases, upstream, seed, grade))
        grade.lines.append(f"PASSED: all {len(cases)} cases agree with tinyattn's backward and "
                           "with finite differences")
    else:
        grade.lines += rule(exercise, seed)
        grade.lines.append("FAILED")
    return grade


def _arguments(exercise: Exercise, values: Values) -> list[Any]:
    return [values[name] for name in exercise.arguments]


def _finite_differences(exercise: Exercise, case: Case, d_out: np.ndarray,
                        name: str) -> np.ndarray:
    """d(Σ d_out ⊙ reference)/d input, element by element."""
    values = case.values(requires_grad=False)

    def loss(x: np.ndarray) -> float:
        with no_grad():
            out = exercise.reference(**{**values, name: Tensor(x)}).numpy()
        return float(np.sum(np.where(d_out != 0, out * d_out, 0.0)))

    x = case.inputs[name]
    numeric = np.zeros(x.shape)
    for i in range(x.size):
        unit = np.zeros(x.size)
        unit[i] = 1.0
        numeric.flat[i] = central_difference(loss, x, unit.reshape(x.shape), 1e-6)
    return numeric


def _recording(fn: type[Function], returned: list) -> type[Function]:
    """``fn`` with its backward's raw return value kept in ``returned`` (before autograd sums
    a broadcast gradient to its input's shape or refuses one of a wrong shape)."""
    def backward(ctx: Any, *grads: Any) -> Any:
        result = fn.backward(ctx, *grads)
        returned.append(result)
        return result

    return type(fn.__name__, (fn,), {"backward": staticmethod(backward),
                                     "__module__": fn.__module__})


def _grade_case(fn: type[Function], exercise: Exercise, case: Case, number: int,
                rng: np.random.Generator, grade: Grade) -> np.ndarray | None:
    """Grade one case; returns the upstream gradient it used (None if the forward failed)."""
    label = f"case {number} ({case.label})"

    def fail(message: str) -> None:
        grade.passed = False
        grade.lines.append(f"  {label}: {message}")

    with no_grad():
        expected_out = exercise.reference(**case.values(requires_grad=False)).numpy()
    d_out = rng.uniform(0.5, 1.5) * np.ones(()) if expected_out.ndim == 0 else \
        rng.standard_normal(expected_out.shape)
    expected = reference_gradients(exercise.reference, case.values(), Tensor(d_out),
                                   exercise.inputs)
    values = case.values()
    returned: list = []
    try:
        out = _recording(fn, returned).apply(*_arguments(exercise, values))
    except Exception as err:
        fail(f"forward raised {type(err).__name__}: {err}")
        return None
    if not isinstance(out, Tensor) or out.shape != expected_out.shape or not np.allclose(
            out.numpy(), expected_out, RTOL, ATOL):
        fail("forward no longer computes what the exercise defines (keep the given forward, "
             "or change it without changing its output)")
        return None
    try:
        found = grad(out, [values[n] for n in exercise.inputs], Tensor(d_out.copy()),
                     allow_unused=True)
    except NotImplementedError as err:
        fail(f"backward is not written yet ({err})")
        return d_out
    except Exception as err:
        fail(f"backward raised {type(err).__name__}: {err}{_count_hint(exercise, err)}")
        raw = _raw_gradients(exercise, returned)
        if raw is not None:  # the gradients it returned, of a shape autograd refused
            right = {n: g.numpy() for n, g in expected.items()}
            wrong = [n for n in exercise.inputs if raw[n].shape != right[n].shape
                     or not np.allclose(raw[n], right[n], RTOL, ATOL)]
            if wrong:
                _report_diagnoses(exercise, values, d_out, raw, expected, wrong, grade)
        return d_out
    missing = [n for n, g in zip(exercise.inputs, found) if g is None]
    if missing:
        fail(f"backward returned None for d{', d'.join(missing)}: return one gradient per "
             f"argument of forward, in order ({', '.join(exercise.arguments)})")
        return d_out
    mine = {n: g.numpy().astype(np.float64) for n, g in zip(exercise.inputs, found)}
    wrong = []
    for name in exercise.inputs:
        ok, message = _compare(name, mine[name], expected[name].numpy(),
                               _finite_differences(exercise, case, d_out, name))
        grade.lines.append(f"  {label}: {message}")
        if not ok:
            wrong.append(name)
    if wrong:
        grade.passed = False
        _report_diagnoses(exercise, values, d_out, mine, expected, wrong, grade)
    return d_out


def _count_hint(exercise: Exercise, err: Exception) -> str:
    """What to return, when autograd refused the number of gradients."""
    if "incorrect number of gradients" not in str(err):
        return ""
    return (f" — return one gradient per argument of forward, in order: "
            f"{', '.join('d' + a if a in exercise.inputs else 'None' for a in exercise.arguments)}")


def _raw_gradients(exercise: Exercise, returned: list) -> dict[str, np.ndarray] | None:
    """The gradients the backward returned, by input name, as arrays (None when it returned
    no tensors where they belong)."""
    if not returned:
        return None
    result = returned[-1] if isinstance(returned[-1], tuple) else (returned[-1],)
    raw = {}
    for name, value in zip(exercise.arguments, result):
        if name in exercise.inputs:
            if not isinstance(value, Tensor):
                return None
            raw[name] = value.numpy().astype(np.float64)
    return raw if len(raw) == len(exercise.inputs) else None


def _report_diagnoses(exercise: Exercise, values: Values, d_out: np.ndarray,
                      mine: dict[str, np.ndarray], expected: dict[str, Tensor],
                      wrong: list[str], grade: Grade) -> None:
    """Add the diagnoses of the wrong gradients to the report (each once in the grade's
    list)."""
    right = {n: g.numpy() for n, g in expected.items()}
    for diagnosis in _diagnose(exercise, values, d_out, mine, right, wrong):
        if diagnosis not in grade.diagnoses:
            grade.diagnoses.append(diagnosis)
        grade.lines.append(f"    diagnosis: {diagnosis}")


def _compare(name: str, mine: np.ndarray, expected: np.ndarray,
             numeric: np.ndarray) -> tuple[bool, str]:
    if mine.shape != expected.shape:
        return False, f"d{name} has shape {mine.shape}, expected {expected.shape}  FAIL"
    if not np.all(np.isfinite(mine)):
        return False, f"d{name} has non-finite values (nan or inf)  FAIL"
    error = np.abs(mine - expected)
    against_fd = float(np.max(np.abs(mine - numeric), initial=0.0))
    bad = (error > ATOL + RTOL * np.abs(expected)) | (
        np.abs(mine - numeric) > FD_ATOL + FD_RTOL * np.abs(numeric))
    summary = (f"d{name} {mine.shape}: max |yours − tinyattn| {float(error.max(initial=0)):.1e},"
               f" max |yours − finite differences| {against_fd:.1e}")
    if not bad.any():
        return True, summary + "  ok"
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(error)), error.shape))
    return False, (f"{summary}  FAIL: {int(bad.sum())} of {bad.size} elements differ; at "
                   f"{worst} yours {mine[worst]:.6g}, expected {expected[worst]:.6g}")


def _diagnose(exercise: Exercise, values: Values, d_out: np.ndarray,
              mine: dict[str, np.ndarray], expected: dict[str, np.ndarray],
              wrong: list[str]) -> list[str]:
    """What went wrong: a known mistake when the gradients match one, else general slips."""
    for mistake in exercise.mistakes:
        try:
            with no_grad():
                variant = {n: g.numpy() for n, g in
                           mistake.gradients(values, Tensor(d_out.copy())).items()}
        except ValueError:  # this slip cannot happen at these shapes (a product misaligns)
            continue
        if all(mine[n].shape == variant[n].shape and np.allclose(mine[n], variant[n], 1e-6, 1e-9)
               for n in exercise.inputs):
            return [mistake.diagnosis]
    found = []
    for name in wrong:
        yours, right = mine[name], expected[name]
        if yours.shape != right.shape:
            hint = " (a missing transpose?)" if sorted(yours.shape) == sorted(right.shape) else ""
            found.append(f"d{name} must have the shape of {name}, {right.shape}; yours has "
                         f"{yours.shape}{hint}")
        elif not np.any(yours):
            found.append(f"d{name} is all zeros")
        elif np.allclose(yours, -right, 1e-6, 1e-9):
            found.append(f"d{name} has the opposite sign")
        else:
            factor = float(np.sum(yours * right) / max(float(np.sum(right * right)), 1e-300))
            if np.allclose(yours, factor * right, 1e-6, 1e-9):
                found.append(f"d{name} is off by a constant factor {factor:.6g} (a missing "
                             "scale? a mean where a sum belongs, or the reverse?)")
    return found or [f"d{', d'.join(wrong)} differ(s) from the chain rule: compare your steps "
                     "with the forward, one operation at a time"]


def _second_order(fn: type[Function], exercise: Exercise, cases: list[Case],
                  upstream: list[np.ndarray | None], seed: int, grade: Grade) -> str:
    """Whether the learner's backward can itself be differentiated (gradgradcheck of
    ``fn.apply`` on every case), as one line of the report."""
    for number, (case, d_out) in enumerate(zip(cases, upstream), 1):
        reason = _not_differentiable(fn, exercise, case, d_out, seed)
        if reason is not None:
            grade.differentiable = False
            return (f"second order (not graded): {fn.__name__}.backward cannot be "
                    f"differentiated again (case {number}): {reason}")
    grade.differentiable = True
    return (f"second order: {fn.__name__}.backward is differentiable: gradgradcheck of "
            f"{fn.__name__}.apply agrees with finite differences on all {len(cases)} cases")


_OUTSIDE = "outside tensor operations (numpy, .numpy(), from_numpy, .detach(), tensor(...))"


def _not_differentiable(fn: type[Function], exercise: Exercise, case: Case, d_out: np.ndarray,
                        seed: int) -> str | None:
    """Why ``fn``'s backward is not differentiable on ``case`` (None when it is)."""
    values = case.values()
    arguments = _arguments(exercise, values)
    inputs = [values[n] for n in exercise.inputs]
    cotangent = Tensor(d_out.copy(), requires_grad=True)
    try:
        with enable_grad():
            out = fn.apply(*arguments)
            kept = _saved_intermediates(out.grad_fn, arguments)
            found = grad(out, inputs, cotangent, create_graph=True, allow_unused=True)
    except Exception as err:
        return f"backward with create_graph=True raised {type(err).__name__}: {err}"
    detached = [n for n, g in zip(exercise.inputs, found) if g is None or not g.requires_grad]
    if detached:
        return (f"the d{', d'.join(detached)} it returns {'is' if len(detached) == 1 else 'are'} "
                f"not connected to the graph: computed {_OUTSIDE}, which autograd cannot "
                "follow. Written with tensor operations, a backward is differentiable")
    try:
        gradgradcheck(lambda *args: fn.apply(*args), arguments, grad_outputs=[cotangent],
                      seed=seed)
    except GradcheckError as err:
        return _second_derivative_reason(exercise, str(err), kept)
    except Exception as err:  # e.g. @once_differentiable: differentiating it again refuses
        return f"differentiating it raised {type(err).__name__}: {err}"
    return None


def _saved_intermediates(ctx: Any, arguments: list[Any]) -> list[str]:
    """The tensors ``forward`` kept for backward that are neither its inputs nor its outputs
    (``saved_tensors[i]``, ``ctx.name``): computed while nothing was recorded."""
    if ctx is None:
        return []
    found = []
    # the context's own record of what was saved: an output of the op is kept in another form
    for i, saved in enumerate(getattr(ctx, "_saved", ())):
        if isinstance(saved, Tensor) and not any(saved is a for a in arguments):
            found.append(f"saved_tensors[{i}]")
    for name, value in vars(ctx).items():
        if isinstance(value, Tensor) and not any(value is a for a in arguments):
            found.append(f"ctx.{name}")
    return found


def _second_derivative_reason(exercise: Exercise, report: str, kept: list[str]) -> str:
    """Which derivative of the backward's result is wrong, from a gradcheck report, and the
    likely cause."""
    index = re.search(r"gradient of input (\d+)", report)
    count = len(exercise.arguments)
    if index is None:
        return f"its second derivatives disagree with finite differences ({report})"
    i = int(index.group(1))
    if i >= count:
        return ("its result does not follow grad_output as it should (second derivatives with "
                f"respect to grad_output disagree with finite differences): part of it uses "
                f"grad_output {_OUTSIDE}, a constant to autograd")
    name = exercise.arguments[i]
    wrong = (f"its result does not follow {name} as it should (second derivatives with respect "
             f"to {name} disagree with finite differences): ")
    if kept:
        return wrong + (f"forward kept {', '.join(kept)}, a tensor it computed; forward runs "
                        "without recording, so to autograd that tensor is a constant with no "
                        "link to the inputs. Save the inputs (or outputs) and recompute it in "
                        "backward")
    return wrong + f"part of it is computed {_OUTSIDE}, a constant to autograd"
