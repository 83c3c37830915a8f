#pragma once
// gizml::tile: tile programs (Step 3 of the guide). A program says what one block of the output
// is; Tile::run traces it once into an IR and runs that for every point of the grid, on the CPU
// for host tensors and as a generated CUDA kernel for GPU tensors. Tile::ir prints the IR with
// the GPU layout of each value, Tile::cuda gives its CUDA source. Rules in docs/tile.md.
#include <gizml/tensor.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gizml::tile {

using tensor::Shape;
using tensor::Tensor;
using Grid = std::vector<int64_t>;

namespace detail {
class Builder;
}

/// A block index: an i64 scalar that is the same for the whole program instance (p.id(axis),
/// p.index(n), a fold's counter, and sums and products of those). A number converts to one.
class Index {
 public:
  Index(int64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor): `.at({i, 0})`
  Index(int value) : value_(value) {}      // NOLINT(google-explicit-constructor)

  Index add(const Index& o) const;
  Index sub(const Index& o) const;
  Index mul(const Index& o) const;

 private:
  friend class detail::Builder;
  Index(detail::Builder* b, int id) : b_(b), id_(id) {}
  detail::Builder* b_ = nullptr;  // null for a plain number
  int id_ = -1;
  int64_t value_ = 0;
};

inline Index operator+(const Index& a, const Index& b) { return a.add(b); }
inline Index operator-(const Index& a, const Index& b) { return a.sub(b); }
inline Index operator*(const Index& a, const Index& b) { return a.mul(b); }

/// A block of values: its shape and dtype (F32, F16, BF16 or Bool) are known while tracing.
/// Operations broadcast as NumPy's (a [1, 4] tile against a [4, 4] one repeats its row) and
/// round to the result's dtype after each step, as tensors do.
class Tile {
 public:
  Shape shape() const;
  DType dtype() const;

  /// A tile of value, in this tile's shape and dtype: `t + 1.0` is `t.add(t.k(1.0))`.
  Tile k(double value) const;

  Tile neg() const; Tile abs() const; Tile exp() const; Tile log() const;
  Tile sqrt() const; Tile rsqrt() const; Tile sin() const; Tile cos() const;
  Tile tanh() const; Tile sigmoid() const; Tile relu() const; Tile silu() const;
  Tile gelu() const;  // erf form
  Tile geluTanh() const;
  Tile floor() const; Tile ceil() const; Tile round() const; Tile sign() const;

  Tile add(const Tile& o) const; Tile sub(const Tile& o) const;
  Tile mul(const Tile& o) const; Tile div(const Tile& o) const;
  Tile pow(const Tile& o) const; Tile min(const Tile& o) const;
  Tile max(const Tile& o) const; Tile mod(const Tile& o) const;
  Tile eq(const Tile& o) const; Tile ne(const Tile& o) const;  // comparisons give Bool
  Tile lt(const Tile& o) const; Tile le(const Tile& o) const;
  Tile gt(const Tile& o) const; Tile ge(const Tile& o) const;

  Tile cast(DType dtype) const;

  /// Reductions along one axis; the axis stays with length 1, so `t - t.max(1)` broadcasts.
  Tile sum(int64_t axis) const;
  Tile max(int64_t axis) const;
  Tile min(int64_t axis) const;

  /// The matrix product of [m, k] and [k, n] tiles, in F32.
  Tile dot(const Tile& o) const;

 private:
  friend class detail::Builder;
  Tile(detail::Builder* b, int id) : b_(b), id_(id) {}
  detail::Builder* b_;
  int id_;
};

/// condition != 0 ? a : b, elementwise with broadcasting.
Tile where(const Tile& condition, const Tile& a, const Tile& b);

