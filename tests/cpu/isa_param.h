#pragma once
// Tests run once per int8 ISA (AVX2, AVX-VNNI, AVX-512 VNNI), each skipped with the reason where
// this CPU, or GIZML_CPU_ISA, does not run it.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "cpu/cpu_features.h"

namespace gizml::cpu {
inline void PrintTo(Isa isa, std::ostream* os) { *os << isaName(isa); }
}  // namespace gizml::cpu

namespace gizml::test {

class IsaTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  void SetUp() override {
    if (!cpu::isaSupported(GetParam(), cpu::detectedCpuFeatures()))
      GTEST_SKIP() << "this CPU lacks " << cpu::isaName(GetParam());
    if (!cpu::isaSupported(GetParam(), cpu::cpuFeatures()))
      GTEST_SKIP() << "GIZML_CPU_ISA holds the kernels below " << cpu::isaName(GetParam());
  }
};

inline std::string isaParamName(const ::testing::TestParamInfo<cpu::Isa>& info) { return cpu::isaName(info.param); }

}  // namespace gizml::test
