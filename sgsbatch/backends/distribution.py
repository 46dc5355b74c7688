"""The sampling distribution: log-probabilities of every token after temperature and top-p.

One definition for both sides of CISPO's importance weight: the transformers backend samples
from it and records its logprobs (vLLM's `processed_logprobs` are the same quantity), and the
trainer evaluates the current policy under it. Top-p keeps the most likely tokens whose mass
before them is below `top_p` (so the top token always stays) and renormalises. Temperature <= 0
(greedy) gives the temperature-1 distribution.
"""

from __future__ import annotations

from typing import Any


def sampling_logprobs(logits: Any, temperature: float, top_p: float) -> Any:
    """log p(token) per row of `logits` (…, vocab) under temperature and top-p."""
    import torch

    if temperature <= 0:
        return torch.log_softmax(logits, dim=-1)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_logp, order = torch.sort(logp, dim=-1, descending=True)
        probs = sorted_logp.exp()
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p  # always keeps the top token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logp = torch.log_softmax(logp.masked_fill(drop, float("-inf")), dim=-1)
    return logp
