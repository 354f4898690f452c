"""Bring your own backward: write a backward pass by hand, as a PyTorch custom
``autograd.Function``, and have it graded.

``tinyattn exercise list`` names the exercises, ``tinyattn exercise new NAME DIR`` writes a
stub — a class ``Fn(torch.autograd.Function)`` whose ``forward(ctx, ...)`` is given, on
tensors, and whose ``backward(ctx, grad_output)`` is left to write with tensor operations; the
file starts with ``import tinyattn as torch`` and runs unchanged with ``import torch`` — and
``tinyattn exercise check FILE`` grades it: ``Fn.apply`` on float64 tensors, every element of
every gradient (taken through autograd) against tinyattn's own backward and against finite
differences, on several shapes (a causal mask included where it matters), with a diagnosis of
the usual mistakes — a missing row-sum term in the softmax backward, a missing scale in dQ or
dK, a missing transpose, a dropout mask not reapplied, a mean taken for a sum — and the rule
itself, read from tinyattn's ops. A right backward is then differentiated in turn (a
second-order check): written in tensor ops it is differentiable, through numpy it is not.

=====================  ==============================================================
file                   exercise
=====================  ==============================================================
``softmax.py``         dx of a row softmax
``layer_norm.py``      dx, dweight, dbias of a layer norm
``attention_head.py``  dQ, dK, dV of one attention head (with and without a causal mask)
``cross_entropy.py``   d logits of the mean cross-entropy
``dropout_attention.py``  dQ, dK, dV with inverted dropout on the attention weights
``exercise.py``        what an exercise is; ``grader.py`` how a file is graded;
                       ``rules.py`` the rule, read from the ops
=====================  ==============================================================
"""

from __future__ import annotations

import os
from pathlib import Path

from . import attention_head, cross_entropy, dropout_attention, layer_norm, softmax
from .exercise import Case, Exercise, Mistake
from .grader import ExerciseFileError, Grade, check_file
from .rules import rule

EXERCISES: dict[str, Exercise] = {exercise.name: exercise for exercise in map(
    Exercise.from_module, (softmax, layer_norm, attention_head, cross_entropy, dropout_attention))}


def write_stub(name: str, directory: str | os.PathLike, overwrite: bool = False) -> Path:
    """Write the stub of exercise ``name`` to ``directory/name.py`` and return its path.

    Examples
    --------
    >>> import tempfile
    >>> path = write_stub("softmax", tempfile.mkdtemp())
    >>> path.name, "raise NotImplementedError" in path.read_text()
    ('softmax.py', True)
    """
    if name not in EXERCISES:
        raise KeyError(f"exercise new: no exercise named {name!r}; the exercises are "
                       f"{sorted(EXERCISES)}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if path.exists() and not overwrite:
        raise FileExistsError(f"exercise new: {path} exists already (pass --force to "
                              "overwrite it)")
    path.write_text(EXERCISES[name].stub)
    return path


def instructions(name: str) -> str:
    """The rule exercise ``name`` asks for, read from tinyattn's ops (what ``tinyattn exercise
    new`` prints after writing the stub; see :mod:`tinyattn.exercises.rules`)."""
    return "\n".join(rule(EXERCISES[name]))


def check(path: str | os.PathLike, seed: int = 0) -> Grade:
    """Grade the solution file at ``path`` (see :mod:`tinyattn.exercises.grader`)."""
    return check_file(path, EXERCISES, seed)


__all__ = ["EXERCISES", "Case", "Exercise", "ExerciseFileError", "Grade", "Mistake", "check",
           "instructions", "write_stub"]
