// Model: a converted folder loaded (tokenizer, chat template, architecture) and its chat prompts.
#include <gizml/chat_template.h>
#include <gizml/error.h>
#include <gizml/llm.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "llm/tool_calls.h"

namespace gizml::llm {
namespace {

std::string tokenText(const Tokenizer& t, TokenId id) { return id >= 0 ? t.idToToken(id) : ""; }

nlohmann::ordered_json templateVars(const Tokenizer& t, bool thinking) {
  return {{"bos_token", tokenText(t, t.bos())}, {"eos_token", tokenText(t, t.eos())}, {"enable_thinking", thinking}};
}

// The special token a template writes right after an assistant message (<|im_end|>,
// <end_of_turn>, <|eot_id|>): models end their turns with it, which need not be eos.
std::optional<TokenId> templateTurnEnd(const ChatTemplate& chat, const Tokenizer& t) {
  const std::string probe = "gizml turn end probe";
  const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", "Hi"}},
                                           {{"role", "assistant"}, {"content", probe}}};
  std::string text;
  try {
    text = chat.renderChat(messages, nlohmann::ordered_json::array(), false, templateVars(t, false));
  } catch (const Error&) {
    return std::nullopt;  // a template that refuses this conversation: eos alone ends turns
  }
  const size_t at = text.find(probe);
  if (at == std::string::npos) return std::nullopt;
  for (TokenId id : t.encode(std::string_view(text).substr(at + probe.size()), false))
    if (t.isSpecial(id)) return id;
  return std::nullopt;
}

}  // namespace

Model::Model(std::shared_ptr<LanguageModel> model, std::shared_ptr<const Tokenizer> tokenizer, std::string chatTemplate)
    : model_(std::move(model)), tokenizer_(std::move(tokenizer)) {
  check(model_ && tokenizer_, "model: a model and a tokenizer are needed");
  if (!chatTemplate.empty()) template_ = std::make_shared<const ChatTemplate>(ChatTemplate::parse(chatTemplate));
  const auto addEnd = [&](int64_t id) {
    if (id >= 0 && std::find(endOfTurn_.begin(), endOfTurn_.end(), id) == endOfTurn_.end())
      endOfTurn_.push_back(static_cast<TokenId>(id));
  };
  addEnd(tokenizer_->eos());
  for (int64_t id : model_->config().eosTokenIds) addEnd(id);
  if (template_) {
    if (const std::optional<TokenId> end = templateTurnEnd(*template_, *tokenizer_)) addEnd(*end);
    calls_ = callFormatOf(*template_, templateVars(*tokenizer_, false));
  }
}

std::string Model::chatPrompt(const nlohmann::ordered_json& messages, bool thinking) const {
  return chatPrompt(messages, nlohmann::ordered_json::array(), {{"enable_thinking", thinking}});
}

ChatTokens Model::chatTokens(const nlohmann::ordered_json& messages, bool thinking) const {
  return chatTokens(messages, nlohmann::ordered_json::array(), {{"enable_thinking", thinking}});
}

namespace {

nlohmann::ordered_json withVariables(nlohmann::ordered_json vars, const nlohmann::ordered_json& variables) {
  check(variables.is_object(), "chatPrompt: the template variables must be an object");
  for (const auto& [key, value] : variables.items()) vars[key] = value;
  return vars;
}

}  // namespace

size_t Model::agreeingPrefix(const nlohmann::ordered_json& prefix, const nlohmann::ordered_json& tools,
                             const nlohmann::ordered_json& vars, const std::vector<TokenId>& whole,
                             size_t previous) const {
  const auto agreeing = [&](const nlohmann::ordered_json& messages) {
    const std::vector<TokenId> ids = tokenizer_->encode(template_->renderChat(messages, tools, false, vars), false);
    return static_cast<size_t>(std::mismatch(ids.begin(), ids.end(), whole.begin(), whole.end()).first - ids.begin());
  };
  try {
    return agreeing(prefix);
  } catch (const Error&) {
    // Templates that refuse a chat without a user turn (Qwen3.5's: "No user query found") render
    // the prefix with an empty user turn after it; where that stops agreeing is past its end.
  }
  try {
    nlohmann::ordered_json probed = prefix;
    probed.push_back({{"role", "user"}, {"content", ""}});
    return std::max(previous, agreeing(probed));
  } catch (const Error&) {
    return previous;  // no end known within it
  }
}

std::string Model::chatPrompt(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                              const nlohmann::ordered_json& variables) const {
  check(template_ != nullptr, "model: it has no chat template");
  check(messages.is_array(), "chatPrompt: messages must be a list of {role, content}");
  check(tools.is_array(), "chatPrompt: tools must be a list");
  return template_->renderChat(messages, tools, true, withVariables(templateVars(*tokenizer_, false), variables));
}

