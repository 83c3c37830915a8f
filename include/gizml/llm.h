#pragma once
// gizml::llm: language models. Converting a Hugging Face folder or a GGUF file into our
// quantized format (docs/format.md), once; loading it; generating with an Engine.
#include <gizhw/gpu.h>
#include <gizml/error.h>
#include <gizml/grammar.h>
#include <gizml/kv_format.h>
#include <gizml/tensor.h>
#include <gizml/tokenizer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gizml::llm {

/// Widths of the stored weights: `layers` for every linear layer, `head` for the output layer
/// (and the embedding when it is tied to it); group: values per scale along the input dimension.
struct Bits {
  int layers = 4;
  int head = 6;
  int64_t group = 32;
};

struct TensorReport {
  std::string name;
  std::string format;      // "f32", "q4", ...
  double bitsPerWeight;    // stored bits over values, scales included
  double relativeRmsError; // ||stored - source|| / ||source||
};

struct ConvertReport {
  std::vector<TensorReport> tensors;
  double bitsPerWeight = 0;  // of the whole model
  /// A table, one line per tensor, and the totals.
  std::string text() const;
};

/// Converts source (a Hugging Face folder or a .gguf file) into the folder destination:
/// manifest.json, weights.bin, the tokenizer files and report.json, and a multimodal source's
/// vision tower as stored in vision/ (vision::Tower::load's folder). loraFolder, when not empty,
/// is a PEFT LoRA adapter merged into the weights before they are quantized. layers, when not 0,
/// keeps only the model's first `layers` layers and the embedding (not the final norm, the output
/// layer or the MTP layer): a text encoder's folder, which load() reads with those layers alone
/// and whose Engine gives hidden states, not text. Shows a progress bar on stderr when it is a
/// terminal. Throws gizml::Error naming the file and field at fault.
ConvertReport convert(const std::string& source, const std::string& destination, const Bits& bits = {},
                      const std::string& loraFolder = "", int64_t layers = 0);

/// How a request picks its tokens. The penalties shape the logits first: presence and frequency
/// (OpenAI's) over the generated tokens, repetition (CTRL's, as transformers) over prompt and
/// generated tokens. temperature 0 is greedy; otherwise topK (0: all), topP and minP cut the
/// distribution, and draws come from a counter-based generator keyed by seed, so the same seed
/// and prompt give the same tokens whatever else the engine runs.
struct Sampling {
  double temperature = 0.0;
  int topK = 0;
  double topP = 1.0;
  double minP = 0.0;
  uint64_t seed = 0;
  double presencePenalty = 0.0;
  double frequencyPenalty = 0.0;
  double repetitionPenalty = 1.0;
  /// Added to the logits of these tokens after the penalties, before sampling and the log
  /// probabilities (OpenAI's logit_bias): -100 bans a token in practice, +100 all but forces it.
  std::vector<std::pair<TokenId, float>> logitBias;
  /// -1: none; n >= 0: each token's log probability and the n most likely, in Progress/Result.
  int logprobs = -1;
  /// When set, only tokens whose bytes the grammar allows next, and the end of the turn only once
  /// the text is a whole sentence of it (needs the engine's tokenizer).
  std::shared_ptr<const grammar::Grammar> grammar;
  /// The grammar applies from the token after the first generated `after` on (a reasoning
  /// model's </think>); -1: from the first token.
  TokenId after = -1;
};
Sampling greedy();
Sampling sample(double temperature, int topK = 0, double topP = 1.0, uint64_t seed = 0);

/// A picture a prompt shows, for models with a vision tower (Qwen3.5, Qwen3-VL): the tower's rows
/// (vision::Tower::encode, F32 [t h w, hidden]) read in place of as many placeholder tokens from
/// prompt index `first`, laid out as t x h x w rows (the tower's grid over its merge size) for
/// the model's multimodal positions.
struct Picture {
  int64_t first = 0;
  tensor::Tensor rows;
  int64_t t = 1, h = 0, w = 0;
  /// Qwen3-VL's deepstack rows (the tower's earlier blocks, merged): deepstack[l] (rows' shape)
  /// is added to the picture's rows of the residual stream after the language model's layer l.
  std::vector<tensor::Tensor> deepstack = {};
};

