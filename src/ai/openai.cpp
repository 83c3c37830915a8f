// Reading the OpenAI API's completion requests: every field checked, named when it is wrong.
#include "ai/openai.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>

#include "ai/message_content.h"
#include "ai/request_fields.h"
#include "core/json_input.h"

namespace gizml::ai {
namespace {

using Json = nlohmann::ordered_json;

Json toolCallsOf(const Json& calls, const std::string& param) {
  if (!calls.is_array()) bad(param, "expected a list, got " + typeName(calls));
  Json out = Json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = param + "[" + std::to_string(j) + "]";
    const Json& call = calls[j];
    if (!call.is_object()) bad(at, "expected an object, got " + typeName(call));
    const auto f = call.find("function");
    if (f == call.end() || !f->is_object()) bad(at + ".function", "expected an object with name and arguments");
    const auto name = f->find("name");
    if (name == f->end() || !name->is_string()) bad(at + ".function.name", "expected a string");
    Json args = Json::object();
    if (const auto a = f->find("arguments"); a != f->end() && !a->is_null()) {
      if (a->is_string()) {
        // Templates read the arguments as a mapping (Qwen's tojson / items()); text that is not
        // JSON stays the string it is.
        try {
          args = parseJson(a->get<std::string>());
        } catch (const JsonTooDeep&) {
          tooDeep(at + ".function.arguments");
        } catch (const Json::exception&) {
          args = *a;
        }
      } else if (a->is_object()) {
        args = *a;
      } else {
        bad(at + ".function.arguments", "expected a JSON string or an object, got " + typeName(*a));
      }
    }
    if (const auto type = call.find("type"); type != call.end() && !type->is_null() && *type != "function")
      bad(at + ".type", "only 'function' calls are supported");
    const auto id = call.find("id");  // required, as OpenAI's: the tool message answering names it
    if (id == call.end() || !id->is_string() || id->get<std::string>().empty())
      bad(at + ".id", "expected the call's id, a non-empty string");
    Json function = {{"name", *name}, {"arguments", args}};
    Json item = {{"type", "function"}, {"function", function}, {"id", *id}};
    out.push_back(std::move(item));
  }
  return out;
}

Json toolsOf(const Json& tools) {
  if (!tools.is_array()) bad("tools", "expected a list, got " + typeName(tools));
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const Json& tool = tools[i];
    if (!tool.is_object()) bad(at, "expected an object, got " + typeName(tool));
    if (tool.value("type", Json("function")) != "function") bad(at + ".type", "only 'function' tools are supported");
    const auto f = tool.find("function");
    if (f == tool.end() || !f->is_object()) bad(at + ".function", "expected an object");
    const auto name = f->find("name");
    if (name == f->end() || !name->is_string() || name->get<std::string>().empty())
      bad(at + ".function.name", "expected a non-empty string");
    // OpenAI's pattern ^[a-zA-Z0-9_-]{1,64}$: names a model writes back and parsers find.
    const std::string n = name->get<std::string>();
    if (n.size() > 64 || n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                             std::string::npos)
      bad(at + ".function.name", "'" + n + "' is not 1 to 64 letters, digits, '_' or '-'");
    if (const auto p = f->find("parameters"); p != f->end() && !p->is_null() && !p->is_object())
      bad(at + ".function.parameters", "expected a JSON schema object");
  }
  return tools;
}

const Target& targetOf(const Json& body, const std::vector<Target>& targets, const std::vector<std::string>& imageModels,
                       size_t& index) {
  const Json* model = field(body, "model");
  if (!model) return targets[index = 0];
  if (!model->is_string()) bad("model", "expected a string, got " + typeName(*model));
  const std::string name = model->get<std::string>();
  if (std::find(imageModels.begin(), imageModels.end(), name) != imageModels.end())
    bad("model", "'" + name + "' is an image model: it answers POST /v1/images/generations, not completions",
        "model_not_supported");
  for (size_t i = 0; i < targets.size(); ++i)
    if (targets[i].name == name) return targets[index = i];
  std::string known;
  for (const Target& t : targets) known += (known.empty() ? "" : ", ") + t.name;
  throw ApiError(404, "The model '" + name + "' does not exist (served: " + known + ")", "model", "model_not_found");
}