ChatTokens Model::chatTokens(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             const nlohmann::ordered_json& variables) const {
  ChatTokens out;
  out.ids = tokenizer_->encode(chatPrompt(messages, tools, variables), false);
  const nlohmann::ordered_json vars = withVariables(templateVars(*tokenizer_, false), variables);
  // Templates that rewrite earlier turns (dropping old reasoning) agree with the whole only so
  // far: a message ends where its prefix's tokens stop matching.
  nlohmann::ordered_json prefix = nlohmann::ordered_json::array();
  for (const auto& message : messages) {
    prefix.push_back(message);
    out.ends.push_back(agreeingPrefix(prefix, tools, vars, out.ids, out.ends.empty() ? 0 : out.ends.back()));
  }
  if (!messages.empty() && messages[0].is_object()) {
    const auto role = messages[0].find("role");
    if (role != messages[0].end() && (*role == "system" || *role == "developer")) out.head = out.ends[0];
  }
  return out;
}

ChatTokens Model::chatTokens(const nlohmann::ordered_json& messages, std::vector<Picture>& pictures,
                             bool thinking) const {
  return chatTokens(messages, nlohmann::ordered_json::array(), {{"enable_thinking", thinking}}, pictures);
}

ChatTokens Model::chatTokens(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             const nlohmann::ordered_json& variables, std::vector<Picture>& pictures) const {
  const ChatTokens text = chatTokens(messages, tools, variables);
  const TokenId pad = tokenizer_->tokenToId("<|image_pad|>");
  check(pad >= 0, "chatTokens: the tokenizer has no <|image_pad|> token to place pictures at");
  const auto placeholders = static_cast<size_t>(std::count(text.ids.begin(), text.ids.end(), pad));
  check(placeholders == pictures.size(), "chatTokens: the chat shows " + std::to_string(placeholders) +
                                             " pictures (<|image_pad|> tokens), " + std::to_string(pictures.size()) +
                                             " were given");
  // Each placeholder becomes its picture's rows; the message ends after it move with them.
  ChatTokens out;
  out.head = text.head;
  std::vector<size_t> moved(text.ids.size() + 1, 0);  // rows added before each index
  size_t next = 0;
  for (size_t i = 0; i < text.ids.size(); ++i) {
    moved[i + 1] = moved[i];
    if (text.ids[i] != pad) {
      out.ids.push_back(text.ids[i]);
      continue;
    }
    Picture& p = pictures[next++];
    check(p.t > 0 && p.h > 0 && p.w > 0, "chatTokens: picture " + std::to_string(next - 1) + " has no grid of rows");
    p.first = static_cast<int64_t>(out.ids.size());
    out.ids.insert(out.ids.end(), static_cast<size_t>(p.t * p.h * p.w), pad);
    moved[i + 1] += static_cast<size_t>(p.t * p.h * p.w) - 1;
  }
  for (size_t end : text.ends) out.ends.push_back(end + moved[end]);
  out.head += moved[out.head];
  return out;
}

int64_t Model::contextLength() const { return model_->config().maxPositions; }
int64_t Model::hiddenSize() const { return model_->config().hiddenSize; }

Engine Model::engine(int slots, int64_t maxTokens, int64_t poolTokens) const {
  return Engine(model_, tokenizer_, endOfTurn_, slots, maxTokens, poolTokens);
}

Model load(const std::string& folder) { return load(folder, LoadOptions{}); }

namespace {

/// The model of a folder as `modelOptions` builds it, with its tokenizer and chat template.
Model built(const std::string& folder, const ModelOptions& modelOptions) {
  auto weights = std::make_shared<const ConvertedModel>(ConvertedModel::open(folder));
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromJson(folder));
  // A conversion of the first layers alone (convert's layers) loads those, or fewer, on one device.
  const int64_t kept = weights->manifest().value("kept_layers", int64_t{0});
  ModelOptions options = modelOptions;
  check(kept == 0 || options.layers <= kept, folder + ": holds only the model's first " + std::to_string(kept) +
                                                 " layers, not " + std::to_string(options.layers));
  check(kept == 0 || options.stages.empty(),
        folder + ": holds only the model's first " + std::to_string(kept) + " layers (hidden states), not stages");
  if (kept > 0 && options.layers == 0) options.layers = kept;
  // The architecture may read the mapped weights as it runs: its deleter keeps them alive.
  std::shared_ptr<LanguageModel> model(buildLanguageModel(*weights, options).release(),
                                       [weights](LanguageModel* m) { delete m; });
  return Model(std::move(model), std::move(tokenizer), weights->chatTemplate());
}

