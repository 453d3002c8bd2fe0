"""The one next-token rule for every model's generation loop (``docs/methods.md#generation``): greedy or nucleus
(top-p, temperature) as a :class:`Decoding`, :func:`sample_next` over a batch of logits, and the decoding names of
notebook 03's corpora. The GPT-Neo decoders (:mod:`helpers.generation.completions`) and the compressor
(:mod:`helpers.models.compressor`) both sample with it; it imports only ``torch``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class Decoding:
    """``greedy`` (k must be 1) or ``nucleus`` sampling with ``top_p`` and ``temperature``; ``k`` per prompt."""

    method: str = "greedy"
    k: int = 1
    top_p: float = 0.95
    temperature: float = 1.0

    def __post_init__(self):
        if self.method not in ("greedy", "nucleus"):
            raise ValueError(f"decoding method must be greedy or nucleus, not {self.method!r}")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.method == "greedy" and self.k != 1:
            raise ValueError("greedy decoding is deterministic: k must be 1")
        if not 0 < self.top_p <= 1 or self.temperature <= 0:
            raise ValueError(f"need 0 < top_p <= 1 and temperature > 0, got {self.top_p}, {self.temperature}")

    @property
    def name(self) -> str:
        return "greedy" if self.method == "greedy" else f"nucleus-{self.k}"

    def settings(self) -> dict:
        d = asdict(self)
        if self.method == "greedy":
            d.pop("top_p"), d.pop("temperature")
        return d


SHORTLIST = 256  # nucleus sampling looks at the most likely tokens first (see sample_next)


def _draw(sorted_p: torch.Tensor, idx: torch.Tensor, top_p: float, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from probabilities sorted in descending order (``idx``: their token ids), keeping the
    tokens whose strictly more likely predecessors hold less than ``top_p`` of the mass."""
    if top_p < 1.0:
        before = sorted_p.cumsum(-1) - sorted_p  # mass of strictly more likely tokens
        sorted_p = sorted_p.masked_fill(before >= top_p, 0.0)
    cdf = sorted_p.cumsum(-1)
    pos = torch.searchsorted(cdf, u.to(cdf.device) * cdf[:, -1:]).clamp_(max=sorted_p.size(-1) - 1)
    return idx.gather(-1, pos).squeeze(-1)


def sample_next(logits: torch.Tensor, decoding: Decoding, generator: torch.Generator | None,
                u: torch.Tensor | None = None) -> torch.Tensor:
    """Next token per row of ``logits`` [B, V]: argmax, or nucleus sampling (smallest set of most likely tokens
    whose probability reaches ``top_p``, the token that crosses the threshold included), by inverse-CDF sampling
    with uniforms from ``generator`` (or the given ``u`` [B, 1] in [0, 1)).

    Sorting a whole vocabulary per row and step is most of the cost of sampling from a small model, so the
    ``SHORTLIST`` most likely tokens are taken first (``topk``), and only a row whose shortlist holds less than
    ``top_p`` of the mass is sorted whole. The draw is the same as sorting every row (the tokens past the shortlist
    would all be cut), up to the order of tokens of exactly equal probability. It pays only where nuclei are
    narrow: the cpu profile's tiny-1M decoder spreads top-p 0.95 over a median of 332 of its 4,096 tokens, so most
    rows are sorted whole anyway and generation is no faster (``benchmarks/generation.py``, where a shortlist of
    1,024 measured 1.29x but changed 1 of 320 completions)."""
    if decoding.method == "greedy":
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / decoding.temperature, dim=-1)
    if u is None:
        u = torch.rand(len(logits), 1, generator=generator)
    vocab = probs.size(-1)
    if decoding.top_p >= 1.0 or vocab <= SHORTLIST:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        return _draw(sorted_p, idx, decoding.top_p, u)
    sorted_p, idx = probs.topk(SHORTLIST, dim=-1)
    out = _draw(sorted_p, idx, decoding.top_p, u)
    wide = (sorted_p.sum(-1) < decoding.top_p).nonzero().squeeze(-1)  # the nucleus reaches past the shortlist
    if len(wide):
        full_p, full_idx = probs[wide].sort(dim=-1, descending=True)
        out[wide] = _draw(full_p, full_idx, decoding.top_p, u.to(probs.device)[wide])
    return out


def decoding_from_name(name: str, top_p: float = 0.95, temperature: float = 1.0) -> Decoding:
    """``"greedy"`` or ``"nucleus-<k>"`` (a corpus name of notebook 03's params) as a :class:`Decoding`."""
    if name == "greedy":
        return Decoding("greedy")
    method, _, k = name.partition("-")
    if method != "nucleus" or not k.isdigit() or int(k) < 1:
        raise ValueError(f"a decoding name is 'greedy' or 'nucleus-<k>' (k >= 1), not {name!r}")
    return Decoding("nucleus", k=int(k), top_p=top_p, temperature=temperature)


def nested_decodings(decodings: Sequence[Decoding]) -> dict[str, tuple[Decoding, int]]:
    """Nucleus corpora with the same settings share samples: ``nucleus-1`` is the first sample of
    ``nucleus-10``, ``nucleus-5`` its first five. Returns, per decoding name, the decoding actually run and the
    number of its samples to keep (so only the largest k is generated)."""
    out: dict[str, tuple[Decoding, int]] = {}
    for d in decodings:
        if d.method == "greedy":
            out[d.name] = (d, 1)
            continue
        biggest = max((e for e in decodings if e.method == "nucleus" and e.top_p == d.top_p and e.temperature == d.temperature),
                      key=lambda e: e.k)
        out[d.name] = (biggest, d.k)
    return out
