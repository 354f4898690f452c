"""See the backward pass: an interactive explorer of a live graph, as one self-contained page.

:func:`view` captures one training step's graph and writes it as a single HTML file that works
offline (no server, no CDN: the page's own JavaScript and CSS are inlined, the numbers embedded
as JSON); in Jupyter the :class:`View` shows inline. The page has two parts.

**The graph.** Every node of the backward graph (``#k``, the numbering of every inspect tool),
grouped by the modules that recorded it (model → block → attention → op; groups collapse), and
the parameters it reaches. Selecting a node shows

* its op, input and output shapes and dtypes; its forward rule (the op's docstring) and its
  backward rule for each input (the op's own ``formula``, as :func:`~tinyattn.inspect.explain`
  writes it, with the same names);
* statistics of its output value and of the gradient arriving there (norm, min, max, mean,
  fraction of zeros, NaN and inf counts; :func:`~tinyattn.inspect.summaries.array_stats`) and
  small heatmaps of their first 2-D slice; for an attention op, ``P``, ``dP`` and ``dS`` per
  head;
* its :func:`~tinyattn.inspect.check_graph` verdict (its backward against finite differences,
  the errors) and what it keeps for backward (:func:`~tinyattn.inspect.memory_ledger`).

Selecting a parameter shows its value and gradient and highlights the gradient's path from the
loss to it, with its formula (:func:`~tinyattn.inspect.explain`).

**Training.** Per layer and head, the attention maps ``P``, ``dP``, ``dS`` across the steps a
:func:`~tinyattn.inspect.recording` recorded, with a step slider, the norms per head and the
softmax gain by query position (:func:`~tinyattn.inspect.softmax_gain`).

How the numbers are obtained. The values of the nodes are the graph's own arrays where the
graph keeps them (an op's saved output, an input kept by a consumer); an output that no op kept
(the input of a reshape or an add, which do not need it) is recomputed by rerunning the op's
forward on its recorded arguments (a dropout reruns with its recorded seed). The gradients come
from one backward pass observed op by op: for :func:`view` a pass of its own
(``retain_graph=True``, nothing accumulated into ``.grad``), for a :func:`recording` the
script's own pass. A tensor is never embedded whole: see :mod:`tinyattn.inspect.summaries`.
"""

from __future__ import annotations

import datetime
import html
import inspect as pyinspect
import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..autograd import Context, ReleasedInput, no_grad, run_backward, seed_gradient
from ..autograd.engine import nodes_towards
from ..nn.module import Module
from ..tables import shape_text
from ..tensor import Tensor, from_numpy
from .check import check_graph
from .explain import chain_rule, explain, operand_names, tensor_names
from .gradients import run_loss
from .graph import graph_nodes
from .ledger import memory_ledger
from .recording import (
    HOOK_POINTS,
    SCOPES,
    Recording,
    SiteRecord,
    SiteWatcher,
    module_scopes,
    parameter_names,
)
from .summaries import array_stats, finite_or_text, heatmap

FORMAT = "tinyattn-view"
VERSION = 1
NODE_MAP_LIMIT = 24
"""A node's value and gradient heatmaps have at most this many rows and columns."""


def op_doc(fn: type) -> str:
    """The forward (and backward) rule an op states in its docstring: the first paragraph, and
    any paragraph starting with ``Forward`` or ``Backward`` (whitespace collapsed)."""
    doc = fn.__dict__.get("__doc__") or ""
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n") if p.strip()]
    if not paragraphs:
        return "(the op has no docstring)"
    return " ".join(paragraphs[:1] + [p for p in paragraphs[1:]
                                      if p.startswith(("Forward", "Backward"))])


