#pragma once
// Exact products of int8 matrices (ConvRot's W8A8 linears: rotated activations times INT8
// weight codes), summed in i32. Two's-complement sums wrap the same way in every order, so the
// kernel of every ISA gives the portable loop's bits for any k.
//
// The weight comes as [n, k] rows (a linear's output channels, as stored). vpdpbusd multiplies
// unsigned by signed bytes, so the VNNI kernels take the activations as a + 128 (a ^ 0x80) and
// take 128 times each weight row's sum off its outputs.
//  - AVX-512 VNNI: "broadcast form" on weight rows packed 16 to a vector (int8_gemm_avx512vnni.cpp).
//  - AVX-VNNI and AVX2: "dot form", no packing: a micro-tile of activation rows times weight rows
//    keeps a vector accumulator per output and sums it across lanes at the end. AVX2 widens the
//    bytes to i16 for vpmaddwd (maddubs' i16 pair sums could saturate at 128 x 128 x 2).
#include <cstdint>

#include "cpu/cpu_features.h"

namespace gizml::cpu {

/// c [m, n] (rows ldc apart) = a [m, k] (rows lda apart) times wᵀ for w [n, k] (rows ldw apart),
/// each output the exact sum of its k int8 products in i32 (wrapping past 2^31, as torch's
/// _int_mm), in parallel over blocks of outputs. Throws if this CPU cannot run isa.
void int8Gemm(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw,
              int32_t* c, int64_t ldc, Isa isa = bestIsa());

namespace int8_kernels {
/// The whole product on AVX-512 VNNI (it packs the weight its own way).
void gemmAvx512Vnni(int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda, const int8_t* w, int64_t ldw,
                    int32_t* c, int64_t ldc);
/// One product as a 256-bit kernel sees it: for the VNNI kernels `a` holds the activations plus 128 (as
/// unsigned bytes) and weightSums 128 times each weight row's sum; for AVX2 `a` is as given and
/// weightSums is null.
struct Int8Job {
  int64_t k = 0;
  const uint8_t* a = nullptr;
  int64_t lda = 0;
  const int8_t* w = nullptr;
  int64_t ldw = 0;
  const int32_t* weightSums = nullptr;
  int32_t* c = nullptr;
  int64_t ldc = 0;
};
/// The outputs of rows [i0, i1) and weight rows [j0, j1), each over the whole k.
void blockAvx2(const Int8Job& job, int64_t i0, int64_t i1, int64_t j0, int64_t j1);
void blockAvxVnni(const Int8Job& job, int64_t i0, int64_t i1, int64_t j0, int64_t j1);
}  // namespace int8_kernels

}  // namespace gizml::cpu
