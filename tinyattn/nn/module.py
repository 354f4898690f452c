"""``Module`` and ``Parameter``: parameters, buffers, submodules, hooks and state dicts.

A module keeps its parameters, buffers and submodules in three registries (``_parameters``,
``_buffers``, ``_modules``), as ``torch.nn.Module`` does: assigning a ``Parameter`` or a
``Module`` to an attribute registers it, reading the attribute looks it up there. Everything
is named with dots as in PyTorch (``blocks.0.attn.in_proj_weight``), so state dicts move
between the two without renaming.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ..tensor import Tensor, _to_array, float32, float64
from .checkpoint import save_arrays


class Parameter(Tensor):
    """A leaf tensor that a ``Module`` registers as one of its parameters (requires grad).

    ``Parameter(tensor)`` shares the tensor's memory, as in PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w = ta.nn.Parameter(ta.zeros(2))
    >>> w.requires_grad, w.is_leaf
    (True, True)
    """

    def __init__(self, data: Any = None, requires_grad: bool = True):
        if data is None:
            data = np.empty(0, dtype=float32)
        super().__init__(_to_array(data), requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(NamedTuple):
    """The keys ``load_state_dict`` could not match, as PyTorch's ``_IncompatibleKeys``."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")


class InvalidNameError(KeyError, ValueError):
    """A parameter, buffer or submodule name that cannot be registered.

    A ``KeyError`` as in PyTorch, and a ``ValueError`` like tinyattn's other bad-input errors.
    """

    __str__ = Exception.__str__  # KeyError would quote the message


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods; ``remove()`` unregisters the hook.

    Also a context manager that removes the hook on exit.
    """

    def __init__(self, hooks: list[tuple[Callable, bool]], entry: tuple[Callable, bool]):
        self._hooks, self._entry = hooks, entry

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        for index, entry in enumerate(self._hooks):
            if entry is self._entry:
                del self._hooks[index]
                return

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.remove()


def check_device(owner: str, device: Any) -> None:
    """Accept ``None``, ``"cpu"`` (``"cpu:0"``) or a device object of type cpu; refuse others.

    Examples
    --------
    >>> check_device("Linear", "cpu")
    >>> check_device("Linear", "cuda")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Linear: tinyattn runs on the CPU only; device 'cuda' is not available ...
    """
    if device is None:
        return
    kind = device if isinstance(device, str) else getattr(device, "type", None)
    if isinstance(kind, str) and kind.split(":")[0] == "cpu":
        return
    raise ValueError(f"{owner}: tinyattn runs on the CPU only; device {device!r} is not "
                     "available (use 'cpu' or leave the device unset)")


def float_dtype(owner: str, dtype: Any) -> np.dtype:
    """``dtype`` as float32 or float64 (None gives float32), or a TypeError naming ``owner``.

    Examples
    --------
    >>> float_dtype("Linear", None), float_dtype("Linear", "float64")
    (dtype('float32'), dtype('float64'))
    """
    if dtype is None:
        return float32
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{owner}: expected a dtype such as ta.float32 or ta.float64, got "
                        f"{dtype!r}") from None
    if target.kind != "f":
        raise TypeError(f"{owner}: expected a float dtype, got {target}")
    if target not in (float32, float64):
        raise TypeError(f"{owner}: tinyattn computes in float32 and float64 only, got {target}")
    return target


def _check_name(owner: str, kind: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{owner}: {kind} name should be a string, got {type(name).__name__}")
    if "." in name:
        raise InvalidNameError(f"{owner}: {kind} name can't contain '.', got {name!r} (dots "
                               "separate submodules in state dict keys)")
    if name == "":
        raise InvalidNameError(f"{owner}: {kind} name can't be empty")


class Module:
    """Base class of every layer: subclasses set parameters/submodules in ``__init__`` and
    define ``forward``; calling the module runs its hooks and ``forward``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> class Scale(ta.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.weight = ta.nn.Parameter(ta.ones(3))
    ...         self.register_buffer("offset", ta.zeros(3))
    ...     def forward(self, x):
    ...         return x * self.weight + self.offset
    >>> scale = Scale()
    >>> [name for name, _ in scale.named_parameters()], list(scale.state_dict())
    (['weight'], ['weight', 'offset'])
    """

    training: bool

    def __init__(self) -> None:
        setter = object.__setattr__
        setter(self, "training", True)
        setter(self, "_parameters", {})
        setter(self, "_buffers", {})
        setter(self, "_non_persistent_buffers_set", set())
        setter(self, "_modules", {})
        setter(self, "_forward_pre_hooks", [])
        setter(self, "_forward_hooks", [])

    # ---- attributes -------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Reached only when normal lookup fails: registered entries live in the registries.
        state = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in state and name in state[registry]:
                return state[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        state = self.__dict__
        params, buffers, modules = (state.get(key) for key in
                                    ("_parameters", "_buffers", "_modules"))
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._unregister(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"{type(self).__name__}: cannot assign "
                                f"'{type(value).__name__}' as parameter '{name}' (Parameter or "
                                "None expected; wrap a tensor in ta.nn.Parameter)")
            params[name] = None
        elif isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._unregister(name, keep="_modules")
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"{type(self).__name__}: cannot assign "
                                f"'{type(value).__name__}' as child module '{name}' (Module or "
                                "None expected)")
            modules[name] = None
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"{type(self).__name__}: cannot assign "
                                f"'{type(value).__name__}' as buffer '{name}' (Tensor or None "
                                "expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _unregister(self, name: str, keep: str) -> None:
        """Forget ``name`` everywhere but in registry ``keep`` (one name, one meaning)."""
        self.__dict__.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                getattr(self, registry).pop(name, None)
        if keep != "_buffers":
            self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # ---- registration -----------------------------------------------------------------------
    def _check_new_name(self, op: str, kind: str, registry: str, name: Any) -> None:
        owner = f"{type(self).__name__}.{op}"
        if registry not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        _check_name(owner, kind, name)
        if name in self.__dict__[registry]:
            return
        for other, what in (("_parameters", "a parameter"), ("_buffers", "a buffer"),
                            ("_modules", "a submodule")):
            if name in self.__dict__[other]:
                raise InvalidNameError(f"{owner}: '{name}' is already {what} of "
                                       f"{type(self).__name__}")
        if hasattr(self, name):
            raise InvalidNameError(f"{owner}: attribute '{name}' already exists")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or ``None``, an absent optional parameter) under ``name``.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Module()
        >>> layer.register_parameter("bias", None)
        >>> layer.bias is None, list(layer.state_dict())
        (True, [])
        """
        self._check_new_name("register_parameter", "parameter", "_parameters", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"{type(self).__name__}.register_parameter: cannot assign "
                            f"'{type(param).__name__}' object to parameter '{name}' (Parameter "
                            "or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is part of the module's state but not a parameter.

        Buffers are not trained (``parameters()`` skips them), are converted by ``to(dtype)``
        when they hold floats, and are saved in ``state_dict()`` unless ``persistent=False``.
        Assigning a tensor to the attribute later replaces the buffer; ``None`` is allowed.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Module()
        >>> layer.register_buffer("mask", ta.triu(ta.ones(3, 3), diagonal=1))
        >>> layer.register_buffer("cache", ta.zeros(2), persistent=False)
        >>> list(layer.state_dict()), [name for name, _ in layer.named_buffers()]
        (['mask'], ['mask', 'cache'])
        """
        self._check_new_name("register_buffer", "buffer", "_buffers", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            hint = " (wrap it with ta.tensor)" if isinstance(tensor, np.ndarray) else ""
            raise TypeError(f"{type(self).__name__}.register_buffer: cannot assign "
                            f"'{type(tensor).__name__}' object to buffer '{name}' (Tensor or "
                            f"None required){hint}")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module (or ``None``) under ``name``; the same as assigning it."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}.add_module: {type(module).__name__} is not "
                            "a Module subclass")
        self._check_new_name("add_module", "module", "_modules", name)
        self._modules[name] = module

    register_module = add_module

    # ---- calling ----------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  '"forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        for hook, with_kwargs in tuple(self._forward_pre_hooks):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(f"{type(self).__name__}: a forward pre-hook "
                                           "registered with with_kwargs=True must return None "
                                           "or a tuple (new_args, new_kwargs)")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in tuple(self._forward_hooks):
            result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before every ``forward``; a return value replaces the
        positional inputs (a non-tuple is wrapped in one).

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs)`` and may return
        ``(args, kwargs)``. ``prepend=True`` runs it before the hooks already registered.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Identity()
        >>> handle = layer.register_forward_pre_hook(lambda module, args: args[0] * 2)
        >>> layer(ta.ones(2)).tolist()
        [2.0, 2.0]
        >>> handle.remove()
        >>> layer(ta.ones(2)).tolist()
        [1.0, 1.0]
        """
        return self._add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after every ``forward``; a return value replaces
        the output.

        With ``with_kwargs=True`` the hook is ``hook(module, args, kwargs, output)``.
        ``prepend=True`` runs it before the hooks already registered.

        Examples
        --------
        >>> import tinyattn as ta
        >>> seen = []
        >>> layer = ta.nn.Linear(3, 2)
        >>> handle = layer.register_forward_hook(lambda m, args, out: seen.append(out.shape))
        >>> _ = layer(ta.ones(4, 3))
        >>> seen
        [(4, 2)]
        """
        return self._add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    def _add_hook(self, hooks: list[tuple[Callable, bool]], hook: Callable, prepend: bool,
                  with_kwargs: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"{type(self).__name__}: a hook must be callable, got "
                            f"{type(hook).__name__}")
        entry = (hook, bool(with_kwargs))
        if prepend:
            hooks.insert(0, entry)
        else:
            hooks.append(entry)
        return RemovableHandle(hooks, entry)

    # ---- traversal --------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, child)`` for each direct submodule (each module once, ``None`` skipped)."""
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set[Module] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first (a parent before its children).

        A module reachable twice is listed once, under its first name, unless
        ``remove_duplicate=False``.
        """
        memo = set() if memo is None else memo
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if remove_duplicate:
                if module in memo:
                    continue
                memo.add(module)
            yield name, module
            children = [(f"{name}.{key}" if name else key, child)
                        for key, child in module._modules.items() if child is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_name, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{module_name}.{name}" if module_name else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by two modules appears once,
        under its first name (unless ``remove_duplicate=False``)."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` pairs, persistent or not, ``None`` buffers skipped."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first, then this module); return ``self``.

        Examples
        --------
        >>> import tinyattn as ta
        >>> net = ta.nn.Sequential(ta.nn.Linear(2, 2), ta.nn.ReLU())
        >>> _ = net.apply(lambda m: print(type(m).__name__))
        Linear
        ReLU
        Sequential
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- modes, gradients, dtypes -----------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and, recursively, its children."""
        if not isinstance(mode, bool):
            raise ValueError(f"{type(self).__name__}.train: training mode is expected to be "
                             f"boolean, got {mode!r}")
        object.__setattr__(self, "training", mode)
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode (dropout is the identity); the same as ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Turn gradients of every parameter on or off (e.g. to freeze a module)."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: to None (default) or to zeros in place."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.data[...] = 0

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Convert floating-point parameters, their gradients and floating-point buffers to a
        dtype, in place; return ``self``.

        Accepts PyTorch's forms ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
        ``to(tensor)`` (its dtype) and the keywords ``device``, ``dtype``, ``non_blocking``.
        The only device is the CPU; integer and boolean tensors keep their dtype.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Linear(2, 3).to("cpu", ta.float64)
        >>> layer.weight.dtype
        dtype('float64')
        """
        device, dtype = _parse_to_arguments(args, kwargs)
        check_device("Module.to", device)
        if dtype is not None:
            self._convert_floats(float_dtype("Module.to", dtype))
        return self

    def _convert_floats(self, dtype: np.dtype) -> None:
        for module in self.modules():
            for tensor in (*module._parameters.values(), *module._buffers.values()):
                if tensor is None or tensor.dtype.kind != "f" or tensor.dtype == dtype:
                    continue
                tensor.data = tensor.data.astype(dtype)
                if tensor.grad is not None:
                    tensor.grad.data = tensor.grad.data.astype(dtype)

    def double(self) -> Module:
        """Convert floating-point parameters and buffers to float64."""
        return self.to(float64)

    def float(self) -> Module:
        """Convert floating-point parameters and buffers to float32."""
        return self.to(float32)

    def cpu(self) -> Module:
        """Return ``self``: tinyattn modules always live on the CPU."""
        return self

    def cuda(self, device: Any = None) -> Module:
        """Refuse: tinyattn runs on the CPU only."""
        raise ValueError("Module.cuda: tinyattn runs on the CPU only; there is no CUDA device "
                         "(use .cpu() or leave the module where it is)")

    def half(self) -> Module:
        """Refuse: tinyattn computes in float32 and float64 only."""
        raise TypeError("Module.half: tinyattn computes in float32 and float64 only, got "
                        "float16")

    def bfloat16(self) -> Module:
        """Refuse: tinyattn computes in float32 and float64 only."""
        raise TypeError("Module.bfloat16: tinyattn computes in float32 and float64 only, got "
                        "bfloat16")

    # ---- state ------------------------------------------------------------------------------
    def _named_state(self) -> Iterator[tuple[str, Tensor]]:
        """Every state dict entry: per module (parent first), its parameters then its
        persistent buffers; a shared tensor appears under each of its names, as in PyTorch."""
        for module_name, module in self.named_modules(remove_duplicate=False):
            prefix = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if param is not None:
                    yield prefix + name, param
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers_set:
                    yield prefix + name, buffer

    def state_dict(self, *, destination: dict[str, Tensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Tensor]:
        """Every parameter and persistent buffer under its dotted name, as in PyTorch.

        The values are tensors detached from the graph that share memory with the module's
        own (``keep_vars=True`` gives the parameters themselves): the state dict is a view,
        not a snapshot. Keys carry ``prefix``; entries are added to ``destination`` if given.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Linear(2, 3)
        >>> state = layer.state_dict()
        >>> list(state), state["weight"].requires_grad
        (['weight', 'bias'], False)
        >>> state["weight"].numpy() is layer.weight.numpy()
        True
        """
        destination = OrderedDict() if destination is None else destination
        for name, tensor in self._named_state():
            destination[prefix + name] = tensor if keep_vars else tensor.detach()
        return destination

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Copy values into the parameters and persistent buffers, in place.

        Values may be tinyattn tensors, numpy arrays or anything with ``__array__`` (PyTorch
        tensors included) of the right shape; they are cast to each tensor's dtype. Missing and
        unexpected keys are errors when ``strict``, a shape mismatch always is; on any error
        nothing is changed.

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``, as in PyTorch.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Linear(2, 1)
        >>> layer.load_state_dict({"weight": [[1.0, 2.0]], "bias": [0.5]})
        <All keys matched successfully>
        >>> layer(ta.ones(1, 2)).tolist()
        [[3.5]]
        """
        owner = f"load_state_dict into {type(self).__name__}"
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{owner}: expected a mapping of parameter names to arrays, got "
                            f"{type(state_dict).__name__}")
        own = dict(self._named_state())
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        problems = []
        arrays = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            array, problem = _as_array(state_dict[key])
            if problem:
                problems.append(f"{key}: {problem}")
            elif array.shape != target.shape:
                problems.append(f"{key}: shape {array.shape} in the state dict, "
                                f"{target.shape} in the model")
            else:
                arrays[key] = array
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if problems:
            raise ValueError(f"{owner} failed (nothing was changed):\n  "
                             + "\n  ".join(problems))
        for key, array in arrays.items():
            target = own[key]
            if target.data.flags.writeable:
                np.copyto(target.data, array, casting="unsafe")
            else:
                target.data = array.astype(target.dtype, copy=True)
        return IncompatibleKeys(missing, unexpected)

    def save(self, path: str | os.PathLike) -> None:
        """(+) Write the state dict to ``path`` as ``.npz``, atomically (temp file, rename).

        An interrupted save never leaves a half-written file in place of a good checkpoint;
        :func:`tinyattn.nn.load` reads it back without unpickling anything.
        """
        save_arrays(path, {name: tensor.data for name, tensor in self._named_state()})

    # ---- printing ---------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(child).replace("\n", "\n  ")
                 for name, child in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _as_array(value: Any) -> tuple[np.ndarray | None, str | None]:
    """``value`` (Tensor, ndarray, PyTorch tensor, nested lists) as a numeric array, or the
    reason it is not one."""
    if isinstance(value, Tensor):
        value = value.data
    elif callable(getattr(value, "detach", None)):
        value = value.detach()  # a PyTorch tensor that requires grad has no __array__
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:
        return None, f"cannot read a {type(value).__name__} as an array ({err})"
    if array.dtype.kind not in "fiub":
        return None, f"expected numbers, got dtype {array.dtype}"
    return array, None


def _parse_to_arguments(args: tuple, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """``(device, dtype)`` from the arguments of ``Module.to``."""
    unknown = set(kwargs) - {"device", "dtype", "non_blocking"}
    if unknown:
        raise TypeError(f"Module.to: unexpected keyword arguments {sorted(unknown)}")
    if len(args) > 3:
        raise TypeError(f"Module.to: expected at most 3 positional arguments, got {len(args)}")
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, bool):
            continue  # non_blocking: meaningless on the CPU
        if isinstance(arg, Tensor):
            dtype = arg.dtype
        elif isinstance(arg, str):
            try:
                dtype = np.dtype(arg)
            except TypeError:
                device = arg
        elif hasattr(arg, "type") and not isinstance(arg, (type, np.dtype)):
            device = arg  # a device object
        else:
            dtype = arg
    return device, dtype

