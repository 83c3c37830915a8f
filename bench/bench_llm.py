#!/usr/bin/env python3
"""Language-model speed beside llama.cpp, in the same run, same threads: prefill (one pass of N
prompt tokens) and greedy decode steps after it, tok/s of each and the ratio ours / llama.cpp,
and each engine's peak RSS (each run is its own process). llama.cpp is its own `llama-bench`
(decode timed at the same depth as ours, -d N) and, for several sequences at once,
`llama-batched-bench`, built for this CPU by scripts/bench-setup.sh under LLAMA_CPP_DIR
(default ~/.cache/gizml-bench). The runs alternate ours / llama.cpp, `--rounds` times, one timed
run each; the best of each engine is reported with the spread of its rounds, so that load from
other processes hits both alike and unsteady figures show (the load average is printed too).
After each round the machine's read bandwidth on the same threads (`bench_core_scaling read`,
when built) is measured, and its range printed: decode against bandwidth needs the bandwidth of
those minutes, which on this project's VMs moves by up to 1.5x from hour to hour.

  bench_llm.py speed --pair NAME OURS_FOLDER LLAMA_GGUF [--pair ...] [--threads 1 2]
                     [--prefill 512 --decode 128] [--batch N] [--rounds 3]
  bench_llm.py kl --ours REF_FOLDER FOLDER... --llama REF.gguf GGUF... [--text FILE --tokens 512]
      mean KL(reference || model) of the next-token distributions over the same positions of a real
      text (bench/kl_text.txt: public-domain American documents), each engine against its own
      16-bit reference and against the other's (needs scripts/bench-setup.sh --kl: llama-cpp-python)
  bench_llm.py kv --ours FOLDER --llama GGUF [--formats 16 8 4 4/2 2] [--llama-types f16 q8_0 q4_0]
      our KV formats against our 16-bit cache and llama.cpp's KV cache types against its F16 cache
      (flash attention on: llama.cpp quantizes V only with it), same text and positions: mean KL,
      top-1 agreement, bytes a token takes in every layer (the context each holds in one GiB), and
      with --speed the decode tok/s of each after a prefill of --tokens (needs --kl's setup;
      with --llama-types and nothing after it, ours alone: the text tokenized by `giz tokenize`)
  bench_llm.py quantize F16.gguf OUT.gguf {q4_0,q4_k_m,q8_0,f16}   llama.cpp's quantizer
  bench_llm.py quantize Q.gguf OUT.gguf f16   a quantized GGUF's values as F16 (kl's reference for it)

Run it with .venv-bench/bin/python; GIZ (default build/release/giz) is our CLI.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
GIZ = os.environ.get("GIZ", str(ROOT / "build/release/giz"))
LLAMA_BIN = pathlib.Path(os.environ.get("LLAMA_CPP_DIR", pathlib.Path.home() / ".cache/gizml-bench")) / "build/bin"


def peak_rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def quiet_llama(L) -> None:
    L.llama_backend_init()
    global _quiet_log  # kept alive: llama.cpp calls it for as long as the process runs
    _quiet_log = L.llama_log_callback(lambda level, text, data: None)
    L.llama_log_set(_quiet_log, None)


def llama_child(args) -> None:
    """Runs in its own process: loads the GGUF, times prefill and decode, prints one JSON line."""
    import time

    import llama_cpp as L

    quiet_llama(L)
    model = L.llama_model_load_from_file(args.model.encode(), L.llama_model_default_params())
    assert model, f"llama.cpp could not load {args.model}"
    cp = L.llama_context_default_params()
    cp.n_ctx = args.prefill + args.decode + 16
    cp.n_batch = cp.n_ubatch = args.prefill
    cp.n_threads = cp.n_threads_batch = args.threads
    if args.kv_type:
        # GGML's type numbers (ggml.h); llama.cpp keeps a quantized V cache only with flash attention.
        cp.type_k = cp.type_v = {"f16": 1, "q4_0": 2, "q8_0": 8}[args.kv_type]
        if hasattr(cp, "flash_attn_type"):
            cp.flash_attn_type = 1
        else:
            cp.flash_attn = True
    ctx = L.llama_init_from_model(model, cp)
    assert ctx, f"llama.cpp could not make a context for {args.model} (KV type {args.kv_type})"
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    tokens = [int(t) for t in pathlib.Path(args.tokens).read_text().split()][: args.prefill]
    batch = L.llama_batch_init(args.prefill, 0, 1)

    def fill(toks, start, all_logits):
        batch.n_tokens = len(toks)
        for i, t in enumerate(toks):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, start + i, 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = all_logits or i == len(toks) - 1

    fill(tokens, 0, bool(args.logits))
    t0 = time.perf_counter()
    assert L.llama_decode(ctx, batch) == 0
    prefill_s = time.perf_counter() - t0
    if args.logits:
        rows = np.stack([np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, i), shape=(n_vocab,)) for i in range(len(tokens))])
        rows.astype(np.float32).tofile(args.logits)
    nxt = int(np.argmax(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))))
    t1 = time.perf_counter()
    for step in range(args.decode):
        fill([nxt], len(tokens) + step, False)
        assert L.llama_decode(ctx, batch) == 0
        nxt = int(np.argmax(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))))
    decode_s = time.perf_counter() - t1
    print(json.dumps({"engine": "llama.cpp", "threads": args.threads, "prefill_tokens": len(tokens),
                      "prefill_tok_s": len(tokens) / prefill_s, "decode_tokens": args.decode,
                      "decode_tok_s": args.decode / decode_s if args.decode else 0.0,
                      "peak_rss_mib": peak_rss_mib()}))


def run_json(cmd, env=None) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_ours(folder, tokens, prefill, decode, threads, logits=None, kv=None, batch=1) -> dict:
    cmd = [GIZ, "bench", folder, "--prefill", str(prefill), "--decode", str(decode), "--tokens", tokens]
    if logits:
        cmd += ["--logits", logits]
    if kv:
        cmd += ["--kv", kv]
    if batch > 1:
        cmd += ["--batch", str(batch)]
    return run_json(cmd, env=dict(os.environ, GIZML_THREADS=str(threads)))


def run_llama(gguf, tokens, prefill, decode, threads, logits=None, kv=None) -> dict:
    """kl's logits of every prompt position, through llama-cpp-python's C API (scripts/bench-setup.sh --kl)."""
    cmd = [sys.executable, __file__, "llama-child", gguf, tokens, "--prefill", str(prefill), "--decode", str(decode),
           "--threads", str(threads)]
    if logits:
        cmd += ["--logits", logits]
    if kv:
        cmd += ["--kv-type", kv]
    return run_json(cmd)


def run_measured(cmd) -> tuple:
    """Runs cmd to its end; its standard output and its own peak RSS in MiB (wait4's ru_maxrss)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err.read()[-2000:]}")
        return out.read(), usage.ru_maxrss / 1024


def llama_bench(gguf, threads, prefill, decode) -> dict:
    """One llama-bench process per figure: prefill of `prefill` tokens, or `decode` generated tokens
    after a context of `prefill` (-d, so both engines decode at the same depth); its own warm-up
    run is not counted. tok/s of the one timed repetition, and the process's peak RSS."""
    shape = ["-p", str(prefill), "-n", "0"] if decode == 0 else ["-p", "0", "-n", str(decode), "-d", str(prefill)]
    text, rss = run_measured([str(LLAMA_BIN / "llama-bench"), "-m", gguf, "-t", str(threads), "-r", "1", "-o", "json",
                              *shape])
    return {"tok_s": json.loads(text)[0]["samples_ts"][0], "peak_rss_mib": rss}


def llama_batched(gguf, threads, prefill, decode, batch) -> dict:
    """llama-batched-bench: `batch` sequences, each its own prompt of `prefill` tokens processed
    together in ubatches of 512, then `decode` steps of all of them at once; tok/s in total."""
    text, rss = run_measured([str(LLAMA_BIN / "llama-batched-bench"), "-m", gguf, "-t", str(threads), "-tb",
                              str(threads), "-c", str(batch * (prefill + decode)), "-b", "2048", "-ub", "512",
                              "-npp", str(prefill), "-ntg", str(decode), "-npl", str(batch), "--output-format",
                              "jsonl"])
    row = json.loads([line for line in text.splitlines() if line.startswith("{")][-1])
    return {"prefill_tok_s": row["speed_pp"], "decode_tok_s": row["speed_tg"], "peak_rss_mib": rss}


def run_anchor(gguf, prefill, decode, threads, batch=1) -> dict:
    """llama.cpp's figures for one round (its tools make their own random prompt ids)."""
    if batch > 1:
        return llama_batched(gguf, threads, prefill, decode, batch)
    pp = llama_bench(gguf, threads, prefill, 0)
    tg = llama_bench(gguf, threads, prefill, decode) if decode else {"tok_s": 0.0, "peak_rss_mib": 0.0}
    return {"prefill_tok_s": pp["tok_s"], "decode_tok_s": tg["tok_s"],
            "peak_rss_mib": max(pp["peak_rss_mib"], tg["peak_rss_mib"])}


def write_tokens(path, n, vocab_limit, seed) -> None:
    # Ids below the smallest vocabulary of the models compared, the same for both engines.
    ids = np.random.default_rng(seed).integers(0, vocab_limit, n)
    pathlib.Path(path).write_text(" ".join(map(str, ids)))


def summary(runs, key) -> tuple:
    """Best of the rounds, and their spread: (largest - smallest) / largest."""
    values = [r[key] for r in runs]
    return max(values), (max(values) - min(values)) / max(values) if max(values) else 0.0


CORE_SCALING = pathlib.Path(os.environ.get("CORE_SCALING", str(ROOT / "build/release/bench/bench_core_scaling")))


def read_bandwidth(threads: int):
    """The machine's read bandwidth now, GB/s on `threads` threads (bench_core_scaling's sum of 256
    MiB, best of three), or None where that benchmark is not built."""
    if not CORE_SCALING.exists():
        return None
    out = subprocess.run([str(CORE_SCALING), "read", str(max(threads, 2))], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("read"):
            numbers = line.split()
            # "read 256 MiB 1 thread A, N threads B GB/s, ..."
            return float(numbers[5].rstrip(",")) if threads == 1 else float(numbers[8])
    return None


def speed(args) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.txt")
        write_tokens(tokens, args.prefill, args.vocab_limit, 7)
        what = (f"{args.batch} sequences, each " if args.batch > 1 else "") + (f"our KV {args.kv}, " if args.kv else "")
        print(f"# {what}prefill {args.prefill}, decode {args.decode}, rounds {args.rounds} (ours and llama.cpp "
              f"alternating; best of the rounds, spread = (max - min) / max), load average before "
              f"{os.getloadavg()[0]:.2f}; llama.cpp: {LLAMA_BIN}")
        for name, ours_folder, gguf in args.pair:
            for threads in args.threads:
                runs = {"ours": [], "llama": []}
                reads = []  # the machine's read bandwidth after each round: it moves from hour to hour
                for _ in range(args.rounds):
                    runs["ours"].append(run_ours(ours_folder, tokens, args.prefill, args.decode, threads,
                                                 kv=args.kv, batch=args.batch))
                    runs["llama"].append(run_anchor(gguf, args.prefill, args.decode, threads, args.batch))
                    reads.append(read_bandwidth(threads))
                line = f"{name}, {threads} thread{'s' if threads > 1 else ''}:"
                for key in ("prefill_tok_s", "decode_tok_s") if args.decode else ("prefill_tok_s",):
                    (o, os_), (l, ls) = summary(runs["ours"], key), summary(runs["llama"], key)
                    line += (f" {key.split('_')[0]} {o:.1f} ({os_:.0%}) vs {l:.1f} ({ls:.0%}) tok/s, "
                             f"ratio {o / l:.2f};")
                rss = lambda who: max(r["peak_rss_mib"] for r in runs[who])
                read = ""
                if None not in reads:
                    read = (f"; memory read {min(reads):.1f}-{max(reads):.1f} GB/s on {threads} thread"
                            f"{'s' if threads > 1 else ''} between the rounds")
                    if args.decode:  # each round's decode beside the bandwidth read right after it
                        read += " (our decode tok/s, GB/s: " + ", ".join(
                            f"{r['decode_tok_s']:.1f}/{g:.1f}" for r, g in zip(runs["ours"], reads)) + ")"
                print(f"{line} peak RSS {rss('ours'):.0f} vs {rss('llama'):.0f} MiB{read}", flush=True)
        print(f"# load average after {os.getloadavg()[0]:.2f}")


def tokenize(gguf, text) -> list:
    """The ids of `text` by the GGUF's own tokenizer (llama.cpp's, vocabulary only), with the
    special tokens the model puts in front (its add_bos flag)."""
    import llama_cpp as L

    quiet_llama(L)
    params = L.llama_model_default_params()
    params.vocab_only = True
    model = L.llama_model_load_from_file(gguf.encode(), params)
    assert model, f"llama.cpp could not load {gguf}"
    raw = text.encode()
    ids = (L.llama_token * (len(raw) + 16))()
    n = L.llama_tokenize(L.llama_model_get_vocab(model), raw, len(raw), ids, len(ids), True, False)
    assert n >= 0, "llama_tokenize failed"
    L.llama_model_free(model)
    return list(ids[:n])


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def mean_kl(reference, other, rows=64) -> float:
    """Mean over positions of KL(softmax(reference) || softmax(other)), in float64, a block of rows
    at a time (a whole [512, 151936] in float64 is 600 MiB per temporary)."""
    total = 0.0
    for i in range(0, len(reference), rows):
        p = log_softmax(reference[i:i + rows].astype(np.float64))
        q = log_softmax(other[i:i + rows].astype(np.float64))
        total += float((np.exp(p) * (p - q)).sum())
    return total / len(reference)


def next_token_spread(logits, rows=64):
    """Mean entropy (nats) and mean largest probability of the rows' next-token distributions."""
    entropy = top_p = 0.0
    for i in range(0, len(logits), rows):
        logp = log_softmax(logits[i:i + rows].astype(np.float64))
        entropy -= float((np.exp(logp) * logp).sum())
        top_p += float(np.exp(logp.max(-1)).sum())
    return entropy / len(logits), top_p / len(logits)


def kl(args) -> None:
    """Each engine's quantized models against its own 16-bit reference, and against the other's."""
    ids = tokenize(args.llama[0], pathlib.Path(args.text).read_text())
    assert len(ids) >= args.tokens, f"{args.text} has only {len(ids)} tokens, fewer than --tokens {args.tokens}"
    ids = ids[: args.tokens]
    runs = [("ours", run_ours, target) for target in args.ours] + [("llama.cpp", run_llama, t) for t in args.llama]
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.txt")
        pathlib.Path(tokens).write_text(" ".join(map(str, ids)))
        logits = []
        for i, (_, fn, target) in enumerate(runs):
            path = os.path.join(tmp, f"{i}.f32")
            fn(target, tokens, len(ids), 0, args.threads, logits=path)
            logits.append(np.fromfile(path, dtype=np.float32).reshape(len(ids), -1))
            os.remove(path)
    assert len({l.shape[1] for l in logits}) == 1, f"vocabularies differ: {[l.shape[1] for l in logits]}"
    refs = {"ours": 0, "llama.cpp": len(args.ours)}
    name = lambda i: f"{runs[i][0]} {pathlib.Path(runs[i][2]).name}"
    top1 = lambda a, b: float((logits[a].argmax(-1) == logits[b].argmax(-1)).mean())
    versus = lambda ref, i: f"vs {name(ref)} KL {mean_kl(logits[ref], logits[i]):.6f} top-1 {top1(ref, i):.3f}"
    print(f"# {len(ids)} positions of {args.text} ({pathlib.Path(args.llama[0]).name}'s tokenizer), threads "
          f"{args.threads}; KL(reference || model) in nats, mean over positions; top-1: argmax agreement")
    print(f"reference {name(refs['ours'])}: {versus(refs['llama.cpp'], refs['ours'])}")
    for i, (engine, _, _) in enumerate(runs):
        if i not in refs.values():
            other = refs["llama.cpp" if engine == "ours" else "ours"]
            print(f"{name(i)}: {versus(refs[engine], i)}; {versus(other, i)}", flush=True)
    # How peaked the reference is: random weights give near-flat distributions, whose argmax any
    # small error flips (a low top-1 agreement there says little about a real model's).
    entropy, top_p = next_token_spread(logits[refs["llama.cpp"]])
    print(f"reference entropy {entropy:.3f} nats (uniform {np.log(logits[0].shape[1]):.3f}), "
          f"mean top-1 probability {top_p:.4f}")


def kv_bytes_per_token(config, fmt) -> float:
    """Bytes one token takes in every attention layer of our cache in format `fmt` ("16", "4/2"):
    keys and values of every KV head, and for codes a scale and an offset (F16) per head."""
    bits = {"f32": 32, "16": 16, "f16": 16, "bf16": 16, "8": 8, "4": 4, "2": 2}
    layers = sum(t != "linear_attention" for t in config["layer_types"])
    heads, dim = config["num_kv_heads"], config["head_dim"]
    total = 0.0
    for side in fmt.split("/") if "/" in fmt else [fmt, fmt]:
        total += heads * (dim * bits[side] / 8 + (4 if bits[side] < 16 else 0))
    return layers * total


def llama_kv_bytes_per_token(config, kind) -> float:
    """The same for llama.cpp's cache types (ggml's blocks of 32: q8_0 34 bytes, q4_0 18)."""
    per_value = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}[kind]
    layers = sum(t != "linear_attention" for t in config["layer_types"])
    return layers * 2 * config["num_kv_heads"] * config["head_dim"] * per_value


def giz_tokenize(gguf, text) -> list:
    """The ids of `text` by our tokenizer of the GGUF, with the special tokens it puts around a sequence."""
    out = subprocess.run([GIZ, "tokenize", "--tokenizer", gguf, "--special", text], check=True, capture_output=True,
                         text=True).stdout
    return [int(t) for t in out.split()]


def kv(args) -> None:
    """Each engine's KV cache settings against its own 16-bit cache on one model and text."""
    text = pathlib.Path(args.text).read_text()
    ids = (tokenize(args.llama, text) if args.llama_types else giz_tokenize(args.llama, text))[: args.tokens]
    config = json.loads((pathlib.Path(args.ours) / "manifest.json").read_text())["config"]
    runs = [("ours", f) for f in args.formats] + [("llama.cpp", t) for t in args.llama_types]
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.txt")
        pathlib.Path(tokens).write_text(" ".join(map(str, ids)))
        logits, speeds = [], []
        for i, (engine, setting) in enumerate(runs):
            path = os.path.join(tmp, f"{i}.f32")
            if engine == "ours":
                run_ours(args.ours, tokens, len(ids), 0, args.threads, logits=path, kv=setting)
            else:
                run_llama(args.llama, tokens, len(ids), 0, args.threads, logits=path, kv=setting)
            logits.append(np.fromfile(path, dtype=np.float32).reshape(len(ids), -1))
            os.remove(path)
            if args.speed:
                fn = run_ours if engine == "ours" else run_llama
                speeds.append(fn(args.ours if engine == "ours" else args.llama, tokens, len(ids), args.decode,
                                 args.threads, kv=setting)["decode_tok_s"])
    top1 = lambda a, b: float((logits[a].argmax(-1) == logits[b].argmax(-1)).mean())
    print(f"# {len(ids)} positions of {args.text}, threads {args.threads}; each setting against its engine's "
          f"first ({', '.join(runs[i][1] for i in sorted({0, len(args.formats)}) if i < len(runs))}): mean KL(reference || "
          f"setting) in nats, top-1 "
          f"agreement; bytes a token takes in all layers' caches and the tokens one GiB holds"
          + (f"; decode tok/s after {len(ids)} tokens ({args.decode} steps)" if args.speed else ""))
    for i, (engine, setting) in enumerate(runs):
        ref = 0 if engine == "ours" else len(args.formats)
        size = kv_bytes_per_token(config, setting) if engine == "ours" else llama_kv_bytes_per_token(config, setting)
        speed = f", decode {speeds[i]:.1f} tok/s" if args.speed else ""
        print(f"{engine} kv {setting}: KL {mean_kl(logits[ref], logits[i]):.6f} top-1 {top1(ref, i):.3f}, "
              f"{size:.0f} bytes/token, {2**30 / size:,.0f} tokens/GiB{speed}", flush=True)


def quantize(args) -> None:
    """llama.cpp's own quantizer (llama-quantize); to f16 it dequantizes, which it refuses unless told."""
    extra = ["--allow-requantize"] if args.type == "f16" else []
    run_measured([str(LLAMA_BIN / "llama-quantize"), *extra, args.src, args.dst, args.type.upper(), str(args.threads)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-limit", type=int, default=49152, help="prompt ids stay below it (SmolLM2's vocabulary)")
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--pair", nargs=3, action="append", required=True, metavar=("NAME", "OURS", "LLAMA_GGUF"))
    s.add_argument("--threads", type=int, nargs="+", default=[2])
    s.add_argument("--prefill", type=int, default=512)
    s.add_argument("--decode", type=int, default=128)
    s.add_argument("--batch", type=int, default=1, help="sequences decoded at once (llama-batched-bench's -npl)")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--kv", help="our KV cache's format (giz bench --kv: f32, 16, 8, 4, 4/2, ...; llama.cpp's is F16)")
    k = sub.add_parser("kl")
    k.add_argument("--ours", nargs="+", required=True, metavar="FOLDER", help="the 16-bit reference, then the others")
    k.add_argument("--llama", nargs="+", required=True, metavar="GGUF", help="the F16 reference, then the others")
    k.add_argument("--text", default=str(ROOT / "bench/kl_text.txt"), help="real text, tokenized by the reference GGUF")
    k.add_argument("--tokens", type=int, default=512)
    k.add_argument("--threads", type=int, default=2)
    v = sub.add_parser("kv")
    v.add_argument("--ours", required=True, metavar="FOLDER")
    v.add_argument("--llama", required=True, metavar="GGUF", help="the same model for llama.cpp (its tokenizer reads the text)")
    v.add_argument("--formats", nargs="+", default=["16", "8", "4", "4/2", "2"], help="ours; the first is the reference")
    v.add_argument("--llama-types", nargs="*", default=["f16", "q8_0", "q4_0"],
                   help="llama.cpp's; the first is its reference; none: ours alone")
    v.add_argument("--text", default=str(ROOT / "bench/kl_text.txt"))
    v.add_argument("--tokens", type=int, default=512)
    v.add_argument("--decode", type=int, default=128)
    v.add_argument("--speed", action="store_true", help="also time decode steps after the text, each setting")
    v.add_argument("--threads", type=int, default=2)
    q = sub.add_parser("quantize")
    q.add_argument("src")
    q.add_argument("dst")
    q.add_argument("type", choices=["q4_0", "q4_k_m", "q8_0", "f16"])
    q.add_argument("--threads", type=int, default=2)
    c = sub.add_parser("llama-child")
    c.add_argument("model")
    c.add_argument("tokens")
    c.add_argument("--prefill", type=int, required=True)
    c.add_argument("--decode", type=int, required=True)
    c.add_argument("--logits")
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"])
    args = ap.parse_args()
    {"speed": speed, "kl": kl, "kv": kv, "quantize": quantize, "llama-child": llama_child}[args.mode](args)


if __name__ == "__main__":
    main()
