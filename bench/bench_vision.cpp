// A vision tower's picture on the CPU (vision::Tower::picture: the patches, the blocks, the
// merger) for a tower folder and a picture: best seconds of `runs` after a warm-up. Its anchor,
// transformers' Qwen3_5VisionModel on the same weights and picture in torch, runs beside it in
// bench_vision.py, which makes the folder (Qwen3.5's real widths, random weights) and prints the
// ratio.
//
//   bench_vision FOLDER PICTURE.png [--runs R]
#include <gizml/image.h>
#include <gizml/threads.h>
#include <gizml/vision.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "best_of_alternating.h"

int main(int argc, char** argv) {
  int runs = 3;
  std::vector<const char*> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::atoi(argv[++i]);
    else paths.push_back(argv[i]);
  }
  if (paths.size() != 2 || runs < 1) {
    std::fprintf(stderr, "usage: bench_vision FOLDER PICTURE [--runs R]\n");
    return 2;
  }
  std::ifstream in(paths[1], std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const gizml::image::Image picture = gizml::image::decode(bytes);
  const gizml::vision::Tower tower = gizml::vision::Tower::load(paths[0]);
  const gizml::llm::Picture first = tower.picture(picture);
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const double t0 = wallClock();
    tower.picture(picture);
    best = std::min(best, wallClock() - t0);
  }
  std::printf("threads %d\npicture %ldx%ld rows %ld seconds %.3f\n", gizml::core::threadCount(), long(picture.width),
              long(picture.height), long(first.rows.size(0)), best);
}