std::vector<TokenId> completionPrompt(const Json& body, const Target& target) {
  const Json* prompt = field(body, "prompt");
  if (!prompt) bad("prompt", "is required");
  const auto ids = [&](const Json& list, const std::string& param) {
    std::vector<TokenId> out;
    const auto vocab = static_cast<int64_t>(target.model->tokenizer().vocabSize());
    for (const Json& t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab)
        bad(param, "token ids must be whole numbers in [0, " + std::to_string(vocab) + ")");
      out.push_back(static_cast<TokenId>(t.get<int64_t>()));
    }
    return out;
  };
  std::vector<TokenId> out;
  if (prompt->is_string()) {
    out = target.model->tokenizer().encode(prompt->get<std::string>(), true);
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    out = ids(*prompt, "prompt");
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    out = target.model->tokenizer().encode((*prompt)[0].get<std::string>(), true);
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_array()) {
    out = ids((*prompt)[0], "prompt[0]");
  } else if (prompt->is_array() && prompt->size() > 1) {
    bad("prompt", "only one prompt per request is supported");
  } else {
    bad("prompt", "expected a string, a list of token ids or a list of one of them, got " + typeName(*prompt));
  }
  if (out.empty()) bad("prompt", "is empty");
  return out;
}

// response_format: text (no grammar), json_object, or json_schema's schema.
std::shared_ptr<const grammar::Grammar> responseGrammar(const Json& format) {
  if (!format.is_object()) bad("response_format", "expected an object, got " + typeName(format));
  const Json* type = field(format, "type");
  if (!type || !type->is_string()) bad("response_format", "needs a type: text, json_object or json_schema");
  if (*type == "text") return nullptr;
  if (*type == "json_object") return std::make_shared<const grammar::Grammar>(grammar::Grammar::anyObject());
  if (*type != "json_schema")
    bad("response_format", "type '" + type->get<std::string>() + "' is not text, json_object or json_schema");
  const Json* wrapper = field(format, "json_schema");
  if (!wrapper || !wrapper->is_object()) bad("response_format", "json_schema needs an object {\"name\", \"schema\"}");
  const Json* schema = field(*wrapper, "schema");
  if (!schema) bad("response_format", "json_schema.schema is required");
  try {
    return std::make_shared<const grammar::Grammar>(grammar::Grammar::fromSchema(schema->dump()));
  } catch (const Error& e) {
    bad("response_format", std::string("json_schema.schema: ") + e.what());
  }
}

// logit_bias: {"token id": bias in [-100, 100]}, OpenAI's shape.
std::vector<std::pair<TokenId, float>> logitBias(const Json& bias, const Target& target) {
  if (!bias.is_object()) bad("logit_bias", "expected an object of token ids to numbers, got " + typeName(bias));
  const auto vocab = static_cast<int64_t>(target.model->tokenizer().vocabSize());
  std::vector<std::pair<TokenId, float>> out;
  for (const auto& [key, value] : bias.items()) {
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoll(key) >= vocab)
      bad("logit_bias", "'" + key + "' is not a token id in [0, " + std::to_string(vocab) + ")");
    if (!value.is_number()) bad("logit_bias", "'" + key + "': expected a number, got " + typeName(value));
    const double v = value.get<double>();
    if (!(v >= -100 && v <= 100)) bad("logit_bias", "'" + key + "': " + value.dump() + " is outside [-100, 100]");
    out.emplace_back(static_cast<TokenId>(std::stoll(key)), static_cast<float>(v));
  }
  return out;
}

