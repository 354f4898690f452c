"""Bring your own backward: the stubs (custom autograd Functions), the grader, one wrong
solution per diagnosis, the second-order check, the rule read from the ops, and the same
solution files under real PyTorch."""

import inspect as pyinspect
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from printed import printed_numbers

import tinyattn as ta
from tinyattn import inspect as ta_inspect
from tinyattn.cli import main
from tinyattn.exercises import EXERCISES, check
from tinyattn.exercises.rules import rule, single_op
from tinyattn.ops.loss import CrossEntropy
from tinyattn.ops.normalization import LayerNorm
from tinyattn.ops.softmax import Softmax

# the body of each stub's backward, written out with tensor operations (the stub's own
# first line, which reads ctx.saved_tensors, stays)
SOLUTIONS = {
    "softmax": """\
        return y * (grad_output - (grad_output * y).sum(dim=-1, keepdim=True))
""",
    "layer_norm": """\
        x_hat, rstd = normalize(x, ctx.eps)
        g = grad_output * weight
        dx = (g - g.mean(dim=-1, keepdim=True)
              - x_hat * (g * x_hat).mean(dim=-1, keepdim=True)) * rstd
        rows = tuple(range(x.dim() - 1))
        return dx, (grad_output * x_hat).sum(dim=rows), grad_output.sum(dim=rows), None
""",
    "attention_head": """\
        p = attention_weights(q, k, ctx.scale, ctx.causal)
        dv = p.transpose(-2, -1) @ grad_output
        dp = grad_output @ v.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))
        dq = ctx.scale * ds @ k
        dk = ctx.scale * ds.transpose(-2, -1) @ q
        return dq, dk, dv, None
""",
    "cross_entropy": """\
        probs = logits.softmax(dim=-1)
        onehot = torch.nn.functional.one_hot(targets, logits.shape[-1]).to(logits.dtype)
        return (probs - onehot) / logits.shape[0] * grad_output, None
""",
    "dropout_attention": """\
        weights = attention_weights(q, k, ctx.scale, ctx.causal)
        dv = (weights * keep / (1.0 - ctx.p)).transpose(-2, -1) @ grad_output
        dp = (grad_output @ v.transpose(-2, -1)) * keep / (1.0 - ctx.p)
        ds = weights * (dp - (dp * weights).sum(dim=-1, keepdim=True))
        dq = ctx.scale * ds @ k
        dk = ctx.scale * ds.transpose(-2, -1) @ q
        return dq, dk, dv, None, None, None
""",
}

IMPORT = ("import tinyattn as torch  # the same file runs under PyTorch: write `import torch` "
          "instead")


def run(capsys, *argv):
    status = main(["exercise", *argv])
    return status, capsys.readouterr().out


def solution_text(name, *replacements):
    """The stub of ``name`` with its backward written out, then each ``(old, new)`` applied."""
    text, count = re.subn(r"        raise NotImplementedError\(.*\)\n", lambda _: SOLUTIONS[name],
                          EXERCISES[name].stub)
    assert count == 1
    for old, new in replacements:
        assert old in text, f"{old!r} is not in the solution of {name}"
        text = text.replace(old, new)
    return text


