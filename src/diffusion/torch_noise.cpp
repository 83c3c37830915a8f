// torch.randn(shape, float32, generator=torch.manual_seed(seed)) on the CPU, as ComfyUI draws its
// initial noise, reproduced bit for bit in portable scalar code.
//
// What torch does (ATen's CPU normal kernel, DistributionTemplates.h; read from its source and
// the x86-64 wheel's machine code):
// - an mt19937 seeded with the seed's low 32 bits (the standard initialisation, so
//   std::mt19937 is the same generator);
// - 16 values or more: every element first gets a uniform (r & 0xFFFFFF) * 2^-24 of one draw;
//   then each full block of 16 becomes Box-Muller normals pairing lanes j and j + 8; when the
//   count is not a multiple of 16 the last 16 elements get fresh uniforms and are recomputed;
// - fewer than 16: one double Box-Muller per two elements (cos first, the sin cached for the
//   next element), each uniform from 53 bits of two draws, rounded to float at the end.
// The blocks run torch's AVX2 kernel (Cephes' single-precision log and sincos from
// avx_mathfun.h, which torch also takes on AVX-512 CPUs). GCC compiled its multiply-adds into
// fmas; the std::fma calls below are exactly those of the shipped kernel. The file compiles with
// -ffp-contract=off (CMakeLists.txt) so that no other multiply-add fuses.
#include <gizml/diffusion.h>

#include <bit>
#include <cmath>
#include <numbers>
#include <random>
#include <string>