// Sampling, limits and stops: the fields the two endpoints share.
void readSampling(const Json& body, bool chat, const Target& target, Generation& g) {
  llm::Sampling& s = g.request.sampling;
  if (auto v = number(body, "temperature", 0, 2)) s.temperature = *v;  // OpenAI's range
  if (auto v = number(body, "top_p", 0, 1)) {
    if (*v == 0) bad("top_p", "must be above 0");
    s.topP = *v;
  }
  if (auto v = integer(body, "top_k", -1, 1 << 30)) s.topK = static_cast<int>(std::max<int64_t>(*v, 0));
  if (auto v = number(body, "min_p", 0, 1)) s.minP = *v;
  const auto seed = integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  s.seed = seed ? static_cast<uint64_t>(*seed) : freshSeed();
  if (auto v = number(body, "presence_penalty", -2, 2)) s.presencePenalty = *v;
  if (auto v = number(body, "frequency_penalty", -2, 2)) s.frequencyPenalty = *v;
  if (auto v = number(body, "repetition_penalty", 0, 100)) {
    if (*v == 0) bad("repetition_penalty", "must be above 0");
    s.repetitionPenalty = *v;
  }
  if (auto v = integer(body, "n", 1, kMaxChoices)) g.choices = static_cast<int>(*v);
  if (g.choices > target.slots)
    bad("n", std::to_string(g.choices) + " choices need as many slots; '" + target.name + "' has " +
                 std::to_string(target.slots));
  if (auto v = integer(body, "best_of", 1, 1 << 30); v && *v != 1) bad("best_of", "only best_of = 1 is supported");
  const auto tokens = [&](const char* name) { return integer(body, name, 1, std::numeric_limits<int32_t>::max()); };
  if (auto v = tokens("max_tokens")) g.request.limit = *v;
  if (chat)
    if (auto v = tokens("max_completion_tokens")) g.request.limit = *v;

  if (const Json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      g.request.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& s : *stop) {
        if (!s.is_string()) bad("stop", "expected strings, got " + typeName(s));
        g.request.stop.push_back(s.get<std::string>());
      }
    } else {
      bad("stop", "expected a string or a list of strings, got " + typeName(*stop));
    }
    if (g.request.stop.size() > 16) bad("stop", "at most 16 stop strings");
    for (const std::string& s : g.request.stop)
      if (s.empty()) bad("stop", "a stop string is empty");
  }

  if (chat) {
    const bool logprobs = boolean(body, "logprobs").value_or(false);
    const auto top = integer(body, "top_logprobs", 0, 20);
    if (top && !logprobs) bad("top_logprobs", "needs logprobs: true");
    if (logprobs) g.logprobs = static_cast<int>(top.value_or(0));
  } else {
    const Json* lp = field(body, "logprobs");
    if (lp && lp->is_boolean()) {
      if (lp->get<bool>()) g.logprobs = 0;
    } else if (auto v = integer(body, "logprobs", 0, 5)) {  // OpenAI's bound for completions
      g.logprobs = static_cast<int>(*v);
    }
  }
  s.logprobs = g.logprobs;

  if (const Json* bias = field(body, "logit_bias")) s.logitBias = logitBias(*bias, target);
  if (const Json* format = field(body, "response_format")) s.grammar = responseGrammar(*format);
  g.stream = boolean(body, "stream").value_or(false);
  if (const Json* options = field(body, "stream_options")) {
    if (!g.stream) bad("stream_options", "is only allowed with stream: true");
    if (!options->is_object()) bad("stream_options", "expected an object, got " + typeName(*options));
    if (auto v = boolean(*options, "include_usage")) g.includeUsage = *v;
  }
}

}  // namespace

nlohmann::ordered_json errorBody(const std::string& message, const std::string& type, const std::string& param,
                                 const std::string& code) {
  Json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (!code.empty()) error["code"] = code;
  return {{"error", error}};
}

namespace {

// tool_choice ("none", "auto", "required" or {"type": "function", "function": {"name"}}) and
// parallel_tool_calls; a forced call is held to the grammar of the call format.
void readToolChoice(const Json& body, Generation& g) {
  ToolChoice& c = g.toolChoice;
  if (const Json* choice = field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string k = choice->get<std::string>();
      if (k == "none") c.kind = ToolChoice::None;
      else if (k == "auto") c.kind = ToolChoice::Auto;
      else if (k == "required") c.kind = ToolChoice::Required;
      else bad("tool_choice", "'" + k + "' is not none, auto, required or {\"type\": \"function\", ...}");
    } else if (choice->is_object()) {
      if (choice->value("type", Json()) != "function") bad("tool_choice.type", "expected 'function'");
      const Json* f = field(*choice, "function");
      const Json* name = f && f->is_object() ? field(*f, "name") : nullptr;
      if (!name || !name->is_string()) bad("tool_choice.function.name", "expected a string");
      c.kind = ToolChoice::Named;
      c.name = name->get<std::string>();
    } else {
      bad("tool_choice", "expected a string or an object, got " + typeName(*choice));
    }
  }
  if (auto v = boolean(body, "parallel_tool_calls")) c.parallel = *v;
  if (c.kind == ToolChoice::None) g.tools = Json::array();
  if (c.kind != ToolChoice::Required && c.kind != ToolChoice::Named) return;
  if (g.tools.empty()) bad("tool_choice", "needs tools to call");
  if (c.kind == ToolChoice::Named) {
    std::string known;
    bool found = false;
    for (const Json& t : g.tools) {
      found = found || t["function"]["name"] == c.name;
      known += (known.empty() ? "" : ", ") + t["function"]["name"].get<std::string>();
    }
    if (!found) bad("tool_choice.function.name", "'" + c.name + "' is not one of the tools (" + known + ")");
  }
  if (g.request.sampling.grammar) bad("tool_choice", "a forced tool call cannot be combined with a JSON response_format");
  try {
    g.request.sampling.grammar = toolCallGrammar(g.tools, c);
  } catch (const Error& e) {
    bad("tools", std::string("the parameters' schema: ") + e.what());
  }
}