def solution(tmp_path, name, *replacements):
    """:func:`solution_text` written to ``tmp_path/name.py``."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.py"
    path.write_text(solution_text(name, *replacements))
    return path


def test_list_names_every_exercise(capsys):
    status, out = run(capsys, "list")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()] == list(EXERCISES)
    assert set(EXERCISES) == {"softmax", "layer_norm", "attention_head", "cross_entropy",
                              "dropout_attention"}


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_each_stub_is_a_custom_function_whose_forward_is_the_exercise(name):
    exercise = EXERCISES[name]
    assert exercise.stub.count(IMPORT) == 1
    namespace = {"__name__": f"stub_{name}"}
    exec(compile(exercise.stub, f"{name}.py", "exec"), namespace)
    fn = namespace[exercise.function]
    assert issubclass(fn, ta.autograd.Function)
    assert list(pyinspect.signature(fn.forward).parameters)[1:] == list(exercise.arguments)
    assert set(exercise.inputs) <= set(exercise.arguments)
    for case in exercise.cases(np.random.default_rng(1)):
        values = case.values()
        out = fn.apply(*(values[a] for a in exercise.arguments))
        with ta.no_grad():
            expected = exercise.reference(**case.values(requires_grad=False))
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)
        with pytest.raises(NotImplementedError):
            out.backward(ta.ones_like(out))


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_fresh_stub_is_graded_as_not_written_and_the_solution_passes(name, tmp_path, capsys):
    status, out = run(capsys, "new", name, str(tmp_path))
    assert status == 0 and f"wrote {tmp_path / (name + '.py')}" in out
    status, out = run(capsys, "check", str(tmp_path / f"{name}.py"))
    assert status == 1 and "backward is not written yet" in out and out.rstrip().endswith(
        "FAILED")
    assert "the rule, " in out  # a failed report states the rule
    status, out = run(capsys, "check", str(solution(tmp_path / "solved", name)))
    assert status == 0, out
    assert out.rstrip().endswith("with finite differences") and "PASSED: all 3 cases" in out
    assert out.count("  ok") == 3 * len(EXERCISES[name].inputs)
    assert "the rule, " not in out
    function = EXERCISES[name].function
    assert f"second order: {function}.backward is differentiable" in out, out


def test_the_grade_of_a_solution_records_that_its_backward_is_differentiable(tmp_path):
    grade = check(solution(tmp_path, "softmax"))
    assert grade.passed and grade.differentiable is True and not grade.diagnoses


MISTAKES = [
    ("softmax", "        return y * (grad_output - (grad_output * y).sum(dim=-1, keepdim=True))",
     "        return y * grad_output", "the row-sum term is missing"),
    ("attention_head", "        dq = ctx.scale * ds @ k", "        dq = ds @ k",
     "the scale s = 1/√D is missing in dQ: "),
    ("attention_head", "        dk = ctx.scale * ds.transpose(-2, -1) @ q",
     "        dk = ds.transpose(-2, -1) @ q", "the scale s = 1/√D is missing in dK: "),
    ("attention_head", "        dk = ctx.scale * ds.transpose(-2, -1) @ q",
     "        dk = ctx.scale * ds @ q", "a transpose is missing in dK"),
    ("attention_head", "        dv = p.transpose(-2, -1) @ grad_output",
     "        dv = p @ grad_output", "a transpose is missing in dV"),
    ("attention_head", "        ds = p * (dp - (dp * p).sum(dim=-1, keepdim=True))",
     "        ds = p * dp", "the row-sum term of the softmax backward is missing"),
    ("dropout_attention",
     "        dp = (grad_output @ v.transpose(-2, -1)) * keep / (1.0 - ctx.p)",
     "        dp = grad_output @ v.transpose(-2, -1)",
     "the dropout mask is not reapplied in the backward: the gradient at the weights"),
    ("dropout_attention",
     "        dv = (weights * keep / (1.0 - ctx.p)).transpose(-2, -1) @ grad_output",
     "        dv = weights.transpose(-2, -1) @ grad_output", "dV is built from the dropped"),
    ("dropout_attention",
     "        dp = (grad_output @ v.transpose(-2, -1)) * keep / (1.0 - ctx.p)",
     "        dp = (grad_output @ v.transpose(-2, -1)) * keep",
     "without its 1 / (1 − p) scale"),
    ("cross_entropy", "        return (probs - onehot) / logits.shape[0] * grad_output, None",
     "        return (probs - onehot) * grad_output, None", "sum instead of mean"),
    ("cross_entropy", "        return (probs - onehot) / logits.shape[0] * grad_output, None",
     "        return (probs - onehot) / probs.numel() * grad_output, None",
     "mean over all N·C entries"),
    ("cross_entropy", "        return (probs - onehot) / logits.shape[0] * grad_output, None",
     "        return (probs - onehot) / logits.shape[0], None",
     "the upstream gradient grad_output is ignored"),
    ("layer_norm",
     "              - x_hat * (g * x_hat).mean(dim=-1, keepdim=True)) * rstd",
     "              ) * rstd", "the variance's dependence on x is missing"),
    ("layer_norm", """\
        dx = (g - g.mean(dim=-1, keepdim=True)
              - x_hat * (g * x_hat).mean(dim=-1, keepdim=True)) * rstd