namespace gizml::diffusion {
namespace {

// Cephes' polynomial coefficients and reduction constants, as avx_mathfun.h rounds them to float.
constexpr float kSqrtHalf = 0.707106781186547524f;
constexpr float kLogP[9] = {7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f,
                            -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                            2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
constexpr float kLogQ1 = -2.12194440e-4f;
constexpr float kLogQ2 = 0.693359375f;
constexpr float kMinusDp1 = -0.78515625f;
constexpr float kMinusDp2 = -2.4187564849853515625e-4f;
constexpr float kMinusDp3 = -3.77489497744594108e-8f;
constexpr float kSinP0 = -1.9515295891E-4f, kSinP1 = 8.3321608736E-3f, kSinP2 = -1.6666654611E-1f;
constexpr float kCosP0 = 2.443315711809948E-005f, kCosP1 = -1.388731625493765E-003f,
                kCosP2 = 4.166664568298827E-002f;
constexpr float kFourOverPi = 1.27323954473516f;
constexpr float kTwoPi = static_cast<float>(2.0 * std::numbers::pi);

// log256_ps for one lane of u in [2^-24, 1] (so neither its NaN mask nor its clamp to the
// smallest normal ever applies).
float cephesLog(float u) {
  const uint32_t bits = std::bit_cast<uint32_t>(u);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 127) + 1.0f;
  const float m = std::bit_cast<float>((bits & ~0x7f800000u) | std::bit_cast<uint32_t>(0.5f));
  // m in [0.5, 1): below sqrt(1/2) take 2m - 1 and one less in the exponent.
  const bool low = m < kSqrtHalf;
  if (low) e -= 1.0f;
  const float x = (m - 1.0f) + (low ? m : 0.0f);
  const float z = x * x;
  float y = std::fma(kLogP[0], x, kLogP[1]);
  for (int k = 2; k < 9; ++k) y = std::fma(y, x, kLogP[k]);
  y = y * x;
  y = std::fma(y, z, e * kLogQ1);
  y = std::fma(-z, 0.5f, y);
  return std::fma(e, kLogQ2, x + y);
}

// sincos256_ps for one lane of theta in [0, 2 pi).
void cephesSinCos(float theta, float& sinOut, float& cosOut) {
  const uint32_t signSin = std::bit_cast<uint32_t>(theta) & 0x80000000u;
  float x = std::fabs(theta);
  // The octant j, rounded up to even, and the remainder x - j pi/4 in three parts.
  int32_t j = static_cast<int32_t>(x * kFourOverPi);
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  const uint32_t swapSin = static_cast<uint32_t>(j & 4) << 29;
  const bool sinPoly = (j & 2) == 0;  // lanes whose sine is the sine polynomial
  const uint32_t signCos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  x = std::fma(y, kMinusDp1, x);
  x = std::fma(y, kMinusDp2, x);
  x = std::fma(y, kMinusDp3, x);

  const float z = x * x;
  const float halfZ = z * 0.5f;
  float c = std::fma(kCosP0, z, kCosP1);
  c = std::fma(c, z, kCosP2);
  c = c * z;
  c = std::fma(z, c, -halfZ);
  c = c + 1.0f;
  float s = std::fma(kSinP0, z, kSinP1);
  s = std::fma(s, z, kSinP2);
  s = s * z;
  s = std::fma(x, s, x);

  // The kernel selects with masks and then adds and subtracts the masked parts: kept as is, for
  // its signed zeros.
  const float sinFromS = sinPoly ? s : 0.0f, sinFromC = sinPoly ? 0.0f : c;
  const float sinValue = sinFromC + sinFromS;
  const float cosValue = (c - sinFromC) + (s - sinFromS);
  sinOut = std::bit_cast<float>(std::bit_cast<uint32_t>(sinValue) ^ signSin ^ swapSin);
  cosOut = std::bit_cast<float>(std::bit_cast<uint32_t>(cosValue) ^ signCos);
}

// normal_fill_16_AVX2: 16 uniforms in place to 16 normals, lane j with lane j + 8.
void boxMuller16(float* data) {
  for (int j = 0; j < 8; ++j) {
    const float radius = std::sqrt(-2.0f * cephesLog(1.0f - data[j]));
    float s, c;
    cephesSinCos(kTwoPi * data[j + 8], s, c);
    // torch's fma(n, std 1, mean 0): n itself, but -0 becomes +0.
    data[j] = radius * c + 0.0f;
    data[j + 8] = radius * s + 0.0f;
  }
}

float uniform24(std::mt19937& engine) { return static_cast<float>(engine() & 0xFFFFFFu) * 0x1p-24f; }

double uniform53(std::mt19937& engine) {
  const uint64_t high = engine();
  const uint64_t bits = (high << 32) | engine();
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
}

}  // namespace

tensor::Tensor torchRandn(uint64_t seed, const tensor::Shape& shape) { return TorchGenerator(seed).randn(shape); }

TorchGenerator::TorchGenerator(uint64_t seed) : engine_(static_cast<uint32_t>(seed)) {}

tensor::Tensor TorchGenerator::randn(const tensor::Shape& shape) {
  for (int64_t d : shape)
    if (d < 0) throw Error("torchRandn: negative dimension in shape " + tensor::shapeText(shape));
  tensor::Tensor out = tensor::empty(shape, DType::F32);
  const int64_t n = out.numel();
  float* data = out.data<float>();

  if (n < 16) {
    // at::normal_distribution<double>: a pair of normals a time, the second kept in the generator.
    for (int64_t i = 0; i < n; ++i) {
      double value;
      if (nextNormal_) {
        value = *nextNormal_;
        nextNormal_.reset();
      } else {
        const double u1 = uniform53(engine_);
        const double u2 = uniform53(engine_);
        const double radius = std::sqrt(-2.0 * std::log1p(-u2));
        const double theta = 2.0 * std::numbers::pi * u1;
        nextNormal_ = radius * std::sin(theta);
        value = radius * std::cos(theta);
      }
      data[i] = static_cast<float>(value + 0.0);  // torch's fma(value, std 1, mean 0)
    }
    return out;
  }

  for (int64_t i = 0; i < n; ++i) data[i] = uniform24(engine_);
  for (int64_t i = 0; i + 16 <= n; i += 16) boxMuller16(data + i);
  if (n % 16 != 0) {
    float* tail = data + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform24(engine_);
    boxMuller16(tail);
  }
  return out;
}

}  // namespace gizml::diffusion