// The messages as the template reads them; the pictures they show appended to `pictures`.
Json normalizeMessages(const Json& messages, std::vector<PictureFile>& pictures) {
  if (!messages.is_array()) bad("messages", "expected a list of messages, got " + typeName(messages));
  if (messages.empty()) bad("messages", "is empty");
  Json out = Json::array();
  std::vector<std::string> calls;  // the ids of the assistant's calls that tool messages may answer now
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const Json& m = messages[i];
    if (!m.is_object()) bad(at, "expected an object, got " + typeName(m));
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad(at + ".role", "is required (system, user, assistant or tool)");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      bad(at + ".role", "'" + r + "' is not system, user, assistant or tool");
    Json message = {{"role", r}};
    const auto content = m.find("content");
    const bool hasCalls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (content == m.end() || content->is_null()) {
      if (r != "assistant") bad(at + ".content", "is required");
      message["content"] = "";
    } else {
      message["content"] = messageContent(*content, at + ".content", r == "user", pictures);
    }
    if (r == "assistant") {
      if (hasCalls) message["tool_calls"] = toolCallsOf(m["tool_calls"], at + ".tool_calls");
      if (const auto rc = m.find("reasoning_content"); rc != m.end() && rc->is_string()) message["reasoning_content"] = *rc;
    }
    if (r == "tool") {  // the answer to a call: which one is required
      const auto id = m.find("tool_call_id");
      if (id == m.end() || id->is_null()) bad(at + ".tool_call_id", "is required in tool messages");
      if (!id->is_string()) bad(at + ".tool_call_id", "expected a string, got " + typeName(*id));
      if (calls.empty()) bad(at + ".role", "a tool message must answer an assistant message's tool_calls before it");
      if (std::find(calls.begin(), calls.end(), id->get<std::string>()) == calls.end())
        bad(at + ".tool_call_id", "'" + id->get<std::string>() + "' is not the id of a call in the assistant message before it");
      message["tool_call_id"] = *id;
    } else {
      calls.clear();
      if (message.contains("tool_calls"))
        for (const Json& call : message["tool_calls"]) calls.push_back(call["id"].get<std::string>());
    }
    if (const auto name = m.find("name"); name != m.end() && name->is_string()) message["name"] = *name;
    out.push_back(std::move(message));
  }
  return out;
}

// The chat template's variables: enable_thinking (the server's default, or reasoning_effort's),
// reasoning_effort, and chat_template_kwargs.
Json templateVariables(const Json& body, bool thinking) {
  Json variables = {{"enable_thinking", thinking}};
  if (const Json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) bad("chat_template_kwargs", "expected an object, got " + typeName(*kwargs));
    for (const auto& [k, v] : kwargs->items()) variables[k] = v;
  }
  if (const Json* effort = field(body, "reasoning_effort")) {
    if (!effort->is_string()) bad("reasoning_effort", "expected a string, got " + typeName(*effort));
    const std::string e = effort->get<std::string>();
    if (e != "none" && e != "minimal" && e != "low" && e != "medium" && e != "high")
      bad("reasoning_effort", "'" + e + "' is not none, minimal, low, medium or high");
    variables["enable_thinking"] = e != "none" && e != "minimal";
    variables["reasoning_effort"] = e;
  }
  return variables;
}

llm::ChatTokens textChatTokens(const Target& target, const Json& messages, const Json& tools, const Json& variables) {
  try {
    return target.model->chatTokens(messages, tools, variables);
  } catch (const Error&) {
    // A template may refuse the prefixes chatTokens renders for its marks: the whole alone.
  }
  try {
    return {target.model->tokenizer().encode(target.model->chatPrompt(messages, tools, variables), false), {}, 0};
  } catch (const Error& e) {
    bad("messages", std::string("the chat template of '") + target.name + "' failed: " + e.what());
  }
}