""", "        dx = g * rstd\n", "the mean and variance were treated as constants"),
]


@pytest.mark.parametrize("name, old, new, diagnosis", MISTAKES,
                         ids=[f"{m[0]}: {m[3][:40]}" for m in MISTAKES])
def test_each_known_mistake_is_diagnosed(name, old, new, diagnosis, tmp_path, capsys):
    status, out = run(capsys, "check", str(solution(tmp_path, name, (old, new))))
    assert status == 1
    assert "FAIL: " in out and out.rstrip().endswith("FAILED")
    diagnoses = [line for line in out.splitlines() if "diagnosis: " in line]
    assert diagnoses and all(diagnosis in line for line in diagnoses), out
    assert "second order" not in out  # only a right backward is differentiated again


def test_both_places_of_the_dropout_mask_forgotten_is_its_own_diagnosis(tmp_path):
    path = solution(tmp_path, "dropout_attention",
                    ("        dp = (grad_output @ v.transpose(-2, -1)) * keep / (1.0 - ctx.p)",
                     "        dp = grad_output @ v.transpose(-2, -1)"),
                    ("        dv = (weights * keep / (1.0 - ctx.p)).transpose(-2, -1)",
                     "        dv = weights.transpose(-2, -1)"))
    grade = check(path)
    assert not grade.passed
    assert len(grade.diagnoses) == 1 and "neither on the way to P nor in dV" in grade.diagnoses[0]


def test_general_slips_are_diagnosed(tmp_path, capsys):
    path = solution(tmp_path, "layer_norm",
                    ("        dx = (g - g.mean", "        dx = 2.0 * (g - g.mean"))
    status, out = run(capsys, "check", str(path))
    assert status == 1
    # the slip doubles dx: each of the 3 cases is diagnosed with the whole factor 2
    assert printed_numbers(out, "diagnosis: dx is off by a constant factor") == [2.0] * 3
    path = solution(tmp_path, "softmax", ("        return y * (", "        return -y * ("))
    assert "diagnosis: dx has the opposite sign" in run(capsys, "check", str(path))[1]
    path = solution(tmp_path, "cross_entropy",
                    ("        return (probs - onehot)", "        return 0.0 * (probs - onehot)"))
    assert "diagnosis: dlogits is all zeros" in run(capsys, "check", str(path))[1]


def test_a_gradient_of_the_wrong_shape_is_refused_by_autograd_and_diagnosed(tmp_path, capsys):
    # summed over the features instead of the rows: (4,) for a weight of shape (6,)
    path = solution(tmp_path, "layer_norm", ("(grad_output * x_hat).sum(dim=rows)",
                                             "(grad_output * x_hat).sum(dim=-1)"))
    status, out = run(capsys, "check", str(path))
    assert status == 1
    assert "backward raised RuntimeError: function LayerNormBackward returned an invalid " \
           "gradient at index 1: got shape (4,)" in out, out
    assert "diagnosis: dweight must have the shape of weight, (6,); yours has (4,)" in out


def test_a_missing_none_for_a_non_tensor_argument_says_what_to_return(tmp_path, capsys):
    path = solution(tmp_path, "layer_norm", ("grad_output.sum(dim=rows), None",
                                             "grad_output.sum(dim=rows)"))
    status, out = run(capsys, "check", str(path))
    assert status == 1
    assert "incorrect number of gradients (expected 4, got 3) — return one gradient per " \
           "argument of forward, in order: dx, dweight, dbias, None" in out
    assert "diagnosis" not in out  # the three gradients it did return are right


NUMPY_SOFTMAX = """\
        y, g = y.numpy(), grad_output.numpy()
        return torch.from_numpy(y * (g - (g * y).sum(axis=-1, keepdims=True)))
