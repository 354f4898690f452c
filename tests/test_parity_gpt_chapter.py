"""The GPT chapter of a build-an-LLM-from-scratch textbook, written once against a ``torch``
argument and run on PyTorch and on tinyattn (``import tinyattn as torch``).

The chapter's code, in the order a reader meets it: a LayerNorm written with ``mean`` and
``var(unbiased=False)``, the tanh GELU written with ``torch.sqrt(torch.tensor(2.0 / torch.pi))``
and ``torch.pow``, a FeedForward ``nn.Sequential``, a TransformerBlock with two shortcut
connections around the previous chapter's MultiHeadAttention, the GPTModel with token and
position embeddings, greedy generation, sampling with temperature and top-k, a sliding-window
dataset over token ids with a ``DataLoader``, and the plain training loop (cross-entropy over
``logits.flatten(0, 1)``, AdamW, ``model.train()``/``model.eval()``). Together with
``test_parity_module.py`` (SelfAttention_v1, CausalAttention, MultiHeadAttentionWrapper,
MultiHeadAttention) this covers ten classes of the attention and GPT chapters.

PyTorch builds every model; tinyattn's copy gets its weights through ``state_dict`` /
``load_state_dict``. Outputs, every gradient, optimizer steps and greedy generation are compared
in float64.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import tinyattn

torch = pytest.importorskip("torch")

from parity import as_numpy, assert_close  # noqa: E402
from test_parity_module import textbook  # noqa: E402  (the attention chapter's classes)

TEXT = ("every effort moves you forward, and every step you take moves the story on; "
        "the model reads one token at a time and learns to guess the next one. ")


def gpt_chapter(torch):
    """The chapter's classes and functions, written against ``torch``."""
    nn = torch.nn
    MultiHeadAttention = textbook(torch)[3]

    class LayerNorm(nn.Module):
        def __init__(self, emb_dim):
            super().__init__()
            self.eps = 1e-5
            self.scale = nn.Parameter(torch.ones(emb_dim))
            self.shift = nn.Parameter(torch.zeros(emb_dim))

        def forward(self, x):
            mean = x.mean(dim=-1, keepdim=True)
            var = x.var(dim=-1, keepdim=True, unbiased=False)
            return self.scale * (x - mean) / torch.sqrt(var + self.eps) + self.shift

    class GELU(nn.Module):
        def forward(self, x):
            inner = torch.sqrt(torch.tensor(2.0 / torch.pi)) * (x + 0.044715 * torch.pow(x, 3))
            return 0.5 * x * (1 + torch.tanh(inner))

    class FeedForward(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.layers = nn.Sequential(
                nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
                GELU(),
                nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]),
            )

        def forward(self, x):
            return self.layers(x)

    class TransformerBlock(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.att = MultiHeadAttention(
                d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                dropout=cfg["drop_rate"], num_heads=cfg["n_heads"], qkv_bias=cfg["qkv_bias"])
            self.ff = FeedForward(cfg)
            self.norm1 = LayerNorm(cfg["emb_dim"])
            self.norm2 = LayerNorm(cfg["emb_dim"])
            self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

        def forward(self, x):
            shortcut = x  # attention, with a shortcut around it
            x = self.drop_shortcut(self.att(self.norm1(x)))
            x = x + shortcut
            shortcut = x  # feed-forward, with a shortcut around it
            x = self.drop_shortcut(self.ff(self.norm2(x)))
            return x + shortcut

    class GPTModel(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
            self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
            self.drop_emb = nn.Dropout(cfg["drop_rate"])
            self.trf_blocks = nn.Sequential(
                *[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
            self.final_norm = LayerNorm(cfg["emb_dim"])
            self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

        def forward(self, in_idx):
            batch_size, seq_len = in_idx.shape
            tok_embeds = self.tok_emb(in_idx)
            pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
            x = self.drop_emb(tok_embeds + pos_embeds)
            x = self.trf_blocks(x)
            return self.out_head(self.final_norm(x))

    def generate_text_simple(model, idx, max_new_tokens, context_size):
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -context_size:]
            with torch.no_grad():
                logits = model(idx_cond)
            logits = logits[:, -1, :]  # the last position predicts the next token
            probas = torch.softmax(logits, dim=-1)
            idx_next = torch.argmax(probas, dim=-1, keepdim=True)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    def next_token_probabilities(logits, temperature=0.0, top_k=None):
        """The sampling step of ``generate`` up to the softmax (for comparing the two)."""
        if top_k is not None:
            top_logits, _ = torch.topk(logits, top_k)
            min_val = top_logits[:, -1]
            logits = torch.where(logits < min_val, torch.tensor(float("-inf")).to(logits.device),
                                 logits)
        if temperature > 0.0:
            logits = logits / temperature
        return torch.softmax(logits, dim=-1)

    def generate(model, idx, max_new_tokens, context_size, temperature=0.0, top_k=None,
                 eos_id=None):
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -context_size:]
            with torch.no_grad():
                logits = model(idx_cond)
            logits = logits[:, -1, :]
            if temperature > 0.0:
                probs = next_token_probabilities(logits, temperature, top_k)
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                idx_next = torch.argmax(logits, dim=-1, keepdim=True)
            if idx_next == eos_id:
                break
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    class GPTDataset(torch.utils.data.Dataset):
        """Input windows of ``max_length`` token ids and the same windows shifted by one."""

        def __init__(self, token_ids, max_length, stride):
            self.input_ids, self.target_ids = [], []
            for i in range(0, len(token_ids) - max_length, stride):
                self.input_ids.append(torch.tensor(token_ids[i:i + max_length]))
                self.target_ids.append(torch.tensor(token_ids[i + 1:i + max_length + 1]))

        def __len__(self):
            return len(self.input_ids)

        def __getitem__(self, idx):
            return self.input_ids[idx], self.target_ids[idx]

    def create_dataloader(token_ids, batch_size=4, max_length=8, stride=4, shuffle=True,
                          drop_last=True, num_workers=0):
        dataset = GPTDataset(token_ids, max_length, stride)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle,
                                           drop_last=drop_last, num_workers=num_workers)

    def calc_loss_batch(input_batch, target_batch, model, device):
        input_batch, target_batch = input_batch.to(device), target_batch.to(device)
        logits = model(input_batch)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())

    def calc_loss_loader(data_loader, model, device, num_batches=None):
        if len(data_loader) == 0:
            return float("nan")
        num_batches = len(data_loader) if num_batches is None else min(num_batches,
                                                                      len(data_loader))
        total_loss = 0.0
        for i, (input_batch, target_batch) in enumerate(data_loader):
            if i >= num_batches:
                break
            total_loss += calc_loss_batch(input_batch, target_batch, model, device).item()
        return total_loss / num_batches

    def evaluate_model(model, train_loader, val_loader, device, eval_iter):
        model.eval()
        with torch.no_grad():
            train_loss = calc_loss_loader(train_loader, model, device, num_batches=eval_iter)
            val_loss = calc_loss_loader(val_loader, model, device, num_batches=eval_iter)
        model.train()
        return train_loss, val_loss

    def train_model_simple(model, train_loader, val_loader, optimizer, device, num_epochs,
                           eval_freq, eval_iter):
        train_losses, val_losses, track_tokens_seen = [], [], []
        tokens_seen, global_step = 0, -1
        for _ in range(num_epochs):
            model.train()
            for input_batch, target_batch in train_loader:
                optimizer.zero_grad()
                loss = calc_loss_batch(input_batch, target_batch, model, device)
                loss.backward()
                optimizer.step()
                tokens_seen += input_batch.numel()
                global_step += 1
                if global_step % eval_freq == 0:
                    train_loss, val_loss = evaluate_model(
                        model, train_loader, val_loader, device, eval_iter)
                    train_losses.append(train_loss)
                    val_losses.append(val_loss)
                    track_tokens_seen.append(tokens_seen)
        return train_losses, val_losses, track_tokens_seen

    return SimpleNamespace(**{name: value for name, value in locals().items()
                              if name not in ("torch", "nn")})


