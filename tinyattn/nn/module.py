"""``Module`` and ``Parameter``: parameters, buffers, submodules and hooks.

A module keeps its parameters, buffers and submodules in three registries (``_parameters``,
``_buffers``, ``_modules``), as ``torch.nn.Module`` does: assigning a ``Parameter`` or a
``Module`` to an attribute registers it, reading the attribute looks it up there. Everything
is named with dots as in PyTorch (``blocks.0.attn.in_proj_weight``), so state dicts move
between the two without renaming. State dicts are in :mod:`.state`, dtype and device
conversions in :mod:`.conversion`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..dtypes import get_default_dtype
from ..kernels.compile_ahead import expect
from ..tensor import Tensor, _to_array
from .conversion import ConversionMixin, check_device, float_dtype
from .state import IncompatibleKeys, StateDictMixin

__all__ = ["IncompatibleKeys", "InvalidNameError", "Module", "Parameter", "RemovableHandle",
           "check_device", "float_dtype"]


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
            data = np.empty(0, dtype=get_default_dtype())
        super().__init__(_to_array(data), requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


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


def _check_name(owner: str, kind: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{owner}: {kind} name should be a string, got {type(name).__name__}")
    if "." in name:
        raise InvalidNameError(f"{owner}: {kind} name can't contain '.', got {name!r} (dots "
                               "separate submodules in state dict keys)")
    if name == "":
        raise InvalidNameError(f"{owner}: {kind} name can't be empty")


class Module(ConversionMixin, StateDictMixin):
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
    kernel_families: tuple[str, ...] = ()
    """The kernel families (modules of :mod:`tinyattn.kernels`) this layer's forward and
    backward run with its default options. Built, the layer tells
    :func:`~tinyattn.kernels.compile_ahead.expect` (for the default dtype), so that on an empty
    numba cache a helper process can compile them before they are reached."""

    def __init__(self) -> None:
        if self.kernel_families:
            expect(self.kernel_families, get_default_dtype())
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
        registered = {key: name in entries for key in ("_parameters", "_buffers", "_modules")
                      if (entries := self.__dict__.get(key)) is not None}
        if isinstance(value, Parameter):
            self._adopt("_parameters", "parameters", name)
            self.register_parameter(name, value)
        elif registered.get("_parameters"):
            self._reassign("_parameters", name, value, (), "parameter", "Parameter or None "
                           "expected; wrap a tensor in ta.nn.Parameter")
        elif isinstance(value, Module):
            self._adopt("_modules", "module", name)
            self._modules[name] = value
        elif registered.get("_modules"):
            self._reassign("_modules", name, value, (), "child module", "Module or None expected")
        elif registered.get("_buffers"):
            self._reassign("_buffers", name, value, Tensor, "buffer", "Tensor or None expected")
        else:
            object.__setattr__(self, name, value)

    def _adopt(self, registry: str, kind: str, name: str) -> None:
        """Make ``name`` an entry of ``registry`` only (it is about to be assigned)."""
        if registry not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        self._unregister(name, keep=registry)

    def _reassign(self, registry: str, name: str, value: Any, accepted: type | tuple,
                  kind: str, expected: str) -> None:
        """Assign to the registered ``name``: None, or a value of the ``accepted`` type."""
        if value is not None and not isinstance(value, accepted):
            raise TypeError(f"{type(self).__name__}: cannot assign '{type(value).__name__}' as "
                            f"{kind} '{name}' ({expected})")
        self.__dict__[registry][name] = value

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
                param.grad.numpy()[...] = 0

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
