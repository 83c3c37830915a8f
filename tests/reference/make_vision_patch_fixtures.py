#!/usr/bin/env python3
"""Writes the fixtures of tests/vision/picture_patches_test.cpp: pictures to Qwen3.5's patches.

Run from anywhere with a Python that has transformers 5, Pillow, numpy, torch and safetensors:

    /work/venv-torch/bin/python tests/reference/make_vision_patch_fixtures.py

It is deterministic (the pictures come from fixed seeds) and rewrites tests/data/vision/:

  *.png           small RGB pictures made here (gradients, a disc, a bar, noise);
  *.safetensors   per case, what transformers' Qwen2VLImageProcessorPil (the PIL backend of the
                  Qwen2-VL image processor, which Qwen3-VL and Qwen3.5 use) gives for the picture:
                  pixel_values (F32 [patches, 3 * temporal_patch_size * patch_size^2]) and
                  image_grid_thw (I64 [1, 3]); where only some rows are kept (the case with
                  Qwen3.5's own min_pixels, whose picture is scaled up to 71,680 pixels), `rows`
                  (I64) names them and pixel_values holds those rows only;
  cases.json      the cases: {"patches": [{name, picture, config}], "smart_resize": [{height,
                  width, factor, min_pixels, max_pixels, and expected [height, width] or error}]},
                  each config as preprocessor_config.json names its fields.

Qwen3.5's preprocessor_config.json (read on Hugging Face: MurphyA/Qwen3.5-0.8B, "Duplicate from
Qwen/Qwen3.5-0.8B", and the 390-byte file listed in Qwen/Qwen3.5-9B, the same as Qwen3-VL's): size
{"longest_edge": 16777216, "shortest_edge": 65536}, patch_size 16, temporal_patch_size 2,
merge_size 2, image_mean and image_std [0.5, 0.5, 0.5]. The other cases keep these but for smaller
min and max pixels (so that the fixtures stay small), and two try other configs (Qwen2-VL's patch
14 with CLIP's mean and std; patch 8, merge 3, 3 frames).
"""
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil, smart_resize

ROOT = Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "tests" / "data" / "vision"

QWEN35 = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "min_pixels": 65536,
    "max_pixels": 16777216,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


def picture(width: int, height: int, seed: int) -> Image.Image:
    """An RGB picture: gradients, a disc, a dark bar and some noise, so that resizing has edges."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    img = np.stack([x / max(width - 1, 1), y / max(height - 1, 1), 0.5 + 0.5 * np.sin((x + 2 * y) / 3.0)], axis=-1)
    disc = (x - width * 0.6) ** 2 + (y - height * 0.4) ** 2 < (min(width, height) * 0.3) ** 2
    img[disc] = [0.9, 0.2, 0.1]
    img[height // 5: height // 2, width // 8: width // 3] = [0.05, 0.05, 0.6]
    img += rng.normal(0, 0.05, img.shape)
    return Image.fromarray(np.round(np.clip(img, 0, 1) * 255).astype(np.uint8), "RGB")


def processor(config: dict) -> Qwen2VLImageProcessorPil:
    return Qwen2VLImageProcessorPil(
        patch_size=config["patch_size"],
        temporal_patch_size=config["temporal_patch_size"],
        merge_size=config["merge_size"],
        image_mean=config["image_mean"],
        image_std=config["image_std"],
        size={"shortest_edge": config["min_pixels"], "longest_edge": config["max_pixels"]},
    )


def patch_case(name: str, width: int, height: int, seed: int, config: dict, row_stride: int = 1) -> dict:
    """Saves the picture as PNG, runs the processor on the PNG as Pillow reads it, and saves its
    output (every row_stride-th row and the last block of rows when row_stride > 1)."""
    png = f"{name}.png"
    picture(width, height, seed).save(OUT / png)
    out = processor(config)(images=Image.open(OUT / png), return_tensors="np")
    pixels = np.ascontiguousarray(out["pixel_values"], dtype=np.float32)
    tensors = {"image_grid_thw": torch.from_numpy(np.asarray(out["image_grid_thw"], dtype=np.int64))}
    if row_stride > 1:
        last_block = config["merge_size"] ** 2
        rows = sorted(set(range(0, len(pixels), row_stride)) | set(range(len(pixels) - last_block, len(pixels))))
        tensors["rows"] = torch.tensor(rows, dtype=torch.int64)
        pixels = pixels[rows]
    tensors["pixel_values"] = torch.from_numpy(np.ascontiguousarray(pixels))
    save_file(tensors, OUT / f"{name}.safetensors")
    return {"name": name, "picture": png, "config": config}


def smart_resize_case(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> dict:
    case = {"height": height, "width": width, "factor": factor, "min_pixels": min_pixels, "max_pixels": max_pixels}
    try:
        case["expected"] = list(smart_resize(height, width, factor, min_pixels, max_pixels))
    except ValueError as error:
        case["error"] = str(error)
    return case


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    small = dict(QWEN35, min_pixels=1024, max_pixels=65536)
    patches = [
        # Qwen3.5's own config: 40 x 30 scaled up to 320 x 224 by its min_pixels (rows sampled).
        patch_case("qwen35_40x30", 40, 30, 1, QWEN35, row_stride=12),
        patch_case("small_40x30", 40, 30, 1, small),                     # to 32 x 32: down across, up down
        patch_case("small_97x61", 97, 61, 2, dict(small, min_pixels=4096)),  # to 96 x 64
        patch_case("wide_300x17", 300, 17, 3, dict(small, max_pixels=4096)),  # over max_pixels: 256 x 32
        patch_case("up_23x19", 23, 19, 4, dict(small, min_pixels=4096)),     # under min_pixels: 96 x 64
        patch_case("qwen2vl_40x30", 40, 30, 5,
                   dict(QWEN35, patch_size=14, min_pixels=784, image_mean=list(OPENAI_CLIP_MEAN),
                        image_std=list(OPENAI_CLIP_STD))),
        patch_case("merge3_40x30", 40, 30, 6, dict(small, patch_size=8, merge_size=3, temporal_patch_size=3)),
    ]
    sizes = [
        (30, 40, 32, 1024, 65536), (61, 97, 32, 4096, 65536), (17, 300, 32, 1024, 4096), (19, 23, 32, 4096, 65536),
        (30, 40, 32, 65536, 16777216), (1080, 1920, 32, 65536, 16777216), (4000, 6000, 32, 65536, 16777216),
        (3, 500, 32, 65536, 16777216), (5000, 25, 32, 65536, 16777216), (476, 1300, 28, 3136, 1003520),
        (48, 80, 32, 1, 1 << 30),  # 1.5 and 2.5 factors: Python's round takes halves to even
        (1, 200, 28, 3136, 1003520),  # an aspect ratio of exactly 200 is allowed
        (1, 201, 28, 3136, 1003520), (2, 403, 32, 65536, 16777216), (10000, 49, 32, 65536, 16777216),
    ]
    cases = {"patches": patches, "smart_resize": [smart_resize_case(*size) for size in sizes]}
    (OUT / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")


if __name__ == "__main__":
    main()