inline Tile operator+(const Tile& a, const Tile& b) { return a.add(b); }
inline Tile operator-(const Tile& a, const Tile& b) { return a.sub(b); }
inline Tile operator*(const Tile& a, const Tile& b) { return a.mul(b); }
inline Tile operator/(const Tile& a, const Tile& b) { return a.div(b); }
inline Tile operator<(const Tile& a, const Tile& b) { return a.lt(b); }
inline Tile operator<=(const Tile& a, const Tile& b) { return a.le(b); }
inline Tile operator>(const Tile& a, const Tile& b) { return a.gt(b); }
inline Tile operator>=(const Tile& a, const Tile& b) { return a.ge(b); }
inline Tile operator-(const Tile& a) { return a.neg(); }
// A number next to a tile becomes a tile of that value (the tile's dtype).
inline Tile operator+(const Tile& a, double b) { return a.add(a.k(b)); }
inline Tile operator+(double a, const Tile& b) { return b.k(a).add(b); }
inline Tile operator-(const Tile& a, double b) { return a.sub(a.k(b)); }
inline Tile operator-(double a, const Tile& b) { return b.k(a).sub(b); }
inline Tile operator*(const Tile& a, double b) { return a.mul(a.k(b)); }
inline Tile operator*(double a, const Tile& b) { return b.k(a).mul(b); }
inline Tile operator/(const Tile& a, double b) { return a.div(a.k(b)); }
inline Tile operator/(double a, const Tile& b) { return b.k(a).div(b); }
inline Tile operator<(const Tile& a, double b) { return a.lt(a.k(b)); }
inline Tile operator<=(const Tile& a, double b) { return a.le(a.k(b)); }
inline Tile operator>(const Tile& a, double b) { return a.gt(a.k(b)); }
inline Tile operator>=(const Tile& a, double b) { return a.ge(a.k(b)); }

/// Blocks of a tensor to read: at(index) is the tile of block `index` (one Index per axis).
/// Outside the tensor it reads the fill value (0 unless p.read was given another).
class Reader {
 public:
  Tile at(const std::vector<Index>& index) const;
  /// How many blocks cover axis: cdiv(size, block).
  Index blocks(int64_t axis) const;

 private:
  friend class detail::Builder;
  Reader(detail::Builder* b, int operand) : b_(b), operand_(operand) {}
  detail::Builder* b_;
  int operand_;
};

/// Blocks of a tensor to write: put(tile, index) stores the tile (of the block shape) at block
/// `index`; the elements outside the tensor are not written. The tile converts to the tensor's
/// dtype.
class Writer {
 public:
  void put(const Tile& tile, const std::vector<Index>& index) const;

 private:
  friend class detail::Builder;
  Writer(detail::Builder* b, int operand) : b_(b), operand_(operand) {}
  detail::Builder* b_;
  int operand_;
};

/// What a tile program's function receives: the tracer that records its operations.
class Program {
 public:
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  /// The block this grid point computes along grid axis `axis`.
  Index id(int64_t axis);
  /// The number n as an Index: the spec's p.int(n) (`int` is a C++ keyword).
  Index index(int64_t n);
  Tile zeros(const Shape& shape, DType dtype = DType::F32);
  Tile full(const Shape& shape, double value, DType dtype = DType::F32);
  /// Reads t in blocks of `block` (one length per axis of t); outside t reads `fill`.
  Reader read(const Tensor& t, const Shape& block, double fill = 0.0);
  /// Writes t in blocks of `block`; Tile::run returns the written tensors in this order.
  Writer write(const Tensor& t, const Shape& block);
  /// acc = init, then acc = body(k, acc) for k = start, ..., start + count - 1; the result is
  /// the last acc. The body is traced once, as a loop.
  Tile fold(const Index& start, const Index& count, const Tile& init,
            const std::function<Tile(Index, Tile)>& body);
  /// How many blocks of a product's operands the GPU reads ahead (1 to 4).
  void stages(int n);

 private:
  friend class detail::Builder;
  explicit Program(detail::Builder* b) : b_(b) {}
  detail::Builder* b_;
};

using Body = std::function<void(Program&)>;

/// ceil(a / b) for b > 0: the number of blocks of length b covering a.
int64_t cdiv(int64_t a, int64_t b);

/// Traces body once, then runs it for every point of grid: in parallel on the CPU's threads for
/// host tensors; for GPU tensors as the kernel of Tile::cuda, compiled through the GPU's kernel
/// cache and launched on its stream (asynchronously, like the tensor operations). A program on a
/// GPU reads only tensors on that GPU (else a gizml::Error at p.read/p.write naming both); a
/// host tensor given to p.write is copied to the GPU first and the copy is what comes back.
/// Returns the tensors given to p.write, in order, holding the results.
std::vector<Tensor> run(const Grid& grid, const Body& body);

