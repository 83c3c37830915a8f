"""transformers' hidden states after the first N layers, for a model loaded with only those
(gizml::llm::LoadOptions::layers, Engine::hidden): tests/llm/hidden_test.cpp and
tests/slow/hidden_real_test.cpp compare against them.

Run with a Python that has torch and transformers 5, and gguf and accelerate for smollm2 (here
/work/venv-torch/bin/python):
    python tests/reference/make_hidden_fixtures.py tiny [arch ...]     (all by default)
    python tests/reference/make_hidden_fixtures.py masked [arch ...]   (MASKED_ARCHS by default)
    python tests/reference/make_hidden_fixtures.py smollm2 "$(scripts/default-model.sh smollm2)"

tiny: for each tiny model of tests/data/models/<arch>/ (make_model_fixtures.py), its hf/ folder
loaded in float32 (the bf16 weights exactly) and run on that fixture's prompt 2 (17 tokens, past
the sliding windows) gives tests/data/models/<arch>/hidden.safetensors:
  hidden_<N>: f32 [17, hidden], the residual stream after layer N
for N = half the layers and all of them. For N below the model's layers that is
output_hidden_states' hidden_states[N] (hidden_states[0]: the embeddings, Gemma's scaled); for
N = all, hidden_states[N] is after the final norm, so the fixture holds the final norm's input
instead (a forward pre-hook), which is what gizml gives.

masked: for the tiny models whose layers all attend every key and whose positions transformers
numbers 0, 1, ... whatever the mask (MASKED_ARCHS: not Mistral's or Gemma 3's sliding windows,
not Qwen3-VL, whose get_rope_index numbers by the mask), the same prompt with attention_mask of ATTENDED ones then zeros (padding, as
FLUX.2 klein's text encoder reads it) gives tests/data/models/<arch>/masked_hidden.safetensors:
  hidden_<N>: f32 [17, hidden] for every N from 0 (the embeddings) to all (the final norm's
  input); attended: i64 [1], ATTENDED.
Engine::hidden(prompt, layers, attended) is compared against it.

smollm2: SmolLM2-135M-Instruct's GGUF (a Q4_1 file: transformers dequantizes it to float32 with
its own reader) on a short sentence gives tests/data/real_models/smollm2_hidden.safetensors
(hidden_<N> [tokens, 576] for N = 1 and 29 of 30: Z-Image's hidden_states[-2]) and
smollm2_hidden.json (the token ids and the Ns).
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
import transformers as tf

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
TINY_PROMPT = 2
SMOLLM2_TEXT = "The Nile, the Amazon and the Yangtze"
SMOLLM2_LAYERS = [1, 29]
MASKED_ARCHS = ["llama", "qwen2", "qwen3"]
ATTENDED = 9


def final_norm(model):
    """The text model's final norm (Qwen3-VL keeps its text model under language_model)."""
    modules = dict(model.named_modules())
    for name in ("model.norm", "model.language_model.norm"):
        if name in modules:
            return modules[name]
    raise RuntimeError("no final norm found")


def hidden_after(model, ids, layers, attention_mask=None):
    """{N: [tokens, hidden]} for each N in layers (N <= the model's layers)."""
    total = model.config.get_text_config().num_hidden_layers
    before_norm = []
    hook = final_norm(model).register_forward_pre_hook(lambda module, args: before_norm.append(args[0]))
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), attention_mask=attention_mask, output_hidden_states=True)
    hook.remove()
    assert len(out.hidden_states) == total + 1
    return {n: (before_norm[0] if n == total else out.hidden_states[n])[0].float().contiguous() for n in layers}


def tiny_model(arch):
    """The tiny fixture's model in float32, and its prompt."""
    folder = os.path.join(DATA, "models", arch)
    config = json.load(open(os.path.join(folder, "hf", "config.json")))
    model_class = getattr(tf, config["architectures"][0])
    model = model_class.from_pretrained(os.path.join(folder, "hf"), dtype=torch.float32,
                                        attn_implementation="eager").eval()
    return model, json.load(open(os.path.join(folder, "reference.json")))["prompts"][TINY_PROMPT]


def masked(archs):
    for arch in archs or MASKED_ARCHS:
        model, ids = tiny_model(arch)
        total = model.config.get_text_config().num_hidden_layers
        mask = torch.tensor([[1] * ATTENDED + [0] * (len(ids) - ATTENDED)])
        states = hidden_after(model, ids, range(total + 1), mask)
        tensors = {f"hidden_{n}": h for n, h in states.items()}
        tensors["attended"] = torch.tensor([ATTENDED], dtype=torch.int64)
        save_file(tensors, os.path.join(DATA, "models", arch, "masked_hidden.safetensors"))
        print(f"{arch}: hidden states 0..{total}, {ATTENDED} of {len(ids)} tokens attended")


def tiny(archs):
    for arch in archs or sorted(os.listdir(os.path.join(DATA, "models"))):
        folder = os.path.join(DATA, "models", arch)
        model, ids = tiny_model(arch)
        total = model.config.get_text_config().num_hidden_layers
        states = hidden_after(model, ids, sorted({total // 2, total}))
        save_file({f"hidden_{n}": h for n, h in states.items()}, os.path.join(folder, "hidden.safetensors"))
        print(f"{arch}: hidden states after layers {sorted(states)} of {total}")


def smollm2(gguf):
    where = {"pretrained_model_name_or_path": os.path.dirname(os.path.abspath(gguf)),
             "gguf_file": os.path.basename(gguf)}
    model = tf.AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32).eval()
    tokenizer = tf.AutoTokenizer.from_pretrained(**where)
    ids = tokenizer(SMOLLM2_TEXT, add_special_tokens=False)["input_ids"]
    states = hidden_after(model, ids, SMOLLM2_LAYERS)
    out = os.path.join(DATA, "real_models")
    save_file({f"hidden_{n}": h for n, h in states.items()}, os.path.join(out, "smollm2_hidden.safetensors"))
    with open(os.path.join(out, "smollm2_hidden.json"), "w") as f:
        json.dump({"text": SMOLLM2_TEXT, "ids": ids, "layers": SMOLLM2_LAYERS}, f)
        f.write("\n")
    print(f"smollm2: {len(ids)} tokens, hidden states after layers {SMOLLM2_LAYERS}")


def main():
    torch.set_num_threads(1)
    if len(sys.argv) >= 2 and sys.argv[1] == "tiny":
        tiny(sys.argv[2:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "masked":
        masked(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "smollm2":
        smollm2(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