CHAPTERS = {"torch": gpt_chapter(torch), "tinyattn": gpt_chapter(tinyattn)}
VOCAB = sorted(set(TEXT)) + ["<|endoftext|>"]
EOS = VOCAB.index("<|endoftext|>")


def encode(text: str) -> list[int]:
    """A character tokenizer (the chapter's is GPT-2's BPE; any tokenizer gives token ids)."""
    return [VOCAB.index(ch) for ch in text]


def config(**changes) -> dict:
    cfg = {"vocab_size": len(VOCAB), "context_length": 8, "emb_dim": 12, "n_heads": 2,
           "n_layers": 2, "drop_rate": 0.0, "qkv_bias": False}
    cfg.update(changes)
    return cfg


# Outputs computed through the chapter's GELU: its float32 constant may differ by one unit in the
# last place (6e-8 relative) between the two libraries (see the GELU test below); everything else
# agrees to rounding in float64.
THROUGH_GELU = 1e-6


def twins(name, *args):
    """``name(*args)`` built by PyTorch (seeded 123, float64) and by tinyattn with its weights."""
    torch.manual_seed(123)
    theirs = getattr(CHAPTERS["torch"], name)(*args).double()
    ours = getattr(CHAPTERS["tinyattn"], name)(*args).double()
    result = ours.load_state_dict(theirs.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    return ours, theirs


def token_batch(batch_size=2, seq_len=8, seed=0):
    ids = np.random.default_rng(seed).integers(0, len(VOCAB), size=(batch_size, seq_len))
    return tinyattn.tensor(ids), torch.tensor(ids)


def float_batch(shape, seed=0):
    array = np.random.default_rng(seed).normal(size=shape)
    return tinyattn.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def backward_both(ours, theirs, seed=1):
    cotangent = np.random.default_rng(seed).normal(size=tuple(theirs.shape))
    ours.backward(tinyattn.tensor(cotangent))
    theirs.backward(torch.tensor(cotangent))


def assert_same_gradients(ours, theirs, rtol=1e-10):
    their_params = dict(theirs.named_parameters())
    names = [name for name, _ in ours.named_parameters()]
    assert names == list(their_params)
    for name, param in ours.named_parameters():
        assert param.grad is not None, name
        assert_close(param.grad, their_params[name].grad, rtol=rtol)


@pytest.mark.parametrize("name, args, shape, rtol", [
    ("LayerNorm", (12,), (2, 5, 12), 1e-10),
    ("GELU", (), (2, 5, 12), THROUGH_GELU),
    ("FeedForward", (config(),), (2, 5, 12), THROUGH_GELU),
    ("TransformerBlock", (config(),), (2, 6, 12), THROUGH_GELU),
])
def test_layer_output_and_every_gradient_match_torch(name, args, shape, rtol):
    ours, theirs = twins(name, *args)
    x, their_x = float_batch(shape)
    out, their_out = ours(x), theirs(their_x)
    assert out.dtype == np.float64
    assert_close(out, their_out, rtol)
    backward_both(out, their_out)
    assert_close(x.grad, their_x.grad, rtol)
    assert_same_gradients(ours, theirs, rtol)


def test_layer_norm_and_gelu_equal_the_built_in_layers():
    x, _ = float_batch((3, 12), seed=2)
    chapter = CHAPTERS["tinyattn"]
    norm = chapter.LayerNorm(12).double()
    assert_close(norm(x), tinyattn.nn.LayerNorm(12).double()(x), rtol=1e-12)
    normalized = norm(x).numpy()
    np.testing.assert_allclose(normalized.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(normalized.var(-1), 1.0, rtol=1e-4)  # eps = 1e-5 inside
    assert_close(chapter.GELU()(x), tinyattn.nn.GELU(approximate="tanh")(x), THROUGH_GELU)


def test_gelu_differs_from_torch_only_by_its_float32_square_root():
    # torch.tensor(2.0 / torch.pi) is float32, so its square root is rounded to float32: tinyattn
    # rounds it correctly (numpy's sqrt), this PyTorch build's vectorised sqrt can be one unit
    # in the last place off. Each library's GELU is the float64 formula with its own constant.
    ours_c, theirs_c = (lib.sqrt(lib.tensor(2.0 / lib.pi)) for lib in (tinyattn, torch))
    assert ours_c.dtype == np.float32 and theirs_c.dtype == torch.float32
    assert ours_c.item() == np.sqrt(np.float32(2.0 / np.pi))
    assert abs(ours_c.item() - theirs_c.item()) <= np.spacing(np.float32(0.8))
    x, their_x = float_batch((5,), seed=3)
    for lib, out, constant in ((tinyattn, CHAPTERS["tinyattn"].GELU()(x), ours_c.item()),
                               (torch, CHAPTERS["torch"].GELU()(their_x), theirs_c.item())):
        assert str(out.dtype).endswith("float64"), lib.__name__
        v = as_numpy(x)
        expected = 0.5 * v * (1 + np.tanh(constant * (v + 0.044715 * v ** 3)))
        np.testing.assert_allclose(as_numpy(out), expected, rtol=1e-14, atol=0)


def test_gpt_model_names_sizes_outputs_and_gradients_match_torch():
    cfg = config()
    ours, theirs = twins("GPTModel", cfg)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    total = sum(p.numel() for p in ours.parameters())
    assert total == sum(p.numel() for p in theirs.parameters())
    assert ours.out_head.weight.shape == tuple(theirs.out_head.weight.shape)
    idx, their_idx = token_batch()
    logits, their_logits = ours(idx), theirs(their_idx)
    assert logits.shape == (2, 8, len(VOCAB))
    assert_close(logits, their_logits, THROUGH_GELU)
    backward_both(logits, their_logits)
    assert_same_gradients(ours, theirs, THROUGH_GELU)


def test_greedy_generation_gives_the_same_tokens():
    ours, theirs = twins("GPTModel", config())
    ours.eval()
    theirs.eval()
    start = encode("every ef")[:4]
    out = CHAPTERS["tinyattn"].generate_text_simple(
        ours, tinyattn.tensor(start).unsqueeze(0), max_new_tokens=12, context_size=8)
    their_out = CHAPTERS["torch"].generate_text_simple(
        theirs, torch.tensor(start).unsqueeze(0), max_new_tokens=12, context_size=8)
    assert out.shape == (1, 16)
    assert out.tolist() == their_out.tolist()
    assert out.dtype == np.int64
    greedy = CHAPTERS["tinyattn"].generate(ours, tinyattn.tensor([start]), 12, 8, eos_id=EOS)
    assert greedy.tolist() == out.tolist()


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.7, 3), (1.4, 5)])
def test_sampling_distribution_matches_torch(temperature, top_k):
    logits = np.random.default_rng(4).normal(size=(1, len(VOCAB))) * 3
    probs = CHAPTERS["tinyattn"].next_token_probabilities(
        tinyattn.tensor(logits), temperature, top_k)
    their_probs = CHAPTERS["torch"].next_token_probabilities(
        torch.tensor(logits), temperature, top_k)
    assert_close(probs, their_probs)
    if top_k is not None:
        assert int((probs.numpy() > 0).sum()) == top_k


