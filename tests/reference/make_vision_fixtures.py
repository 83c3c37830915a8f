"""Tiny random multimodal models with their vision towers, and what transformers computes from
pictures, for tests/vision/tower_test.cpp (gizml::vision::Tower) and the language models' picture
rows (tests/llm/picture_rows_test.cpp).

Run with a Python that has torch and transformers 5 (here /work/venv-torch/bin/python):
    python tests/reference/make_vision_fixtures.py [qwen3_5_vl] [qwen3_vl_deepstack]   (both by default)

qwen3_5_vl: Qwen3_5ForConditionalGeneration. qwen3_vl_deepstack: Qwen3VLForConditionalGeneration
(make_model_fixtures.py's qwen3_vl text model) whose tower's blocks 0 and 1 also give deepstack
rows, added to the language model's residual stream after its layers 0 and 1; its
vision.safetensors holds them too (deepstack_<i>_<l>).

tests/data/models/<name>/ gets
  hf/config.json, hf/model.safetensors  Qwen3_5ForConditionalGeneration (bf16 values, as
                                        make_model_fixtures.py's): make_model_fixtures' qwen3_5
                                        text model and a 2-block vision tower of width 32 whose
                                        16 learned positions (4 x 4) are interpolated to each grid
  vision.safetensors                    per picture i: pixels_<i> F32 [patches, 3*2*16*16] (random
                                        normal: the patches themselves are
                                        make_vision_patch_fixtures.py's), rows_<i> F32 the tower's
                                        output (pooler_output, [patches / 4, 64]), blocks_<i> the
                                        last block's output (last_hidden_state); logits F32 [len,
                                        vocab] of the prompt below with both pictures, positions
                                        I64 [3, len] (get_rope_index's multimodal positions)
  vision.json                           grids ([t, h, w] per picture), the prompt's token ids,
                                        the token ids of the image pad / vision start / end, and
                                        greedy (16 tokens transformers' generate appends)

Pictures: grid 1 x 6 x 4 (not square, fewer positions than the 4 x 4 table on one side, more
on the other) and 1 x 8 x 10. The tower's attention runs per picture (transformers' cu_seqlens).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
import transformers as tf

import make_model_fixtures as lm

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models")
IMAGE, START, END = 500, 501, 502
GRIDS = [[1, 6, 4], [1, 8, 10]]
GREEDY_TOKENS = 16
VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=lm.COMMON["hidden_size"],
              patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
              in_channels=3, hidden_act="gelu_pytorch_tanh")
TOKENS = dict(image_token_id=IMAGE, vision_start_token_id=START, vision_end_token_id=END, tie_word_embeddings=False)


def qwen3_5_vl():
    config = tf.Qwen3_5Config(text_config=lm.QWEN35, vision_config=VISION, **TOKENS)
    return tf.Qwen3_5ForConditionalGeneration(config)


def qwen3_vl_deepstack():
    text = dict(lm.COMMON, num_hidden_layers=2, head_dim=16,
                rope_parameters=dict(rope_type="default", rope_theta=5000.0, mrope_section=[2, 3, 3],
                                     mrope_interleaved=True))
    config = tf.Qwen3VLConfig(text_config=text, vision_config=dict(VISION, deepstack_visual_indexes=[0, 1]), **TOKENS)
    return tf.Qwen3VLForConditionalGeneration(config)


MODELS = {"qwen3_5_vl": qwen3_5_vl, "qwen3_vl_deepstack": qwen3_vl_deepstack}


def prompt(g):
    """Text, the first picture's placeholder, text, the second's, text."""
    ids = torch.randint(3, 400, (5,), generator=g).tolist()
    for t, h, w in GRIDS:
        ids += [START] + [IMAGE] * (t * h * w // 4) + [END] + torch.randint(3, 400, (3,), generator=g).tolist()
    return ids


def build(name):
    torch.manual_seed(0)
    m = MODELS[name]().eval()
    for config in (m.config, m.config.vision_config, m.config.text_config):
        config._attn_implementation = "eager"
    lm.randomize(m, 0)
    g = torch.Generator().manual_seed(0)
    grid = torch.tensor(GRIDS)
    pixels = [torch.randn(t * h * w, 3 * 2 * 16 * 16, generator=g) for t, h, w in GRIDS]
    ids = prompt(g)
    tensors = {}
    with torch.no_grad():
        for i, p in enumerate(pixels):
            out = m.model.visual(p, grid_thw=grid[i:i + 1])
            tensors[f"pixels_{i}"] = p.contiguous()
            tensors[f"rows_{i}"] = out.pooler_output.float().contiguous()
            tensors[f"blocks_{i}"] = out.last_hidden_state.float().contiguous()
            for layer, rows in enumerate(getattr(out, "deepstack_features", None) or []):
                tensors[f"deepstack_{i}_{layer}"] = rows.float().contiguous()
        # mm_token_type_ids marks the picture rows (1), without which transformers gives text positions.
        input_ids = torch.tensor([ids])
        types = (input_ids == IMAGE).int()
        inputs = dict(input_ids=input_ids, pixel_values=torch.cat(pixels), image_grid_thw=grid, mm_token_type_ids=types)
        tensors["logits"] = m(**inputs).logits[0].float().contiguous()
        positions, _ = m.model.get_rope_index(input_ids, types, image_grid_thw=grid)
        tensors["positions"] = positions[:, 0].to(torch.int64).contiguous()
        out = m.generate(**inputs, max_new_tokens=GREEDY_TOKENS, do_sample=False)
    greedy = out[0, len(ids):].tolist()
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    save_file(tensors, os.path.join(folder, "vision.safetensors"))
    m.to(torch.bfloat16).save_pretrained(os.path.join(folder, "hf"))
    with open(os.path.join(folder, "vision.json"), "w") as f:
        json.dump({"grids": GRIDS, "prompt": ids, "image_token": IMAGE, "vision_start": START, "vision_end": END,
                   "greedy": greedy}, f)
        f.write("\n")
    print(f"{name}: {len(ids)} prompt tokens, greedy {greedy}")


def main():
    torch.set_num_threads(1)
    for name in sys.argv[1:] or MODELS:
        build(name)


if __name__ == "__main__":
    main()
