#!/usr/bin/env python3
"""PyAV (PyPI's av, with its own FFmpeg build) reads the MP4 that `giz video` wrote from the tiny
MiniMax H3 of tests/reference/make_h3_pipeline_fixtures.py (ctest giz_video_h3_pyav) and sets it
beside diffusers' own output for the same request (h3_pipeline_case.safetensors: "frames" [1, 3,
124, 8, 16] in [0, 1], "audio" [2, 2070] at 32 kHz).

Checks a video stream of 124 frames of 16 x 8 at 24 frames a second whose frames, converted back to
RGB by PyAV's libswscale, are within MIN_LUMA_PSNR of diffusers' frames in luma (BT.709 weights)
and within MIN_PSNR in RGB of diffusers' frames put through yuv420p and back (libswscale): yuv420p
keeps one colour sample per 2 x 2 pixels, and these frames are random noise at 16 x 8 pixels, so
that round trip alone is 19.7 dB from diffusers' RGB (measured: luma 34.6 dB, against the round
trip 29.3 dB). And an AAC stream of 2 channels at 32 kHz holding at least the 2,070 samples of each
channel (AAC pads to whole frames of 1,024; PyAV drops the encoder's priming), each channel's first
2,070 correlated with diffusers' same channel by at least MIN_CORRELATION and with the other
channel well below (AAC at 128 kb/s on 65 ms of noise-like sound: measured 0.94 with its own
channel, 0.29 swapped).

Usage: check_h3_video.py CLIP.mp4 CASE.safetensors. Exit 77 (skipped) without numpy, PyAV or
safetensors, or when the clip is not there (a build without FFmpeg writes PNG frames instead).
"""
import os
import sys

try:
    import av
    import numpy as np
    from safetensors.numpy import load_file
except ImportError:
    sys.exit(77)

FRAMES, WIDTH, HEIGHT, FPS, RATE, SAMPLES = 124, 16, 8, 24, 32000, 2070
MIN_LUMA_PSNR, MIN_PSNR = 30.0, 25.0
MIN_CORRELATION, MAX_SWAPPED_CORRELATION = 0.85, 0.6


def psnr(a, b):
    return 10 * np.log10(1.0 / float(np.mean((a - b) ** 2)))


def luma(rgb):
    return 0.2126 * rgb[..., 0] + 0.7152 * rgb[..., 1] + 0.0722 * rgb[..., 2]


def through_yuv420p(frames):
    out = []
    for f in (frames * 255).round().astype(np.uint8):
        picture = av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")
        out.append(picture.reformat(format="yuv420p").reformat(format="rgb24").to_ndarray())
    return np.stack(out).astype(np.float64) / 255.0


def main():
    clip, case = sys.argv[1], sys.argv[2]
    if not os.path.exists(clip):
        sys.exit(77)
    want = load_file(case)["frames"][0].transpose(1, 2, 3, 0)  # [frames, h, w, 3]
    with av.open(clip) as container:
        video = container.streams.video[0]
        assert video.average_rate == FPS, video.average_rate
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == FRAMES, len(frames)
    got = np.stack(frames).astype(np.float64) / 255.0
    assert got.shape == (FRAMES, HEIGHT, WIDTH, 3), got.shape
    in_luma, in_rgb = psnr(luma(got), luma(want)), psnr(got, through_yuv420p(want))
    print(f"video: {FRAMES} frames of {WIDTH} x {HEIGHT} at {FPS} fps; against diffusers' frames luma "
          f"{in_luma:.1f} dB PSNR, RGB {in_rgb:.1f} dB against them through yuv420p")
    assert in_luma >= MIN_LUMA_PSNR and in_rgb >= MIN_PSNR, (in_luma, in_rgb)
    with av.open(clip) as container:
        audio = container.streams.audio[0]
        assert audio.rate == RATE and audio.channels == 2, (audio.rate, audio.channels)
        sound = np.concatenate([f.to_ndarray() for f in container.decode(audio=0)], axis=1)  # planar
    assert sound.shape[0] == 2 and sound.shape[1] >= SAMPLES, sound.shape
    want_sound = load_file(case)["audio"]
    got_sound = sound[:, :SAMPLES].astype(np.float64)
    same = [float(np.corrcoef(got_sound[c], want_sound[c])[0, 1]) for c in range(2)]
    swapped = [float(np.corrcoef(got_sound[c], want_sound[1 - c])[0, 1]) for c in range(2)]
    print(f"audio: {audio.channels} channels at {audio.rate} Hz, {sound.shape[1]} samples decoded; "
          f"correlation with diffusers' channels {same[0]:.3f} {same[1]:.3f}, swapped {swapped[0]:.3f} {swapped[1]:.3f}")
    assert min(same) >= MIN_CORRELATION and max(swapped) <= MAX_SWAPPED_CORRELATION, (same, swapped)


if __name__ == "__main__":
    main()
