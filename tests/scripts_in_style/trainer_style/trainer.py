"""A reusable training loop of the kind research codebases ship: a config object, batches
drawn for ever from a random sampler with replacement, and named callback events."""

import time

import torch
from config import Config
from torch.utils.data import RandomSampler
from torch.utils.data.dataloader import DataLoader


class Trainer:
    """Runs AdamW on ``model`` over ``dataset`` until ``config.max_iters`` steps (for ever when
    it is None); the ``on_batch_end`` callbacks see the trainer after every step."""

    @staticmethod
    def defaults():
        return Config(device="auto", workers=2, max_iters=None, batch_size=32, lr=3e-4,
                      betas=(0.9, 0.95), weight_decay=0.1, clip=1.0)

    def __init__(self, config, model, dataset):
        self.config, self.model, self.dataset = config, model, dataset
        self.events = {}
        wanted = config.device
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = wanted
        self.model = model.to(self.device)
        self.step = 0
        self.step_seconds = 0.0
        self.loss = None
        print(f"trainer: device {self.device}")

    def add_callback(self, event, fn):
        self.events.setdefault(event, []).append(fn)

    def trigger_callbacks(self, event):
        for fn in self.events.get(event, ()):
            fn(self)

    def _batches(self):
        sampler = RandomSampler(self.dataset, replacement=True, num_samples=int(1e10))
        return DataLoader(self.dataset, sampler=sampler, shuffle=False, pin_memory=True,
                          batch_size=self.config.batch_size, num_workers=self.config.workers)

    def run(self):
        cfg = self.config
        optimizer = self.model.make_optimizer(cfg)
        loader = self._batches()
        stream = iter(loader)
        self.model.train()
        last = time.time()
        while cfg.max_iters is None or self.step < cfg.max_iters:
            try:
                inputs, targets = next(stream)
            except StopIteration:  # a finite loader starts over
                stream = iter(loader)
                inputs, targets = next(stream)
            inputs, targets = inputs.to(self.device), targets.to(self.device)
            _, self.loss = self.model(inputs, targets)
            self.model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip)
            optimizer.step()
            self.step += 1
            now = time.time()
            self.step_seconds, last = now - last, now
            self.trigger_callbacks("on_batch_end")
