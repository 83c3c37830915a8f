#!/usr/bin/env python3
"""Writes the image fixtures in tests/data/image/ with Pillow, and Pillow's pixels of them.

Each picture is a small synthetic scene (gradients, noise, hard edges) saved by Pillow as PNG
(RGB, RGBA, grey, grey + alpha, palette with transparency, 1-bit, 16-bit grey) or JPEG (4:4:4,
4:2:2, 4:2:0 baseline and progressive, grey, CMYK); 16-bit RGB, which Pillow cannot write, is
written here with zlib. expected.txt lists the cases test_image checks:

  decode FILE MAX_PIXELS WIDTH HEIGHT EXPECTED.rgb   image::decode(FILE, MAX_PIXELS) must give
      these pixels: Pillow's Image.open(FILE).convert("RGB") (16-bit grey: its values >> 8),
      resized when larger than MAX_PIXELS as diffusers' Flux2ImageProcessor does (LANCZOS);
  resize FILE WIDTH HEIGHT EXPECTED.rgb   image::resize of the decoded FILE: Pillow's
      resize((WIDTH, HEIGHT), LANCZOS), up and down, one side or both;
  bicubic FILE WIDTH HEIGHT EXPECTED.rgb   the same with Pillow's BICUBIC filter.

Bad files (bad_*) must be refused: truncated PNG and JPEG, and headers declaring absurd sizes.
The PNG and JPEG files also seed fuzz/corpus/fuzz_image.
"""
import math
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ROOT = Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "tests" / "data" / "image"
CORPUS = ROOT / "fuzz" / "corpus" / "fuzz_image"


def scene(width: int, height: int, seed: int) -> np.ndarray:
    """float RGB in [0, 1]: a diagonal gradient, a disc, a sharp rectangle and some noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = x / max(width - 1, 1)
    g = y / max(height - 1, 1)
    b = 0.5 + 0.5 * np.sin((x + 2 * y) / 3.0)
    img = np.stack([r, g, b], axis=-1)
    disc = (x - width * 0.6) ** 2 + (y - height * 0.4) ** 2 < (min(width, height) * 0.3) ** 2
    img[disc] = [0.9, 0.2, 0.1]
    img[height // 5: height // 2, width // 8: width // 3] = [0.05, 0.05, 0.6]
    img += rng.normal(0, 0.04, img.shape)
    return np.clip(img, 0, 1)


def bytes8(img: np.ndarray) -> np.ndarray:
    return np.round(img * 255).astype(np.uint8)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(width: int, height: int, bit_depth: int, colour_type: int, rows: bytes) -> bytes:
    """A PNG from filter-0 rows, for what Pillow cannot write (and for broken headers)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(rows))
            + png_chunk(b"IEND", b""))


def write_rgb16(path: Path, img: np.ndarray) -> None:
    height, width, _ = img.shape
    samples = np.round(img * 65535).astype(">u2")
    rows = b"".join(b"\x00" + samples[y].tobytes() for y in range(height))
    path.write_bytes(raw_png(width, height, 16, 2, rows))


def expected_rgb(path: Path) -> Image.Image:
    """Pillow's decoded pixels as RGB, turned upright by their EXIF orientation as ComfyUI's
    LoadImage turns them (16-bit grey: the high byte, which Pillow's convert clips)."""
    im = ImageOps.exif_transpose(Image.open(path))
    if im.mode in ("I;16", "I;16B"):
        high = (np.asarray(im).astype(np.uint16) >> 8).astype(np.uint8)
        return Image.fromarray(np.stack([high] * 3, axis=-1), "RGB")
    return im.convert("RGB")