struct Request {
  std::vector<TokenId> prompt;
  int64_t limit = 256;  // the most tokens to generate
  Sampling sampling;
  std::vector<std::string> stop;  // stop strings, matched on the decoded text
  /// Prompt lengths (ascending, ChatTokens::ends) at which the model keeps its state: a later
  /// request sharing the prompt that far resumes there. A KV cache resumes anywhere; recurrent
  /// states (Qwen 3.5) only at their end and at these marks.
  std::vector<size_t> marks;
  /// The length of the prompt's head (ChatTokens::head: the system turn with the tools) that
  /// other requests share. One of at least 256 tokens is read once and kept (apart from the
  /// slots, up to one per slot, the least recently used dropped first): later prompts that start
  /// with it read only the rest, every slot reading one copy of its keys and values; requests
  /// that name it while another reads it wait for that one. 0: none.
  size_t head = 0;
  /// The pictures the prompt shows (ascending, apart; the head ends before the first). A slot
  /// never shares their rows with another request's.
  std::vector<Picture> pictures;
};

/// A token's log probability (log-softmax of its logits after the penalties) and the top ones.
struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<TokenId, float>> top;
};

enum class Finish { Running, Length, EndOfTurn, Stop, Cancelled };
const char* finishName(Finish f);

/// What one step gave one request.
struct Progress {
  int request = 0;
  std::vector<TokenId> tokens;
  /// The text these tokens complete that is safe to send (with the engine's tokenizer): whole
  /// UTF-8 characters, never the start of a stop string that may still complete (held back
  /// until it cannot), cut before a stop string; at the request's end what was held back.
  std::string text;
  std::vector<TokenLogprob> logprobs;  // one per token when the request asked for them
  Finish finish = Finish::Running;
  int64_t drafted = 0, accepted = 0;   // the model's drafts verified in this step, and kept
  int64_t cached = 0;  // the request's prompt tokens taken from what its slot held (not read again)
};

struct Result {
  std::vector<TokenId> tokens;  // the end-of-turn token that ended it included
  std::string text;             // the Progress texts together: the answer, cut before a stop string
  std::vector<TokenLogprob> logprobs;
  Finish finish = Finish::Running;
  int64_t drafted = 0, accepted = 0;
};

class LanguageModel;
class ChatTemplate;

/// The most prompt rows an Engine step reads (a longer prompt is read over several steps). A
/// pass's intermediate rows stay in buffers the size of the largest pass (about 32 KB a row on
/// Gemma 3 270M, 50 KB on Qwen3-0.6B): a 4096-token prompt read whole held 130 MB more for good
/// on Gemma 3. 512, llama.cpp's passes (its ubatch): as fast as 1,024 (docs/benchmarks.md).
/// giz bench reads its prompt the same.
inline constexpr int64_t kPromptRowsPerStep = 512;

/// Runs requests on a model in slots of up to maxTokens tokens each. Every step is one forward
/// pass of the model for all running requests: the decoding ones feed their last token, new
/// prompts are read whole up to kPromptRowsPerStep rows together, or in parts while others
/// decode (setPrefillBudget). The slots' keys
/// and values live in pages of one pool (for the models here): a slot keeps what it read after
/// its request ends, and a request starts from the slot holding the longest start of its prompt
/// (the earlier turns of its chat, a shared system prompt), sharing that slot's pages rather
/// than reading them again or cutting the slot's own tail away; a page is copied only when a
/// sequence writes into one it shares. When the pool runs short, idle slots give their pages
/// back, least recently used first, then running requests, the last admitted first (preempted:
/// see preemptions()). Bad requests throw gizml::Error and leave the engine as it was.
class Engine {
 public:
  /// endOfTurn: the tokens that end a request (the tokenizer's eos, the template's turn end).
  /// poolTokens: the KV pool's size in tokens (whole pages); 0: enough for every slot's whole
  /// context. A pool that cannot hold one slot's context is an Error naming both.
  Engine(std::shared_ptr<LanguageModel> model, std::shared_ptr<const Tokenizer> tokenizer,
         std::vector<TokenId> endOfTurn, int slots, int64_t maxTokens, int64_t poolTokens = 0);
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  ~Engine();

