// A choice's tokens to OpenAI's JSON: chat messages and deltas (refusal null, tool calls as
// OpenAI streams them), completions' text, log probabilities of both shapes.
#include "ai/choice.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;

Json logprobEntry(const Tokenizer& tokenizer, TokenId id, float logprob) {
  const std::string text = tokenizer.decode(std::span<const TokenId>(&id, 1), false);
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

Json emptyLogprobs(bool chat) {
  if (chat) return {{"content", Json::array()}, {"refusal", nullptr}};
  return {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
          {"text_offset", Json::array()}};
}

void append(Json& into, const Json& more) {
  for (const auto& [key, values] : more.items())
    if (values.is_array())
      for (const Json& v : values) into[key].push_back(v);
}

}  // namespace

ChoiceWriter::ChoiceWriter(const Tokenizer& tokenizer, const Generation& g, size_t index, std::string (*newId)())
    : tokenizer_(tokenizer),
      chat_(g.chat),
      index_(index),
      logprobs_(g.logprobs),
      parallelCalls_(g.toolChoice.parallel),
      newId_(newId),
      answer_(g.chat && g.reasoning, g.chat ? g.tools : Json::array(), g.inReasoning),
      stepLogprobs_(emptyLogprobs(g.chat)),
      wholeLogprobs_(emptyLogprobs(g.chat)) {}

void ChoiceWriter::take(Job::Choice& taken) {
  if (finished_) return;
  tokens_ += static_cast<int64_t>(taken.tokens.size());
  const bool done = taken.done;
  AnswerStream::Delta d;
  if (chat_) {
    d = answer_.push(taken.text);
    if (done) {
      AnswerStream::Delta rest = answer_.finish();
      d.content += rest.content;
      d.reasoning += rest.reasoning;
      for (ToolCall& c : rest.calls) d.calls.push_back(std::move(c));
    }
    // parallel_tool_calls false: the first call only.
    if (!parallelCalls_ && !calls_.empty()) d.calls.clear();
    if (!parallelCalls_ && d.calls.size() > 1) d.calls.resize(1);
  } else {
    d.content = std::move(taken.text);
  }

  stepLogprobs_ = emptyLogprobs(chat_);
  for (const llm::TokenLogprob& l : taken.logprobs) {
    if (chat_) {
      Json entry = logprobEntry(tokenizer_, l.token, l.logprob);
      Json top = Json::array();
      for (const auto& [tok, lp] : l.top) top.push_back(logprobEntry(tokenizer_, tok, lp));
      entry["top_logprobs"] = top;
      stepLogprobs_["content"].push_back(std::move(entry));
    } else {
      const std::string tokText = tokenizer_.decode(std::span<const TokenId>(&l.token, 1), false);
      Json top = Json::object();
      for (const auto& [tok, lp] : l.top) top[tokenizer_.decode(std::span<const TokenId>(&tok, 1), false)] = lp;
      stepLogprobs_["tokens"].push_back(tokText);
      stepLogprobs_["token_logprobs"].push_back(l.logprob);
      stepLogprobs_["top_logprobs"].push_back(top);
      stepLogprobs_["text_offset"].push_back(textOffset_);
      textOffset_ += tokText.size();
    }
  }
  append(wholeLogprobs_, stepLogprobs_);

  content_ += d.content;
  reasoning_ += d.reasoning;
  for (const ToolCall& c : d.calls)
    calls_.push_back({{"index", calls_.size()}, {"id", "call_" + newId_()}, {"type", "function"},
                      {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  delta_ = std::move(d);
  if (done) finished_ = true, finish_ = taken.finish, endPending_ = true;
}

const char* ChoiceWriter::finishReason() const {
  if (!calls_.empty()) return "tool_calls";
  return finish_ == llm::Finish::Length ? "length" : "stop";
}

ChoiceWriter::Json ChoiceWriter::opening() const {
  return {{"index", index_},
          {"delta", {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}},
          {"logprobs", nullptr},
          {"finish_reason", nullptr}};
}

std::vector<ChoiceWriter::Json> ChoiceWriter::chunks() {
  std::vector<Json> out;
  const bool hasLogprobs = chat_ ? !stepLogprobs_["content"].empty() : !stepLogprobs_["tokens"].empty();
  if (!delta_.reasoning.empty() || !delta_.content.empty() || hasLogprobs) {
    Json choice = {{"index", index_}};
    if (chat_) {
      Json d = Json::object();
      if (!delta_.reasoning.empty()) d["reasoning_content"] = delta_.reasoning;
      if (!delta_.content.empty()) d["content"] = delta_.content;
      choice["delta"] = d;
    } else {
      choice["text"] = delta_.content;
    }
    choice["logprobs"] = hasLogprobs ? stepLogprobs_ : Json(nullptr);
    choice["finish_reason"] = nullptr;
    out.push_back(std::move(choice));
  }
  // The calls this take completed: the last delta_.calls.size() entries of calls_.
  for (size_t i = calls_.size() - delta_.calls.size(); i < calls_.size(); ++i) {
    const Json& call = calls_[i];
    Json head = call;
    head["function"]["arguments"] = "";
    Json args = {{"index", call["index"]}, {"function", {{"arguments", call["function"]["arguments"]}}}};
    for (Json* part : {&head, &args})
      out.push_back({{"index", index_}, {"delta", {{"tool_calls", Json::array({*part})}}}, {"logprobs", nullptr},
                     {"finish_reason", nullptr}});
  }
  delta_ = {};
  stepLogprobs_ = emptyLogprobs(chat_);
  if (endPending_) {
    endPending_ = false;
    Json last = {{"index", index_}};
    if (chat_) last["delta"] = Json::object();
    else last["text"] = "";
    last["logprobs"] = nullptr;
    last["finish_reason"] = finishReason();
    out.push_back(std::move(last));
  }
  return out;
}

ChoiceWriter::Json ChoiceWriter::whole() const {
  Json choice = {{"index", index_}};
  const Json logprobs = logprobs_ >= 0 ? wholeLogprobs_ : Json(nullptr);
  if (chat_) {
    Json message = {{"role", "assistant"}};
    if (!calls_.empty()) {
      std::string content = content_;
      while (!content.empty() && (content.back() == '\n' || content.back() == ' ')) content.pop_back();
      message["content"] = content.empty() ? Json(nullptr) : Json(content);
      message["refusal"] = nullptr;
      message["tool_calls"] = calls_;
      for (Json& call : message["tool_calls"]) call.erase("index");
    } else {
      message["content"] = content_;
      message["refusal"] = nullptr;
    }
    if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
    choice["message"] = message;
  } else {
    choice["text"] = content_;
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finishReason();
  return choice;
}

}  // namespace gizml::ai
