// Bad input to gizml::netops: each is a gizml::Error naming the function and what is wrong.
#include <gizml/netops.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"

using namespace gizml;

namespace {

T::Tensor z(const T::Shape& shape) { return T::zeros(shape); }

TEST(NetopsBadInput, Affine) {
  expectError([] { netops::affine(z({2, 3, 1}), z({4, 3}), z({4})); }, {"netops::affine", "x of shape [2, 3, 1]"});
  expectError([] { netops::affine(z({2, 3}), z({4, 5}), z({4})); }, {"netops::affine", "w of shape [4, 5]", "in"});
  expectError([] { netops::affine(z({2, 3}), z({4, 3}), z({3})); }, {"netops::affine", "b of shape [3]", "[4]"});
  expectError([] { netops::affine(z({2, 3}), z({4, 3}), z({4}), DType::I32); }, {"compute dtype i32"});
  expectError([] { netops::affine(T::zeros({2, 3}, DType::I64), z({4, 3}), z({4})); }, {"x has dtype i64"});
}

TEST(NetopsBadInput, LayerNorm) {
  expectError([] { netops::layerNorm(z({2, 4}), z({3}), z({4}), 1e-5); }, {"netops::layerNorm", "weight of shape [3]"});
  expectError([] { netops::layerNorm(z({2, 4}), z({4}), z({4, 1}), 1e-5); }, {"bias of shape [4, 1]"});
  expectError([] { netops::layerNorm(z({2, 0}), z({0}), z({0}), 1e-5); }, {"x of shape [2, 0]", "empty rows"});
  expectError([] { netops::layerNorm(z({2, 4}), z({4}), z({4}), -1.0); }, {"eps"});
  expectError([] { netops::layerNormGrad(z({2, 5}), z({2, 4}), z({4}), z({2}), z({2})); },
              {"netops::layerNormGrad", "dy of shape [2, 5]"});
  expectError([] { netops::layerNormGrad(z({2, 4}), z({2, 4}), z({4}), z({3}), z({2})); }, {"mean of shape [3]"});
  expectError([] { netops::layerNormGrad(z({2, 4}), z({2, 4}), z({4}), z({2}), z({2, 1})); }, {"rstd of shape"});
}

TEST(NetopsBadInput, CrossEntropy) {
  expectError([] { netops::crossEntropyLoss(z({6}), {0}); }, {"netops::crossEntropyLoss", "logits of shape [6]"});
  expectError([] { netops::crossEntropyRows(z({2, 3}), {0}); }, {"netops::crossEntropyRows", "labels has 1 entries for 2 rows"});
  expectError([] { netops::crossEntropyGrad(z({2, 3}), {0, 3}, 1.0); }, {"netops::crossEntropyGrad", "labels[1] = 3", "[0, 3)"});
  expectError([] { netops::crossEntropyLoss(z({2, 3}), {-1, 0}); }, {"labels[0] = -1"});
  expectError([] { netops::crossEntropyLoss(z({0, 3}), {}); }, {"no rows"});
}

TEST(NetopsBadInput, Attention) {
  expectError([] { netops::attention(z({2, 3}), z({1, 2, 3}), z({1, 2, 3}), 1.0); }, {"netops::attention", "q of shape [2, 3]"});
  expectError([] { netops::attention(z({1, 2, 4}), z({1, 3, 5}), z({1, 3, 2}), 1.0); }, {"k of shape [1, 3, 5]", "b and d"});
  expectError([] { netops::attention(z({1, 2, 4}), z({2, 3, 4}), z({2, 3, 2}), 1.0); }, {"k of shape [2, 3, 4]"});
  expectError([] { netops::attention(z({1, 2, 4}), z({1, 3, 4}), z({1, 4, 2}), 1.0); }, {"v of shape [1, 4, 2]", "tk"});
  expectError([] { netops::attention(z({1, 2, 4}), z({1, 3, 4}), z({1, 3, 2}), 1.0, false, 1.0); }, {"rate = 1", "[0, 1)"});
  expectError([] { netops::attention(z({1, 2, 4}), z({1, 3, 4}), z({1, 3, 2}), 1.0, false, -0.1); }, {"rate"});
  expectError([] { netops::causalMask(-1, 2); }, {"netops::causalMask", "tq = -1"});
}

TEST(NetopsBadInput, Patches) {
  expectError([] { netops::im2col(z({3, 4, 4}), 3, 3, 1, 0); }, {"netops::im2col", "x of shape [3, 4, 4]"});
  expectError([] { netops::im2col(z({1, 1, 4, 4}), 0, 3, 1, 0); }, {"kh = 0"});
  expectError([] { netops::im2col(z({1, 1, 4, 4}), 3, 3, 0, 0); }, {"stride = 0"});
  expectError([] { netops::im2col(z({1, 1, 4, 4}), 3, 3, 1, -1); }, {"pad = -1"});
  expectError([] { netops::im2col(z({1, 1, 4, 2}), 3, 3, 1, 0); }, {"kw = 3", "more than"});
  expectError([] { netops::col2im(z({4, 9}), 1, 0, 4, 4, 3, 3, 1, 0); }, {"netops::col2im", "c = 0"});
  expectError([] { netops::col2im(z({5, 9}), 1, 1, 4, 4, 3, 3, 1, 0); }, {"cols of shape [5, 9]", "[4, 9]"});
  expectError([] { netops::im2col1d(z({5}), 3, 1, 0, 1); }, {"netops::im2col1d", "x of shape [5]"});
  expectError([] { netops::im2col1d(z({5, 2}), 3, 1, 0, 0); }, {"dilation = 0"});
  expectError([] { netops::im2col1d(z({5, 2}), 3, 1, 0, 1, 4); }, {"first = 4"});
  expectError([] { netops::im2col1d(z({5, 2}), 3, 1, 0, 1, 1, 3); }, {"count = 3"});
  expectError([] { netops::col2im1d(z({4, 5}), 2, 6, 3, 1, 0); }, {"netops::col2im1d", "cols of shape [4, 5]"});
  expectError([] { netops::col2im1d(z({4, 6}), 2, 6, 3, 0, 0); }, {"stride = 0"});
}

TEST(NetopsBadInput, Convolutions) {
  expectError([] { netops::conv1d(z({5, 2}), z({3, 2}), {}, 1, 0, 1); }, {"netops::conv1d", "w of shape [3, 2]"});
  expectError([] { netops::conv1d(z({5, 2}), z({3, 4, 2}), {}, 1, 0, 1); }, {"w of shape [3, 4, 2]", "channels"});
  expectError([] { netops::conv1d(z({5, 2}), z({3, 2, 2}), {z({2})}, 1, 0, 1); }, {"bias of shape [2]", "[3]"});
  expectError([] { netops::conv1d(z({5, 2}), z({3, 2, 2}), {z({3}), z({3})}, 1, 0, 1); }, {"bias holds 2"});
  expectError([] { netops::conv1d(z({5, 2}), z({3, 2, 2}), {}, 0, 0, 1); }, {"stride = 0"});
  expectError([] { netops::convTranspose1d(z({5, 2}), z({3, 2, 2}), {}, 1, 0); },
              {"netops::convTranspose1d", "w of shape [3, 2, 2]", "channels"});
  expectError([] { netops::convTranspose1d(z({2, 2}), z({2, 3, 2}), {}, 1, 2); }, {"pad = 2", "no output"});
  expectError([] { netops::convTranspose1d(z({2, 2}), z({2, 3, 0}), {}, 1, 0); }, {"k = 0"});
}

TEST(NetopsBadInput, Pooling) {
  expectError([] { netops::pool2d(z({1, 4, 4}), 2, 2, false); }, {"netops::pool2d", "x of shape [1, 4, 4]"});
  expectError([] { netops::pool2d(z({1, 1, 4, 4}), 5, 1, true); }, {"size = 5"});
  expectError([] { netops::pool2d(z({1, 1, 4, 4}), 2, 0, true); }, {"stride = 0"});
  expectError([] { netops::pool2dGrad(z({1, 1, 3, 3}), z({1, 1, 4, 4}), 2, 2, false); },
              {"netops::pool2dGrad", "dy of shape [1, 1, 3, 3]", "[1, 1, 2, 2]"});
}

TEST(NetopsBadInput, GroupNorm) {
  expectError([] { netops::groupNorm(z({6, 4}), 4, z({6}), z({6}), 1e-5); }, {"netops::groupNorm", "groups = 4", "6 channels"});
  expectError([] { netops::groupNorm(z({6, 4}), 0, z({6}), z({6}), 1e-5); }, {"groups = 0"});
  expectError([] { netops::groupNorm(z({6, 4}), 3, z({4}), z({6}), 1e-5); }, {"w of shape [4]"});
  expectError([] { netops::groupNorm(z({6, 4}), 3, z({6}), z({6}), 1e-5, false, DType::I8); }, {"dtype i8"});
}

TEST(NetopsBadInput, TensorMethods) {
  expectError([] { netops::argmax(T::scalar(1.0)); }, {"netops::argmax", "x of shape []"});
  expectError([] { netops::argmax(z({3, 0})); }, {"x of shape [3, 0]"});
  expectError([] { netops::dropout(z({3}), T::Key(1), 1.0); }, {"netops::dropout", "p = 1", "[0, 1)"});
  expectError([] { netops::dropout(z({3}), T::Key(1), -0.5); }, {"p = -0.5"});
}

TEST(NetopsBadInput, GpuOperandsNameTheFunction) {
  // Operands on two devices are an Error, never a hidden copy.
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  expectError([&] { netops::attention(z({1, 2, 4}).on(*gpu), z({1, 3, 4}), z({1, 3, 2}), 1.0); },
              {"netops::attention", "two devices"});
}

}  // namespace
