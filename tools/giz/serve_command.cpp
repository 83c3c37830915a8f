// giz serve MODEL [MODEL ...] [flags]: the OpenAI API on the models (gizml::ai::Server) until
// SIGINT or SIGTERM.
#include <gizml/ai.h>

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "command_line.h"
#include "generation.h"
#include "image_model.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: giz serve MODEL [MODEL ...] [--host 127.0.0.1] [--port 8080] [--slots 4] [--context 4096]\n"
    "                 [--name NAME ...] [--think] [--max-body-mb 8] [--api-key KEY] [--cors-origin ORIGIN ...]\n"
    "                 [--head-timeout 5] [--body-timeout 10] [--request-timeout 30] [--idle-timeout 60]\n"
    "                 [--max-connections 4096] [--max-per-client 256] [--bits 4] [--kv auto] [--pool TOKENS]\n"
    "                 [--prefill-budget on] [--device auto] [--image NAME=FOLDER ...] [--image-max-side 2048]\n"
    "                 [--upsampler FOLDER] [--picture-pixels 1048576]\n"
    "  MODEL: as for giz run (giz run --help), converted on first use;\n"
    "  each is served under its folder's name (or the --name given in its place); the first is the\n"
    "  default. --port 0 takes a free port. --think: thinking on unless a request's reasoning_effort\n"
    "  says otherwise. --api-key (or $GIZML_API_KEY): routes but /health need 'Authorization: Bearer KEY'.\n"
    "  --cors-origin: an origin (or *) whose web pages may call the server. Timeouts in seconds.\n"
    "  --kv: keys and values as f32, 16, or codes of 8, 4 or 2 bits, or apart as K/V (4/2); auto:\n"
    "  8 bits, else 4, else 4/2, the first in which the KV pool fits the memory available.\n"
    "  --pool: each engine's KV pool in tokens (pages of 256), shared by its slots; default: every\n"
    "  slot's whole context. Idle slots give their pages to running ones when it runs short.\n"
    "  --prefill-budget off: a prompt is read whole in one step even while other requests decode\n"
    "  (on: in parts, each adding about a decode step's time). --device as for giz run.\n"
    "  --image: a Z-Image Turbo or klein folder (as for giz paint) served as NAME on POST\n"
    "  /v1/images/generations, klein's on POST /v1/images/edits too (the first the default image model);\n"
    "  no MODEL is needed then. --image-max-side: larger sizes get 400. --upsampler: BFL's prompt\n"
    "  upsampler (a chat model of giz convert, as giz paint --upsample) for requests with \"upsample\": true.\n"
    "  A MODEL with a vision tower (FOLDER/vision, kept by giz convert) reads pictures in chats (image_url\n"
    "  parts, data: URLs); --picture-pixels: larger pictures are scaled down to this many pixels first.\n"
    "  Serves until SIGINT or SIGTERM.\n";

int connectionCount(const std::string& flag, const std::string& text) {
  const int64_t v = parseCount(flag, text);
  if (v < 1 || v > 1000000) throw gizml::Error(flag + ": " + text + " is not in [1, 1000000]");
  return static_cast<int>(v);
}

// Seconds (decimals allowed) as milliseconds, at least 1 ms.
int milliseconds(const std::string& flag, const std::string& text) {
  const double v = parseNumber(flag, text);
  if (!(v >= 0.001 && v <= 86400))
    throw gizml::Error(flag + ": '" + text + "' is not a number of seconds in [0.001, 86400]");
  return static_cast<int>(v * 1000 + 0.5);
}

bool onOrOff(const std::string& flag, const std::string& text) {
  if (text != "on" && text != "off") throw gizml::Error(flag + ": '" + text + "' is not on or off");
  return text == "on";
}

// A socket for each connection: the soft open-file limit up to the hard one.
void raiseOpenFileLimit(int connections) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  const rlim_t needed = static_cast<rlim_t>(connections) + 64;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed)
    std::cerr << "giz serve: the open-file limit (" << limit.rlim_cur << ") holds fewer than --max-connections "
              << connections << "; past it connections get 503\n";
}

