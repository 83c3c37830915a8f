"""Chats taking turns on fewer slots than chats, on `giz serve` at 127.0.0.1: what keeping a
displaced chat's state and taking it back costs a turn.

usage: serve_turns.py --model FOLDER_OR_GGUF [--giz PATH] [--slots 1] [--chats 2] [--turns 4] [--words 1500]

Each chat starts as a text of --words words; each turn adds a line to its chat, asks for 16
tokens greedily (/v1/completions) and adds them. The chats take their turns in rotation, so each
turn's slot last held another chat. Prints the time of the first turns (each reads its whole
prompt) and the mean time of the later ones (each reads only its new line, its chat's state taken
back), and an md5 of the answers. Compare builds with --giz.
"""
import argparse
import hashlib
import json
import pathlib
import sys
import time
import urllib.request

from serve_load import ROOT, Server

WORDS = "the dragon and the knight rode over the hills of the northern kingdom while rain fell".split()


def complete(server, model, prompt):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 16, "temperature": 0}).encode()
    request = urllib.request.Request(f"http://{server.host}:{server.port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)["choices"][0]["text"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--giz", default=str(ROOT / "build" / "release" / "giz"))
    parser.add_argument("--model", required=True)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--chats", type=int, default=2)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--words", type=int, default=1500)
    args = parser.parse_args()
    args.url, args.pid, args.serve_args = None, None, ["--context", "4096"]
    server = Server(args)
    try:
        model = pathlib.Path(args.model).stem if args.model.endswith(".gguf") else pathlib.Path(args.model).name
        chats = [" ".join(WORDS[(i * 7 + c) % len(WORDS)] for i in range(args.words)) for c in range(args.chats)]
        times, answers = [], []
        for turn in range(args.turns):
            for c in range(args.chats):
                chats[c] += f" And then, turn {turn}."
                start = time.perf_counter()
                answers.append(complete(server, model, chats[c]))
                chats[c] += answers[-1]
                times.append(time.perf_counter() - start)
        first, later = times[:args.chats], times[args.chats:]
        print(f"{args.chats} chats on {args.slots} slot(s): first turns {sum(first):.2f} s in all, "
              f"later turns {sum(later) / len(later):.3f} s each (mean of {len(later)}, "
              f"{min(later):.3f}-{max(later):.3f}); answers' md5 "
              f"{hashlib.md5(json.dumps(answers).encode()).hexdigest()[:8]}")
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