def node_values(order: list[Context], output: Tensor) -> dict[int, list[np.ndarray | None]]:
    """The output values of every node of ``order`` (by ``id``), one array per output.

    Taken from the graph where it keeps them — ``output`` itself, an op's saved output, an
    input kept by a consumer — and otherwise recomputed by rerunning the op's forward (with
    grad mode off, on copies) from its recorded arguments and its inputs' values, in forward
    order. An output that cannot be had either way is None.
    """
    known: dict[tuple[int, int], np.ndarray] = {}
    if output.grad_fn is not None:
        known[(id(output.grad_fn), output._output_nr)] = output.numpy()
    for node in order:
        for slot, (value, edge) in enumerate(zip(node.inputs, node.edges)):
            if isinstance(edge, Context) and isinstance(value, Tensor):
                known.setdefault((id(edge), node.input_slots[slot]), value.numpy())
        try:
            saved = node.saved_tensors
        except RuntimeError:  # changed in place after the op
            saved = ()
        for tensor in saved:
            if isinstance(tensor, Tensor) and tensor.grad_fn is node:
                known.setdefault((id(node), tensor._output_nr), tensor.numpy())
    values: dict[int, list[np.ndarray | None]] = {}
    for node in reversed(order):  # forward order: a node's inputs come first
        outs = [known.get((id(node), i)) for i in range(len(node.out_shapes))]
        if any(o is None for o in outs):
            rerun = _rerun(node, values)
            if rerun is not None:
                outs = [o if o is not None else r for o, r in zip(outs, rerun)]
        values[id(node)] = outs
    return values


def _rerun(node: Context, values: dict[int, list]) -> list[np.ndarray] | None:
    """``node``'s outputs computed again by its forward, or None when an input is unknown or
    the forward fails."""
    args = []
    for slot, (value, edge) in enumerate(zip(node.inputs, node.edges)):
        if isinstance(value, ReleasedInput) or (isinstance(edge, Context)
                                                and isinstance(value, Tensor)):
            produced = values.get(id(edge), [])
            index = node.input_slots[slot]
            array = produced[index] if index < len(produced) else None
            if array is None:
                return None
            args.append(from_numpy(np.array(array, copy=True)))
        elif isinstance(value, Tensor):
            args.append(from_numpy(value.numpy().copy()))
        else:
            args.append(value)
    try:
        with no_grad():
            fresh = Context(node.fn, tuple(args), node.needs_input_grad, node.kwargs)
            out = node.fn.forward(fresh, *args, **node.kwargs)
    except Exception:  # a learner's op may fail in any way: the value is then unknown
        return None
    outs = out if isinstance(out, tuple) else (out,)
    return [o.numpy() if isinstance(o, Tensor) else None for o in outs]


def _summary(array: np.ndarray | None, signed: bool | None = None) -> tuple[Any, Any]:
    """Statistics and heatmap of an array (None, None for none)."""
    if array is None:
        return None, None
    stats = array_stats(array)
    stats = {k: finite_or_text(v) if isinstance(v, float) else v for k, v in stats.items()}
    return stats, heatmap(array, NODE_MAP_LIMIT, signed)