  /// Starts a request in a free slot; returns its id. Throws when no slot is free, or when the
  /// model was loaded with only its first layers (LoadOptions::layers: it has no output layer).
  int add(const Request& request);
  /// Starts `choices` requests on one prompt in as many free slots (OpenAI's n): the prompt is
  /// read once, in choice 0's slot, and each other choice continues from a copy of that state
  /// (where the model's state copies; else it reads the prompt itself). Choice i samples with
  /// seed + i. Returns their ids, choice 0's first. Throws when fewer slots are free.
  std::vector<int> add(const Request& request, int choices);
  /// Slots without a running request.
  int freeSlots() const;
  /// One step of every running request; requests that finish leave their slots.
  std::vector<Progress> advance();
  /// Ends a running request (its slot becomes free); unknown ids are ignored.
  void cancel(int request);
  /// Tokens drafted ahead per step where the model drafts (Qwen 3.5's MTP layer), verified in
  /// the step's forward pass; 0 turns drafting off. Greedy requests give the same tokens either
  /// way, sampled ones the same distribution. Default 2. A request whose drafts are kept less
  /// than a quarter of the time (after 16) stops drafting.
  void setDrafts(int count);
  /// Runs each kind of step the engine takes once, on states of its own that it then drops: a
  /// prompt's pass, a decode step of every slot at once, and a draft where the model drafts. On a
  /// GPU the first run of each kernel compiles it, and a decode step of each batch size up to the
  /// slots runs twice, its second run recorded to be replayed by the steps after (for contexts
  /// in the first 256 positions; a longer one records on its second step); warming moves that
  /// wait to before the first request (giz serve warms before it listens). The kernel tunings of an earlier start are
  /// read from gizhw::gpu::tuningsDirectory() first, and what this process has measured is saved
  /// there after (a damaged or unwritable file is skipped, as the kernel cache skips its own).
  /// Returns the seconds it took. The engine's slots, pool and results are as before.
  double warm();
  /// On (the default): while requests decode, a step reads at most the prompt rows that add as
  /// much time as a step of the decoding requests alone, so a long prompt is read over several
  /// steps and they get a token every step (vLLM's chunked prefill, its budget in time). Both
  /// times are running estimates of this engine's forward passes (32 rows until there are some);
  /// a prompt moves on by at least a row a step and at most kPromptRowsPerStep, and every 4th step is the
  /// decoding requests' alone, timing them afresh as their contexts grow. A request draws its first
  /// token, and its n choices start, once its whole prompt is read; its marks are kept as with a
  /// whole read. Off: a prompt is read whole (up to kPromptRowsPerStep) in the step after its add. A prompt read in parts
  /// gives the logits of a whole read, so the same tokens; Qwen 3.5's recurrent layers round
  /// other splits otherwise, so there they agree to rounding (a near tie may go either way).
  void setPrefillBudget(bool on);
  /// Requests still running (those preempted, waiting for pages, included).
  int running() const;
  int slots() const;
  int64_t maxTokens() const;
  /// The KV pool: its tokens (whole pages), its bytes, and its pages in use. 0 where the model's
  /// states keep their own memory.
  int64_t poolTokens() const;
  int64_t poolBytes() const;
  int64_t poolPagesUsed() const;
  /// Times a running request gave its pages back because a step needed more than the pool had
  /// once idle slots and kept heads gave theirs (vLLM's preemption by recompute), the request
  /// admitted last first. A preempted request keeps its slot and waits, giving no tokens, with
  /// its state moved to host memory (setHostCache); the oldest waiting starts again once the
  /// pool has room for what it read (requests admitted after it wait too, not to start before
  /// it), taking that state back or reading its prompt and tokens again, and goes on with the
  /// tokens (and random draws) it gives without the wait.
  int64_t preemptions() const;
  /// How its pool keeps keys and values: the model's setting, or the engine's choice.
  KvFormat kvFormat() const;
  /// When a request takes a slot from another chat, that chat's state stays in the KV pool
  /// (sharing its pages) until the pool needs them, then moves to host memory (as does an idle
  /// slot's when the pool runs short); the next request that starts with it (the chat's next
  /// turn) takes it back instead of reading it again. At most `bytes` of host memory are kept, the
  /// oldest leaving first; -1 (the default): half of the memory the machine has available at each
  /// move; 0: none (chats then wait only in the pool).
  void setHostCache(int64_t bytes);
  /// Bytes of the chats kept in host memory now.
  int64_t hostCacheBytes() const;

