// Un-permuting llama.cpp's q/k rows against the numpy permute of convert_hf_to_gguf.py.
#include "llm/formats/llama_permute.h"

#include <gtest/gtest.h>

#include "llm/formats/safetensors.h"
#include "llm_test_util.h"

using namespace gizml;
using namespace gizml::llm;

TEST(LlamaPermute, UndoesConvertScriptPermute) {
  const SafetensorsFile f(llmData("permute.safetensors"));
  const int64_t heads = std::stoll(f.metadata().at("heads")), kv = std::stoll(f.metadata().at("kv_heads"));
  EXPECT_EQ(unpermuteLlamaRows(f.load("q_permuted"), heads, "q").toFloats(), f.load("q").toFloats());
  EXPECT_EQ(unpermuteLlamaRows(f.load("k_permuted"), kv, "k").toFloats(), f.load("k").toFloats());
  EXPECT_EQ(unpermuteLlamaRows(f.load("bq_permuted"), heads, "bq").toFloats(), f.load("bq").toFloats());
  EXPECT_EQ(unpermuteLlamaRows(f.load("bk_permuted"), kv, "bk").toFloats(), f.load("bk").toFloats());
  expectError([&] { unpermuteLlamaRows(f.load("q"), 3, "blk.0.attn_q.weight"); }, {"blk.0.attn_q.weight", "3 heads"});
}
