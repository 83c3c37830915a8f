// Bad tile programs fail while tracing, with a gizml::Error naming the operation and shapes.
#include <gizml/tile.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"

#include <optional>
#include <string>

using namespace gizml;

namespace {
void expectTraceError(const Tile::Body& body, std::initializer_list<std::string> fragments) {
  expectError([&] { Tile::run({1}, body); }, fragments);
}
}  // namespace

TEST(TileErrors, MismatchedBlockShapes) {
  const auto x = T::zeros({8, 8});
  expectTraceError([&](Tile::Program& p) {
    const auto a = p.read(x, {4, 4}).at({0, 0}), b = p.read(x, {4, 8}).at({0, 0});
    p.write(T::zeros({4, 4}), {4, 4}).put(a + b, {0, 0});
  }, {"tile add", "[4, 4]", "[4, 8]", "broadcast"});
  expectTraceError([&](Tile::Program& p) {
    p.write(T::zeros({8, 8}), {4, 4}).put(p.zeros({4, 8}), {0, 0});
  }, {"put", "[4, 8]", "f32[8, 8] in blocks [4, 4]"});
  expectTraceError([&](Tile::Program& p) { p.read(x, {4}); }, {"read", "f32[8, 8]", "blocks [4]"});
  expectTraceError([&](Tile::Program& p) { p.read(x, {4, 0}); }, {"read", "[4, 0]", "empty"});
  expectTraceError([&](Tile::Program& p) {
    p.fold(0, 2, p.zeros({4, 4}), [&](Tile::Index, Tile::Tile acc) { return acc.sum(0); });
  }, {"fold", "f32[1, 4]", "f32[4, 4]"});
}

TEST(TileErrors, ReadingPastTheBlocks) {
  const auto x = T::zeros({5, 8});
  expectTraceError([&](Tile::Program& p) { p.read(x, {4, 4}).at({2, 0}); },
                   {"read", "f32[5, 8] in blocks [4, 4]", "block index 2 on axis 0", "2 blocks"});
  expectTraceError([&](Tile::Program& p) { p.read(x, {4, 4}).at({0, p.index(-1)}); },
                   {"read", "block index -1 on axis 1"});
  // A grid larger than the tensor's blocks: p.id(0) reaches block 2 of 2.
  try {
    Tile::run({3}, [&](Tile::Program& p) { p.read(x, {4, 4}).at({p.id(0), 0}); });
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block index 0..2 on axis 0"), std::string::npos) << e.what();
  }
  expectTraceError([&](Tile::Program& p) {
    const auto X = p.read(x, {4, 4});
    p.fold(0, X.blocks(1) + 1, p.zeros({4, 4}), [&](Tile::Index k, Tile::Tile acc) { return acc + X.at({0, k}); });
  }, {"block index 0..2 on axis 1"});
}

TEST(TileErrors, DotOfIncompatibleTiles) {
  expectTraceError([&](Tile::Program& p) { p.zeros({4, 8}).dot(p.zeros({4, 8})); }, {"dot", "[4, 8]", "[k, n]"});
  expectTraceError([&](Tile::Program& p) { p.zeros({4}).dot(p.zeros({4, 8})); }, {"dot", "[4]"});
}

TEST(TileErrors, WriteNeverPut) {
  expectTraceError([&](Tile::Program& p) { p.write(T::zeros({4, 4}), {4, 4}); },
                   {"write", "f32[4, 4] in blocks [4, 4]", "no put"});
}

TEST(TileErrors, IndexArity) {
  const auto x = T::zeros({4, 4});
  expectTraceError([&](Tile::Program& p) { p.read(x, {4, 4}).at({0}); },
                   {"read", "f32[4, 4]", "block index of 1 axes", "has 2"});
  expectTraceError([&](Tile::Program& p) { p.write(T::zeros({4, 4}), {4, 4}).put(p.zeros({4, 4}), {0, 0, 0}); },
                   {"put", "3 axes"});
  expectTraceError([&](Tile::Program& p) { p.id(1); }, {"id", "axis 1", "[1]"});
  expectTraceError([&](Tile::Program& p) { p.read(x, {4, 4}).blocks(2); }, {"blocks", "axis 2"});
}

TEST(TileErrors, OtherMisuse) {
  expectTraceError([&](Tile::Program& p) { p.zeros({4, 4}).sum(2); }, {"sum", "axis 2", "[4, 4]"});
  expectTraceError([&](Tile::Program& p) { p.zeros({4}, DType::I32); }, {"full", "i32"});
  expectTraceError([&](Tile::Program& p) { p.zeros({4}).cast(DType::I64); }, {"cast", "i64"});
  expectTraceError([&](Tile::Program& p) { p.read(T::zeros({4}, DType::I32), {4}); }, {"read", "i32[4]"});
  expectTraceError([&](Tile::Program& p) { p.stages(5); }, {"stages", "5"});
  expectTraceError([&](Tile::Program& p) {
    std::optional<Tile::Tile> inner;
    p.fold(0, 1, p.zeros({2}), [&](Tile::Index, Tile::Tile acc) { inner = acc * 2.0; return acc; });
    p.write(T::zeros({2}), {2}).put(*inner, {0});
  }, {"put", "finished fold"});
  EXPECT_THROW(Tile::run({}, [](Tile::Program&) {}), Error);
  EXPECT_THROW(Tile::cdiv(4, 0), Error);
}
