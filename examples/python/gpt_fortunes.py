# A small GPT trained on English text under mixed_bfloat16 from Python, then asked to continue a
# prompt: examples/transformers.cpp in Python. The text is the fortune databases of Debian's
# `fortunes` package, tokenized by bytes; TokenDataset draws windows of it that fit reads batch by
# batch. A few steps show the loss falling; --steps 3000 and `--context 128` train a readable model
# (as `mixprec train --model gpt-micro --dataset text:/usr/share/games/fortunes` does).
import argparse

import mixprec as mp
from mixprec import mixed_precision

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
parser.add_argument("--context", type=int, default=64, help="tokens per window (default 64)")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--policy", default="mixed_bfloat16")
args = parser.parse_args()

mixed_precision.set_global_policy(args.policy)
mp.set_seed(1)

tokens = mp.data.open_text_dataset(mp.data.FORTUNES_DIR, validation_fraction=0.1)  # vocab 257
gpt = mp.applications.GPT(preset="gpt-nano", context=args.context, vocab=tokens.vocab_size)
adamw = mp.optimizers.AdamW(learning_rate=2e-3,
                            exclude_from_weight_decay=["bias", "gamma", "beta", "embeddings"])
gpt.compile(optimizer=adamw, loss=mp.losses.SparseCategoricalCrossentropy(from_logits=True))
train = tokens.train_windows(args.context, batch_size=args.batch_size,
                             steps_per_epoch=args.steps, seed=1)
gpt.fit(train, epochs=1, verbose=2)
validation = tokens.validation_windows(args.context)
print(f"{args.policy}: validation loss {gpt.evaluate(validation, batch_size=64, verbose=0):.4f}")

byte_tokens = mp.data.ByteTokenizer()
prompt = byte_tokens.encode("The ")
out = mp.applications.generate(gpt, prompt, max_tokens=60, temperature=0.8, top_k=20)
print(byte_tokens.decode(out).decode("utf-8", errors="replace"))
