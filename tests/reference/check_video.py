#!/usr/bin/env python3
"""PyAV (PyPI's av, with its own FFmpeg build) reads the MP4 that image::writeVideo wrote in
test_image's Mp4.ReadsBackThroughLibav: the clip of tests/image/video_clip.h, recomputed here.

Checks an H.264 stream of 8 frames of 64 x 48 at 8 frames a second tagged BT.709 limited range,
each frame within 35 dB PSNR of the RGB written (converted back by PyAV's libswscale); an AAC
stream of 2 channels at 48 kHz lasting 48000 samples, decoded within 25 dB SNR of the sine
written; and the index (moov) before the samples (mdat).

Usage: check_video.py CLIP.mp4. Exit 77 (skipped) without numpy or PyAV.
"""
import sys

try:
    import av
    import numpy as np
except ImportError:
    sys.exit(77)

FRAMES, WIDTH, HEIGHT, FPS, RATE = 8, 64, 48, 8, 48000


def frame(index):
    x = np.arange(WIDTH) * 255 // (WIDTH - 1)
    y = np.arange(HEIGHT) * 255 // (HEIGHT - 1)
    rgb = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    rgb[:, :, 0] = x[None, :]
    rgb[:, :, 1] = y[:, None]
    rgb[:, :, 2] = 16 + 30 * index
    return rgb


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 10 * np.log10(255.0**2 / max(mse, 1e-12))


path = sys.argv[1]
with open(path, "rb") as f:
    head = f.read()
assert head.find(b"moov") < head.find(b"mdat"), "the index is not before the samples (faststart)"

with av.open(path) as clip:
    video, audio = clip.streams.video[0], clip.streams.audio[0]
    assert video.codec_context.name == "h264", video.codec_context.name
    assert (video.width, video.height) == (WIDTH, HEIGHT), (video.width, video.height)
    assert video.average_rate == FPS, video.average_rate
    assert video.frames == FRAMES, video.frames
    assert audio.codec_context.name == "aac", audio.codec_context.name
    assert audio.rate == RATE and audio.codec_context.channels == 2, (audio.rate, audio.codec_context.channels)
    assert audio.duration * audio.time_base == 1, audio.duration * audio.time_base

    decoded = list(clip.decode(video=0))
    assert len(decoded) == FRAMES, len(decoded)
    for i, f in enumerate(decoded):
        # FFmpeg's numbers: AVCOL_SPC_BT709 and AVCOL_RANGE_MPEG (limited). Read as BT.601, the
        # frames are about 28 dB from those written; as BT.709, about 40.
        assert (int(f.colorspace), int(f.color_range)) == (1, 1), (f.colorspace, f.color_range)
        quality = psnr(f.reformat(format="rgb24", src_colorspace="ITU709").to_ndarray(), frame(i))
        assert quality > 35, f"frame {i}: {quality:.1f} dB"

with av.open(path) as clip:
    sound = np.concatenate([f.to_ndarray() for f in clip.decode(audio=0)], axis=1)[:, :RATE]
n = np.arange(RATE)
sine = np.sin(2 * np.pi * 440.0 * n / RATE)
for channel, written in enumerate([0.5 * sine, -0.25 * sine]):
    noise = sound[channel] - written
    quality = 10 * np.log10(np.sum(written**2) / np.sum(noise**2))
    assert quality > 25, f"channel {channel}: {quality:.1f} dB"
print(f"PyAV {av.__version__} reads {path}: H.264 {WIDTH} x {HEIGHT}, {FRAMES} frames at {FPS}/s, AAC stereo 48 kHz")