// A chat that shows pictures: each through the model's vision tower, its rows in place of the
// placeholder the template writes for it.
llm::ChatTokens pictureChatTokens(const Target& target, const Json& messages, const std::vector<PictureFile>& files,
                                  const Json& tools, const Json& variables, std::vector<llm::Picture>& pictures) {
  if (!target.tower)
    bad(files[0].param, "'" + target.name + "' reads no pictures (it was served without a vision tower)");
  pictures = towerPictures(files, *target.tower, target.picturePixels);
  try {
    return target.model->chatTokens(messages, tools, variables, pictures);
  } catch (const Error& e) {
    bad("messages", std::string("the chat template of '") + target.name + "' failed: " + e.what());
  }
}

bool endsInThink(const Tokenizer& tokenizer, const std::vector<TokenId>& ids) {
  const size_t n = std::min<size_t>(ids.size(), 6);
  std::string tail = tokenizer.decode(std::span<const TokenId>(ids).last(n), false);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  return tail.size() >= 7 && tail.substr(tail.size() - 7) == "<think>";
}

}  // namespace

Generation parseGeneration(const std::string& text, bool chat, const std::vector<Target>& targets, bool thinking,
                           const std::vector<std::string>& imageModels) {
  const Json body = parseBody(text);
  Generation g;
  g.chat = chat;
  const Target& target = targetOf(body, targets, imageModels, g.target);
  g.request.limit = std::numeric_limits<int64_t>::max();
  readSampling(body, chat, target, g);

  if (chat) {
    if (!field(body, "messages")) bad("messages", "is required");
    if (field(body, "prompt")) bad("prompt", "is not a field of chat completions (use messages)");
    std::vector<PictureFile> pictures;
    const Json messages = normalizeMessages(body["messages"], pictures);
    const Json variables = templateVariables(body, thinking);
    if (const Json* tools = field(body, "tools")) g.tools = toolsOf(*tools);
    readToolChoice(body, g);
    // A template that writes no tools gets them (and earlier calls and results) as text.
    const bool generic = !target.writesTools;
    const Json prompted = generic ? genericToolMessages(messages, g.tools, g.toolChoice) : messages;
    llm::ChatTokens tokens =
        pictures.empty() ? textChatTokens(target, prompted, generic ? Json::array() : g.tools, variables)
                         : pictureChatTokens(target, prompted, pictures, generic ? Json::array() : g.tools, variables,
                                             g.request.pictures);
    g.request.prompt = std::move(tokens.ids);
    for (size_t end : tokens.ends)
      if (end > 0 && end <= g.request.prompt.size() && (g.request.marks.empty() || end > g.request.marks.back()))
        g.request.marks.push_back(end);
    // The system turn with the tools: a start other chats share (a long one is kept once).
    if (tokens.head <= g.request.prompt.size()) g.request.head = tokens.head;
    g.reasoning = true;
    g.inReasoning = endsInThink(target.model->tokenizer(), g.request.prompt);
    // A reasoning model thinks freely; the response format holds from its </think> on.
    if (g.inReasoning && g.request.sampling.grammar)
      g.request.sampling.after = target.model->tokenizer().tokenToId("</think>");
  } else {
    if (field(body, "messages")) bad("messages", "is not a field of completions (use prompt, or /v1/chat/completions)");
    if (boolean(body, "echo").value_or(false)) bad("echo", "is not supported");
    if (const Json* suffix = field(body, "suffix"); suffix && !(suffix->is_string() && suffix->get<std::string>().empty()))
      bad("suffix", "is not supported");
    g.request.prompt = completionPrompt(body, target);
  }

  const auto length = static_cast<int64_t>(g.request.prompt.size());
  if (length >= target.context)
    throw ApiError(400,
                   "the prompt's " + std::to_string(length) + " tokens do not fit the " + std::to_string(target.context) +
                       "-token context of '" + target.name + "' (with room for one more)",
                   chat ? "messages" : "prompt", "context_length_exceeded");
  g.request.limit = std::min(g.request.limit, target.context - length);
  return g;
}

}  // namespace gizml::ai
