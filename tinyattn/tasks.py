"""Data for the training examples: synthetic sequence tasks and a character-level text corpus
(:func:`default_corpus`, shipped with the package).

A sequence task shows the model ``n`` random symbols, a separator, then the answer::

    x_1 … x_n  SEP  y_1 … y_n        copy: y = x, reverse: y = x reversed, sort: y = sorted(x)

and a decoder-only model learns it as next-token prediction: the input is the sequence without
its last token, the target the sequence shifted by one, with the prompt positions set to
``IGNORE_INDEX`` so that only the answer is scored. Batches are generated on the fly from a
numpy generator; evaluation sequences are drawn once and never appear in training batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .validation import check_int

TASKS = ("copy", "reverse", "sort")
IGNORE_INDEX = -100
"""Target value that ``cross_entropy`` skips (its default ``ignore_index``)."""


@dataclass(frozen=True)
class SequenceTask:
    """One synthetic task: ``name`` in :data:`TASKS`, ``length`` symbols from ``num_symbols``.

    Symbols are token ids ``0 … num_symbols − 1``; the separator is ``num_symbols``.

    Examples
    --------
    >>> import numpy as np
    >>> task = SequenceTask("reverse", length=3, num_symbols=5)
    >>> inputs, targets = task.encode(np.array([[1, 2, 3]]))
    >>> inputs.tolist(), targets.tolist()
    ([[1, 2, 3, 5, 3, 2]], [[-100, -100, -100, 3, 2, 1]])
    """

    name: str
    length: int = 8
    num_symbols: int = 10

    def __post_init__(self) -> None:
        if self.name not in TASKS:
            raise ValueError(f"SequenceTask: unknown task {self.name!r}; expected one of {TASKS}")
        for label in ("length", "num_symbols"):
            check_int("SequenceTask", label, getattr(self, label), 1)

    @property
    def separator(self) -> int:
        return self.num_symbols

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + 1

    @property
    def context_length(self) -> int:
        """Model input length: prompt, separator and answer, minus the last answer token."""
        return 2 * self.length

    def answer(self, symbols: np.ndarray) -> np.ndarray:
        """The correct answers ``(B, n)`` for prompts ``(B, n)``."""
        if self.name == "copy":
            return symbols.copy()
        if self.name == "reverse":
            return symbols[:, ::-1].copy()
        return np.sort(symbols, axis=1)

    def prompt(self, symbols: np.ndarray) -> np.ndarray:
        """``x_1 … x_n SEP`` as ``(B, n + 1)`` token ids, the start of generation."""
        separator = np.full((len(symbols), 1), self.separator, dtype=np.int64)
        return np.concatenate([symbols.astype(np.int64), separator], axis=1)

    def encode(self, symbols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets ``(B, 2n)`` for prompts ``(B, n)`` (prompt targets ignored)."""
        sequence = np.concatenate([self.prompt(symbols), self.answer(symbols)], axis=1)
        inputs, targets = sequence[:, :-1], sequence[:, 1:].copy()  # (B, 2n) each
        targets[:, : self.length] = IGNORE_INDEX
        return inputs, targets

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Random prompts ``(batch_size, n)``."""
        return rng.integers(0, self.num_symbols, size=(batch_size, self.length), dtype=np.int64)


@dataclass
class TaskData:
    """A fixed held-out set of a task and a stream of training batches that avoids it.

    Examples
    --------
    >>> data = TaskData(SequenceTask("copy", length=4), eval_size=16, seed=0)
    >>> inputs, targets = data.train_batch(8)
    >>> inputs.shape, targets.shape, data.eval_symbols.shape
    ((8, 8), (8, 8), (16, 4))
    """

    task: SequenceTask
    eval_size: int = 512
    seed: int = 0
    eval_symbols: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        held_out_rng = np.random.default_rng([self.seed, 1])
        self.eval_symbols = self.task.sample(self.eval_size, held_out_rng)
        self._held_out = {row.tobytes() for row in self.eval_symbols}
        self._rng = np.random.default_rng([self.seed, 0])

    def train_batch(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets of fresh random prompts, none of them in the held-out set."""
        symbols = self.task.sample(batch_size, self._rng)
        for i, row in enumerate(symbols):
            while row.tobytes() in self._held_out:
                row = self.task.sample(1, self._rng)[0]
            symbols[i] = row
        return self.task.encode(symbols)

    def eval_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """Inputs and targets of the whole held-out set."""
        return self.task.encode(self.eval_symbols)


DEFAULT_CORPUS = Path(__file__).resolve().parent / "data" / "tinyshakespeare.txt"
"""The default text corpus, shipped with the package: *tinyshakespeare*, 1,115,394 characters
of Shakespeare's plays (public domain) in the form char-level language models are usually
trained on. It is fixed text, so the figures computed from it (the lab's scale table, a
trained model's losses) change only when the code does."""


def default_corpus() -> str:
    """The text of :data:`DEFAULT_CORPUS`, the corpus of ``tinyattn train --text`` and
    ``tinyattn lab scale``.

    Examples
    --------
    >>> text = default_corpus()
    >>> len(text), len(set(text)), text[:14]
    (1115394, 65, 'First Citizen:')
    """
    return DEFAULT_CORPUS.read_text(encoding="utf-8")


class CharDataset:
    """A text split into characters: vocabulary, encode/decode, and random training windows.

    The first ``1 − val_fraction`` of the text is for training, the rest for evaluation.

    Examples
    --------
    >>> import numpy as np
    >>> data = CharDataset("hello world, hello attention", context_length=4, val_fraction=0.25)
    >>> data.decode(data.encode("hello"))
    'hello'
    >>> inputs, targets = data.batch("train", 2, np.random.default_rng(0))
    >>> inputs.shape, bool((inputs[:, 1:] == targets[:, :-1]).all())
    ((2, 4), True)
    """

    def __init__(self, text: str, context_length: int, val_fraction: float = 0.1,
                 chars: str | None = None):
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"CharDataset: val_fraction must be in (0, 1), got {val_fraction}")
        self.chars = "".join(sorted(set(text))) if chars is None else chars
        self.context_length = context_length
        self._index = {c: i for i, c in enumerate(self.chars)}
        split = int(len(text) * (1.0 - val_fraction))
        self._splits = {"train": text[:split], "eval": text[split:]}
        for name, part in self._splits.items():
            if len(part) < context_length + 1:
                raise ValueError(
                    f"CharDataset: the {name} part of the text has {len(part)} characters; "
                    f"at least context_length + 1 = {context_length + 1} are needed"
                )
        self._encoded = {name: self.encode(part) for name, part in self._splits.items()}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text``; a character outside the vocabulary is a ValueError."""
        unknown = sorted(set(text) - set(self._index))
        if unknown:
            raise ValueError(f"CharDataset: characters {unknown!r} are not in the vocabulary")
        return np.array([self._index[c] for c in text], dtype=np.int64)

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.chars[int(i)] for i in np.asarray(ids).reshape(-1))

    def batch(self, split: str, batch_size: int, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray]:
        """``batch_size`` random windows of ``split`` ('train' or 'eval'): inputs, targets."""
        if split not in self._encoded:
            raise ValueError(f"CharDataset.batch: split must be 'train' or 'eval', got {split!r}")
        data = self._encoded[split]
        starts = rng.integers(0, len(data) - self.context_length, size=batch_size)
        window = starts[:, None] + np.arange(self.context_length + 1)  # (B, T + 1)
        tokens = data[window]
        return tokens[:, :-1], tokens[:, 1:]