"""


def test_a_backward_written_with_numpy_is_right_but_not_differentiable(tmp_path, capsys):
    path = solution(tmp_path, "softmax", (SOLUTIONS["softmax"], NUMPY_SOFTMAX))
    status, out = run(capsys, "check", str(path))
    assert status == 0 and "PASSED: all 3 cases" in out, out
    assert out.count("  ok") == 3
    line = next(line for line in out.splitlines() if line.startswith("second order"))
    assert line.startswith("second order (not graded): Softmax.backward cannot be "
                           "differentiated again (case 1): the dx it returns is not connected "
                           "to the graph: computed outside tensor operations (numpy"), line
    assert check(path).differentiable is False


def test_a_constant_computed_with_numpy_inside_the_backward_is_found(tmp_path):
    # the result still depends on grad_output, but y went through numpy: d(dx)/dx is lost
    path = solution(tmp_path, "softmax", (
        SOLUTIONS["softmax"],
        "        y = torch.from_numpy(y.numpy().copy())\n" + SOLUTIONS["softmax"]))
    grade = check(path)
    assert grade.passed and grade.differentiable is False
    assert "its result does not follow x as it should (second derivatives with respect to x " \
           "disagree with finite differences): part of it is computed outside tensor " \
           "operations" in str(grade)


def test_an_intermediate_saved_by_forward_is_named_as_the_cause(tmp_path):
    path = solution(tmp_path, "attention_head",
                    ("        ctx.scale, ctx.causal = scale, causal\n",
                     "        ctx.scale, ctx.causal = scale, causal\n        ctx.p = p\n"),
                    ("        p = attention_weights(q, k, ctx.scale, ctx.causal)\n",
                     "        p = ctx.p\n"))
    grade = check(path)
    assert grade.passed and grade.differentiable is False
    assert "does not follow q as it should" in str(grade)
    assert "forward kept ctx.p, a tensor it computed" in str(grade)


def test_a_once_differentiable_backward_is_reported(tmp_path):
    path = solution(tmp_path, "cross_entropy",
                    ("    def backward(ctx, grad_output):",
                     "    @once_differentiable\n    def backward(ctx, grad_output):"),
                    ('EXERCISE = "cross_entropy"',
                     'from tinyattn.autograd.function import once_differentiable\n\n'
                     'EXERCISE = "cross_entropy"'))
    grade = check(path)
    assert grade.passed and grade.differentiable is False
    assert "marked with @once_differentiable" in str(grade)


def test_the_grader_compares_with_finite_differences_not_only_with_tinyattn(tmp_path):
    # a solution that is right: every element agrees with both oracles, and each oracle's
    # error is printed; the finite differences are of the reference, computed here again
    grade = check(solution(tmp_path, "cross_entropy"))
    errors = [float(m) for m in re.findall(r"finite differences\| ([0-9.e+-]+)", str(grade))]
    assert len(errors) == 3 and all(0 < e < 1e-6 for e in errors)


@pytest.mark.parametrize("name, op", [("softmax", Softmax), ("layer_norm", LayerNorm),
                                      ("cross_entropy", CrossEntropy),
                                      ("attention_head", None), ("dropout_attention", None)])
def test_the_reference_of_an_exercise_is_one_op_or_a_composition(name, op):
    assert single_op(EXERCISES[name]) is op


def _independent_node(name):
    """A node of the exercise's op, built here from the public API (not the exercise)."""
    x = ta.randn(3, 5, dtype=ta.float64, requires_grad=True)
    if name == "softmax":
        return ta.softmax(x, dim=-1).grad_fn, ["x", "1"], "y"
    if name == "layer_norm":
        w = ta.randn(5, dtype=ta.float64, requires_grad=True)
        b = ta.randn(5, dtype=ta.float64, requires_grad=True)
        return ta.nn.functional.layer_norm(x, (5,), w, b).grad_fn, ["x", "weight", "bias"], "y"
    target = ta.tensor(np.array([0, 4, 2]))
    return ta.nn.functional.cross_entropy(x, target).grad_fn, ["logits"], "loss"


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "cross_entropy"])
def test_new_prints_the_rule_of_the_op_itself(name, tmp_path, capsys):
    status, out = run(capsys, "new", name, str(tmp_path))
    assert status == 0
    node, operands, output = _independent_node(name)
    op = node.fn
    assert f"the rule, from tinyattn's own op {op.__module__}.{op.__qualname__}:" in out
    assert pyinspect.cleandoc(op.__doc__).splitlines()[0].replace("``", "") in out
    for slot, input_name in enumerate(EXERCISES[name].inputs):
        formula = op.formula(node, slot, "d" + output, operands, output)
        assert f"    d{input_name} = {formula}\n" in out, out
    # the report of a file that fails states the same rule
    path = tmp_path / f"{name}.py"
    assert "\n".join(rule(EXERCISES[name])) in run(capsys, "check", str(path))[1]


@pytest.mark.parametrize("name", ["attention_head", "dropout_attention"])
def test_new_prints_what_explain_composes_for_a_composite_exercise(name, tmp_path, capsys):
    status, out = run(capsys, "new", name, str(tmp_path))
    assert status == 0
    exercise = EXERCISES[name]
    values = exercise.cases(np.random.default_rng(0))[0].values()
    names = {}
    out_tensor = exercise.reference(**values, names=names)
    labels = {"Q": values["q"], "K": values["k"], "V": values["v"], "O": out_tensor, **names}
    for letter in "QKV":
        explanation = ta_inspect.explain(labels[letter], out_tensor, labels)
        assert f"    {explanation.formula}\n" in out
        for step in explanation.steps:
            assert f"    {step}\n" in out
    assert "Softmax" in out and "MatMul" in out
    assert "\n".join(rule(exercise)) in out


def test_no_rule_is_written_out_in_the_exercises():
    """The rules printed come from the ops: none of their lines is in the exercises' code."""
    sources = "\n".join(path.read_text() for path in
                        (Path(ta.__file__).parent / "exercises").glob("*.py"))
    for exercise in EXERCISES.values():
        for line in rule(exercise):
            stripped = line.strip()
            if "=" in stripped and not stripped.startswith("the rule"):
                assert stripped not in sources, stripped


