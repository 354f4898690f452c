"""An encoder-decoder transformer in the style of the line-by-line annotated paper
implementations, trained on the copy task: label smoothing through ``nn.KLDivLoss``, the
warm-up learning-rate schedule through ``LambdaLR``, masks built from padding and from the
subsequent-position rule, and greedy decoding that should give the input back.

``python copy_task.py [epochs] [seed]``: prints each epoch's losses and the decoded sequences.
"""

import copy
import math
import sys
import time

import torch
import torch.nn as nn
from torch.nn.functional import log_softmax
from torch.optim.lr_scheduler import LambdaLR


def clones(module, n):
    "n independent copies of a module."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


class LayerNorm(nn.Module):
    "Normalise the last dim, then scale and shift (the unbiased std, as the paper's code)."

    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(features))
        self.shift = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.gain * (x - mean) / (std + self.eps) + self.shift


class SublayerConnection(nn.Module):
    "x + dropout(sublayer(norm(x))): a residual around a pre-normalised sublayer."

    def __init__(self, size, dropout):
        super().__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


def attention(query, key, value, mask=None, dropout=None):
    "Scaled dot-product attention; positions where mask == 0 get -1e9 before the softmax."
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = scores.softmax(dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return torch.matmul(weights, value), weights


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        assert d_model % h == 0
        self.d_k, self.h = d_model // h, h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # the same mask for every head
        batches = query.size(0)
        query, key, value = [
            proj(t).view(batches, -1, self.h, self.d_k).transpose(1, 2)
            for proj, t in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(batches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward, dropout):
        super().__init__()
        self.self_attn, self.feed_forward = self_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 2)
        self.size = size

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class DecoderLayer(nn.Module):
    def __init__(self, size, self_attn, src_attn, feed_forward, dropout):
        super().__init__()
        self.size = size
        self.self_attn, self.src_attn, self.feed_forward = self_attn, src_attn, feed_forward
        self.sublayer = clones(SublayerConnection(size, dropout), 3)

    def forward(self, x, memory, src_mask, tgt_mask):
        m = memory
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sublayer[1](x, lambda x: self.src_attn(x, m, m, src_mask))
        return self.sublayer[2](x, self.feed_forward)


class Stack(nn.Module):
    "N copies of a layer, then a final LayerNorm."

    def __init__(self, layer, n):
        super().__init__()
        self.layers = clones(layer, n)
        self.norm = LayerNorm(layer.size)

    def forward(self, x, *args):
        for layer in self.layers:
            x = layer(x, *args)
        return self.norm(x)


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=64):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


class Generator(nn.Module):
    "Linear projection to the vocabulary, then log-softmax."

    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


def make_model(src_vocab, tgt_vocab, n=2, d_model=32, d_ff=64, h=4, dropout=0.0):
    c = copy.deepcopy
    attn = MultiHeadedAttention(h, d_model)
    ff = FeedForward(d_model, d_ff, dropout)
    position = PositionalEncoding(d_model, dropout)
    model = EncoderDecoder(
        Stack(EncoderLayer(d_model, c(attn), c(ff), dropout), n),
        Stack(DecoderLayer(d_model, c(attn), c(attn), c(ff), dropout), n),
        nn.Sequential(Embeddings(d_model, src_vocab), c(position)),
        nn.Sequential(Embeddings(d_model, tgt_vocab), c(position)),
        Generator(d_model, tgt_vocab),
    )
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def subsequent_mask(size):
    "True where position i may attend position j (j <= i)."
    shape = (1, size, size)
    above = torch.triu(torch.ones(shape), diagonal=1).type(torch.uint8)
    return above == 0


class Batch:
    "Source and target with their masks; the target split into decoder input and labels."

    def __init__(self, src, tgt=None, pad=0):
        self.src = src
        self.src_mask = (src != pad).unsqueeze(-2)
        if tgt is not None:
            self.tgt = tgt[:, :-1]
            self.tgt_y = tgt[:, 1:]
            self.tgt_mask = self.make_std_mask(self.tgt, pad)
            self.ntokens = (self.tgt_y != pad).data.sum()

    @staticmethod
    def make_std_mask(tgt, pad):
        mask = (tgt != pad).unsqueeze(-2)
        return mask & subsequent_mask(tgt.size(-1)).type_as(mask.data)