def test_sampled_tokens_stay_in_the_top_k_and_repeat_with_the_seed():
    chapter = CHAPTERS["tinyattn"]
    ours, _ = twins("GPTModel", config())
    start = tinyattn.tensor([encode("the ")])
    runs = []
    for _ in range(2):
        tinyattn.manual_seed(123)
        runs.append(chapter.generate(ours, start, 10, 8, temperature=1.4, top_k=3,
                                     eos_id=EOS).tolist())
    assert runs[0] == runs[1]
    tokens = runs[0][0]
    for position in range(4, len(tokens)):
        with tinyattn.no_grad():
            logits = ours(tinyattn.tensor([tokens[max(0, position - 8):position]]))[0, -1]
        top3 = np.argsort(logits.numpy())[-3:]
        assert tokens[position] in top3
    # top_k=1 leaves one candidate, so sampling is greedy
    tinyattn.manual_seed(0)
    sampled = chapter.generate(ours, start, 6, 8, temperature=0.5, top_k=1, eos_id=EOS)
    assert sampled.tolist() == chapter.generate_text_simple(ours, start, 6, 8).tolist()


def test_generation_stops_at_the_end_of_sequence_token():
    chapter = CHAPTERS["tinyattn"]
    ours, _ = twins("GPTModel", config())
    start = tinyattn.tensor([encode("the ")])
    greedy = chapter.generate_text_simple(ours, start, 5, 8).tolist()[0]
    eos_id = greedy[6]
    first = greedy.index(eos_id, 4)  # the first generated occurrence
    stopped = chapter.generate(ours, start, 5, 8, eos_id=eos_id)
    assert stopped.tolist()[0] == greedy[:first]