/// FNV-1a of the manifest: the same conversion gives the same name on every machine.
std::string conversionName(const std::string& folder) {
  std::ifstream manifest(std::filesystem::path(folder) / kManifestName, std::ios::binary);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c; manifest.get(c);) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

/// Whether the folder's weights leave less than options.stageBelow free on its GPU while the
/// machine shows other NVIDIA GPUs: then it loads across them all.
bool splits(const std::string& folder, const LoadOptions& options) {
  if (!options.gpu || options.stageBelow == 0 || options.layers != 0) return false;
  const gizhw::gpu::Gpu& gpu = *options.gpu;
  if (gpu.properties().vendor != gizhw::gpu::Vendor::Nvidia || gizhw::gpu::deviceCount() < 2) return false;
  const ConvertedModel weights = ConvertedModel::open(folder);
  if (weights.manifest().value("kept_layers", int64_t{0}) > 0) return false;  // a text encoder: hidden states only
  return weightBytes(weights) + options.stageBelow > gpu.freeBytes();
}

}  // namespace

std::vector<int64_t> stageCounts(int64_t layers, const std::vector<uint64_t>& freeBytes) {
  long double total = 0;
  for (uint64_t b : freeBytes) total += static_cast<long double>(b);
  check(!freeBytes.empty() && total > 0, "stages: the GPUs have no free memory to hold layers");
  // Each its share rounded down, then the layers left to the largest remainders (the first
  // among equals).
  std::vector<int64_t> counts;
  std::vector<std::pair<long double, size_t>> remainders;
  int64_t given = 0;
  for (size_t i = 0; i < freeBytes.size(); ++i) {
    const long double share = static_cast<long double>(layers) * static_cast<long double>(freeBytes[i]) / total;
    counts.push_back(static_cast<int64_t>(share));
    given += counts.back();
    remainders.push_back({share - static_cast<long double>(counts.back()), i});
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < layers; ++i, ++given) ++counts[remainders[i % remainders.size()].second];
  return counts;
}

Model load(const std::string& folder, const LoadOptions& options) {
  if (splits(folder, options)) {
    LoadOptions across = options;
    across.gpu.reset();
    return loadAcross(folder, {}, {}, across);
  }
  Model out = built(folder, {.kvCache = options.kv, .layers = options.layers, .gpu = options.gpu});
  out.conversion_ = conversionName(folder);
  return out;
}

Model loadAcross(const std::string& folder, const std::vector<int>& gpus, const std::vector<int64_t>& counts,
                 const LoadOptions& options) {
  check(!options.gpu && options.layers == 0,
        "loadAcross: " + folder + ": the stages place every layer; LoadOptions::gpu and layers must be unset");
  const int shown = gizhw::gpu::deviceCount();
  std::vector<int> ordinals = gpus;
  if (ordinals.empty())
    for (int i = 0; i < shown; ++i) ordinals.push_back(i);
  check(!ordinals.empty(), "loadAcross: " + folder + ": the machine shows no GPU");
  std::vector<gizhw::gpu::Gpu> opened;
  for (int ordinal : ordinals) {
    check(std::count(ordinals.begin(), ordinals.end(), ordinal) == 1,
          "loadAcross: GPU " + std::to_string(ordinal) + " is named twice");
    std::optional<gizhw::gpu::Gpu> gpu = gizhw::gpu::open(ordinal);
    check(gpu.has_value(), "loadAcross: there is no GPU " + std::to_string(ordinal) + "; the machine shows " +
                               std::to_string(shown) + " (those CUDA_VISIBLE_DEVICES lets it see)");
    opened.push_back(*gpu);
  }
  const int64_t layers = ConvertedModel::open(folder).config().numLayers;
  std::vector<int64_t> perGpu = counts;
  if (perGpu.empty()) {
    std::vector<uint64_t> free;
    for (const gizhw::gpu::Gpu& gpu : opened) free.push_back(gpu.freeBytes());
    perGpu = stageCounts(layers, free);
  }
  check(perGpu.size() == opened.size(), "loadAcross: " + std::to_string(perGpu.size()) + " layer counts for " +
                                            std::to_string(opened.size()) + " GPUs");
  int64_t sum = 0;
  for (int64_t n : perGpu) sum += n;
  check(sum == layers, "loadAcross: " + folder + ": the layer counts sum to " + std::to_string(sum) +
                           ", the model has " + std::to_string(layers) + " layers");
  ModelOptions modelOptions{.kvCache = options.kv};
  for (size_t i = 0; i < opened.size(); ++i)
    if (perGpu[i] > 0 || !counts.empty()) modelOptions.stages.push_back({opened[i], perGpu[i]});
  Model out = built(folder, modelOptions);
  out.conversion_ = conversionName(folder);
  return out;
}

}  // namespace gizml::llm