def _forward_parameters(fn: type) -> dict[int, str]:
    """The names of an op's ``forward`` arguments by position (``ctx`` left out; a
    ``*args`` covers every position from its own)."""
    try:
        found = list(pyinspect.signature(fn.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return {}
    names = {}
    for i, parameter in enumerate(found):
        if parameter.kind is parameter.VAR_POSITIONAL:
            return {**names, **{j: f"{parameter.name}[{j - i}]" for j in range(i, i + 64)}}
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names[i] = parameter.name
    return names


def _short(value: Any, limit: int = 48) -> str:
    text = repr(value) if not isinstance(value, np.ndarray) else \
        f"array of shape {shape_text(value.shape)}, {value.dtype}"
    return text if len(text) <= limit else text[:limit - 1] + "…"


class GraphCapture:
    """Everything the explorer shows of the live graph behind ``output``, gathered before its
    backward pass; :meth:`on_node` collects the gradients during it (an ``on_node`` observer
    of :func:`~tinyattn.autograd.run_backward`), :meth:`view` makes the page.

    Parameters
    ----------
    output : Tensor
        The output (the loss) of a live graph.
    names : mapping or Module, optional
        Names for tensors (as for :func:`~tinyattn.inspect.explain`); parameters of the
        modules recorded by :func:`~tinyattn.inspect.recording.module_scopes` are named by
        their dotted names.
    check : bool
        Run :func:`~tinyattn.inspect.check_graph`.
    """

    def __init__(self, output: Tensor, names: Mapping[str, Tensor] | Module | None = None,
                 check: bool = True):
        self.output = output
        self.order = graph_nodes(output, "view")
        order = self.order
        self.index = {id(node): i for i, node in enumerate(order)}
        params = parameter_names(order)
        given = dict(names.named_parameters()) if isinstance(names, Module) else dict(names or {})
        for name, tensor in given.items():
            if not isinstance(tensor, Tensor):
                raise TypeError(f"view: names[{name!r}] must be a Tensor, got "
                                f"{type(tensor).__name__}")
        self.leaves: list[Tensor] = []
        seen: set[int] = set()
        for node in reversed(order):  # forward order: the embedding's weight first
            for edge in node.edges:
                if isinstance(edge, Tensor) and id(edge) not in seen:
                    seen.add(id(edge))
                    self.leaves.append(edge)
        leaf_id = {id(t): f"p{i}" for i, t in enumerate(self.leaves)}
        self.leaf_id = leaf_id
        known = {id(t): name for name, t in given.items()}
        self.leaf_names = {}
        self.leaf_groups = {}
        for t in self.leaves:
            group, name = params.get(id(t), (None, None))
            self.leaf_names[id(t)] = known.get(id(t)) or name
            self.leaf_groups[id(t)] = group
        explain_names = {name: t for t in self.leaves
                         if (name := self.leaf_names[id(t)]) is not None}
        explain_names.update(given)
        self.explain_names = explain_names
        labels = tensor_names(order, output, explain_names)
        index = self.index

        def label(key: int) -> str:
            return labels.get(key) or f"h{index[key]}"

        self.label = label
        for t in self.leaves:
            if self.leaf_names[id(t)] is None:
                self.leaf_names[id(t)] = label(id(t))
        self.group_classes: dict[str, str] = {}
        self.nodes = [self._static(i, node) for i, node in enumerate(order)]
        self._add_values()
        self.check = None
        if check:
            try:
                self.check = check_graph(output)
            except Exception as err:  # reported on the page; the rest still works
                self.check_error = f"{type(err).__name__}: {err}"
            else:
                for result in self.check.nodes:
                    self.nodes[result.index]["check"] = {
                        "status": result.status, "note": result.note,
                        "checked": list(result.checked),
                        "max_abs_error": finite_or_text(result.max_abs_error),
                        "max_rel_error": finite_or_text(result.max_rel_error)}
        self.ledger = memory_ledger(output)
        for entry in self.ledger.entries:
            memory = self.nodes[entry.index]["memory"]
            memory["bytes"] += entry.nbytes
            memory["items"].append({"item": entry.item, "shape": list(entry.shape),
                                    "dtype": str(entry.dtype), "nbytes": entry.nbytes,
                                    "quadratic": entry.quadratic,
                                    "shared_with": entry.shared_with})
        self.leaf_data = [self._leaf(t) for t in self.leaves]
        self.grads: dict[int, list] = {}
        self.leaf_grads: dict[int, np.ndarray] = {}

    # ---- before the backward ------------------------------------------------------------------
    def _static(self, index: int, node: Context) -> dict[str, Any]:
        label = self.label
        operands = operand_names(node, label)
        params = _forward_parameters(node.fn)
        g, out = "d" + label(id(node)), label(id(node))
        inputs = []
        for slot, (value, edge) in enumerate(zip(node.inputs, node.edges)):
            if isinstance(value, (Tensor, ReleasedInput)):
                source = f"n{self.index[id(edge)]}" if isinstance(edge, Context) else \
                    self.leaf_id.get(id(edge)) if edge is not None else None
                entry = {"slot": slot, "param": params.get(slot), "kind": "tensor",
                         "name": operands[slot],
                         "shape": list(value.shape), "dtype": str(value.dtype), "from": source,
                         "output": node.input_slots[slot] if isinstance(edge, Context) else 0,
                         "kept": not isinstance(value, ReleasedInput)}
                if edge is not None and node.needs_input_grad[slot]:
                    entry["symbol"] = "d" + operands[slot]
                    try:
                        entry["rule"] = chain_rule(node, slot, g, operands, out)
                    except Exception as err:  # a learner's formula may fail
                        entry["rule"] = f"(the op's formula failed: {type(err).__name__}: {err})"
            else:
                entry = {"slot": slot, "param": params.get(slot), "kind": "option",
                         "name": _short(value)}
            inputs.append(entry)
        for key, value in node.kwargs.items():
            inputs.append({"slot": key, "param": key, "kind": "option", "name": _short(value)})
        scope = SCOPES.get(node, ())
        self.group_classes.update(scope)
        return {
            "index": index, "op": node.name, "label": out, "doc": op_doc(node.fn),
            "scope": [gid for gid, _ in scope], "hooks": HOOK_POINTS.get(node, []),
            "inputs": inputs,
            "outputs": [{"shape": list(shape), "dtype": str(dtype) if dtype is not None else
                         None} for shape, dtype in zip(node.out_shapes, node.out_dtypes)],
            "check": None, "memory": {"bytes": 0, "items": []}, "attention": None,
        }

    def _add_values(self) -> None:
        values = node_values(self.order, self.output)
        for node, data in zip(self.order, self.nodes):
            for out, array in zip(data["outputs"], values[id(node)]):
                out["value"], out["value_map"] = _summary(array)
                out["grad"], out["grad_map"] = None, None

    def _leaf(self, tensor: Tensor) -> dict[str, Any]:
        stats, picture = _summary(tensor.numpy())
        used = [[i, slot] for i, node in enumerate(self.order)
                for slot, edge in enumerate(node.edges) if edge is tensor]
        data = {"id": self.leaf_id[id(tensor)], "name": self.leaf_names[id(tensor)],
                "group": self.leaf_groups[id(tensor)], "shape": list(tensor.shape),
                "dtype": str(tensor.dtype), "value": stats, "value_map": picture,
                "grad": None, "grad_map": None, "consumers": used}
        try:
            found = explain(tensor, self.output, names=self.explain_names)
            visit, _ = nodes_towards(self.order, {id(tensor)})
            data["explain"] = {
                "formula": found.formula, "chain": found.chain, "paths": found.paths,
                "steps": [str(step) for step in found.steps],
                "nodes": sorted(self.index[key] for key in visit if key in self.index)}
        except Exception as err:
            data["explain"] = {"error": f"{type(err).__name__}: {err}"}
        return data

    # ---- during the backward ------------------------------------------------------------------
    def on_node(self, node: Context, grads_out: tuple, grads_in: tuple) -> None:
        """Keep the statistics of the gradient arriving at ``node`` and sum what it sends to
        the leaves (as the engine sums them)."""
        index = self.index.get(id(node))
        if index is None:
            return
        for out, grad in zip(self.nodes[index]["outputs"], grads_out):
            out["grad"], out["grad_map"] = _summary(grad, signed=True)
        for edge, grad in zip(node.edges, grads_in):
            if grad is not None and isinstance(edge, Tensor):
                held = self.leaf_grads.get(id(edge))
                self.leaf_grads[id(edge)] = np.array(grad, copy=True) if held is None else \
                    held + grad

    # ---- the page ------------------------------------------------------------------------------
    def page_data(self, step: int | None = None, title: str | None = None,
                  sites: list[SiteRecord] | None = None) -> dict[str, Any]:
        """The graph's numbers for the page (JSON-ready)."""
        for tensor, data in zip(self.leaves, self.leaf_data):
            grad = self.leaf_grads.get(id(tensor))
            data["grad"], data["grad_map"] = _summary(grad, signed=True)
        for site in sites or []:
            self.nodes[site.node]["attention"] = site.name
        groups, tree = _tree(self.nodes, self.leaf_data, self.group_classes)
        loss = float(self.output.numpy().reshape(-1)[0]) if self.output.numel() == 1 else None
        check = self.check
        ledger = self.ledger
        summary = {
            "nodes": len(self.nodes), "leaves": len(self.leaf_data),
            "check": None if check is None else {
                "ok": check.ok, "failed": len(check.failures),
                "skipped": sum(n.status == "skipped" for n in check.nodes),
                "kinks": sum(n.status == "kink" for n in check.nodes), "text": check.summary()},
            "check_error": getattr(self, "check_error", None),
            "memory": {"total_bytes": ledger.total_bytes, "distinct_bytes": ledger.distinct_bytes,
                       "quadratic_bytes": ledger.quadratic_bytes, "text": ledger.summary()},
        }
        return {
            "format": FORMAT, "version": VERSION, "title": title or "tinyattn view",
            "created": datetime.datetime.now().isoformat(timespec="seconds"),
            "step": step, "loss": finite_or_text(loss), "output_shape": list(self.output.shape),
            "summary": summary, "groups": groups, "tree": tree, "nodes": self.nodes,
            "leaves": self.leaf_data,
            "attention": {"steps": [{"step": step, "loss": finite_or_text(loss),
                                     "sites": [s.page_data() for s in sites or []]}],
                          "graph_step": step},
        }

    def view(self, step: int | None = None, recording: Recording | None = None,
             title: str | None = None, sites: list[SiteRecord] | None = None) -> View:
        """The :class:`View` of the captured graph (with the training view of ``recording``)."""
        page = View(self.page_data(step, title, sites), sites)
        return page.with_recording(recording) if recording is not None else page


def _tree(nodes: list[dict], leaves: list[dict],
          classes: dict[str, str]) -> tuple[dict[str, dict], list]:
    """The module groups and the nested layout: each group lists its items (``{"n": k}`` a
    node, ``{"p": i}`` a parameter, ``{"g": id, "items": [...]}`` a group) in the order of the
    graph (#0 first; a parameter after the last node that uses it); a group of one item is
    replaced by that item."""
    groups: dict[str, dict] = {}
    members: dict[str | None, list[tuple[float, dict]]] = {}
    for node in nodes:
        parent = None
        for gid in node["scope"]:
            if gid not in groups:
                groups[gid] = {"parent": parent}
            parent = gid
        members.setdefault(parent, []).append((node["index"], {"n": node["index"]}))
    for i, leaf in enumerate(leaves):
        group = leaf["group"] if leaf["group"] in groups else None
        last = max((k for k, _ in leaf["consumers"]), default=len(nodes))
        members.setdefault(group, []).append((last + 0.5, {"p": i}))
    children: dict[str | None, list[str]] = {}
    for gid, info in groups.items():
        children.setdefault(info["parent"], []).append(gid)

    def build(gid: str | None) -> tuple[float, list]:
        items = list(members.get(gid, []))
        for child in children.get(gid, []):
            key, sub = build(child)
            if len(sub) == 1:
                items.append((key, sub[0]))  # a group of one item: the item itself
            elif sub:
                items.append((key, {"g": child, "items": sub}))
        items.sort(key=lambda pair: pair[0])
        return (items[0][0] if items else float("inf")), [item for _, item in items]

    _, tree = build(None)
    used: set[str] = set()

    def mark(items: list) -> None:
        for item in items:
            if "g" in item:
                used.add(item["g"])
                mark(item["items"])

    mark(tree)
    labelled = {}
    for gid in used:
        parent = groups[gid]["parent"]
        root, _, path = gid.partition("/")
        if parent is None:
            label = root
        else:
            parent_path = parent.partition("/")[2]
            label = path[len(parent_path) + 1:] if parent_path and path.startswith(
                parent_path + ".") else path
        labelled[gid] = {"label": label, "parent": parent, "class": classes.get(gid)}
    return labelled, tree


class View:
    """The explorer of one graph (and of the steps of a recording): its numbers, and the page.

    ``data`` is what the page shows, JSON-ready (:meth:`save_json` writes it; the page embeds
    the same); ``html()`` is the page; Jupyter shows it inline. ``sites`` (when the view was
    captured in this process) are the :class:`~tinyattn.inspect.recording.SiteRecord` of the
    graph's attention calls, with their whole ``P``, ``dP``, ``dS`` arrays.
    """

    def __init__(self, data: dict[str, Any], sites: list[SiteRecord] | None = None):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"View: not the data of a tinyattn view (expected a dict with "
                             f"format={FORMAT!r})")
        if data.get("version") != VERSION:
            raise ValueError(f"View: data of version {data.get('version')!r}; this tinyattn "
                             f"reads version {VERSION}")
        self.data = data
        self.sites = sites or []

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """One dict per node, ``nodes[k]`` for ``#k``."""
        return self.data["nodes"]

    @property
    def leaves(self) -> list[dict[str, Any]]:
        """One dict per parameter (leaf that requires grad) of the graph."""
        return self.data["leaves"]

    def leaf(self, name: str) -> dict[str, Any]:
        """The parameter named ``name``."""
        for leaf in self.leaves:
            if leaf["name"] == name:
                return leaf
        raise KeyError(f"View.leaf: no parameter named {name!r}; the names are "
                       f"{[leaf['name'] for leaf in self.leaves]}")

    def with_recording(self, recording: Recording) -> View:
        """This graph with the training view of ``recording`` (its recorded steps)."""
        data = dict(self.data)
        steps = recording.page_data()["steps"]
        if steps:
            data["attention"] = {"steps": steps, "graph_step": self.data["step"]}
        return View(data, self.sites)

    @classmethod
    def of_recording(cls, recording: Recording) -> View:
        """The training view of a recording that captured no graph."""
        steps = recording.page_data()["steps"]
        last = recording.records[-1] if recording.records else None
        return cls({
            "format": FORMAT, "version": VERSION, "title": recording.title or "tinyattn view",
            "created": datetime.datetime.now().isoformat(timespec="seconds"),
            "step": None, "loss": finite_or_text(last.loss) if last else None,
            "output_shape": [], "summary": {"nodes": 0, "leaves": 0, "check": None,
                                            "check_error": None, "memory": None},
            "groups": {}, "tree": [], "nodes": [], "leaves": [],
            "attention": {"steps": steps, "graph_step": None}})

    def html(self) -> str:
        """The page: one self-contained HTML document."""
        return page(self.data)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the page to ``path`` (``.html``; its folder is created) and return the path."""
        target = Path(path)
        if target.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"View.save: the page's path must end in .html, got "
                             f"{str(target)!r} (save_json writes the numbers)")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.html(), encoding="utf-8")
        return target

    def save_json(self, path: str | os.PathLike) -> Path:
        """Write the page's numbers to ``path`` as JSON (``View.load`` reads it back)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(to_json(self.data), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike) -> View:
        """The view saved by :meth:`save_json` at ``path``."""
        source = Path(path)
        if not source.is_file():
            raise FileNotFoundError(f"View.load: no file at {str(source)!r}")
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"View.load: {source} is not JSON ({err})") from None
        return cls(data)

    def _repr_html_(self) -> str:
        """Jupyter: the page in an iframe (its own document, so that its script and styles
        stay inside it)."""
        return (f'<iframe srcdoc="{html.escape(self.html(), quote=True)}" '
                'style="width: 100%; height: 760px; border: 1px solid #ccc" '
                'title="tinyattn view"></iframe>')

    def __repr__(self) -> str:
        steps = len(self.data["attention"]["steps"])
        sites = max((len(s["sites"]) for s in self.data["attention"]["steps"]), default=0)
        return (f"<View of {len(self.nodes)} nodes, {len(self.leaves)} parameters, {sites} "
                f"attention calls, {steps} step{'s' if steps != 1 else ''}>")


