#!/usr/bin/env python3
"""FLUX 3 layout prompts for gizml::diffusion::fluxLayout (tests/diffusion/flux_layout_test.cpp).

Run:  python3 tests/reference/make_flux_layout_cases.py   (the standard library only)

The form is BFL's documentation of FLUX 3 Image's bounding boxes (docs.bfl.ai, "FLUX 3 Image:
Bounding boxes"): a caption citing each element as <id>, then the element table as a JSON array,
each row {"id", "bbox", "desc"} with bbox [top, left, bottom, right] in integers 0..1000, or for an
edit {"id", "from", "src_bbox", "tgt_bbox", "desc"} with from "ref_image_K" or null; the array
compact as JavaScript's JSON.stringify writes it (Python's json.dumps with separators (",", ":") and
ensure_ascii False writes the same for these strings). Ids the caption does not cite are appended
as " <id>" before the table. Writes tests/data/diffusion/flux_layout_cases.json: a list of
{"caption", "elements", "prompt"}.
"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion", "flux_layout_cases.json")

CASES = [
    ("A running figure <silhouette_1> centered on a flat chartreuse background <background_1>.",
     [{"id": "background_1", "bbox": [0, 0, 1000, 1000], "desc": "Flat chartreuse color field."},
      {"id": "silhouette_1", "bbox": [150, 300, 850, 700], "desc": "Black silhouette of a runner mid-stride."}]),
    # Uncited ids are appended; quotes, backslashes, a tab, a newline and non-ASCII text in desc.
    ("Exhibition poster on warm bone paper.",
     [{"id": "title_1", "bbox": [60, 80, 220, 920], "desc": "Bold headline reading \"MONOLITH\" \\ 2026"},
      {"id": "arch_1", "bbox": [260, 200, 780, 800], "desc": "Fluted terracotta arch,\ttwo tones\nmatte"},
      {"id": "note_2", "bbox": [900, 10, 990, 400], "desc": "Caption «Été» — 東京 ✓"}]),
    # An edit: keep one element, move one from the picture, remove one, add a new one.
    ("In <ref_image_0>, move the lamp <lamp_1> to the left and add a cat <cat_1>.",
     [{"id": "sofa_1", "from": "ref_image_0", "src_bbox": [500, 100, 900, 700], "tgt_bbox": [500, 100, 900, 700],
       "desc": "Grey linen sofa."},
      {"id": "lamp_1", "from": "ref_image_0", "src_bbox": [200, 750, 600, 900], "tgt_bbox": [200, 50, 600, 200],
       "desc": "Brass floor lamp."},
      {"id": "plant_1", "from": "ref_image_0", "src_bbox": [600, 880, 950, 990], "tgt_bbox": None,
       "desc": "Potted fern."},
      {"id": "cat_1", "from": None, "src_bbox": None, "tgt_bbox": [700, 400, 900, 600], "desc": "Sleeping orange cat."}]),
]


def prompt(caption, elements):
    text = caption
    for e in elements:
        if f"<{e['id']}>" not in text:
            text += f" <{e['id']}>"
    return text + " " + json.dumps(elements, separators=(",", ":"), ensure_ascii=False)


def main():
    cases = [{"caption": c, "elements": e, "prompt": prompt(c, e)} for c, e in CASES]
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for case in cases:
        print(case["prompt"])


if __name__ == "__main__":
    main()