def capped_size(width: int, height: int, max_pixels: int) -> tuple:
    """diffusers' Flux2ImageProcessor._resize_to_target_area."""
    scale = math.sqrt(max_pixels / (width * height))
    return int(width * scale), int(height * scale)


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    cases = []

    def reference(name: str, im: Image.Image) -> str:
        ref = f"{name}.rgb"
        (OUT / ref).write_bytes(im.tobytes())
        return ref

    def decode_case(name: str, max_pixels: int = 1 << 28) -> None:
        im = expected_rgb(OUT / name)
        w, h = im.size
        if w * h > max_pixels:
            w, h = capped_size(w, h, max_pixels)
            im = im.resize((w, h), Image.Resampling.LANCZOS)
        suffix = "" if max_pixels == 1 << 28 else f".max{max_pixels}"
        cases.append(f"decode {name} {max_pixels} {w} {h} {reference(name + suffix, im)}")

    def resize_case(name: str, w: int, h: int, kind: str = "resize") -> None:
        resampling = Image.Resampling.BICUBIC if kind == "bicubic" else Image.Resampling.LANCZOS
        im = expected_rgb(OUT / name).resize((w, h), resampling)
        suffix = ".bicubic" if kind == "bicubic" else ""
        cases.append(f"{kind} {name} {w} {h} {reference(f'{name}.{w}x{h}{suffix}', im)}")

    rgb = bytes8(scene(37, 23, 1))
    Image.fromarray(rgb, "RGB").save(OUT / "rgb.png")
    alpha = np.linspace(0, 255, 37 * 23).astype(np.uint8).reshape(23, 37, 1)
    Image.fromarray(np.concatenate([bytes8(scene(37, 23, 2)), alpha], axis=-1), "RGBA").save(OUT / "rgba.png")
    grey = bytes8(scene(29, 19, 3).mean(axis=-1))
    Image.fromarray(grey, "L").save(OUT / "grey.png")
    Image.fromarray(np.stack([grey, grey[::-1]], axis=-1), "LA").save(OUT / "grey_alpha.png")
    palette = Image.fromarray(bytes8(scene(31, 17, 4)), "RGB").quantize(colors=13)
    palette.save(OUT / "palette.png", transparency=3)
    Image.fromarray(grey > 128).save(OUT / "bilevel.png")
    grey16 = np.round(scene(27, 21, 5).mean(axis=-1) * 65535).astype(np.uint16)
    Image.fromarray(grey16).save(OUT / "grey16.png")
    write_rgb16(OUT / "rgb16.png", scene(25, 18, 6))
    for name in ["rgb.png", "rgba.png", "grey.png", "grey_alpha.png", "palette.png", "bilevel.png", "grey16.png",
                 "rgb16.png"]:
        decode_case(name)

    photo = Image.fromarray(bytes8(scene(61, 43, 7)), "RGB")
    photo.save(OUT / "q444.jpg", quality=90, subsampling=0)
    photo.save(OUT / "q422.jpg", quality=90, subsampling=1)
    photo.save(OUT / "q420.jpg", quality=90, subsampling=2)
    photo.save(OUT / "progressive420.jpg", quality=85, subsampling=2, progressive=True)
    photo.convert("L").save(OUT / "grey.jpg", quality=90)
    photo.convert("CMYK").save(OUT / "cmyk.jpg", quality=90)
    for name in ["q444.jpg", "q422.jpg", "q420.jpg", "progressive420.jpg", "grey.jpg", "cmyk.jpg"]:
        decode_case(name)

    # EXIF orientations 2 to 8 (an eXIf chunk in PNG, APP1 in JPEG); the budget applies upright.
    for orientation in range(2, 9):
        exif = Image.Exif()
        exif[0x0112] = orientation
        Image.fromarray(bytes8(scene(9, 5, 10 + orientation))).save(OUT / f"orientation{orientation}.png", exif=exif)
        decode_case(f"orientation{orientation}.png")
    exif = Image.Exif()
    exif[0x0112] = 6
    photo.save(OUT / "orientation6.jpg", quality=90, exif=exif)
    decode_case("orientation6.jpg")
    decode_case("orientation6.jpg", 700)

    # Scaled down to a pixel budget (the spec's Image.decode(bytes, 100000) at a small scale).
    big = Image.fromarray(bytes8(scene(97, 61, 8)), "RGB")
    big.save(OUT / "big.png")
    big.save(OUT / "big.jpg", quality=92, subsampling=2)
    decode_case("big.png", 1000)
    decode_case("big.png", 20)
    decode_case("big.jpg", 2000)
    resize_case("rgb.png", 50, 31)   # up, both sides
    resize_case("rgb.png", 37, 9)    # down, height only
    resize_case("rgb.png", 12, 23)   # down, width only
    resize_case("big.png", 1, 1)
    resize_case("big.png", 90, 20)   # down, the height far more: Pillow 13 resamples along y first
    resize_case("rgb.png", 50, 31, "bicubic")  # up, both sides
    resize_case("big.png", 40, 27, "bicubic")  # down, both sides
    resize_case("rgb.png", 37, 9, "bicubic")   # down, height only
    resize_case("rgb.png", 64, 23, "bicubic")  # up, width only
    resize_case("rgb.png", 45, 10, "bicubic")  # up across, down the height: along y first

    # Bad files.
    png = (OUT / "rgb.png").read_bytes()
    (OUT / "bad_truncated.png").write_bytes(png[: len(png) * 2 // 3])
    jpg = (OUT / "q420.jpg").read_bytes()
    (OUT / "bad_truncated.jpg").write_bytes(jpg[: len(jpg) * 2 // 3])
    row = b"\x00" + b"\x00" * 3
    (OUT / "bad_huge.png").write_bytes(raw_png(60000, 60000, 8, 2, row))
    (OUT / "bad_tall.png").write_bytes(raw_png(1, 60000, 8, 2, row))  # a few bytes cannot hold 60000 rows
    (OUT / "bad_wide.png").write_bytes(raw_png(100000, 1, 8, 2, row))
    (OUT / "bad_zero.png").write_bytes(raw_png(0, 1, 8, 2, row))
    sof = jpg.index(b"\xff\xc0")  # baseline SOF0: length, precision, then height and width
    (OUT / "bad_huge.jpg").write_bytes(jpg[: sof + 5] + struct.pack(">HH", 65000, 65000) + jpg[sof + 9:])
    (OUT / "bad_zero.jpg").write_bytes(jpg[: sof + 5] + struct.pack(">HH", 0, 61) + jpg[sof + 9:])

    (OUT / "expected.txt").write_text("\n".join(cases) + "\n")
    CORPUS.mkdir(parents=True, exist_ok=True)
    for f in sorted(OUT.iterdir()):
        if f.suffix in (".png", ".jpg"):
            shutil.copy(f, CORPUS / f.name)


if __name__ == "__main__":
    main()
