"""A training process's memory with and without giving the C heap's free memory back (``malloc_trim``).

Notebook 04's encoder workers in the cpu reference run peaked at 3.5 GB each (8 GB for the notebook) training a
hidden-128 LTG-BERT, whose weights, optimizer state and activations need a few hundred MB. The growth is the C heap
keeping what tensors free: the process's resident memory rises with the steps. This runs the LTG-BERT ``cpu`` preset
(32 × 128 random tokens a step, AdamW, one thread, fp32) for ``--steps`` steps in a fresh process per arm, calling
:func:`helpers.core.process_memory.release_freed_memory` every K steps (``--every``; 0 = never, the baseline), and
prints each arm's time, peak RSS (``VmHWM``), RSS at the end and last loss, with the ratios against the baseline.

    .venv/bin/python benchmarks/heap_trim.py --steps 300 --every 0,50

The training loop calls it at each evaluation (``eval_every``: 50 in the cpu profile's notebook 04) and
:func:`helpers.core.parallel.run_jobs` after each job of a worker process. The losses must be equal: the call changes
where memory lives, not what is computed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import _common  # noqa: F401  (first: puts src/ on sys.path in a checkout without the editable install)

from helpers.core.hardware import cpu_info


def status_mib(key: str) -> int:
    """``VmHWM`` / ``VmRSS`` of this process from ``/proc/self/status``, in MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith(key))


def arm(steps: int, every: int) -> dict:
    """``steps`` steps of the LTG-BERT cpu preset, the heap trimmed every ``every`` steps (0: never)."""
    import torch

    from helpers.core.process_memory import release_freed_memory
    from helpers.data.masking import MaskedBlocks, TokenIds, mlm_loss
    from helpers.models.ltg_bert import LtgBertForMaskedLM, ltg_bert_config
    from helpers.training.optim import param_groups

    torch.set_num_threads(1)
    torch.manual_seed(0)
    vocab = 4096
    net = LtgBertForMaskedLM(ltg_bert_config("cpu", vocab)).train()
    tok = TokenIds(vocab_size=vocab, mask_id=4, cls_id=1, sep_id=2, pad_id=3, special_ids=(0, 1, 2, 3, 4, 5))
    body = torch.randint(6, vocab, (32 * steps, 126), generator=torch.Generator().manual_seed(0))
    data = MaskedBlocks(torch.cat([torch.full((len(body), 1), 1), body, torch.full((len(body), 1), 2)], 1), tok, seed=0)
    opt = torch.optim.AdamW(param_groups(net, 0.1), lr=1e-3)
    before = status_mib("VmRSS")
    t0 = time.perf_counter()
    for s in range(steps):
        loss = mlm_loss(net, data.batch(s, 32))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if every and (s + 1) % every == 0:
            release_freed_memory()
    return {"every": every, "seconds": round(time.perf_counter() - t0, 1), "before_mib": before,
            "peak_mib": status_mib("VmHWM"), "end_mib": status_mib("VmRSS"), "loss": float(loss.detach())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--every", default="0,50", help="comma-separated: trim every K steps (0 = never, the baseline)")
    ap.add_argument("--arm", type=int, default=None, help=argparse.SUPPRESS)  # one arm, in its own process
    a = ap.parse_args()
    if a.arm is not None:
        print(json.dumps(arm(a.steps, a.arm)))
        return
    rows = []
    for every in (int(x) for x in a.every.split(",")):
        out = subprocess.run([sys.executable, __file__, "--steps", str(a.steps), "--arm", str(every)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = rows[0]
    print(f"{cpu_info()['label']}, one thread, fp32; LTG-BERT cpu preset, {a.steps} steps of 32 x 128 tokens")
    print(f"{'trim every':>10} {'seconds':>8} {'x time':>7} {'peak RSS MiB':>13} {'x peak':>7} {'end RSS MiB':>12} "
          f"{'last loss':>10}")
    for r in rows:
        print(f"{r['every'] or 'never':>10} {r['seconds']:>8.1f} {r['seconds'] / base['seconds']:>7.2f} "
              f"{r['peak_mib']:>13,} {r['peak_mib'] / base['peak_mib']:>7.2f} {r['end_mib']:>12,} {r['loss']:>10.6f}")
    same = len({r["loss"] for r in rows}) == 1
    print(f"before training: {base['before_mib']:,} MiB; last losses {'equal' if same else 'DIFFER'} across the arms")


if __name__ == "__main__":
    main()