def test_files_that_cannot_be_graded(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("EXERCISE = 'softmax'\ndef forward(x:\n")
    status, out = run(capsys, "check", str(broken))
    assert status == 1 and "could not be imported: SyntaxError" in out
    unnamed = tmp_path / "unnamed.py"
    unnamed.write_text("def forward(x):\n    return x\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["exercise", "check", str(unnamed)])
    assert exit_info.value.code == 2
    assert "does not name an exercise" in capsys.readouterr().err
    classless = tmp_path / "classless.py"
    classless.write_text("EXERCISE = 'softmax'\n\ndef backward(ctx, g):\n    return g\n")
    with pytest.raises(SystemExit):
        main(["exercise", "check", str(classless)])
    assert "has no autograd.Function subclass: it needs class Softmax(torch.autograd." \
           "Function)" in capsys.readouterr().err
    two = tmp_path / "two.py"
    two.write_text(solution_text("softmax") + "\n\nclass Other(torch.autograd.Function):\n"
                   "    pass\n")
    assert check(two).passed  # the stub's class name decides
    renamed = tmp_path / "renamed.py"
    renamed.write_text(solution_text("softmax").replace("class Softmax(", "class Mine("))
    assert check(renamed).passed  # the one Function of the file
    with pytest.raises(SystemExit):
        main(["exercise", "new", "softmaxx", str(tmp_path)])
    assert "no exercise named 'softmaxx'" in capsys.readouterr().err
    (tmp_path / "softmax.py").write_text("mine")
    with pytest.raises(SystemExit):
        main(["exercise", "new", "softmax", str(tmp_path)])
    assert "exists already" in capsys.readouterr().err
    assert main(["exercise", "new", "softmax", str(tmp_path), "--force"]) == 0
    assert "NotImplementedError" in (tmp_path / "softmax.py").read_text()


def test_a_file_that_imports_real_torch_is_told_to_keep_tinyattn(tmp_path, capsys):
    pytest.importorskip("torch")
    path = tmp_path / "softmax.py"
    path.write_text(solution_text("softmax", (IMPORT, "import torch")))
    with pytest.raises(SystemExit):
        main(["exercise", "check", str(path)])
    assert "is a torch.autograd.Function: the grader runs the file with tinyattn" in \
        capsys.readouterr().err


def _torch_values(torch, case):
    """The case's arguments as torch tensors (float64 inputs that require grad)."""
    values = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True)
              for n, a in case.inputs.items()}
    values.update({n: torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v
                   for n, v in case.options.items()})
    return values


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_same_solution_file_runs_under_pytorch(name, tmp_path):
    """The solution file, with ``torch`` bound to real PyTorch: its gradients are those of
    PyTorch's own autograd through the same forward, and its backward differentiates again."""
    torch = pytest.importorskip("torch")
    exercise = EXERCISES[name]
    text = solution(tmp_path, name).read_text().replace(IMPORT, "import torch")
    namespace = {"__name__": f"torch_solution_{name}"}
    exec(compile(text, f"{name}.py", "exec"), namespace)
    fn = namespace[exercise.function]
    assert issubclass(fn, torch.autograd.Function)
    generator = torch.Generator().manual_seed(0)
    for number, case in enumerate(exercise.cases(np.random.default_rng(2))):
        values = _torch_values(torch, case)
        inputs = [values[n] for n in exercise.inputs]
        out = fn.apply(*(values[a] for a in exercise.arguments))
        dy = torch.randn(out.shape, dtype=torch.float64, generator=generator)
        found = torch.autograd.grad(out, inputs, dy)
        # PyTorch's autograd through the forward itself (a context that keeps nothing)
        fresh = _torch_values(torch, case)
        ctx = SimpleNamespace(save_for_backward=lambda *tensors: None)
        direct = fn.forward(ctx, *(fresh[a] for a in exercise.arguments))
        expected = torch.autograd.grad(direct, [fresh[n] for n in exercise.inputs], dy)
        for mine, right in zip(found, expected):
            torch.testing.assert_close(mine, right, rtol=1e-10, atol=1e-12)
        if number == 0:
            others = {a: values[a] for a in exercise.arguments if a not in exercise.inputs}

            def apply(*tensors, others=others):
                given = dict(zip(exercise.inputs, tensors), **others)
                return fn.apply(*(given[a] for a in exercise.arguments))

            assert torch.autograd.gradgradcheck(apply, tuple(t.detach().requires_grad_()
                                                             for t in inputs))
