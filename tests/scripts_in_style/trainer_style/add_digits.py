"""Teach a tiny GPT to add two n-digit numbers: a project script on the trainer, with
command-line overrides (``--trainer.max_iters=300 --data.digits=1``), a callback that
evaluates held-out problems with ``generate``, and the sum's digits written in reverse
(least significant first, as a carry travels) and flipped back to read it."""

import sys

import torch
from config import Config
from model import TinyGPT
from torch.utils.data import DataLoader, Dataset
from trainer import Trainer


class Sums(Dataset):
    """Every ``a + b`` with n-digit operands, split once into train and test by a seeded
    permutation: ``x`` is the digits of a, b and the reversed sum but the last, ``y`` the
    next digits, masked with -1 outside the answer."""

    def __init__(self, digits, split, test_share=0.2):
        self.digits = digits
        generator = torch.Generator()
        generator.manual_seed(1234)
        order = torch.randperm((10 ** digits) ** 2, generator=generator)
        cut = int(len(order) * test_share)
        self.problems = order[:cut] if split == "test" else order[cut:]

    def __len__(self):
        return self.problems.nelement()

    def __getitem__(self, i):
        n = self.digits
        problem = self.problems[i].item()
        a, b = divmod(problem, 10 ** n)
        text = f"{a:0{n}d}{b:0{n}d}" + f"{a + b:0{n + 1}d}"[::-1]
        tokens = [int(ch) for ch in text]
        x = torch.tensor(tokens[:-1], dtype=torch.long)
        y = torch.tensor(tokens[1:], dtype=torch.long)
        y[: 2 * n - 1] = -1  # only the answer is scored
        return x, y


def accuracy(model, dataset, device):
    """The share of problems whose greedily generated answer is the sum."""
    n = dataset.digits
    place = torch.tensor([[10 ** i for i in range(n + 1)][::-1]], device=device)
    right = total = 0
    for x, _ in DataLoader(dataset, batch_size=50, num_workers=0, drop_last=False):
        x = x.to(device)
        question = x[:, : 2 * n]
        answer = model.generate(question, n + 1, do_sample=False)[:, -(n + 1):].flip(1)
        a = (question[:, :n] * place[:, 1:]).sum(1)
        b = (question[:, n:] * place[:, 1:]).sum(1)
        correct = ((answer * place).sum(1) == a + b).cpu()
        right += int(correct.sum())
        total += correct.numel()
    return right / total


def main(argv):
    config = Config(seed=0, data=Config(digits=1), model=TinyGPT.defaults(),
                    trainer=Trainer.defaults(), eval_every=200)
    config.model.width, config.model.dropout = 48, 0.0
    config.trainer.lr, config.trainer.batch_size, config.trainer.max_iters = 5e-3, 64, 600
    config.merge_from_args(argv)
    print(config)
    torch.manual_seed(config.seed)
    train, test = Sums(config.data.digits, "train"), Sums(config.data.digits, "test")
    config.model.vocab = 10
    config.model.context = 3 * config.data.digits
    model = TinyGPT(config.model)
    trainer = Trainer(config.trainer, model, train)
    history = []

    def report(trainer):
        if trainer.step % 50 == 0:
            print(f"step {trainer.step}: loss {trainer.loss.item():.4f} "
                  f"({trainer.step_seconds * 1000:.1f} ms)")

    def evaluate(trainer):
        if trainer.step % config.eval_every == 0:
            model.eval()
            with torch.no_grad():
                history.append((trainer.step, accuracy(model, test, trainer.device)))
            print(f"step {trainer.step}: test accuracy {history[-1][1]:.4f}")
            model.train()

    trainer.add_callback("on_batch_end", report)
    trainer.add_callback("on_batch_end", evaluate)
    trainer.run()
    model.eval()
    train_accuracy = accuracy(model, train, trainer.device)
    test_accuracy = accuracy(model, test, trainer.device)
    print(f"final: train accuracy {train_accuracy:.4f}, test accuracy {test_accuracy:.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