  /// Runs requests to their ends, as many at once as there are slots, the rest as slots free up.
  std::vector<Result> generate(const std::vector<Request>& requests);

  /// The hidden state of every token of prompt (up to maxTokens of them) after the model's
  /// layers: the residual stream, without the final norm, as an F32 tensor [tokens, hidden]
  /// (transformers' hidden_states[layers], embeddings scaled as the model scales them). All
  /// layers of a whole model, or the first LoadOptions::layers: a text encoder (Z-Image reads
  /// Qwen3-4B's first 35 of 36). The prompt is read in a state of its own, apart from the slots
  /// and their requests.
  tensor::Tensor hidden(const std::vector<TokenId>& prompt) const;
  /// The hidden states of every token of prompt after each of `layers`, from one pass, side by
  /// side: F32 [tokens, layers.size() hidden], row t holding token t's states in the order of
  /// layers. Layer l is transformers' hidden_states[l]: 0 the embeddings, l after the first l
  /// layers (no final norm); up to the layers the model holds. attended > 0: only the first
  /// `attended` tokens are attended as keys, the rest are padding that sees them alone
  /// (transformers' attention_mask of `attended` ones, then zeros; CPU and full-attention layers
  /// only); 0: all. Layers outside the model's or an attended outside 0 .. tokens are Errors.
  tensor::Tensor hidden(const std::vector<TokenId>& prompt, const std::vector<int64_t>& layers,
                        int64_t attended = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A converted model's forward passes over sequences its caller feeds, without an Engine's
/// slots, sampling or stops: each pass reads every sequence's new tokens together, as one step of
/// an engine does. giz bench times a prefill and decode steps with it.
class Sequences {
 public:
  /// Loads the weights of a converted folder (not its tokenizer) and makes `count` empty
  /// sequences of up to maxTokens tokens each, their keys and values kept as kvCache says (F32
  /// unless told). Throws gizml::Error naming the file at fault.
  Sequences(const std::string& folder, int64_t count, int64_t maxTokens, KvFormat kvCache = DType::F32,
            const std::optional<gizhw::gpu::Gpu>& gpu = std::nullopt);
  Sequences(Sequences&&) noexcept;
  Sequences& operator=(Sequences&&) noexcept;
  ~Sequences();

  /// Token ids are below it, and a row of logits has this many values.
  int64_t vocabSize() const;

  /// One forward pass: tokens[s] (at least one) appended to sequence s, for every sequence.
  /// Returns each sequence's F32 logits: [1, vocabSize] for its last token, or [tokens,
  /// vocabSize] for every one when allLogits. Throws gizml::Error when a sequence would pass
  /// maxTokens or a token is outside the vocabulary.
  std::vector<tensor::Tensor> forward(const std::vector<std::vector<TokenId>>& tokens, bool allLogits = false);

  /// Forgets every sequence's tokens and keeps the memory they took, so that the next passes
  /// start afresh on memory already touched (giz bench's warm-up pass, then the timed one).
  void clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A tool call in a model's text: the function's name and its arguments as the text of a JSON
/// object.
struct ToolCall {
  std::string name;
  std::string arguments;
  bool operator==(const ToolCall&) const = default;
};

/// The calls read from a model's text, and the rest of it.
struct ToolCalls {
  std::vector<ToolCall> calls;
  /// The text outside the calls, and the blocks that are no call as they were; trimmed.
  std::string rest;
  /// Why each <tool_call> block left in rest is no call, in the order of the text.
  std::vector<std::string> errors;
};

/// Reads the calls in a model's text: each <tool_call>...</tool_call> block (the last may be
/// unclosed: the turn ended there) in either form a template writes,
///   Hermes': <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call> ("parameters" too), or
///   Qwen's:  <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>.
/// tools (OpenAI tool objects) types the second form's values: a parameter whose schema is not a
/// string is read as JSON when it parses. Model output is outside input: a block that is no call
/// (not JSON, no name, arguments no object, nested deeper than 64 levels) stays in rest with its
/// reason in errors; this never throws for any text.
ToolCalls toolCalls(std::string_view text, const nlohmann::ordered_json& tools = nlohmann::ordered_json::array());

/// How a model's chat template writes the assistant's tool calls (Model::calls).
enum class CallFormat {
  None,      // it writes no tools (or fails on them)
  Json,      // Hermes' JSON in <tool_call> (Qwen 2.5, Qwen 3)
  Function,  // Qwen's <tool_call><function=NAME><parameter=P> (Qwen3-Coder, Qwen 3.5)
  Other,     // in a form toolCalls does not read (Llama 3.1's bare JSON, Mistral's [TOOL_CALLS])
};
const char* callFormatName(CallFormat format);

/// A chat rendered to token ids; ends[i] is where message i ends (the tokens of the template
/// applied to messages 0..i, as far as they agree with the whole).
struct ChatTokens {
  std::vector<TokenId> ids;
  std::vector<size_t> ends;
  /// The tokens of the head: the first message's where it is the system (or developer) turn,
  /// which carries the tools; else 0 (Request::head).
  size_t head = 0;
};

struct LoadOptions {
  /// Only the first `layers` layers of the model: their weights alone are read (the final norm,
  /// the output layer and the MTP layer are not), so memory falls in proportion. Such a model
  /// gives Engine::hidden, not text. 0: all layers (those kept, for a folder convert made of the
  /// first layers); anything outside 0 .. the model's (kept) layers is an Error naming both.
  int64_t layers = 0;
  /// How its engines keep keys and values (KvFormat::parseSetting reads "8", "4/2", "auto", ...);
  /// unset (the default): each engine chooses, 8 bits, else 4, else keys in 4 and values in 2,
  /// the first in which its KV pool fits the memory the machine has available (on a GPU, nine
  /// tenths of its free memory).
  std::optional<KvFormat> kv = std::nullopt;
  /// Where the model runs: this GPU (its layers' weights uploaded once, its KV pages and
  /// activations there, keys and values as kv says, codes as on the CPU), or the CPU (nullopt).
  /// Every architecture runs there.
  std::optional<gizhw::gpu::Gpu> gpu = std::nullopt;
  /// With gpu (an NVIDIA one) and every layer: when the model's weights would leave less than
  /// this many bytes of its memory free and the machine shows other NVIDIA GPUs (those
  /// CUDA_VISIBLE_DEVICES shows), the model loads across all of them, as loadAcross with counts
  /// in proportion to their free memory. 0: never.
  uint64_t stageBelow = uint64_t{1} << 30;
};

/// A converted model, loaded: its tokenizer, chat template and architecture.
class Model {
 public:
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  /// The chat template applied to messages (a JSON list of {role, content}) with the generation
  /// prompt; thinking sets enable_thinking for templates that read it.
  std::string chatPrompt(const nlohmann::ordered_json& messages, bool thinking = false) const;
  /// chatPrompt's tokens, with where each message ends.
  ChatTokens chatTokens(const nlohmann::ordered_json& messages, bool thinking = false) const;
  /// The same with the request's tools (a JSON list of OpenAI tool objects, [] for none) and
  /// variables set over the template's defaults (bos_token, eos_token, enable_thinking = false),
  /// e.g. {"enable_thinking": true, "reasoning_effort": "high"}. gizml::ai's server uses these.
  std::string chatPrompt(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                         const nlohmann::ordered_json& variables) const;
  ChatTokens chatTokens(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                        const nlohmann::ordered_json& variables) const;
  /// chatTokens of messages that show pictures: content items {"type": "image"}, which the
  /// template writes as one <|image_pad|> each, here repeated as many times as that picture has
  /// rows (transformers' Qwen3-VL processor), and pictures[i].first set where picture i's rows
  /// start (the rest of each Picture as vision::Tower gave it). An Error when the template's
  /// placeholders and the pictures differ in number, or the tokenizer has no placeholder.
  ChatTokens chatTokens(const nlohmann::ordered_json& messages, std::vector<Picture>& pictures,
                        bool thinking = false) const;
  /// The same with the request's tools and template variables (as chatTokens above).
  ChatTokens chatTokens(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                        const nlohmann::ordered_json& variables, std::vector<Picture>& pictures) const;
  /// The tokens that end a turn: eos and the template's end of an assistant message.
  const std::vector<TokenId>& endOfTurn() const { return endOfTurn_; }
  /// The longest sequence the model was trained for (config's max positions).
  int64_t contextLength() const;
  /// The width of its hidden states (Engine::hidden's columns).
  int64_t hiddenSize() const;
  /// An engine of `slots` slots of maxTokens tokens, its KV pool of poolTokens (0: every slot's
  /// whole context).
  Engine engine(int slots, int64_t maxTokens, int64_t poolTokens = 0) const;
  /// Names the conversion load() read: a hash of the folder's manifest.json (architecture,
  /// config and weight formats), 16 hex digits; "" for a model made from its parts.
  const std::string& conversion() const { return conversion_; }
  /// The format of the tool calls its chat template writes: found once, when the model is made,
  /// by rendering a conversation with a call of a probe tool and reading it back with toolCalls.
  CallFormat calls() const { return calls_; }

  /// A model from its parts (load() uses it; tests give it their own LanguageModel).
  Model(std::shared_ptr<LanguageModel> model, std::shared_ptr<const Tokenizer> tokenizer, std::string chatTemplate);

 private:
  /// How many of `whole`'s tokens the chat of `prefix` (messages of it) gives too: where its
  /// last message ends (at least `previous`, the message before's end).
  size_t agreeingPrefix(const nlohmann::ordered_json& prefix, const nlohmann::ordered_json& tools,
                        const nlohmann::ordered_json& vars, const std::vector<TokenId>& whole, size_t previous) const;

  std::shared_ptr<LanguageModel> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> template_;  // null when the model has none
  std::vector<TokenId> endOfTurn_;
  std::string conversion_;
  CallFormat calls_ = CallFormat::None;
  friend Model load(const std::string& folder, const LoadOptions& options);
  friend Model loadAcross(const std::string& folder, const std::vector<int>& gpus, const std::vector<int64_t>& counts,
                          const LoadOptions& options);
};

/// Loads a converted folder (convert's output). Throws gizml::Error naming the file at fault.
Model load(const std::string& folder);
Model load(const std::string& folder, const LoadOptions& options);

/// Loads a converted folder in stages across GPUs: gpus[s] (an ordinal among the GPUs
/// CUDA_VISIBLE_DEVICES shows; empty: all of them) holds counts[s] consecutive layers (empty: in
/// proportion to each GPU's free memory, a GPU given none left out) with their KV pages and
/// recurrent states, the last one also the final norm, the output layer and the MTP layer (its
/// drafts). A step runs the stages in turn. Such a model gives logits only (Engine::hidden is an
/// Error); an engine reuses a chat's start and a shared head as on one GPU. options.kv applies;
/// options.gpu and options.layers must be unset. Throws gizml::Error naming an unknown or
/// repeated GPU, counts that do not match the GPUs or do not sum to the model's layers, and a
/// stage too big for its GPU.
Model loadAcross(const std::string& folder, const std::vector<int>& gpus, const std::vector<int64_t>& counts = {},
                 const LoadOptions& options = {});

}  // namespace gizml::llm
