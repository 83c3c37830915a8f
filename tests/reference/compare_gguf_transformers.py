"""transformers' answer for a real GGUF model: the reference tests/slow/real_model_test.cpp compares
our converted model against.

transformers dequantizes the GGUF's tensors to float32 (its own reader, not ours) and runs the
model; the chat prompt comes from the family's published tokenizer and chat template (a
tokenizer_config.json folder of ../shared/data), rendered by transformers' apply_chat_template.
The output JSON holds the prompt's ids, the greedy continuation and, at every position of prompt
+ continuation (teacher-forced, one pass), the `top` largest logits with their ids and the
logits' min and max, so that a test can bound our error as a share of the range without
committing the whole vocabulary.

Run with the torch venv (transformers + gguf + accelerate):
  /work/venv-torch/bin/python tests/reference/compare_gguf_transformers.py \
      --gguf "$(scripts/default-model.sh gemma3)" --tokenizer ../shared/data/tokenizers/gemma3 \
      --out tests/data/real_models/gemma3_rivers.json
  /work/venv-torch/bin/python tests/reference/compare_gguf_transformers.py \
      --gguf "$(scripts/default-model.sh smollm2)" --out tests/data/real_models/smollm2_rivers.json
"""
import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--tokenizer", help="folder with tokenizer.json and tokenizer_config.json (default: the GGUF's)")
    parser.add_argument("--question", default="Name three rivers.")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    torch.manual_seed(0)
    gguf = {"pretrained_model_name_or_path": os.path.dirname(os.path.abspath(args.gguf)),
            "gguf_file": os.path.basename(args.gguf)}
    model = AutoModelForCausalLM.from_pretrained(**gguf, dtype=torch.float32)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer) if args.tokenizer else AutoTokenizer.from_pretrained(**gguf)
    messages = [{"role": "user", "content": args.question}]
    prompt = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])

    # Greedy, a whole pass per token: no cache, no end-of-turn stop, exactly `steps` tokens.
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(args.steps):
            logits = model(torch.tensor([ids])).logits[0, -1]
            ids.append(int(torch.argmax(logits)))
        # Teacher-forced over prompt + continuation but its last token: the logits each step saw.
        all_logits = model(torch.tensor([ids[:-1]])).logits[0]
    greedy = ids[len(prompt):]
    assert [int(torch.argmax(row)) for row in all_logits[len(prompt) - 1 :]] == greedy

    positions = []
    for row in all_logits:
        values, indices = torch.topk(row, args.top)
        positions.append({
            "top_ids": [int(i) for i in indices],
            "top_logits": [float(v) for v in values],
            "min": float(row.min()),
            "max": float(row.max()),
        })
    out = {
        "source": "transformers %s, float32, %s" % (__import__("transformers").__version__, os.path.basename(args.gguf)),
        "question": args.question,
        "prompt": prompt,
        "greedy": greedy,
        "greedy_text": tokenizer.decode(greedy),
        "positions": positions,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print("prompt", prompt)
    print("greedy", greedy)
    print(repr(out["greedy_text"]))


if __name__ == "__main__":
    main()