def to_json(data: dict[str, Any]) -> str:
    """``data`` as compact JSON (no NaN: :func:`~tinyattn.inspect.summaries.finite_or_text`
    wrote them as text)."""
    return json.dumps(data, allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def _asset(name: str) -> str:
    return resources.files("tinyattn.inspect").joinpath("view_assets", name).read_text(
        encoding="utf-8")


def page(data: dict[str, Any]) -> str:
    """The HTML page of ``data``: the page's CSS and JavaScript (package data in
    ``tinyattn/inspect/view_assets``) and the numbers, inlined."""
    payload = to_json(data).replace("</", "<\\/")
    title = html.escape(str(data.get("title", "tinyattn view")))
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f"<title>{title}</title>\n<style>\n", _asset("view.css"), "</style>\n</head>\n",
        "<body>\n<div id=\"app\"><p class=\"loading\">Loading the graph…</p></div>\n",
        "<script type=\"application/json\" id=\"tinyattn-data\">", payload, "</script>\n",
        "<script>\n", _asset("view.js"), "</script>\n</body>\n</html>\n"])


def view(target: Any, batch: Any = None, *, loss_fn: Any = None,
         names: Mapping[str, Tensor] | Module | None = None, title: str | None = None,
         check: bool = True, gradient: Any = None) -> View:
    """The explorer of one graph's backward pass (a self-contained page; inline in Jupyter).

    Parameters
    ----------
    target : Tensor, Module, Recording, dict or path
        * a Tensor: the output (the loss) of a live graph — its backward pass is run once
          (``retain_graph=True``, nothing is accumulated into ``.grad``: the graph can still
          be backwarded). Its ops are grouped by module when the forward ran inside
          :func:`~tinyattn.inspect.recording.module_scopes` or a recording.
        * a Module: called on ``batch`` (as :func:`~tinyattn.inspect.attention_gradients`
          does: ``model(*batch)``, reduced by ``loss_fn`` or an ``(output, loss)`` pair)
          with module scopes, then viewed.
        * a :class:`~tinyattn.inspect.recording.Recording`: its captured graph and its steps.
        * a dict or a path: the numbers a view saved (:meth:`View.save_json`).
    batch, loss_fn
        For a Module.
    names : mapping or Module, optional
        Names of tensors (``{"W_q": w}``), or a module naming its parameters.
    title : str, optional
        The page's title.
    check : bool
        Run :func:`~tinyattn.inspect.check_graph` on every node (the slowest part).
    gradient : Tensor or array, optional
        The gradient the backward pass starts from, for an output of more than one element.

    Examples
    --------
    >>> import tinyattn as ta
    >>> x = ta.randn(5, 4)
    >>> w = ta.randn(4, 4, requires_grad=True)
    >>> page = view(((x @ w) @ x.T).softmax(dim=-1).sum(), names={"W": w})
    >>> [node["op"] for node in page.nodes], page.leaves[0]["name"]
    (['Sum', 'Softmax', 'MatMul', 'MatMul'], 'W')
    >>> page.html().startswith("<!DOCTYPE html>")
    True
    """
    if isinstance(target, Recording):
        return target.view()
    if isinstance(target, dict):
        return View(target)
    if isinstance(target, (str, os.PathLike)):
        return View.load(target)
    if isinstance(target, Module):
        if batch is None:
            raise ValueError("view: a Module needs its batch: view(model, (inputs, targets))")
        with module_scopes():
            _, loss = run_loss(target, batch, loss_fn, "view")
        return view(loss, names=names if names is not None else target, title=title,
                    check=check, gradient=gradient)
    if not isinstance(target, Tensor):
        raise TypeError(f"view: expected a Tensor (a loss), a Module with its batch, a "
                        f"Recording, or saved view data; got {type(target).__name__}")
    capture = GraphCapture(target, names=names, check=check)
    watcher = SiteWatcher(capture.order, keep=True)

    def on_node(node: Context, grads_out: tuple, grads_in: tuple) -> None:
        watcher.on_node(node, grads_out, grads_in)
        capture.on_node(node, grads_out, grads_in)

    seed = seed_gradient(target, gradient, "view")
    run_backward([target], [seed], retain_graph=True, accumulate=False, on_node=on_node)
    if watcher.errors:
        raise RuntimeError("view: " + "; ".join(watcher.errors))
    return capture.view(step=None, title=title, sites=watcher.results())


__all__ = ["GraphCapture", "View", "node_values", "op_doc", "page", "to_json", "view"]