def test_dataset_and_dataloader_give_torchs_batches():
    ids = encode(TEXT)
    datasets = {lib: CHAPTERS[lib].GPTDataset(ids, 8, 4) for lib in CHAPTERS}
    assert len(datasets["tinyattn"]) == len(datasets["torch"]) == len(range(0, len(ids) - 8, 4))
    x, y = datasets["tinyattn"][3]
    assert x.tolist() == ids[12:20] and y.tolist() == ids[13:21]
    loaders = {lib: CHAPTERS[lib].create_dataloader(ids, batch_size=5, shuffle=False)
               for lib in CHAPTERS}
    assert len(loaders["tinyattn"]) == len(loaders["torch"]) == len(datasets["torch"]) // 5
    batches = list(loaders["tinyattn"])
    for (x, y), (their_x, their_y) in zip(batches, loaders["torch"], strict=True):
        assert x.dtype == np.int64 and x.shape == (5, 8)
        assert x.tolist() == their_x.tolist() and y.tolist() == their_y.tolist()
    tinyattn.manual_seed(123)
    shuffled = [x.tolist() for x, _ in CHAPTERS["tinyattn"].create_dataloader(
        ids, batch_size=5, drop_last=False)]
    rows = sorted(row for batch in shuffled for row in batch)
    assert rows == sorted(x.tolist() for x, _ in
                          (datasets["tinyattn"][i] for i in range(len(datasets["tinyattn"]))))
    assert len(shuffled[-1]) == (len(datasets["torch"]) % 5 or 5)


