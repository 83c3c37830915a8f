#!/usr/bin/env python3
"""Python's wave module reads the WAV that image::writeWav wrote in test_image's Video.WritesWav:
the sound of tests/image/video_clip.h (one second at 48 kHz, 440 Hz at half scale on the left and
a quarter, inverted, on the right), recomputed here in f64: 16-bit PCM, each sample within one
step of round(x * 32767) (the C++ sine is f32).

Usage: check_wav.py CLIP.wav. Exit 77 (skipped) without numpy.
"""
import sys
import wave

try:
    import numpy as np
except ImportError:
    sys.exit(77)

RATE = 48000
with wave.open(sys.argv[1], "rb") as w:
    assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (2, 2, RATE, RATE), w.getparams()
    samples = np.frombuffer(w.readframes(RATE), "<i2").reshape(RATE, 2)
sine = np.sin(2 * np.pi * 440.0 * np.arange(RATE) / RATE)
expected = np.rint(np.stack([0.5 * sine, -0.25 * sine], axis=1) * 32767)
worst = np.max(np.abs(samples - expected))
assert worst <= 1, f"a sample is {worst} steps from the sine written"
print(f"wave reads {sys.argv[1]}: 2 channels of 16-bit PCM at 48 kHz, {RATE} frames, the sine within {worst:.0f} step")
