#!/usr/bin/env python3
"""Z-Image Turbo's stages on the CPU beside torch, same threads, same tiny model, prompt and seed:
the text encoder, each of the 8 sampling steps (the DiT and the res_multistep update) and the
VAE decode, in seconds, ours from `giz paint` (which prints each stage's time on stderr) and
torch's from the reference pipeline that made the fixtures
(tests/reference/make_zimage_pipeline_fixtures.py: transformers' Qwen3, diffusers'
ZImageTransformer2DModel, the numpy res_multistep transcription, a plain-torch FLUX.1 decoder),
in f32. The runs alternate ours / torch, `--rounds` times; the best of each is printed with the
ratio torch / ours (above 1: ours is faster).

  bench_paint.py [--model FOLDER] [--size 256x256] [--threads N] [--rounds 3]

FOLDER: giz paint's tiny model folder, which ctest's giz_paint_tiny_folder and
giz_convert_z_image_text write (default build/release/tests/zimage_tiny/model). Run it with a
Python that has torch, transformers 5 and diffusers (`pip install torch transformers diffusers`).
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
GIZ = os.environ.get("GIZ", str(ROOT / "build/release/giz"))
sys.path.insert(0, str(ROOT / "tests/reference"))


def ours(model, width, height, threads):
    env = dict(os.environ, GIZML_THREADS=str(threads))
    out = subprocess.run([GIZ, "paint", model, PROMPT, "--seed", "42", "--size", f"{width}x{height}",
                          "-o", "/tmp/bench_paint.png"], capture_output=True, text=True, env=env, check=True)
    m = re.search(r"text ([\d.]+) s, (\d+) steps [\d.]+ s \(([\d. ]+)\), decode ([\d.]+) s", out.stderr)
    assert m, out.stderr
    return float(m[1]), [float(s) for s in m[3].split()], float(m[4])


class Torch:
    """The fixture script's pipeline, its stages timed."""

    def __init__(self):
        import make_zimage_pipeline_fixtures as ref
        self.ref = ref
        self.tok = ref.tokenizer()
        used = sorted(set(self.tok(ref.TEMPLATE.format(ref.PROMPT), add_special_tokens=False)["input_ids"]))
        self.encoder = ref.text_encoder(used, ref.torch.Generator().manual_seed(31))
        self.transformer = ref.dit()
        _, self.vae = ref.vae()

    def run(self, width, height):
        ref, torch, np = self.ref, self.ref.torch, self.ref.np
        start = time.perf_counter()
        ids = self.tok(ref.TEMPLATE.format(PROMPT), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            text = self.encoder(torch.tensor([ids]), output_hidden_states=True).hidden_states[-2][0]
        text_s = time.perf_counter() - start
        ends = [time.perf_counter()]
        noise = torch.randn([1, 16, height // 8, width // 8], dtype=torch.float32, generator=torch.manual_seed(42))
        sigmas = ref.sampler.flow_sigmas(ref.STEPS, ref.SHIFT)

        def denoise(i, x):
            if i > 0:  # the previous step (its DiT call and its update) ends where this one starts
                ends.append(time.perf_counter())
            t = 1.0 - torch.tensor([sigmas[i]], dtype=torch.float32)
            with torch.no_grad():
                out = -self.transformer([torch.from_numpy(x)[0].unsqueeze(1)], t, [text])[0][0].squeeze(1).unsqueeze(0)
            return x - out.numpy() * sigmas[i]

        latents = ref.sampler.res_multistep(noise.numpy(), sigmas, denoise)
        ends.append(time.perf_counter())
        start = time.perf_counter()
        with torch.no_grad():
            decoded = ref.vae_fixtures.decode(self.vae, torch.from_numpy(latents[-1]))
        pixels = torch.clamp((decoded[0] + 1.0) / 2.0, 0.0, 1.0).permute(1, 2, 0).numpy()
        np.clip(255.0 * pixels, 0, 255).astype(np.uint8)
        decode_s = time.perf_counter() - start
        return text_s, [b - a for a, b in zip(ends, ends[1:])], decode_s


PROMPT = "A red fox in fresh snow, watercolor"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=str(ROOT / "build/release/tests/zimage_tiny/model"))
    p.add_argument("--size", default="256x256")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    width, height = (int(v) for v in a.size.split("x"))
    import torch
    torch.set_num_threads(a.threads)
    reference = Torch()
    reference.run(width, height)  # warm: torch's first calls allocate and pick kernels
    runs = {"ours": [], "torch": []}
    for _ in range(a.rounds):
        runs["ours"].append(ours(a.model, width, height, a.threads))
        runs["torch"].append(reference.run(width, height))
    best = {k: (min(r[0] for r in v), [min(r[1][i] for r in v) for i in range(len(v[0][1]))], min(r[2] for r in v))
            for k, v in runs.items()}
    print(f"Z-Image tiny, {width} x {height}, {a.threads} threads, best of {a.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print(f"{'stage':10} {'ours s':>9} {'torch s':>9} {'torch/ours':>10}")
    rows = [("text", best["ours"][0], best["torch"][0])]
    rows += [(f"step {i}", o, t) for i, (o, t) in enumerate(zip(best["ours"][1], best["torch"][1]))]
    rows += [("decode", best["ours"][2], best["torch"][2])]
    rows += [("total", sum(r[1] for r in rows), sum(r[2] for r in rows))]
    for name, o, t in rows:
        print(f"{name:10} {o:9.4f} {t:9.4f} {t / max(o, 1e-4):10.2f}")


if __name__ == "__main__":
    main()
