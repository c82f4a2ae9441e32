"""Tokenizers trained here, from a fixed word list, for tiny offline checkpoints (no hub download).

Byte-level BPE: any text in any script encodes without unknown tokens, and the same word list always gives
the same vocabulary, so checkpoints built from it are byte-identical run to run.
"""

from __future__ import annotations

from typing import Sequence


def train_bpe(words: Sequence[str], special_tokens: Sequence[str], vocab_size: int = 512):
    """A `tokenizers.Tokenizer` (byte-level BPE) trained on `words`, special tokens first in the vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(special_tokens), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [" ".join(words[start:start + 8]) for start in range(0, len(words), 8)] + list(words)
    tokenizer.train_from_iterator(corpus * 4, trainer)
    return tokenizer
