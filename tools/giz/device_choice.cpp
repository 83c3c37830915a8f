#include "device_choice.h"

#include <gizml/error.h>

#include <iostream>

std::optional<gizhw::gpu::Gpu> deviceFor(const std::string& choice) {
  if (choice == "cpu") return std::nullopt;
  if (choice != "gpu" && choice != "auto")
    throw gizml::Error("--device: '" + choice + "' is not cpu, gpu or auto");
  std::optional<gizhw::gpu::Gpu> gpu = gizhw::gpu::open();
  if (!gpu && choice == "gpu")
    throw gizml::Error("--device gpu: no GPU found (no libcuda.so.1 or libamdhip64.so with a device)");
  return gpu;
}

gizml::llm::Model loadOn(const std::string& choice, const std::string& folder, gizml::llm::LoadOptions options) {
  options.gpu = deviceFor(choice);
  if (!options.gpu) {
    if (choice == "auto") std::cerr << "giz: running on the CPU (no GPU found)\n";
    return gizml::llm::load(folder, options);
  }
  try {
    gizml::llm::Model model = gizml::llm::load(folder, options);
    std::cerr << "giz: running on " << options.gpu->describe() << "\n";
    return model;
  } catch (const gizml::Error& e) {
    if (choice != "auto") throw;
    std::cerr << "giz: running on the CPU: " << e.what() << "\n";
    options.gpu.reset();
    return gizml::llm::load(folder, options);
  }
}