// The name a model is served under: its folder's (or the GGUF file's stem); a hub name as given.
std::string nameOf(const std::string& model) {
  if (!fs::exists(fs::path(model))) return model;
  fs::path path = fs::absolute(fs::path(model)).lexically_normal();
  if (path.filename().empty()) path = path.parent_path();
  return path.extension() == ".gguf" ? path.stem().string() : path.filename().string();
}

// The converted folder's vision tower (FOLDER/vision, kept by giz convert from a multimodal
// source), or null when it has none.
std::shared_ptr<const gizml::vision::Tower> towerOf(const std::string& folder) {
  const fs::path vision = fs::path(folder) / "vision";
  if (!fs::exists(vision / "config.json")) return nullptr;
  return std::make_shared<const gizml::vision::Tower>(gizml::vision::Tower::load(vision.string()));
}

}  // namespace

// ", KV pool of N tokens in M MiB" where the engine keeps one.
std::string poolText(const gizml::llm::Engine& engine) {
  if (engine.poolTokens() == 0) return "";
  return ", KV pool of " + std::to_string(engine.poolTokens()) + " tokens, kv " + engine.kvFormat().text() + ", " +
         std::to_string((engine.poolBytes() + (1 << 20) - 1) >> 20) + " MiB";
}

int serveCommand(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply(kUsage, true);
  gizml::ai::ServeOptions options;
  std::vector<std::string> models, names, images;
  int64_t imageMaxSide = 2048;
  std::string upsamplerFolder;
  int slots = 4;
  int64_t context = 4096;
  int64_t pool = 0;
  int64_t maxBodyMb = 8;
  int bits = 0;
  gizml::llm::LoadOptions load;
  std::string device = "auto";
  bool prefillBudget = true;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--think") options.thinking = true;
    else if (arg.rfind("--", 0) != 0) models.push_back(arg);
    else if (!hasValue) return usageReply(kUsage, false);
    else if (arg == "--host") options.host = argv[++i];
    else if (arg == "--port") options.port = static_cast<int>(parseCount(arg, argv[++i]));
    else if (arg == "--slots") slots = static_cast<int>(parseCount(arg, argv[++i]));
    else if (arg == "--context") context = parseCount(arg, argv[++i]);
    else if (arg == "--pool") pool = parseCount(arg, argv[++i]);
    else if (arg == "--name") names.push_back(argv[++i]);
    else if (arg == "--image") images.push_back(argv[++i]);
    else if (arg == "--image-max-side") imageMaxSide = parseCount(arg, argv[++i]);
    else if (arg == "--upsampler") upsamplerFolder = argv[++i];
    else if (arg == "--picture-pixels") options.picturePixels = parseCount(arg, argv[++i]);
    else if (arg == "--bits") bits = parseBits(argv[++i]);
    else if (arg == "--kv") load.kv = gizml::llm::KvFormat::parseSetting(argv[++i]);
    else if (arg == "--device") device = argv[++i];
    else if (arg == "--prefill-budget") prefillBudget = onOrOff(arg, argv[++i]);
    else if (arg == "--max-body-mb") maxBodyMb = parseCount(arg, argv[++i]);
    else if (arg == "--api-key") options.apiKey = argv[++i];
    else if (arg == "--cors-origin") options.corsOrigins.push_back(argv[++i]);
    else if (arg == "--head-timeout") options.headTimeoutMs = milliseconds(arg, argv[++i]);
    else if (arg == "--body-timeout") options.bodyTimeoutMs = milliseconds(arg, argv[++i]);
    else if (arg == "--request-timeout") options.requestTimeoutMs = milliseconds(arg, argv[++i]);
    else if (arg == "--idle-timeout") options.idleTimeoutMs = milliseconds(arg, argv[++i]);
    else if (arg == "--max-connections") options.maxConnections = connectionCount(arg, argv[++i]);
    else if (arg == "--max-per-client") options.maxPerClient = connectionCount(arg, argv[++i]);
    else return usageReply(kUsage, false);
  }
  if (options.apiKey.empty())
    if (const char* key = std::getenv("GIZML_API_KEY")) options.apiKey = key;
  if ((models.empty() && images.empty()) || names.size() > models.size()) return usageReply(kUsage, false);
  if (imageMaxSide < 16) throw gizml::Error("--image-max-side: " + std::to_string(imageMaxSide) + " is below 16");
  std::vector<std::pair<std::string, std::string>> imageFolders;
  for (const std::string& image : images) {
    const size_t equals = image.find('=');
    if (equals == 0 || equals == std::string::npos || equals + 1 == image.size())
      throw gizml::Error("--image: '" + image + "' is not NAME=FOLDER");
    imageFolders.emplace_back(image.substr(0, equals), image.substr(equals + 1));
  }
  if (slots < 1) throw gizml::Error("--slots: " + std::to_string(slots) + " must be at least 1");
  if (context < 2) throw gizml::Error("--context: " + std::to_string(context) + " must be at least 2");
  if (maxBodyMb < 1) throw gizml::Error("--max-body-mb: " + std::to_string(maxBodyMb) + " must be at least 1");
  if (options.picturePixels < 1)
    throw gizml::Error("--picture-pixels: " + std::to_string(options.picturePixels) + " must be at least 1");
  options.maxBody = static_cast<size_t>(maxBodyMb) * 1024 * 1024;
  for (const std::string& origin : options.corsOrigins)
    if (origin.empty() || origin.find_first_of(" \t\r\n,") != std::string::npos)
      throw gizml::Error("--cors-origin: '" + origin + "' is not an origin (scheme://host[:port]) or *");
  raiseOpenFileLimit(options.maxConnections);

  std::vector<gizml::ai::Served> served;
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string folder = convertedFolder(models[i], bits);
    gizml::llm::Model model = loadOn(device, folder, load);
    const int64_t trained = model.contextLength();
    const int64_t tokens = trained > 0 ? std::min(context, trained) : context;
    gizml::llm::Engine engine = model.engine(slots, tokens, pool);
    engine.setPrefillBudget(prefillBudget);
    const double warmed = engine.warm();
    char took[32];
    std::snprintf(took, sizeof took, "%.2f s", warmed);
    std::cerr << "giz: " << (i < names.size() ? names[i] : nameOf(models[i])) << " warmed in " << took << "\n";
    served.push_back({i < names.size() ? names[i] : nameOf(models[i]), std::move(model), std::move(engine),
                      towerOf(folder)});
  }

  if (!upsamplerFolder.empty() && imageFolders.empty())
    throw gizml::Error("--upsampler: no --image model to upsample prompts for");
  const auto upsampler = upsamplerFolder.empty() ? nullptr
                                                 : std::make_shared<const gizml::diffusion::Upsampler>(
                                                       gizml::diffusion::Upsampler::load(upsamplerFolder));
  std::vector<gizml::ai::ServedPainter> painters;
  for (const auto& [name, folder] : imageFolders)
    painters.push_back({name, loadImageModel(findImageModelFiles(folder, {})), imageMaxSide, upsampler});

  // Every thread the server starts inherits this mask: the signals wait for sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::vector<std::string> servedNames;
  for (const auto& s : served) servedNames.push_back(s.name + " (" + std::to_string(s.engine.slots()) + " slots of " +
                                                     std::to_string(s.engine.maxTokens()) + " tokens" +
                                                     poolText(s.engine) + (s.tower ? ", pictures" : "") + ")");
  for (const auto& p : painters) servedNames.push_back(p.name + " (images up to " + std::to_string(p.maxSide) + " a side)");
  gizml::ai::Server server =
      gizml::ai::serve(std::move(served), std::move(painters), gizml::ai::Listener(options.host, options.port), options);
  std::cout << "serving";
  for (size_t i = 0; i < servedNames.size(); ++i) std::cout << (i ? ", " : " ") << servedNames[i];
  std::cout << "\n" << server.url() << "/v1\n" << std::flush;
  int received = 0;
  sigwait(&signals, &received);
  std::cerr << "giz serve: " << (received == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
  server.stop();
  return 0;
}
