#!/usr/bin/env python3
"""ComfyUI's flow schedule and res_multistep sampler in numpy, for gizml::diffusion
(tests/diffusion/sampler_test.cpp).

Run:  .venv/bin/python tests/reference/make_sampler_fixtures.py   (numpy only; deterministic)
Writes tests/data/diffusion/sampler.bin in the GZFX format of make_tensor_fixtures.py.

Transcribed from ComfyUI (read, not imported): comfy/model_sampling.py
(ModelSamplingDiscreteFlow, time_snr_shift; ModelSamplingAuraFlow is it with multiplier 1),
comfy/samplers.py (simple_scheduler) and comfy/k_diffusion/sampling.py (res_multistep with
eta 0, cfg_pp False, as sample_res_multistep calls it). torch computes all of it in float32
(0-d float32 tensors for the scalars); numpy 2 does the same with np.float32 scalars (NEP 50).

The model is replaced by a fake denoiser, linear in x with coefficients from sigma:
  denoised_i = x * a_i + b_i,  a_i = float32(0.6 - 0.4 sigma_i),  b_i = float32(0.1 sigma_i)
(a_i and b_i are stored, so the test multiplies and adds in float32 as here).

One case per (steps, shift), op "res_multistep", attributes steps and shift_e6 (shift * 1e6):
  sigmas [steps + 1]  the schedule (exact: the test compares bits)
  x0     the starting latent (numpy's normal, seed 7)
  a, b   [steps]      the fake denoiser's coefficients
  xs     [steps, ...] x after each step
The scalars' log/exp/expm1 here are correctly rounded float32; the C++ side's are the C library's
and ComfyUI's torch's (CPU or CUDA), an ulp off at times, so the test allows a few float32
roundings (its tolerance says how many).
"""
import math
import os

import numpy as np

from make_tensor_fixtures import F32, write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion", "sampler.bin")
f32 = np.float32


def flow_sigmas(steps, shift, timesteps=1000):
    """ModelSamplingDiscreteFlow(shift, multiplier 1).sigmas, then simple_scheduler(steps)."""
    t = np.arange(1, timesteps + 1, dtype=np.float32) / f32(timesteps)  # torch: int64 / int -> float32
    table = (f32(shift) * t) / (f32(1) + f32(shift - 1.0) * t)           # time_snr_shift in float32
    ss = len(table) / steps
    return np.array([table[-(1 + int(x * ss))] for x in range(steps)] + [0.0], dtype=np.float32)


# The scalars' log, exp and expm1 correctly rounded to float32 (numpy's own float32 versions are
# an ulp off at times; the C library's, torch's on the CPU and CUDA's are within an ulp of these).
def log(v):
    return f32(math.log(float(v)))


def exp(v):
    return f32(math.exp(float(v)))


def expm1(v):
    return f32(math.expm1(float(v)))


def nan_to_num(v):
    return np.nan_to_num(v, nan=f32(0.0), posinf=np.finfo(np.float32).max, neginf=np.finfo(np.float32).min)


def res_multistep(x, sigmas, denoise):
    """res_multistep(eta=0, cfg_pp=False); returns x after each step."""
    t_fn = lambda sigma: -log(sigma)  # noqa: E731
    phi1_fn = lambda t: expm1(t) / t  # noqa: E731
    phi2_fn = lambda t: (phi1_fn(t) - f32(1.0)) / t  # noqa: E731
    old_denoised = None
    old_sigma_down = None
    xs = []
    for i in range(len(sigmas) - 1):
        denoised = denoise(i, x)
        sigma_down = sigmas[i + 1]  # get_ancestral_step with eta 0: (sigma_to, 0)
        if sigma_down == 0 or old_denoised is None:
            d = (x - denoised) / sigmas[i]
            dt = sigma_down - sigmas[i]
            x = x + d * dt
        else:
            t, t_old, t_next, t_prev = t_fn(sigmas[i]), t_fn(old_sigma_down), t_fn(sigma_down), t_fn(sigmas[i - 1])
            h = t_next - t
            c2 = (t_prev - t_old) / h
            phi1_val, phi2_val = phi1_fn(-h), phi2_fn(-h)
            b1 = nan_to_num(phi1_val - phi2_val / c2)
            b2 = nan_to_num(phi2_val / c2)
            x = exp(-h) * x + h * (b1 * denoised + b2 * old_denoised)
        # The noise term x + noise * s_noise * sigma_up adds zeros at eta 0.
        assert x.dtype == np.float32
        xs.append(x)
        old_denoised = denoised
        old_sigma_down = sigma_down
    return np.stack(xs)


def case(steps, shift, shape, rng):
    sigmas = flow_sigmas(steps, shift)
    a = np.array([0.6 - 0.4 * float(s) for s in sigmas[:-1]], dtype=np.float32)
    b = np.array([0.1 * float(s) for s in sigmas[:-1]], dtype=np.float32)
    x0 = rng.standard_normal(shape).astype(np.float32)
    xs = res_multistep(x0, sigmas, lambda i, x: x * a[i] + b[i])
    name = f"steps_{steps}_shift_{shift}".replace(".", "p")
    return (name, "res_multistep", {"steps": [steps], "shift_e6": [round(shift * 1e6)]},
            [("sigmas", F32, sigmas), ("x0", F32, x0), ("a", F32, a), ("b", F32, b), ("xs", F32, xs)])


def main():
    rng = np.random.default_rng(7)
    # Z-Image Turbo's 8 steps; a stride 1000/steps that is not whole (13, 3); one Euler step only.
    cases = [case(steps, shift, [2, 4, 3, 5], rng) for steps, shift in [(8, 3.0), (3, 3.0), (13, 2.5), (1, 3.0)]]
    size = write_cases(OUT, cases)
    print(f"wrote {len(cases)} cases, {size} bytes to {os.path.normpath(OUT)}")
    print("8-step sigmas:", cases[0][3][0][2].tolist())


if __name__ == "__main__":
    main()
