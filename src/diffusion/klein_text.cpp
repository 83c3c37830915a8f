// KleinText: FLUX.2 [klein]'s text rows as ComfyUI makes them (comfy/text_encoders/flux.py).
#include <gizml/diffusion.h>
#include <gizml/error.h>

#include <algorithm>
#include <string>

namespace gizml::diffusion {

struct KleinText::Parts {
  llm::Model model;
  KleinTextConfig config;
  llm::TokenId pad;
};

namespace {

// KleinTokenizer's llama_template; diffusers' apply_chat_template(enable_thinking=False) too.
constexpr const char* kTemplateStart = "<|im_start|>user\n";
constexpr const char* kTemplateEnd = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

}  // namespace

KleinText KleinText::load(const std::string& folder, const KleinTextConfig& config) {
  check(!config.layers.empty(), "KleinText::load: no hidden states asked for");
  check(config.minTokens >= 1, "KleinText::load: minTokens " + std::to_string(config.minTokens) + " is below 1");
  for (int64_t l : config.layers)
    check(l >= 1, "KleinText::load: hidden state " + std::to_string(l) + " is not after a layer (1 or more)");
  // Only the layers up to the last state are read (an Error names the folder when it has fewer).
  const int64_t last = *std::max_element(config.layers.begin(), config.layers.end());
  llm::Model model = llm::load(folder, {.layers = last});
  const llm::TokenId pad = model.tokenizer().tokenToId("<|endoftext|>");
  check(pad >= 0, folder + ": its tokenizer has no <|endoftext|>, klein's padding token");
  KleinText out;
  out.parts_ = std::make_shared<const Parts>(Parts{std::move(model), config, pad});
  return out;
}

std::vector<llm::TokenId> KleinText::promptTokens(const std::string& prompt) const {
  return parts_->model.tokenizer().encode(kTemplateStart + prompt + kTemplateEnd, false);
}

tensor::Tensor KleinText::condition(const std::string& prompt) const {
  std::vector<llm::TokenId> ids = promptTokens(prompt);
  // ComfyUI's mask (sd1_clip process_tokens with pad 151643 and no end token) ends at the first
  // padding token, wherever it is.
  const auto attended = std::find(ids.begin(), ids.end(), parts_->pad) - ids.begin();
  ids.resize(std::max<size_t>(ids.size(), static_cast<size_t>(parts_->config.minTokens)), parts_->pad);
  const auto tokens = static_cast<int64_t>(ids.size());
  const int64_t context = parts_->model.contextLength();
  check(tokens <= context, "KleinText::condition: the prompt's " + std::to_string(tokens) +
                               " tokens exceed the text encoder's " + std::to_string(context));
  // An engine of the rows' length alone: hidden reads them in a state of its own.
  return parts_->model.engine(1, tokens).hidden(ids, parts_->config.layers, attended).host();
}

int64_t KleinText::width() const {
  return static_cast<int64_t>(parts_->config.layers.size()) * parts_->model.hiddenSize();
}

const KleinTextConfig& KleinText::config() const { return parts_->config; }

}  // namespace gizml::diffusion
