// giz bench MODEL [--prefill N] [--decode N] [--tokens FILE] [--kv FORMAT] [--logits FILE]
// [--batch B]: times a prefill of N prompt tokens and N greedy decode steps after it, and prints
// one JSON line (tok/s of each, peak RSS) for bench/bench_llm.py, which runs llama.cpp the same
// way. The prompt is read in passes of at most llm::kPromptRowsPerStep rows in all, as the engine
// reads prompts (llama-bench's passes are its ubatch). --batch B runs B sequences at once (each
// the same prompt, a part of each in every prefill pass, then one decode step of all B at a
// time), as a server with B requests does; tok/s are totals. --logits writes the prefill's logits
// of every position, then each decode step's ([N + decode, vocab] little-endian f32), for the
// driver's KL divergences and for comparing two builds' bits (the decode time then includes the
// writes).
#include <gizml/llm.h>
#include <gizml/netops.h>
#include <gizml/threads.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "command_line.h"
#include "generation.h"

namespace {

constexpr const char* kUsage =
    "usage: giz bench MODEL [--prefill 512] [--decode 128] [--tokens FILE] [--kv f32] [--logits FILE]\n"
    "                  [--batch 1] [--bits 4] [--device auto]   MODEL, --device as for giz run (giz run --help)\n"
    "  times a prefill of the prompt (FILE's token ids, else seeded random ones) and greedy decode steps,\n"
    "  of --batch sequences at once (tok/s in total); --kv keeps keys and values as f32, f16, bf16, or codes\n"
    "  of 8, 4 or 2 bits, or keys and values apart as K/V (4/2); an untimed warm-up pass of the prompt and\n"
    "  one step comes first, as llama-bench's does; --logits writes the logits of every prompt position and\n"
    "  of each decode step (rows of little-endian f32)\n";

// The peak resident set of this process (VmHWM), in MiB.
double peakRssMiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

}  // namespace

