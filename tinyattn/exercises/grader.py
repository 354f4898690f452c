"""Grade a solution file: every gradient element against tinyattn's backward and finite
differences, on every case, with a diagnosis of the known mistakes.

For each case the grader runs the file's ``forward`` (which must still compute what the
reference computes) and ``backward`` on a random upstream gradient, then compares each
returned gradient element by element with

* the gradient tinyattn's autograd computes for the reference (float64), and
* the central finite differences of the reference, one element at a time
  (:func:`tinyattn.gradcheck.central_difference`).

A gradient that disagrees is compared with the gradients each known :class:`Mistake` would
produce, then with general slips (a wrong shape, the opposite sign, a constant factor, zeros).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from ..autograd import grad, no_grad
from ..gradcheck import central_difference
from ..tensor import Tensor
from .exercise import Case, Exercise

RTOL, ATOL = 1e-6, 1e-9
"""An element passes when ``|yours − expected| <= ATOL + RTOL · |expected|`` (float64) ..."""
FD_RTOL, FD_ATOL = 1e-4, 1e-6
"""... and ``|yours − numeric| <= FD_ATOL + FD_RTOL · |numeric|`` (finite differences)."""


class ExerciseFileError(ValueError):
    """The file cannot be graded (missing, not an exercise file)."""


@dataclass
class Grade:
    """The outcome of grading one file: ``passed``, the report ``lines``, the diagnoses."""

    exercise: str
    passed: bool = True
    lines: list[str] = field(default_factory=list)
    diagnoses: list[str] = field(default_factory=list)

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
    for function in ("forward", "backward"):
        if not callable(getattr(module, function, None)):
            raise ExerciseFileError(f"exercise check: {str(path)!r} has no function "
                                    f"{function}()")
    exercise = exercises[name]
    grade = Grade(name)
    rng = np.random.default_rng(seed)
    cases = exercise.cases(rng)
    grade.lines.append(f"{name}: {len(cases)} cases; every element of every gradient against "
                       "tinyattn's backward and against finite differences")
    for number, case in enumerate(cases, 1):
        _grade_case(module, exercise, case, number, rng, grade)
    if grade.passed:
        grade.lines.append(f"PASSED: all {len(cases)} cases agree with tinyattn's backward and "
                           "with finite differences")
    else:
        grade.lines.append("FAILED")
    return grade


def _reference_gradients(exercise: Exercise, case: Case, d_out: np.ndarray) -> list:
    """The gradients tinyattn's autograd computes for the reference, given ``d_out``."""
    tensors = {n: Tensor(a.copy(), requires_grad=n in exercise.inputs)
               for n, a in case.arrays.items()}
    out = exercise.reference(**tensors, **case.options)
    found = grad(out, [tensors[n] for n in exercise.inputs], grad_outputs=Tensor(d_out))
    return [g.numpy() for g in found]


def _finite_differences(exercise: Exercise, case: Case, d_out: np.ndarray,
                        name: str) -> np.ndarray:
    """d(Σ d_out ⊙ reference)/d input, element by element."""
    def loss(x: np.ndarray) -> float:
        arrays = {n: Tensor(x if n == name else a) for n, a in case.arrays.items()}
        with no_grad():
            out = exercise.reference(**arrays, **case.options).numpy()
        return float(np.sum(np.where(d_out != 0, out * d_out, 0.0)))

    x = case.arrays[name]
    numeric = np.zeros(x.shape)
    for i in range(x.size):
        unit = np.zeros(x.size)
        unit[i] = 1.0
        numeric.flat[i] = central_difference(loss, x, unit.reshape(x.shape), 1e-6)
    return numeric


def _grade_case(module: ModuleType, exercise: Exercise, case: Case, number: int,
                rng: np.random.Generator, grade: Grade) -> None:
    label = f"case {number} ({case.label})"

    def fail(message: str) -> None:
        grade.passed = False
        grade.lines.append(f"  {label}: {message}")

    with no_grad():
        tensors = {n: Tensor(a) for n, a in case.arrays.items()}
        expected_out = exercise.reference(**tensors, **case.options).numpy()
    d_out = rng.uniform(0.5, 1.5) * np.ones(()) if expected_out.ndim == 0 else \
        rng.standard_normal(expected_out.shape)
    expected = _reference_gradients(exercise, case, d_out)
    arrays = {n: a.copy() for n, a in case.arrays.items()}
    try:
        out, cache = module.forward(**arrays, **case.options)
    except Exception as err:
        return fail(f"forward raised {type(err).__name__}: {err}")
    if np.shape(out) != expected_out.shape or not np.allclose(out, expected_out, RTOL, ATOL):
        return fail("forward no longer computes what the exercise defines (keep the given "
                    "forward, or change it without changing its output)")
    try:
        found = module.backward(d_out.copy(), cache)
    except NotImplementedError as err:
        return fail(f"backward is not written yet ({err})")
    except Exception as err:
        return fail(f"backward raised {type(err).__name__}: {err}")
    found = found if isinstance(found, (tuple, list)) else (found,)
    if len(found) != len(exercise.inputs):
        return fail(f"backward returned {len(found)} gradients; expected "
                    f"{len(exercise.inputs)}: d{', d'.join(exercise.inputs)}")
    mine = {n: np.asarray(g, dtype=np.float64) for n, g in zip(exercise.inputs, found)}
    wrong = []
    for name, reference in zip(exercise.inputs, expected):
        ok, message = _compare(name, mine[name], reference,
                               _finite_differences(exercise, case, d_out, name))
        grade.lines.append(f"  {label}: {message}")
        if not ok:
            wrong.append(name)
    if wrong:
        grade.passed = False
        for diagnosis in _diagnose(exercise, case, d_out, mine, dict(zip(exercise.inputs,
                                                                       expected)), wrong):
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


def _diagnose(exercise: Exercise, case: Case, d_out: np.ndarray, mine: dict[str, np.ndarray],
              expected: dict[str, np.ndarray], wrong: list[str]) -> list[str]:
    """What went wrong: a known mistake when the gradients match one, else general slips."""
    for mistake in exercise.mistakes:
        try:
            variant = mistake.gradients(case, d_out)
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

