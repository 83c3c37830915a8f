#!/usr/bin/env python3
"""Pillow reads a PNG that image::encodePng wrote: mode RGB, the expected size and bytes.

Usage: check_encoded_png.py PNG EXPECTED.rgb WIDTH HEIGHT. Exit 77 (skipped) without Pillow.
"""
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit(77)

png, expected, width, height = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Image.open(png) as im:
    im.load()
    assert im.format == "PNG" and im.mode == "RGB", (im.format, im.mode)
    assert im.size == (width, height), im.size
    with open(expected, "rb") as f:
        assert im.tobytes() == f.read(), "Pillow's pixels differ from the image encodePng was given"
print(f"Pillow reads {png}: {width} x {height} RGB, the same bytes")
