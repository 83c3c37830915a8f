#include "cpu/quant_panels.h"

#include <gizml/error.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/thread_pool.h"
#include "cpu/cpu_features.h"
#include "cpu/quant_dot_kernels.h"

namespace gizml::cpu {

namespace {

bool formatPacks(int bits, int64_t group) { return bits >= 2 && bits <= 8 && group % 8 == 0; }

void panelsOf(const QuantMatrix& m, int64_t p0, int64_t p1, const QuantActs& x, const quant_kernels::BlockedActs& blocked,
              float* y) {
  switch (m.isa()) {
    case Isa::Avx512Vnni: return quant_kernels::panelsAvx512Vnni(m, p0, p1, x, blocked, y, m.rows());
    case Isa::AvxVnni: return quant_kernels::panelsAvxVnni(m, p0, p1, x, blocked, y, m.rows());
    default: return quant_kernels::panelsAvx2(m, p0, p1, x, blocked, y, m.rows());
  }
}

}  // namespace

void quant_kernels::blockActs(const QuantActs& x, BlockedActs& out) {
  const int64_t blocks = (x.rows + kBlockRows - 1) / kBlockRows, words = x.cols / 4, groups = x.cols / x.group;
  out.codes.assign(static_cast<size_t>(blocks * kBlockRows * x.cols), 0);
  out.scale.assign(static_cast<size_t>(blocks * kBlockRows * groups), 0.0f);
  out.sum.assign(out.scale.size(), 0.0f);
  for (int64_t row = 0; row < x.rows; ++row) {
    const int64_t b = row / kBlockRows, r = row % kBlockRows;
    const int8_t* codes = x.codes.data() + row * x.cols;
    int8_t* to = out.codes.data() + b * kBlockRows * x.cols + 4 * r;
    for (int64_t w = 0; w < words; ++w) std::memcpy(to + 4 * w * kBlockRows, codes + 4 * w, 4);
    for (int64_t g = 0; g < groups; ++g) {
      const auto at = static_cast<size_t>((b * groups + g) * kBlockRows + r), from = static_cast<size_t>(row * groups + g);
      out.scale[at] = x.scale[from];
      out.sum[at] = x.sum[from];
    }
  }
}

int64_t quant_kernels::codePrefetchBytes() {
  static const int64_t bytes = [] {
    const CpuFeatures& f = detectedCpuFeatures();
    return f.amd && f.family >= 0x1A ? int64_t{4096} : int64_t{2048};
  }();
  return bytes;
}

bool QuantMatrix::panelsSupported(int bits, int64_t group) { return bestIsa() != Isa::Portable && formatPacks(bits, group); }

QuantMatrix::QuantMatrix(const QuantWeights& w, Isa isa) : rows_(w.rows), cols_(w.cols), group_(w.group), bits_(w.bits) {
  check(isaSupported(isa, cpuFeatures()), std::string("QuantMatrix: this CPU (or GIZML_CPU_ISA) does not run ") + isaName(isa));
  check(w.group > 0 && w.cols % w.group == 0 && w.group % 8 == 0,
        "QuantMatrix: " + std::to_string(w.cols) + " columns are not whole groups of " + std::to_string(w.group) +
            " (a multiple of 8)");
  check(w.bits >= 2 && w.bits <= 8, "QuantMatrix: codes of " + std::to_string(w.bits) + " bits (2..8 are stored)");
  scaleTable_.assign(w.scales, w.scales + 256);
  if (isa != Isa::Portable && formatPacks(w.bits, w.group)) {
    isa_ = isa;
    panelRows_ = panelRowsFor(isa);
    pack(w);
  } else {
    source_ = w;
    source_.scales = scaleTable_.data();
  }
}

void QuantMatrix::pack(const QuantWeights& w) {
  const int64_t groups = cols_ / group_, blockBytes = 2 + group_ * bits_ / 8;
  codes_.assign(static_cast<size_t>(panels() * panelCodeBytes()), 0);
  const int64_t P = panelRows_, wordBytes = 4 * P;
  exponents_.assign(static_cast<size_t>(panels() * groups * 2 * P), 0);
  core::parallelFor(panels(), 16, [&](int64_t p0, int64_t p1) {
    std::vector<uint8_t> q(static_cast<size_t>(group_));
    for (int64_t p = p0; p < p1; ++p) {
      uint8_t* codes = codes_.data() + p * panelCodeBytes();
      uint8_t* exponents = exponents_.data() + p * groups * 2 * P;
      for (int64_t i = 0; i < P && P * p + i < rows_; ++i) {
        const uint8_t* block = w.data + (P * p + i) * w.rowBytes;
        for (int64_t g = 0; g < groups; ++g, block += blockBytes) {
          exponents[g * 2 * P + i] = block[0];
          exponents[g * 2 * P + P + i] = block[1];
          uint8_t* groupCodes = codes + g * group_ * P * (bits_ == 4 || bits_ == 6 ? bits_ : 8) / 8;
          if (bits_ == 4) {
            // Source bytes 4k .. 4k+3 hold codes 8k .. 8k+7, two per byte, low nibble first.
            for (int64_t k = 0; k < group_ / 8; ++k) {
              const uint8_t* b = block + 2 + 4 * k;
              uint8_t* word = groupCodes + k * wordBytes + 4 * i;
              word[0] = static_cast<uint8_t>((b[0] & 15) | (b[2] << 4));
              word[1] = static_cast<uint8_t>((b[0] >> 4) | (b[2] & 0xF0));
              word[2] = static_cast<uint8_t>((b[1] & 15) | (b[3] << 4));
              word[3] = static_cast<uint8_t>((b[1] >> 4) | (b[3] & 0xF0));
            }
          } else if (bits_ == 6) {
            // Source bytes 6k .. 6k+5 hold codes 8k .. 8k+7, 6 bits each, little-endian.
            const int64_t half = i / (P / 2);  // the first P/2 rows fill vector bytes 0 .. 2P - 1
            for (int64_t k = 0; k < group_ / 8; ++k) {
              uint64_t v = 0;
              std::memcpy(&v, block + 2 + 6 * k, 6);
              uint8_t* word = groupCodes + k * (wordBytes + 2 * P);
              for (int64_t j = 0; j < 4; ++j) {
                const auto first = static_cast<uint8_t>((v >> (6 * j)) & 63), second = static_cast<uint8_t>((v >> (6 * j + 24)) & 63);
                const int64_t t = 4 * i + j;
                word[t] = static_cast<uint8_t>((first & 15) | (second << 4));
                word[wordBytes + t % (2 * P)] |= static_cast<uint8_t>(((first >> 4) << (2 * half)) | ((second >> 4) << (4 + 2 * half)));
              }
            }
          } else {
            unpackCodes(block + 2, group_, bits_, q.data());
            if (bits_ == 8)
              for (uint8_t& c : q) c ^= 0x80;  // q - 128 as a signed byte
            for (int64_t c = 0; c < group_; c += 4) std::memcpy(groupCodes + c * P + 4 * i, q.data() + c, 4);
          }
        }
      }
    }
  });
}

void QuantMatrix::matmul(const QuantActs& x, float* y) const {
  const QuantMatrix* self = this;
  matmulAll({&self, 1}, x, {&y, 1});
}

namespace {

// A piece of a decode pass reads about this many bytes of weights (a few microseconds at one
// thread's bandwidth; a pass of several activation rows has pieces up to 4x smaller, as each
// byte serves more work), and a thread takes at most this many pieces: enough that a thread
// slowed by the rest of the machine, or one that woke late, leaves its share to the others.
constexpr int64_t kPieceBytes = 64 << 10;
constexpr int64_t kPiecesPerThread = 32;

// The weight bytes one panel of m reads: its codes, then each group's exponents and zero points.
int64_t panelBytes(const QuantMatrix& m) { return m.panelCodeBytes() + m.cols() / m.group() * 2 * m.panelRows(); }

// One product's packed matrices (their panels numbered one after another from firstPanel[i]),
// their outputs, and the cuts of the joint panel range into pieces.
struct Plan {
  std::vector<const QuantMatrix*> packed;
  std::vector<float*> ys;
  std::vector<int64_t> firstPanel, cuts;
};

// plan.cuts: [0, firstPanel.back()) in pieces of about equal bytes, each cut on an even panel of
// its matrix (two threads' outputs of 8-row panels meet on 64-byte steps).
void pieceCuts(Plan& plan, int64_t rows) {
  const std::vector<const QuantMatrix*>& matrices = plan.packed;
  const std::vector<int64_t>& firstPanel = plan.firstPanel;
  std::vector<int64_t>& cuts = plan.cuts;
  int64_t total = 0;
  for (size_t i = 0; i < matrices.size(); ++i) total += (firstPanel[i + 1] - firstPanel[i]) * panelBytes(*matrices[i]);
  const int64_t pieces = std::clamp<int64_t>(total * std::min<int64_t>(rows, 4) / kPieceBytes, 1, kPiecesPerThread * core::threadCount());
  cuts.assign(1, 0);
  int64_t before = 0, k = 1;  // bytes of the matrices before i; the next cut's number
  for (size_t i = 0; i < matrices.size() && k < pieces; ++i) {
    const int64_t bytes = panelBytes(*matrices[i]), panels = firstPanel[i + 1] - firstPanel[i];
    for (; k < pieces && total * k / pieces < before + panels * bytes; ++k) {
      const int64_t within = (total * k / pieces - before + bytes - 1) / bytes;
      const int64_t cut = firstPanel[i] + std::min(panels, (within + 1) / 2 * 2);
      if (cut > cuts.back() && cut < firstPanel.back()) cuts.push_back(cut);
    }
    before += panels * bytes;
  }
  cuts.push_back(firstPanel.back());
}

}  // namespace

void matmulAll(std::span<const QuantMatrix* const> matrices, const QuantActs& x, std::span<float* const> ys) {
  check(matrices.size() == ys.size(), "matmulAll: one output per matrix");
  // The packed matrices, their outputs, first panels (numbered one after another) and pieces,
  // in lists the calling thread keeps: a decode step makes about 120 products, and making these
  // lists anew was a fifth of its mallocs. The workers read them through this reference (a
  // thread_local's own name would give each worker its own, empty, lists).
  thread_local Plan callersPlan;
  Plan& plan = callersPlan;
  plan.packed.clear();
  plan.ys.clear();
  plan.firstPanel.assign(1, 0);
  for (size_t i = 0; i < matrices.size(); ++i) {
    const QuantMatrix& m = *matrices[i];
    checkActsFit("QuantMatrix", x, m.cols(), m.group());
    if (!m.packed()) {
      quantMatmul(m.source_, x, ys[i]);
      continue;
    }
    plan.packed.push_back(&m);
    plan.ys.push_back(ys[i]);
    plan.firstPanel.push_back(plan.firstPanel.back() + m.panels());
  }
  if (plan.packed.empty()) return;
  // Pieces by bytes, not panels: a 6-bit matrix's panels beside 4-bit ones take longer. Which
  // thread computes a panel does not change its sums (each output is one panel kernel's). Each
  // thread reads a contiguous span of pieces before it takes others' last ones: pieces dealt in
  // turn, so that the two threads read neighbouring 64 KiB, made a 2-thread decode read at a
  // third less bandwidth (`giz bench DIR/qwen3s-ours --prefill 16 --decode 512 --kv f16`: 91-103
  // tok/s against 137-139 with one piece a thread, the same minutes).
  pieceCuts(plan, x.rows);
  // The caller's blocks, kept the same way: their memory serves its next product.
  thread_local quant_kernels::BlockedActs callersBlocks;
  const quant_kernels::BlockedActs& blocked = callersBlocks;
  if (x.rows > 1) quant_kernels::blockActs(x, callersBlocks);
  core::parallelSpans(static_cast<int64_t>(plan.cuts.size()) - 1, [&](int64_t piece) {
    const int64_t p0 = plan.cuts[static_cast<size_t>(piece)], p1 = plan.cuts[static_cast<size_t>(piece) + 1];
    for (size_t i = 0; i < plan.packed.size(); ++i) {
      const int64_t b = std::max(p0, plan.firstPanel[i]), e = std::min(p1, plan.firstPanel[i + 1]);
      if (b < e) panelsOf(*plan.packed[i], b - plan.firstPanel[i], e - plan.firstPanel[i], x, blocked, plan.ys[i]);
    }
  });
}

}  // namespace gizml::cpu
