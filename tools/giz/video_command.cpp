// giz video MODEL "prompt" [flags]: a video with sound from MiniMax H3 (gizml::diffusion::H3Pipeline)
// written as an MP4 (or PNG frames and a WAV where the build has no FFmpeg libraries), with a
// progress bar over the denoising passes and each stage's time on stderr.
#include <gizml/diffusion.h>
#include <gizml/error.h>
#include <gizml/image.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command_line.h"
#include "device_choice.h"
#include "image_model.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: giz video [MODEL] PROMPT [--frames 124] [--size WxH] [--steps 6] [--seed 0] [-o video.mp4]\n"
    "                 [--dit FILE] [--text FOLDER] [--vae FILE] [--audio-vae FILE] [--config h3.json]\n"
    "                 [--device cpu|gpu|auto]\n"
    "  MODEL: a MiniMax H3 folder: diffusion_models/ (one .safetensors, H3's checkpoint), text_encoders/\n"
    "  (one folder of gizml::diffusion::convertTextEncoder of its Qwen3-VL, hidden state 50), vae/ (one\n"
    "  .safetensors, the video decoder), audio_vae/ (one .safetensors, the audio decoder) and optionally\n"
    "  h3.json: {\"text_layer\": 50, \"video\": {\"head_dim\", \"patch\", \"patch_t\", \"tile\", \"tile_overlap\",\n"
    "  \"latents_mean\", \"latents_std\"}, \"audio\": {\"latents_mean\", \"latents_std\"}}, each optional (the\n"
    "  released model's by default; the audio's statistics from the file when it holds them).\n"
    "  --dit, --text, --vae, --audio-vae and --config name a part in its place (all four files: no MODEL).\n"
    "  --frames: at 24 fps, rounded up to 17 n + 5, 5 to 15 seconds (108 to 345); --size: WIDTHxHEIGHT, multiples of 32\n"
    "  (without it 1344x768, H3's 16:9 canvas); --steps: Euler passes, 1 to 1000; --seed: torch's generator's (the\n"
    "  same seed, the same noise as diffusers' pipeline); --device: where the transformer runs (auto, the\n"
    "  default: the first GPU when there is one and the model loads there, else the CPU; the text encoder\n"
    "  and the decoders run on the CPU). A progress bar over the passes on stderr when it\n"
    "  is a terminal; each stage's time on stderr.\n";

std::vector<float> floats(const nlohmann::json& v, const std::string& where) {
  if (!v.is_array() || v.empty()) throw gizml::Error(where + ": expected a list of numbers");
  std::vector<float> out;
  for (const nlohmann::json& x : v) {
    if (!x.is_number()) throw gizml::Error(where + ": expected a list of numbers");
    out.push_back(x.get<float>());
  }
  return out;
}

// A whole number from `least` to 2^20.
int64_t whole(const nlohmann::json& v, const std::string& where, int64_t least) {
  if (!v.is_number_integer() || v.get<int64_t>() < least || v.get<int64_t>() > (int64_t{1} << 20))
    throw gizml::Error(where + ": expected a whole number from " + std::to_string(least) + " to 1048576");
  return v.get<int64_t>();
}

// h3.json into config, each unknown or wrong field named.
void readConfig(const std::string& path, gizml::diffusion::H3PipelineConfig& c) {
  const nlohmann::json j = readJsonObject(path);
  for (const auto& [key, value] : j.items()) {
    const std::string at = path + ": " + key;
    if (key == "text_layer") {
      c.textLayer = whole(value, at, 1);
    } else if (key == "video" || key == "audio") {
      if (!value.is_object()) throw gizml::Error(at + ": expected a JSON object");
      for (const auto& [field, v] : value.items()) {
        const std::string where = at + "." + field;
        if (field == "latents_mean") (key == "video" ? c.video.latentsMean : c.audio.latentsMean) = floats(v, where);
        else if (field == "latents_std") (key == "video" ? c.video.latentsStd : c.audio.latentsStd) = floats(v, where);
        else if (key == "video" && field == "head_dim") c.video.headDim = whole(v, where, 1);
        else if (key == "video" && field == "patch") c.video.patch = whole(v, where, 1);
        else if (key == "video" && field == "patch_t") c.video.patchT = whole(v, where, 1);
        else if (key == "video" && field == "tile") c.video.tile = whole(v, where, 0);  // 0: the whole frame
        else if (key == "video" && field == "tile_overlap") c.video.tileOverlap = whole(v, where, 0);
        else throw gizml::Error(where + ": not a field giz video reads");
      }
    } else {
      throw gizml::Error(path + ": '" + key + "' is not text_layer, video or audio");
    }
  }
}

// The sound [streams, samples] interleaved as image::Audio holds it.
gizml::image::Audio interleaved(const gizml::tensor::Tensor& sound, int64_t rate) {
  const gizml::tensor::Tensor host = sound.host().contiguous();
  const int64_t streams = host.size(0), samples = host.size(1);
  gizml::image::Audio out{.samples = {}, .channels = static_cast<int>(streams), .sampleRate = static_cast<int>(rate)};
  out.samples.resize(static_cast<size_t>(streams * samples));
  const float* s = host.data<float>();
  for (int64_t i = 0; i < samples; ++i)
    for (int64_t c = 0; c < streams; ++c) out.samples[static_cast<size_t>(i * streams + c)] = s[c * samples + i];
  return out;
}

}  // namespace

int videoCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  VideoModelFiles files;
  std::vector<std::string> words;
  std::string size, output = "video.mp4", configFile, device = "auto";
  int64_t frames = 124, steps = 6;
  uint64_t seed = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg.rfind("-", 0) != 0 || arg == "-") words.push_back(arg);
    else if (!hasValue) return usageReply(kUsage, false);
    else if (arg == "--seed") seed = parseSeed(arg, argv[++i]);
    else if (arg == "--frames" || arg == "--steps") {
      const int64_t n = parseCount(arg, argv[++i]);
      if (n < 1 || n > 100000) throw gizml::Error(arg + ": " + std::to_string(n) + " is outside 1 to 100000");
      // (--steps: H3PipelineConfig's 1 to 1000, checked with the rest before anything loads.)
      (arg == "--frames" ? frames : steps) = n;
    }
    else if (arg == "--size") size = argv[++i];
    else if (arg == "-o" || arg == "--output") output = argv[++i];
    else if (arg == "--dit") files.model = argv[++i];
    else if (arg == "--text") files.text = argv[++i];
    else if (arg == "--vae") files.videoVae = argv[++i];
    else if (arg == "--audio-vae") files.audioVae = argv[++i];
    else if (arg == "--config") configFile = argv[++i];
    else if (arg == "--device") device = argv[++i];
    else return usageReply(kUsage, false);
  }
  if (words.empty() || words.size() > 2) return usageReply(kUsage, false);
  const auto [width, height] = size.empty() ? std::pair<int64_t, int64_t>{0, 0} : parseImageSize("--size", size);
  requireOutputFolder("-o", output);

  const std::string folder = words.size() == 2 ? words[0] : "";
  const VideoModelFiles found = findVideoModelFiles(folder, files);
  gizml::diffusion::H3PipelineConfig config;
  config.steps = steps;
  if (configFile.empty() && !folder.empty() && fs::is_regular_file(fs::path(folder) / "h3.json"))
    configFile = (fs::path(folder) / "h3.json").string();
  if (!configFile.empty()) readConfig(configFile, config);

  // The request checked before the model loads (minutes for the real one).
  const gizml::diffusion::H3Layout layout = gizml::diffusion::H3Pipeline::layout(config, frames, width, height);
  config.gpu = deviceFor(device);
  const auto loadStart = std::chrono::steady_clock::now();
  const auto load = [&] {
    return gizml::diffusion::H3Pipeline::load(found.model, found.videoVae, found.audioVae, found.text, config);
  };
  const gizml::diffusion::H3Pipeline pipeline = [&] {
    if (!config.gpu) return load();
    try {
      gizml::diffusion::H3Pipeline p = load();
      std::fprintf(stderr, "transformer on %s\n", config.gpu->describe().c_str());
      return p;
    } catch (const gizml::Error& e) {
      if (device != "auto") throw;
      std::fprintf(stderr, "transformer on the CPU: it did not load on %s (%s)\n", config.gpu->describe().c_str(), e.what());
      config.gpu.reset();
      return load();
    }
  }();
  const double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
  if (layout.frames != frames)
    std::fprintf(stderr, "%lld frames rounded up to %lld (17 n + 5, what the video decoder makes)\n",
                 static_cast<long long>(frames), static_cast<long long>(layout.frames));

  const bool terminal = isatty(STDERR_FILENO) != 0;
  gizml::diffusion::H3Times times;
  std::vector<double> passSeconds;
  const auto start = std::chrono::steady_clock::now();
  double before = 0;  // seconds from start to the end of the last pass
  // The passes prepared (a schedule's repeated sigmas are one pass).
  const auto passes = static_cast<int64_t>(pipeline.model().videoSigmas().size()) - 1;
  const auto onStep = [&](int64_t step, const gizml::diffusion::H3Latents&) {
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // generate has timed the text before the first pass.
    passSeconds.push_back(now - (passSeconds.empty() ? times.text : before));
    before = now;
    if (terminal) drawProgress("passes", step + 1, passes, passSeconds.back());
    if (terminal && step + 1 == passes) std::fprintf(stderr, "decoding the video and the sound\n");
  };
  const gizml::diffusion::H3Video video = pipeline.generate(words.back(), seed, layout, onStep, &times);

  // [1, 3, frames, h, w] as writeVideo reads frames: [frames, 3, h, w].
  const gizml::tensor::Tensor framesFirst = video.frames.reshape({video.frames.size(1), video.frames.size(2),
                                                                  video.frames.size(3), video.frames.size(4)})
                                                .permute({1, 0, 2, 3});
  const std::vector<std::string> written =
      gizml::image::writeVideo(output, framesFirst, video.fps, interleaved(video.sound, video.sampleRate));

  std::string each;
  for (double s : passSeconds) {
    char one[32];
    std::snprintf(one, sizeof one, "%s%.3f", each.empty() ? "" : " ", s);
    each += one;
  }
  std::fprintf(stderr,
               "load %.3f s (tables %.1f MB), text %.3f s, %zu passes %.3f s (%s), video decode %.3f s, audio decode "
               "%.3f s\n",
               loadSeconds, static_cast<double>(pipeline.model().tableBytes()) / 1e6, times.text, passSeconds.size(),
               times.sample, each.c_str(), times.video, times.audio);
  for (const std::string& f : written) std::cout << f << "\n";
  std::cout << layout.frames << " frames of " << layout.width << " x " << layout.height << " at " << video.fps
            << " fps, " << video.sound.size(1) << " samples of sound at " << video.sampleRate << " Hz, seed " << seed
            << "\n";
  return 0;
}
