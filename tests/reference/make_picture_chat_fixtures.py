"""Chats that show pictures, as transformers' Qwen3-VL / Qwen3.5 processor tokenizes them, for
tests/llm/picture_chat_test.cpp (llm::Model::chatTokens with pictures).

Run:  /work/venv-torch/bin/python tests/reference/make_picture_chat_fixtures.py   (transformers 5, PIL)

Each chat is rendered by Qwen3.5's real template (../shared/data/templates/Qwen3.5-4B.jinja, which
writes an image content item as <|vision_start|><|image_pad|><|vision_end|>) through the
tokenizer's apply_chat_template, with the generation prompt and thinking off; its pictures (PNGs of
tests/data/vision/, make_vision_patch_fixtures.py's) go through transformers'
Qwen2VLImageProcessorPil with Qwen3.5's preprocessor values; each <|image_pad|> then becomes
grid.prod() / merge_size**2 of them, the processor's replace_image_token (Qwen3VLProcessor,
which itself cannot be built here: its video processor needs torchvision); and the text is
tokenized by Qwen3's tokenizer (../shared/data/tokenizers/qwen3, the same special tokens as
Qwen3.5's vision ones). Writes tests/data/vision/chats.json: per case the messages (image items
without data), the picture files, the grids (t, h, w in patches) and the token ids.
"""
import json
import os

from PIL import Image
import transformers as tf
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
OUT = os.path.join(HERE, "..", "data", "vision")
MERGE = 2

CASES = [
    # The prompt upsampler's edit chat (diffusers' format_input): the pictures as a user turn of
    # their own, then the prompt.
    dict(name="upsampler_edit", pictures=["small_97x61.png"], messages=[
        {"role": "system", "content": [{"type": "text", "text": "Rewrite the request as one instruction."}]},
        {"role": "user", "content": [{"type": "image"}]},
        {"role": "user", "content": [{"type": "text", "text": "make it night"}]}]),
    # Two pictures of different sizes in one message, text around them.
    dict(name="two_pictures", pictures=["wide_300x17.png", "up_23x19.png"], messages=[
        {"role": "user", "content": [{"type": "text", "text": "Compare"}, {"type": "image"},
                                     {"type": "text", "text": "with"}, {"type": "image"},
                                     {"type": "text", "text": "in one line."}]}]),
]


def main():
    tok = tf.AutoTokenizer.from_pretrained(os.path.join(SHARED, "tokenizers", "qwen3"))
    template = open(os.path.join(SHARED, "templates", "Qwen3.5-4B.jinja")).read()
    processor = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=MERGE,
                                         image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                         size={"shortest_edge": 65536, "longest_edge": 16777216})
    out = []
    for case in CASES:
        text = tok.apply_chat_template(case["messages"], chat_template=template, tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
        images = [Image.open(os.path.join(OUT, f)).convert("RGB") for f in case["pictures"]]
        grids = processor(images=images)["image_grid_thw"].tolist()
        # replace_image_token, one placeholder at a time in order (ProcessorMixin's way).
        for t, h, w in grids:
            text = text.replace("<|image_pad|>", "<|placeholder|>" * (t * h * w // MERGE ** 2), 1)
        text = text.replace("<|placeholder|>", "<|image_pad|>")
        ids = tok(text, add_special_tokens=False)["input_ids"]
        out.append(dict(name=case["name"], messages=case["messages"], pictures=case["pictures"], grids=grids, ids=ids))
        print(case["name"], len(ids), "tokens, grids", grids)
    with open(os.path.join(OUT, "chats.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
