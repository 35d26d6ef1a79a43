"""A tiny Llama with random weights and a byte-level BPE tokenizer, built on this machine.

The real-engine harness needs a model vLLM can serve without a model hub: a ``LlamaForCausalLM``
whose weights are random (a fixed seed, so every build is the same model) and a tokenizer trained on
local text (Python's own standard library sources). Its outputs are random text; the harness fixes
every length with token-id prompts, ``max_tokens`` and ``ignore_eos``, so the text never matters —
only the engine's work does, and that is the work of a real Llama of this shape.

Runs in the engine's environment (the ``engine`` extra: torch, transformers, tokenizers)::

    python -m app.bench.realengine.model OUT_DIR [--hidden 512] [--layers 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 8192
CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"


def _corpus(limit_bytes: int = 8 << 20) -> list[str]:
    """Python's standard library sources, up to ``limit_bytes`` (text the machine already has)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, size = [], 0
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        size += len(text)
        if size >= limit_bytes:
            break
    return texts


def build_tokenizer(out: Path) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def build_model(out: Path, hidden: int = 512, layers: int = 8, heads: int = 8, intermediate: int = 1408,
                max_positions: int = 4096, seed: int = 0) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fast = build_tokenizer(out)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=max_positions, bos_token_id=fast.bos_token_id,
                         eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    (out / "headroom-model.json").write_text(json.dumps(
        {"hidden": hidden, "layers": layers, "heads": heads, "intermediate": intermediate, "vocab": VOCAB,
         "max_positions": max_positions, "seed": seed, "torch": torch.__version__}, indent=1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    args = p.parse_args(argv)
    build_model(args.out, hidden=args.hidden, layers=args.layers)
    sys.stdout.write(f"model written to {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