def test_loss_of_a_batch_and_every_gradient_match_torch():
    ours, theirs = twins("GPTModel", config())
    ids = encode(TEXT)
    x, y = next(iter(CHAPTERS["tinyattn"].create_dataloader(ids, shuffle=False)))
    their_x, their_y = torch.tensor(x.tolist()), torch.tensor(y.tolist())
    loss = CHAPTERS["tinyattn"].calc_loss_batch(x, y, ours, "cpu")
    their_loss = CHAPTERS["torch"].calc_loss_batch(their_x, their_y, theirs, torch.device("cpu"))
    assert loss.shape == ()
    assert_close(loss, their_loss, THROUGH_GELU)
    # an untrained model guesses about uniformly: the loss is near log(vocabulary size)
    assert abs(loss.item() - math.log(len(VOCAB))) < 0.5
    loss.backward()
    their_loss.backward()
    assert_same_gradients(ours, theirs, THROUGH_GELU)


def test_training_loop_matches_torch_step_by_step():
    ids = encode(TEXT)
    split = int(0.8 * len(ids))
    ours, theirs = twins("GPTModel", config())
    losses = {}
    for lib, model in (("tinyattn", ours), ("torch", theirs)):
        chapter, module = CHAPTERS[lib], (tinyattn if lib == "tinyattn" else torch)
        module.manual_seed(123)
        train_loader = chapter.create_dataloader(ids[:split], batch_size=4, shuffle=False)
        val_loader = chapter.create_dataloader(ids[split:], batch_size=4, shuffle=False,
                                               drop_last=False)
        optimizer = module.optim.AdamW(model.parameters(), lr=0.004, weight_decay=0.1)
        losses[lib] = chapter.train_model_simple(
            model, train_loader, val_loader, optimizer, module.device("cpu"), num_epochs=2,
            eval_freq=3, eval_iter=2)
    train, val, seen = losses["tinyattn"]
    their_train, their_val, their_seen = losses["torch"]
    assert seen == their_seen and len(train) == len(their_train) >= 4
    np.testing.assert_allclose(train, their_train, rtol=THROUGH_GELU)
    np.testing.assert_allclose(val, their_val, rtol=THROUGH_GELU)
    assert train[-1] < train[0]  # it learns
    their_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        assert_close(param, their_params[name], THROUGH_GELU)
    assert ours.training and theirs.training  # evaluate_model switched back to training
    start = encode("every ")
    assert CHAPTERS["tinyattn"].generate_text_simple(
        ours.eval(), tinyattn.tensor([start]), 10, 8).tolist() == CHAPTERS[
        "torch"].generate_text_simple(theirs.eval(), torch.tensor([start]), 10, 8).tolist()


def test_dropout_is_active_in_training_and_off_in_evaluation():
    cfg = config(drop_rate=0.5)
    ours, theirs = twins("GPTModel", cfg)
    idx, their_idx = token_batch(seed=5)
    ours.eval()
    theirs.eval()
    assert_close(ours(idx), theirs(their_idx), THROUGH_GELU)
    evaluated = ours(idx).numpy()
    ours.train()
    tinyattn.manual_seed(0)
    first = ours(idx).numpy()
    tinyattn.manual_seed(0)
    assert np.array_equal(ours(idx).numpy(), first)  # the seed fixes the masks
    assert not np.allclose(first, evaluated)
