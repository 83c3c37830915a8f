#!/usr/bin/env python3
"""A random Qwen3 text encoder 32 wide (the tiny Z-Image's caption width) made large by its MLP,
as a Hugging Face folder, for measuring the pipeline's memory with `giz convert --z-image-text`.

Run:  /path/to/venv-with-torch/bin/python bench/make_zimage_text_sized.py OUT_FOLDER TOKENIZER_FOLDER
          [--intermediate 65536] [--layers 31]
(torch, transformers). TOKENIZER_FOLDER holds Qwen3's tokenizer.json and tokenizer_config.json
(e.g. the tiny model's converted text_encoders/ folder that ctest's giz_convert_z_image_text
writes). The defaults make about 200 M weights, 380 MB once converted at 16 bits (30 layers kept).
"""
import argparse
import json
import os
import shutil

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "diffusion",
                    "zimage_text_tiny", "config.json")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("tokenizer")
    p.add_argument("--intermediate", type=int, default=65536)
    p.add_argument("--layers", type=int, default=31)
    a = p.parse_args()
    config = json.load(open(TINY))
    config.update(intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                  layer_types=["full_attention"] * a.layers)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**config)).to(torch.bfloat16)
    model.save_pretrained(a.out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, name), os.path.join(a.out, name))
    print(a.out, sum(t.numel() for t in model.parameters()), "weights")


if __name__ == "__main__":
    main()
