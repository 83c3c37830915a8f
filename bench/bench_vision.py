#!/usr/bin/env python3
"""A vision tower on the CPU beside its anchor: our vision::Tower::picture (bench_vision) and
transformers' Qwen3_5VisionModel (torch, F32) on the same random weights at Qwen3.5's real widths
(27 blocks of 1152, 16 heads, MLP 4304, the 9B's 4096-wide rows) and the same picture, whose
patches are transformers' Qwen2VLImageProcessorPil's; the same threads, alternating `--rounds`
times; the best seconds of each (from the picture's bytes to the rows) and the ratio torch / ours.

  bench_vision.py [--threads 2] [--rounds 2] [--side 768]

Run it with a Python that has torch and transformers 5. --side: the picture's side in pixels
(768: diffusers' upsampler shows at most 768 x 768).
"""
import argparse
import os
import pathlib
import re
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = os.environ.get("BENCH_VISION", str(ROOT / "build/release/bench/bench_vision"))
VISION = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
              patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304,
              in_channels=3, hidden_act="gelu_pytorch_tanh")


def make_folder(folder, side):
    """config.json, model.safetensors (model.visual.* in F32) and a random picture."""
    import json

    import numpy as np
    import torch
    import transformers as tf
    from PIL import Image
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = tf.Qwen3_5VisionModel(tf.Qwen3_5VisionConfig(**VISION)).float().eval()
    save_file({"model.visual." + k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "qwen3_5", "vision_config": VISION}, f)
    rng = np.random.default_rng(0)
    picture = os.path.join(folder, "picture.png")
    Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(picture)
    return model, picture


def torch_seconds(model, picture, runs):
    import torch
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    processor = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
                                         image_std=[0.5] * 3, size={"shortest_edge": 65536, "longest_edge": 16777216})
    best = 1e30
    with torch.no_grad():
        for _ in range(runs + 1):  # the first warms up
            t = time.perf_counter()
            inputs = processor(images=[Image.open(picture).convert("RGB")], return_tensors="pt")
            out = model(inputs["pixel_values"], grid_thw=inputs["image_grid_thw"]).pooler_output
            best = min(best, time.perf_counter() - t)
    return best, out.shape[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--side", type=int, default=768)
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as folder:
        model, picture = make_folder(folder, a.side)
        print(f"threads {a.threads}, a {a.side} x {a.side} picture, Qwen3.5's tower at its real widths (random)")
        ours, theirs = [], []
        for _ in range(a.rounds):
            env = dict(os.environ, GIZML_THREADS=str(a.threads))
            out = subprocess.run([BENCH, folder, picture, "--runs", "1"], env=env, check=True, capture_output=True,
                                 text=True).stdout
            ours.append(float(re.search(r"seconds (\S+)", out).group(1)))
            rows = int(re.search(r"rows (\d+)", out).group(1))
            seconds, torch_rows = torch_seconds(model, picture, 1)
            theirs.append(seconds)
            assert rows == torch_rows, (rows, torch_rows)
        print(f"rows {rows}: ours {min(ours):.2f} s, transformers {min(theirs):.2f} s, "
              f"ratio transformers / ours {min(theirs) / min(ours):.2f}")


if __name__ == "__main__":
    main()
