// Tile::tune: times each configuration of a kernel once per key (name, dtypes, shapes, devices)
// and keeps the fastest in gizhw::gpu's tunings table (src/gpu/tunings.h), which
// gizhw::gpu::saveTunings and loadTunings keep in a folder.
#include <gizml/tile.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "gpu/tunings.h"

namespace gizml::tile {

int64_t Config::operator[](const std::string& name) const {
  const auto it = values.find(name);
  check(it != values.end(), "tile config: no value \"" + name + "\" in {" + text() + "}");
  return it->second;
}

std::string Config::text() const { return gizhw::gpu::tuning::text(values); }

namespace {

namespace tuning = gizhw::gpu::tuning;

// The key of tensors: dtype, shape, strides when not contiguous, and device of each, e.g.
// "f32[1000,333]@cpu f32[333,777]@cpu".
std::string keyText(const std::vector<Tensor>& key) {
  std::string out;
  for (const Tensor& t : key) {
    if (!out.empty()) out += ' ';
    out += dtypeName(t.dtype());
    out += '[';
    const auto list = [&](const Shape& values) {
      for (size_t d = 0; d < values.size(); ++d) {
        if (d) out += ',';
        out += std::to_string(values[d]);
      }
    };
    list(t.shape());
    out += ']';
    if (!t.isContiguous()) {
      out += 's';
      list(t.strides());
    }
    out += '@' + t.device();
  }
  return out;
}

// The tensors' devices, each once, waited for.
void synchronize(const std::vector<Tensor>& tensors) {
  std::vector<const gizhw::gpu::Device*> done;
  for (const Tensor& t : tensors) {
    if (!t.onGpu()) continue;
    const auto& device = t.storage()->gpu();
    if (std::find(done.begin(), done.end(), device.get()) != done.end()) continue;
    done.push_back(device.get());
    gizhw::gpu::Gpu(device).synchronize();
  }
}

}  // namespace

std::vector<Tensor> tune(const std::string& name, const std::vector<Config>& configs, const std::vector<Tensor>& key,
                         const std::function<std::vector<Tensor>(const Config&)>& runWith) {
  tuning::checkName(name, "tile tune");
  check(!configs.empty(), "tile tune " + name + ": no configurations to choose from");
  for (const Config& c : configs) tuning::checkConfig(c.values, "tile tune " + name);
  const std::string keyName = keyText(key);
  if (const std::optional<tuning::Values> kept = tuning::kept(name, keyName)) {
    Config config;
    config.values = *kept;
    if (std::find(configs.begin(), configs.end(), config) != configs.end()) return runWith(config);
  }

  using Clock = std::chrono::steady_clock;
  constexpr int kTimedRuns = 3;
  double bestSeconds = std::numeric_limits<double>::infinity();
  const Config* best = nullptr;
  std::vector<Tensor> bestOutputs;
  std::string firstError;
  for (const Config& config : configs) {
    try {
      synchronize(key);
      synchronize(runWith(config));  // warm-up: compiles a GPU kernel, fills caches
      double seconds = std::numeric_limits<double>::infinity();
      std::vector<Tensor> outputs;
      for (int r = 0; r < kTimedRuns; ++r) {
        const auto start = Clock::now();
        outputs = runWith(config);
        synchronize(outputs);
        seconds = std::min(seconds, std::chrono::duration<double>(Clock::now() - start).count());
      }
      if (seconds < bestSeconds) {
        bestSeconds = seconds;
        best = &config;
        bestOutputs = std::move(outputs);
      }
    } catch (const Error& e) {
      if (firstError.empty()) firstError = "tile tune " + name + " {" + config.text() + "}: " + e.what();
    }
  }
  if (!best) throw Error(firstError + " (and every other configuration failed too)");
  tuning::keepMeasured(name, keyName, best->values);
  return bestOutputs;
}

std::optional<Config> tuned(const std::string& name, const std::vector<Tensor>& key) {
  const std::optional<tuning::Values> kept = tuning::kept(name, keyText(key));
  if (!kept) return std::nullopt;
  Config config;
  config.values = *kept;
  return config;
}

}  // namespace gizml::tile
