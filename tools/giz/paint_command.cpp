// giz paint MODEL "prompt" [flags]: one picture from Z-Image Turbo (gizml::diffusion::ZImagePipeline)
// or klein (KleinPipeline: text to image, or an edit of --edit pictures) written as a PNG, with a
// progress bar over the steps and each stage's time on stderr.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/image.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <variant>

#include "command_line.h"
#include "image_model.h"

namespace {

constexpr const char* kUsage =
    "usage: giz paint [MODEL] PROMPT [--seed 0] [--size 1024x1024] [-o image.png] [--edit PICTURE ...]\n"
    "                 [--cache 0.3] [--refresh N] [--steps N] [--dit FILE] [--text FOLDER] [--vae FILE]\n"
    "                 [--config zimage.json] [--upsample FOLDER] [--layout FILE]\n"
    "  MODEL: a Z-Image Turbo or FLUX.2 [klein] / FLUX.3 klein folder laid out as ComfyUI's models/ (which\n"
    "  one, the DiT's tensor names tell): diffusion_models/ (one .safetensors, the DiT), text_encoders/ (one\n"
    "  folder of giz convert QWEN3_4B DEST --z-image-text; klein: of gizml::diffusion::convertTextEncoder),\n"
    "  vae/ae.safetensors (klein: vae/ holding flux2-vae.safetensors) and, for Z-Image, optionally\n"
    "  zimage.json ({\"steps\": 8, \"shift\": 3.0, \"rope_axes\": [32, 48, 48],\n"
    "  \"low_memory\": false}; low_memory: the text encoder let go before the DiT is loaded);\n"
    "  --dit, --text, --vae and --config name a part in its place (all three: no MODEL needed).\n"
    "  --seed: ComfyUI's (the same seed, the same noise); --size: WIDTHxHEIGHT, multiples of the VAE's\n"
    "  scale (16); without it 1024x1024, an edit the first picture's aspect at about 1024x1024 pixels.\n"
    "  --edit (klein): a reference picture (PNG, JPEG, ...), repeatable; --cache (klein): the step cache's\n"
    "  threshold (0 off); --refresh N (klein): the pictures through the blocks only every N steps (0 or 1:\n"
    "  every step, the default); --steps N (klein): 0, the default, is the file's (FLUX.2 4, FLUX.3 16).\n"
    "  --upsample FOLDER: the prompt rewritten fuller first by BFL's prompt upsampler (a chat model of giz\n"
    "  convert, the spec's Qwen3.5-9B; sampled with --seed), shown on stderr; it reads text, not the pictures.\n"
    "  --layout FILE: FLUX 3's bounding boxes (docs/klein.md): a JSON list of {\"id\", \"bbox\": [top, left,\n"
    "  bottom, right] from 0 to 1000, \"desc\"} (an edit's: {\"id\", \"from\", \"src_bbox\", \"tgt_bbox\", \"desc\"}),\n"
    "  the prompt citing them as <id>; appended to the (upsampled) prompt as gizml::diffusion::fluxLayout does.\n"
    "  A progress bar over the steps on stderr when it is a terminal; each stage's time on stderr.\n";

}  // namespace

int paintCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  ImageModelFiles files;
  std::vector<std::string> words, edits;
  std::string size, output = "image.png", upsampler, layoutFile;
  KleinOptions kleinOptions;
  uint64_t seed = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg.rfind("-", 0) != 0 || arg == "-") words.push_back(arg);
    else if (!hasValue) return usageReply(kUsage, false);
    else if (arg == "--seed") seed = parseSeed(arg, argv[++i]);
    else if (arg == "--size") size = argv[++i];
    else if (arg == "--edit") edits.push_back(argv[++i]);
    else if (arg == "--cache") {
      kleinOptions.cache = parseNumber(arg, argv[++i]);
      if (!std::isfinite(*kleinOptions.cache) || *kleinOptions.cache < 0)
        throw gizml::Error("--cache: " + std::string(argv[i]) + " is not a threshold from 0 up (0: no step cache)");
    }
    else if (arg == "--refresh" || arg == "--steps") {
      const int64_t n = parseCount(arg, argv[++i]);
      if (n < 0) throw gizml::Error(arg + ": " + std::to_string(n) + " is below 0");
      (arg == "--refresh" ? kleinOptions.refresh : kleinOptions.steps) = n;
    }
    else if (arg == "-o" || arg == "--output") output = argv[++i];
    else if (arg == "--dit") files.dit = argv[++i];
    else if (arg == "--text") files.text = argv[++i];
    else if (arg == "--vae") files.vae = argv[++i];
    else if (arg == "--config") files.config = argv[++i];
    else if (arg == "--upsample") upsampler = argv[++i];
    else if (arg == "--layout") layoutFile = argv[++i];
    else return usageReply(kUsage, false);
  }
  if (words.empty() || words.size() > 2) return usageReply(kUsage, false);
  // No size: 1024x1024, or (0, 0) for an edit, which KleinPipeline::paint reads as editSize.
  const auto [width, height] =
      !size.empty() ? parseImageSize("--size", size) : std::pair<int64_t, int64_t>{edits.empty() ? 1024 : 0, 0};
  requireOutputFolder("-o", output);
  std::vector<gizml::image::Image> pictures;
  for (const std::string& path : edits) pictures.push_back(readPicture("--edit", path));

  std::vector<gizml::diffusion::FluxElement> layout;
  if (!layoutFile.empty()) {
    const std::string text = fileBytes("--layout", layoutFile);
    try {
      layout = gizml::diffusion::readFluxElements(text);
      gizml::diffusion::fluxLayout(words.back(), layout);  // the elements checked before any model loads
    } catch (const gizml::Error& e) {
      throw gizml::Error("--layout " + layoutFile + ": " + e.what());
    }
  }

  const ImageModelFiles found = findImageModelFiles(words.size() == 2 ? words[0] : "", files);
  // Before the model is loaded (minutes for a real one).
  if (!pictures.empty() && !isKleinDit(found.dit))
    throw gizml::Error("--edit: " + found.dit + " is a Z-Image DiT, which paints from text alone (klein edits)");
  std::string prompt = words.back();
  if (!upsampler.empty()) {
    // Before the image model loads, so that the upsampler's model is let go first.
    prompt = gizml::diffusion::Upsampler::load(upsampler).caption(prompt, pictures, seed);
    std::fprintf(stderr, "upsampled prompt: %s\n", prompt.c_str());
  }
  prompt = gizml::diffusion::fluxLayout(prompt, layout);

  const gizml::ai::ImagePipeline pipeline = loadImageModel(found, kleinOptions);
  const auto* klein = std::get_if<gizml::diffusion::KleinPipeline>(&pipeline);
  const int64_t multiple = std::visit([](const auto& p) { return p.sizeMultiple(); }, pipeline);
  if (width % multiple || height % multiple)
    throw gizml::Error("--size: " + size + " is not a multiple of " + std::to_string(multiple) + " each way");

  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::vector<double> stepSeconds;
  gizml::diffusion::ZImageTimes times;
  const auto onStep = [&](const gizml::diffusion::ZImageStep& s) {
    stepSeconds.push_back(s.seconds);
    if (terminal) drawProgress("steps", s.step + 1, s.steps, s.seconds);
  };
  const gizml::image::Image picture =
      klein ? klein->paint(prompt, seed, pictures, width, height, onStep, &times)
            : std::get<gizml::diffusion::ZImagePipeline>(pipeline).paint(prompt, seed, width, height, onStep, &times);
  const std::vector<uint8_t> png = gizml::image::encodePng(picture);
  std::ofstream out(output, std::ios::binary);
  out.write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  if (!out.flush()) throw gizml::Error("-o " + output + ": cannot be written");

  std::string each;
  for (double s : stepSeconds) {
    char one[32];
    std::snprintf(one, sizeof one, "%s%.4f", each.empty() ? "" : " ", s);
    each += one;
  }
  std::fprintf(stderr, "text %.4f s, %zu steps %.4f s (%s), decode %.4f s\n", times.condition, stepSeconds.size(),
               times.sample, each.c_str(), times.decode);
  std::cout << output << ": " << picture.width << " x " << picture.height << ", seed " << seed << "\n";
  return 0;
}
