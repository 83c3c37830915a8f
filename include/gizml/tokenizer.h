#pragma once
// Text <-> token ids for the language models gizml runs: byte-level BPE (Qwen2/3/3.5, Llama 3)
// and SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma), loaded from a
// Hugging Face tokenizer.json or from a GGUF file's vocabulary.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gizml::llm {

using TokenId = int32_t;

class Tokenizer {
 public:
  /// Loads tokenizer.json (and tokenizer_config.json beside it, for bos/eos) from a folder or
  /// from the path of the tokenizer.json itself; also the tokenizer_gguf.json that convert
  /// writes for a GGUF source (a folder without tokenizer.json uses it).
  static Tokenizer fromJson(const std::string& folderOrPath);
  /// Loads the vocabulary of a GGUF file (tokenizer.ggml.*).
  static Tokenizer fromGguf(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// The ids of text; added and special tokens written in the text become their ids.
  /// addSpecial adds what the model puts around a sequence (e.g. Gemma's and Llama 2's BOS).
  std::vector<TokenId> encode(std::string_view text, bool addSpecial = true) const;
  /// The text of ids (invalid UTF-8 replaced by U+FFFD); skipSpecial leaves special tokens out.
  std::string decode(std::span<const TokenId> ids, bool skipSpecial = false) const;

  /// The id of a token as the vocabulary spells it, or -1.
  TokenId tokenToId(std::string_view token) const;
  /// The vocabulary's spelling of id; throws gizml::Error when id is out of range.
  const std::string& idToToken(TokenId id) const;
  /// The bytes token id adds inside a text (no start-of-text space rule; raw bytes, which may be
  /// part of a UTF-8 character).
  std::string pieceBytes(TokenId id) const;
  bool isSpecial(TokenId id) const;
  size_t vocabSize() const;
  TokenId bos() const;  // -1 when the model has none
  TokenId eos() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  friend class StreamDecoder;
  std::unique_ptr<Impl> impl_;
};

/// Turns ids into text one at a time while generating: each push returns only complete UTF-8
/// characters, holding back the bytes of a character until its last byte arrives.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skipSpecial = false);
  std::string push(TokenId id);
  /// The held-back bytes of an unfinished character, as U+FFFD; resets the decoder.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool skipSpecial_;
  bool atStart_ = true;  // no text yet since the start or since a special token
  std::string pending_;
};

}  // namespace gizml::llm
