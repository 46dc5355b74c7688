"""The `tiny-random` model: a small random Llama-style causal LM plus tokenizer, built offline.

Covered: training a byte-level BPE tokenizer (`tokenizers`) on a given corpus, so any unicode
in Lean statements (ℝ, ∧, ≤, ...) round-trips exactly; wrapping it as a
`PreTrainedTokenizerFast` with bos/eos/pad tokens and a small jinja chat template
(`<|user|>` / `<|assistant|>` turns, generation prompt supported, eos ends an assistant turn);
a random `LlamaForCausalLM` initialised from the seed; and writing both into a directory
atomically (run/checkpoint.py: staging directory + rename, marker file last). The same seed,
corpus and sizes give byte-identical files.

Not covered: anything that needs the model hub (nothing is downloaded), real model quality.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sgsbatch.run.checkpoint import is_complete, publish_dir, read_marker, staging_dir

BOS = "<|bos|>"
EOS = "<|eos|>"
PAD = "<|pad|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] }}"
    "{% if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
    "{{ '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def _corpus_digest(corpus: Sequence[str]) -> str:
    h = hashlib.sha256()
    for text in corpus:
        b = text.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def build_tokenizer(corpus: Sequence[str], vocab_size: int = 512) -> Any:
    """A byte-level BPE `PreTrainedTokenizerFast` trained on `corpus` (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [BOS, EOS, PAD, *ROLE_TOKENS]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS),
        model_max_length=1_000_000,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_param_count(vocab_size: int = 512, hidden_size: int = 64, num_layers: int = 2) -> int:
    """Parameters of `build_tiny_random`'s model with these arguments (its defaults: ~0.2M): untied
    embeddings and head, per layer q/k/v/o, gate/up/down at 4 x hidden, two RMSNorms; the final norm.
    Pure arithmetic (the disk projection of a tiny run uses it; tests/models checks it against the model)."""
    per_layer = 4 * hidden_size * hidden_size + 3 * hidden_size * 4 * hidden_size + 2 * hidden_size
    return 2 * vocab_size * hidden_size + num_layers * per_layer + hidden_size


def build_tiny_random(
    out_dir: Path,
    seed: int,
    corpus: Sequence[str],
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    max_positions: int = 4096,  # the reference Guide prompt is 1,600-2,200 tiny tokens (512-token vocabulary)
) -> None:
    """Build the tiny random model + tokenizer into `out_dir` (atomic; a no-op if already built).

    Raises ValueError if `out_dir` holds a tiny model built from different arguments.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    marker = {
        "kind": "tiny-random",
        "seed": seed,
        "corpus_sha256": _corpus_digest(corpus),
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "max_positions": max_positions,
    }
    if is_complete(out_dir):
        if read_marker(out_dir) != marker:
            raise ValueError(f"{out_dir} holds a tiny-random model built from other arguments")
        return
    tokenizer = build_tokenizer(corpus, vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 4,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        initializer_range=0.02,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        model.float()
    tmp = staging_dir(out_dir)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not publish_dir(tmp, out_dir, marker) and read_marker(out_dir) != marker:
        raise ValueError(f"{out_dir} holds a tiny-random model built from other arguments")