/// The program as the compiler sees it: the operations with the type and GPU layout of each
/// value (which threads and registers hold it, what goes through shared memory), as Tile::cuda
/// generates it for a GPU of compute capability `arch` (major * 10 + minor).
std::string ir(const Grid& grid, const Body& body, int arch = 80);

/// The CUDA C++ kernel for a program, with what a launch needs. It compiles with NVRTC alone (no
/// CUDA headers); a product of F16/BF16 tiles uses the tensor cores and needs sm_80 or later
/// (wgmma and sm_90a where the target is 9.0 and the product's shape suits it).
struct CudaKernel {
  std::string source;
  std::string name;       // the extern "C" kernel's name
  int threads = 0;        // per block
  int64_t blocks = 0;     // one per grid point, on blockIdx.x
  int64_t sharedBytes = 0;  // dynamic shared memory per block
  /// Hopper's tensor maps the launch passes after the tensors, in this order (each a pointer to
  /// a 128-byte CUtensorMap in device memory): of operand `operand`, boxes of [boxRows,
  /// boxCols] 2-byte elements with a swizzle of `swizzleBytes` (0, 32, 64 or 128).
  struct TensorMap {
    int operand = 0;
    int64_t boxRows = 0, boxCols = 0;
    int swizzleBytes = 0;
  };
  std::vector<TensorMap> tensorMaps;
};
/// Generates the kernel for body on grid; its parameters are the tensors of p.read and p.write
/// in the order of those calls (element pointers, offsets applied: float for F32, the 16 bits
/// of F16/BF16 as u16, unsigned char for Bool). `arch` is the target GPU's compute capability as
/// major * 10 + minor (Tile::run passes its GPU's). `tma`: on 9.0, a p.stages pipeline whose
/// operands have 16-byte aligned rows loads them with the tensor memory accelerator, and the
/// launch passes `tensorMaps` (Tile::run does so when the tensors' addresses are aligned too).
CudaKernel cuda(const Grid& grid, const Body& body, int arch = 80, bool tma = false);

// ---- Tuning (docs/tile.md, "Tuning"): the fastest configuration per kernel and tensor shapes.

/// One configuration of a kernel: block sizes, warps, stages, ... by name, e.g.
/// `{{"bm", 128}, {"bn", 128}, {"warps", 8}}`. Names are letters, digits and `_`, starting with a
/// letter or `_`.
struct Config {
  std::map<std::string, int64_t> values;

  Config() = default;
  Config(std::initializer_list<std::pair<const std::string, int64_t>> v) : values(v) {}
  /// The value of name; a gizml::Error naming it and the configuration when it is missing.
  int64_t operator[](const std::string& name) const;
  /// "bm=128,bn=128,warps=8" (names in order): how tunings files and errors write it.
  std::string text() const;
  bool operator==(const Config& o) const { return values == o.values; }
};

/// Runs kernel `name` through runWith(config) and returns its outputs. The first call for `name`
/// and the dtypes, shapes and devices of `key` (the tensors whose shapes decide which
/// configuration is fastest, usually the inputs) times every configuration: a warm-up run (a
/// GPU kernel compiles there) and then 3 timed runs, device-synchronised (wall time on the
/// host), keeping the fastest by its best run. Later calls with that name and key run the kept
/// configuration only, as long as it is still one of `configs`. A configuration that throws is
/// skipped; when all throw, the first one's error is rethrown, naming its configuration.
/// runWith must give the same results for every configuration (they only differ in speed).
std::vector<Tensor> tune(const std::string& name, const std::vector<Config>& configs,
                         const std::vector<Tensor>& key,
                         const std::function<std::vector<Tensor>(const Config&)>& runWith);

/// The configuration kept for name and key (by tune or gizhw::gpu::loadTunings), if any. The
/// kept ones are gizhw::gpu's table: gizhw::gpu::saveTunings and loadTunings keep them in a
/// folder, clearTunings forgets them.
std::optional<Config> tuned(const std::string& name, const std::vector<Tensor>& key);

}  // namespace gizml::tile

namespace gizml {
namespace Tile = tile;  // the spec's `Tile.` prefix: Tile::run, Tile::Program, Tile::cdiv
}