int benchCommand(int argc, char** argv) {
  using gizml::check;
  std::string model, tokensFile, logitsFile, kv = "default", device = "auto";
  int64_t prefill = 512, decode = 128, batch = 1;
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  int bits = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--prefill" && hasValue) prefill = parseCount(a, argv[++i]);
    else if (a == "--decode" && hasValue) decode = parseCount(a, argv[++i]);
    else if (a == "--tokens" && hasValue) tokensFile = argv[++i];
    else if (a == "--logits" && hasValue) logitsFile = argv[++i];
    else if (a == "--kv" && hasValue) kv = argv[++i];
    else if (a == "--bits" && hasValue) bits = parseBits(argv[++i]);
    else if (a == "--batch" && hasValue) batch = parseCount(a, argv[++i]);
    else if (a == "--device" && hasValue) device = argv[++i];
    else if (a.rfind("--", 0) == 0 || !model.empty()) return usageReply(kUsage, false);
    else model = a;
  }
  if (model.empty()) return usageReply(kUsage, false);
  check(prefill > 0 && decode >= 0, "bench: --prefill must be positive and --decode not negative");
  check(batch >= 1, "bench: --batch must be at least 1");
  check(batch == 1 || logitsFile.empty(), "bench: --logits is for one sequence, not --batch");
  const gizml::llm::KvFormat kvCache = kv == "default" ? gizml::llm::KvFormat() : gizml::llm::KvFormat::parse(kv);

  std::optional<gizhw::gpu::Gpu> gpu = deviceFor(device);
  const std::string folder = convertedFolder(model, bits);
  gizml::llm::Sequences sequences = [&] {
    if (gpu) {
      try {
        return gizml::llm::Sequences(folder, batch, prefill + decode, kvCache, gpu);
      } catch (const gizml::Error& e) {
        if (device != "auto") throw;
        std::cerr << "giz: running on the CPU: " << e.what() << "\n";
        gpu.reset();
      }
    }
    return gizml::llm::Sequences(folder, batch, prefill + decode, kvCache);
  }();
  const int64_t vocab = sequences.vocabSize();
  std::vector<int32_t> prompt;
  if (!tokensFile.empty()) {
    std::ifstream in(tokensFile);
    check(in.good(), "bench: cannot read " + tokensFile);
    for (int64_t t; in >> t && static_cast<int64_t>(prompt.size()) < prefill;) prompt.push_back(static_cast<int32_t>(t));
    check(static_cast<int64_t>(prompt.size()) == prefill,
          "bench: " + tokensFile + " has fewer than " + std::to_string(prefill) + " token ids");
  } else {
    std::mt19937 rng(1234);
    for (int64_t i = 0; i < prefill; ++i) prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab)));
  }

  using Clock = std::chrono::steady_clock;
  // What each sequence reads in the next decode pass: the token it chose.
  std::vector<std::vector<gizml::llm::TokenId>> next(static_cast<size_t>(batch));
  // The prompts in passes of at most the engine's rows a step in all (each sequence's part of
  // them alike); the last pass's logits, or every row's.
  const int64_t part = std::max<int64_t>(1, gizml::llm::kPromptRowsPerStep / batch);
  const auto readPrompt = [&](bool allLogits) {
    std::vector<std::vector<gizml::tensor::Tensor>> parts(next.size());
    std::vector<gizml::tensor::Tensor> logits;
    for (int64_t from = 0; from < prefill; from += part) {
      const int64_t to = std::min(prefill, from + part);
      const std::vector<gizml::llm::TokenId> tokens(prompt.begin() + from, prompt.begin() + to);
      logits = sequences.forward(std::vector<std::vector<gizml::llm::TokenId>>(next.size(), tokens), allLogits);
      if (allLogits)
        for (size_t s = 0; s < next.size(); ++s) parts[s].push_back(logits[s]);
    }
    if (allLogits)
      for (size_t s = 0; s < next.size(); ++s) logits[s] = gizml::tensor::concat(parts[s], 0);
    return logits;
  };
  // The warm-up: the first pass touches the KV cache's and the buffers' fresh pages, and wakes the
  // threads; llama-bench leaves such a pass out of its figures too.
  readPrompt(false);
  if (decode > 0) sequences.forward(std::vector<std::vector<gizml::llm::TokenId>>(static_cast<size_t>(batch), {prompt[0]}));
  sequences.clear();
  const auto t0 = Clock::now();
  auto logits = readPrompt(!logitsFile.empty());
  const double prefillSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::ofstream logitsOut;
  const auto writeLogits = [&] {
    const std::vector<float> values = logits[0].toFloats();
    logitsOut.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
    check(logitsOut.good(), "bench: cannot write " + logitsFile);
  };
  if (!logitsFile.empty()) {
    logitsOut.open(logitsFile, std::ios::binary);
    writeLogits();
  }
  // Each sequence's next token: the argmax of its last row.
  auto pickNext = [&] {
    for (size_t s = 0; s < next.size(); ++s) {
      const int64_t rows = logits[s].shape()[0];
      next[s] = {static_cast<gizml::llm::TokenId>(gizml::netops::argmax(logits[s].slice(0, rows - 1, rows))[0])};
    }
  };
  pickNext();
  const auto t1 = Clock::now();
  for (int64_t i = 0; i < decode; ++i) {
    logits = sequences.forward(next);
    if (logitsOut.is_open()) writeLogits();
    pickNext();
  }
  const double decodeSeconds = std::chrono::duration<double>(Clock::now() - t1).count();
  nlohmann::json result = {{"engine", "gizml"},
                           {"threads", gizml::core::threadCount()},
                           {"device", gpu ? gpu->describe() : "cpu"},
                           {"sequences", batch},
                           {"prefill_tokens", prefill},
                           {"prefill_tok_s", static_cast<double>(batch * prefill) / prefillSeconds},
                           {"decode_tokens", decode},
                           {"decode_tok_s", decode > 0 ? static_cast<double>(batch * decode) / decodeSeconds : 0.0},
                           {"peak_rss_mib", peakRssMiB()}};
  std::cout << result.dump() << std::endl;
  return 0;
}
