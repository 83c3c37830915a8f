"""How much transformers' own tiny Qwen 3.5 fixture moves when its matrices get 0.5 % RMS noise
(about what 8-bit weights add): the scale against which tests/llm/qwen35_test.cpp's 8-bit error
is judged. Run with /work/venv-torch/bin/python (torch, transformers):
    python tests/reference/qwen35_sensitivity.py [arch ...]   (qwen3_5 qwen3 llama by default)
Prints max |logit change| / logit range on the fixture's 17-token prompt.
"""
import json
import os
import sys

import torch
import transformers as tf

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models")


def sensitivity(arch, noise=0.005, seed=0):
    folder = os.path.join(MODELS, arch)
    model = tf.AutoModelForCausalLM.from_pretrained(os.path.join(folder, "hf"), dtype=torch.float32).eval()
    with open(os.path.join(folder, "reference.json")) as f:
        prompt = torch.tensor([json.load(f)["prompts"][2]])
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        base = model(input_ids=prompt).logits[0]
        for name, w in model.named_parameters():  # the matrices convert quantizes
            if w.dim() == 2 and "norm" not in name and not name.endswith("mlp.gate.weight") \
                    and "shared_expert_gate" not in name:
                w.add_(noise * w.std() * torch.randn(w.shape, generator=g))
        moved = model(input_ids=prompt).logits[0]
    return float((moved - base).abs().max() / (base.max() - base.min()))


if __name__ == "__main__":
    for arch in sys.argv[1:] or ["qwen3_5", "qwen3", "llama"]:
        print(f"{arch}: {sensitivity(arch):.4f} of the logit range")
