#!/usr/bin/env python3
"""The anchor for bench_tokenizer: the `tokenizers` package, single-threaded, encoding the fixture
corpus one document at a time (as bench_tokenizer does). Prints one line per tokenizer:
`<name> <MB/s>`.

Run from the repository root: .venv/bin/python bench/tokenizer_anchor.py [names...]"""
import os
import pathlib
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reference"))


def read_corpus(path):
    data = path.read_bytes()
    pos = 0

    def varint():
        nonlocal pos
        value, shift = 0, 0
        while True:
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    docs = []
    for _ in range(varint()):
        n = varint()
        docs.append(data[pos:pos + n].decode("utf-8"))
        pos += n
    return docs


def main():
    names = sys.argv[1:] or ["qwen3", "llama3", "gemma3"]
    docs = read_corpus(ROOT / "tests" / "data" / "tokenizer" / "corpus.bin")
    size = sum(len(d.encode("utf-8")) for d in docs)
    for name in names:
        tok = Tokenizer.from_file(str(ROOT.parent / "shared" / "data" / "tokenizers" / name / "tokenizer.json"))
        for d in docs:  # warm the word cache, as the timed passes of ours are
            tok.encode(d, add_special_tokens=False)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for d in docs:
                tok.encode(d, add_special_tokens=False)
            best = min(best, time.perf_counter() - start)
        print(name, "%.2f" % (size / best / 1e6), flush=True)


if __name__ == "__main__":
    main()