class LabelSmoothing(nn.Module):
    "KL divergence to a smoothed one-hot target; padding rows and the padding class get 0."

    def __init__(self, size, padding_idx, smoothing=0.0):
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.true_dist = None

    def forward(self, x, target):
        assert x.size(1) == self.size
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        self.true_dist = true_dist
        return self.criterion(x, true_dist.clone().detach())


def rate(step, model_size, factor, warmup):
    "The paper's schedule: linear warm-up, then decay with the inverse square root of the step."
    step = max(step, 1)
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


class LossCompute:
    def __init__(self, generator, criterion):
        self.generator, self.criterion = generator, criterion

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1))
        return loss.data * norm / norm, loss / norm


def data_gen(vocab, batch_size, batches):
    "Random sequences of 10 symbols starting with 1, to be copied."
    for _ in range(batches):
        data = torch.randint(1, vocab, size=(batch_size, 10))
        data[:, 0] = 1
        src = data.requires_grad_(False).clone().detach()
        tgt = data.requires_grad_(False).clone().detach()
        yield Batch(src, tgt, 0)


def run_epoch(data_iter, model, loss_compute, optimizer=None, scheduler=None):
    "One pass over the batches; steps the optimizer and schedule when given. Loss per token."
    start, total_tokens, total_loss = time.time(), 0, 0.0
    for batch in data_iter:
        out = model.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
        loss, loss_node = loss_compute(out, batch.tgt_y, batch.ntokens)
        if optimizer is not None:
            loss_node.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
        total_loss += float(loss)
        total_tokens += int(batch.ntokens)
    return total_loss / total_tokens, total_tokens / (time.time() - start)


def greedy_decode(model, src, src_mask, max_len, start_symbol):
    memory = model.encode(src, src_mask)
    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.data[0]
        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)
    return ys


def main(epochs=20, seed=0):
    torch.manual_seed(seed)
    vocab = 11
    criterion = LabelSmoothing(size=vocab, padding_idx=0, smoothing=0.0)
    model = make_model(vocab, vocab, n=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = LambdaLR(optimizer=optimizer, lr_lambda=lambda step: rate(
        step, model_size=model.src_embed[0].d_model, factor=3.0, warmup=100))
    for epoch in range(epochs):
        model.train()
        train_loss, speed = run_epoch(data_gen(vocab, 32, 20), model,
                                      LossCompute(model.generator, criterion), optimizer,
                                      scheduler)
        model.eval()
        with torch.no_grad():
            eval_loss, _ = run_epoch(data_gen(vocab, 32, 5), model,
                                     LossCompute(model.generator, criterion))
        print(f"epoch {epoch}: train loss {train_loss:.4f} eval loss {eval_loss:.4f} "
              f"lr {optimizer.param_groups[0]['lr']:.2e} ({speed:.0f} tokens/s)")
    model.eval()
    copied = tokens_right = tokens = 0
    checks = [torch.LongTensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])]
    checks += [torch.cat([torch.ones(1, 1).long(), torch.randint(1, vocab, (1, 9))], dim=1)
               for _ in range(9)]
    with torch.no_grad():
        for src in checks:
            src_mask = torch.ones(1, 1, src.shape[1])
            out = greedy_decode(model, src, src_mask, max_len=src.shape[1], start_symbol=1)
            copied += int(torch.equal(out, src))
            tokens_right += int((out[:, 1:] == src[:, 1:]).sum())
            tokens += src.size(1) - 1
            print("src", src.tolist()[0], "decoded", out.tolist()[0])
    print(f"copied {copied} of {len(checks)} sequences; "
          f"token accuracy {tokens_right / tokens:.4f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
