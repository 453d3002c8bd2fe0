"""Our (Super)GLUE fine-tuning loop (helpers.evaluation.classifier.fit) against ``transformers.Trainer`` on a tiny
task: 40 CoLA training sentences (bundled), a smoke-size LTG-BERT, the same initial weights, the same batch order
(Trainer is handed a sampler that draws our seeded permutations), dropout off, gradient clipping at 1.0 in both.

* With Trainer's own AdamW and linear schedule (no warm-up, no weight decay: where the two definitions coincide)
  every step's training loss agrees within float32 round-off.
* With warm-up they differ for a stated reason: Trainer's linear warm-up is ``step / warmup`` (its first step runs at
  lr 0), ours ``(step + 1) / warmup`` (the first step already moves); and Trainer decays every tensor but biases and
  LayerNorms (embeddings too), ours only weight matrices (:func:`helpers.training.optim.param_groups`). Handing
  Trainer our optimiser and schedule (the BERTtime preset: decay 0.01, 6 % warm-up) brings the losses back together.
"""
from __future__ import annotations

import pytest
import torch
import transformers

from helpers.core.seeding import generator
from helpers.evaluation import classifier as clf
from helpers.evaluation import glue_tasks as gt
from helpers.evaluation.finetune_setup import FinetuneConfig
from helpers.training.optim import param_groups

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py

N_TRAIN, EPOCHS, BATCH = 40, 3, 16  # 3 steps an epoch, the last a partial batch of 8


@pytest.fixture(scope="module")
def task():
    train = gt.load_examples("cola", "train")[:N_TRAIN]
    dev = gt.load_examples("cola", "train")[N_TRAIN:N_TRAIN + 16]
    return train, dev


@pytest.fixture(scope="module")
def model_dir(task, tmp_path_factory):
    """A random smoke-size LTG-BERT MLM folder with an encoder tokenizer trained on the task's sentences."""
    from helpers.data.tokenizers import train_tokenizer
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config

    texts = [e.a for e in gt.load_examples("cola", "train")[:400]]
    tok = train_tokenizer(texts, "encoder", 512)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_ltgbert")
    LtgBertForMaskedLM(ltg_bert_config("smoke", vocab_size=len(tok))).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _classifier(model_dir, seed: int):
    model, tok, kind = clf.load_classifier(model_dir, 2, ("unacceptable", "acceptable"), seed=seed)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model, tok, kind


def _recording(model) -> list[float]:
    """The training loss of every forward pass in train mode with labels (both loops call ``model(...)``)."""
    losses: list[float] = []

    def hook(module, args, kwargs, out):
        if module.training and getattr(out, "loss", None) is not None:
            losses.append(float(out.loss.detach()))

    model.register_forward_hook(hook, with_kwargs=True)
    return losses


def ours(model_dir, task, cfg: FinetuneConfig) -> tuple[list[float], dict]:
    model, tok, kind = _classifier(model_dir, cfg.seed)
    losses = _recording(model)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    clf.fit(model, tok, task[0], task[1], cfg, "mcc", 2, kind, progress=False, log=lambda line: None)
    return losses, start


class OurOrder(torch.utils.data.Sampler):
    """The batch order of :func:`clf.fit`: one ``randperm`` an epoch from ``generator(seed)``."""

    def __init__(self, n: int, seed: int):
        self.n, self.gen = n, generator(seed)

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=self.gen).tolist())


def trainer(model_dir, task, cfg: FinetuneConfig, tmp_path, our_optimizer: bool) -> tuple[list[float], dict]:
    model, tok, kind = _classifier(model_dir, cfg.seed)
    losses = _recording(model)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    train = task[0]
    ids = clf.encode(tok, train, cfg.max_length, kind)
    data = [{"input_ids": x, "labels": e.label} for x, e in zip(ids, train)]

    def collate(rows):
        x, m = clf.pad_batch([r["input_ids"] for r in rows], tok.pad_token_id)
        return {"input_ids": x, "attention_mask": m, "labels": torch.tensor([r["labels"] for r in rows])}

    steps = -(-len(train) // cfg.batch_size) * cfg.epochs
    warmup = int(round(cfg.warmup * steps)) if cfg.warmup < 1 else int(cfg.warmup)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=cfg.batch_size,
        num_train_epochs=cfg.epochs, learning_rate=cfg.lr, weight_decay=cfg.weight_decay, adam_beta1=cfg.betas[0],
        adam_beta2=cfg.betas[1], adam_epsilon=cfg.eps, max_grad_norm=cfg.grad_clip, lr_scheduler_type="linear",
        warmup_steps=warmup, seed=cfg.seed, use_cpu=True, report_to="none", save_strategy="no",
        eval_strategy="no", logging_strategy="no", disable_tqdm=True, remove_unused_columns=False,
        dataloader_num_workers=0, optim="adamw_torch")
    optimizers = (None, None)
    if our_optimizer:
        opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
        optimizers = (opt, torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: clf.lr_multiplier(s, steps, warmup, cfg.schedule)))

    class Ordered(transformers.Trainer):
        def _get_train_sampler(self, train_dataset=None):
            return OurOrder(len(train), cfg.seed)

    Ordered(model=model, args=args, train_dataset=data, data_collator=collate, optimizers=optimizers).train()
    return losses, start


def _cfg(**kw) -> FinetuneConfig:
    return FinetuneConfig(epochs=EPOCHS, batch_size=BATCH, lr=1e-3, seed=7, device="cpu", max_length=64, **kw)


def test_same_seed_same_losses_as_trainer_where_the_definitions_coincide(model_dir, task, tmp_path):
    cfg = _cfg(warmup=0, weight_decay=0.0)
    a, start_a = ours(model_dir, task, cfg)
    b, start_b = trainer(model_dir, task, cfg, tmp_path, our_optimizer=False)
    assert all(torch.equal(start_a[k], start_b[k]) for k in start_a)  # the same initial weights, head included
    assert len(a) == len(b) == 3 * EPOCHS
    assert a[0] == pytest.approx(b[0], abs=1e-6)  # the same first batch, same weights
    assert a == pytest.approx(b, abs=1e-5), (a, b)
    assert a[-1] < a[0] - 0.05  # the run learned something, so agreement is not both standing still


def test_warm_up_and_decay_differ_by_definition_and_agree_with_ours_handed_to_trainer(model_dir, task, tmp_path):
    cfg = _cfg(warmup=0.3, weight_decay=0.01)  # 3 warm-up steps
    a, _ = ours(model_dir, task, cfg)
    own, _ = trainer(model_dir, task, cfg, tmp_path, our_optimizer=False)
    same, _ = trainer(model_dir, task, cfg, tmp_path, our_optimizer=True)
    assert a == pytest.approx(same, abs=1e-5), (a, same)
    # Trainer's first step runs at lr 0: its second batch sees the initial weights, ours has moved already
    assert a[0] == pytest.approx(own[0], abs=1e-6) and abs(a[1] - own[1]) > 1e-4, (a, own)
    assert clf.lr_multiplier(0, 9, 3) == pytest.approx(1 / 3)
    lam = transformers.get_linear_schedule_with_warmup(torch.optim.SGD([torch.zeros(1)], lr=1.0), 3, 9).lr_lambdas[0]
    assert lam(0) == 0.0 and [lam(s) for s in range(3, 9)] == pytest.approx(
        [clf.lr_multiplier(s, 9, 3) for s in range(3, 9)])  # after warm-up the two linear decays coincide
