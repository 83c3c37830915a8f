"""The tiny Qwen 3.5 fixtures (tests/data/models/qwen3_5*/hf, from make_model_fixtures.py) as GGUF
files written by llama.cpp's own converter, so that tests/llm/qwen35_test.cpp checks our reading
of llama.cpp's Qwen 3.5 layout (norms stored as 1 + w, ssm_a = -exp(A_log), value heads
reordered from grouped to tiled, stacked experts) against transformers' logits.

llama.cpp's converter comes from the llama-cpp-python sdist on PyPI (vendor/llama.cpp). Run with a
Python that has torch, numpy and sentencepiece-free transformers deps (here /work/venv-torch):
    python tests/reference/make_qwen35_gguf.py [--llama-cpp DIR]
DIR is an unpacked vendor/llama.cpp; without it the sdist is fetched with `pip download`.

The fixtures have no tokenizer (their vocabulary is 512 made-up ids), so the converter's set_vocab
is replaced by a plain list of 512 tokens: only the tensors and hyper-parameters matter here.
Matrices are written as BF16 (the checkpoint's exact values), vectors as F32.
"""
import argparse
import glob
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "data", "models")


def llama_cpp_folder(given):
    if given:
        return given
    tmp = tempfile.mkdtemp(prefix="llama_cpp_sdist_")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "llama-cpp-python", "-d", tmp], check=True)
    sdist = glob.glob(os.path.join(tmp, "llama_cpp_python-*.tar.gz"))[0]
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp, filter="data")
    return glob.glob(os.path.join(tmp, "llama_cpp_python-*", "vendor", "llama.cpp"))[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama-cpp", help="an unpacked vendor/llama.cpp folder")
    args = parser.parse_args()
    root = llama_cpp_folder(args.llama_cpp)
    sys.path[:0] = [root, os.path.join(root, "gguf-py")]
    import convert_hf_to_gguf
    import conversion.qwen as qwen

    def plain_vocab(self):
        n = self.hparams["vocab_size"]
        self.gguf_writer.add_tokenizer_model("gpt2")
        self.gguf_writer.add_tokenizer_pre("qwen2")
        self.gguf_writer.add_token_list([f"<t{i}>" for i in range(n)])
        self.gguf_writer.add_token_types([1] * n)
        self.gguf_writer.add_token_merges([])

    for cls in (qwen.Qwen3_5TextModel, qwen.Qwen3_5MoeTextModel):
        cls.set_vocab = plain_vocab
    for arch in ("qwen3_5", "qwen3_5_moe"):
        folder = os.path.join(MODELS, arch)
        out = os.path.join(folder, "model.gguf")
        sys.argv = ["convert_hf_to_gguf.py", os.path.join(folder, "hf"), "--outtype", "bf16", "--no-mtp", "--outfile", out]
        convert_hf_to_gguf.main()
        print(f"{arch}: {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
