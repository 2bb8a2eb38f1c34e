#include "server/openai_protocol.h"

#include <limits>

#include "base/json.h"
#include "server/api_error.h"
#include "server/string_fields.h"

namespace fission::server {
namespace {

OrderedJson ParseBody(const std::string& body) {
  OrderedJson json;
  try {
    json = ParseOrderedJson(body, "request body");
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
  if (!json.is_object()) BadRequest("request body must be a JSON object");
  return json;
}

const OrderedJson* Field(const OrderedJson& body, const char* key) {
  auto it = body.find(key);
  return (it == body.end() || it->is_null()) ? nullptr : &*it;
}

double Number(const OrderedJson& body, const char* key, double fallback, double lo, double hi) {
  const OrderedJson* v = Field(body, key);
  if (!v) return fallback;
  if (!v->is_number()) throw ApiError(400, StrCat("'", key, "' must be a number, got ", JsonPreview(*v)), key);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) throw ApiError(400, StrCat("'", key, "' must be in [", lo, ", ", hi, "], got ", d), key);
  return d;
}

std::int64_t Integer(const OrderedJson& body, const char* key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  const OrderedJson* v = Field(body, key);
  if (!v) return fallback;
  const std::optional<std::int64_t> i = ExactInt64(*v);
  if (!i || *i < lo || *i > hi)
    throw ApiError(400, StrCat("'", key, "' must be an integer in [", lo, ", ", hi, "], got ", JsonPreview(*v)), key);
  return *i;
}

bool Boolean(const OrderedJson& body, const char* key, bool fallback) {
  const OrderedJson* v = Field(body, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw ApiError(400, StrCat("'", key, "' must be true or false, got ", JsonPreview(*v)), key);
  return v->get<bool>();
}

std::string String(const OrderedJson& body, const char* key, const std::string& fallback) {
  const OrderedJson* v = Field(body, key);
  if (!v) return fallback;
  if (!v->is_string()) throw ApiError(400, StrCat("'", key, "' must be a string, got ", JsonPreview(*v)), key);
  return v->get<std::string>();
}

std::vector<std::int32_t> TokenIds(const OrderedJson& v, const std::string& where) {
  std::vector<std::int32_t> ids;
  ids.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const OrderedJson& e = v[i];
    const std::optional<std::int64_t> id = e.is_number_integer() ? ExactInt64(e) : std::nullopt;
    if (!id || *id < 0 || *id > std::numeric_limits<std::int32_t>::max())
      throw ApiError(400, StrCat("'", where, "[", i, "]' must be a token id (an integer in [0, 2^31)), got ",
                                 JsonPreview(e)), where);
    ids.push_back(static_cast<std::int32_t>(*id));
  }
  return ids;
}

std::vector<PromptInput> Prompts(const OrderedJson& body) {
  const OrderedJson* p = Field(body, "prompt");
  if (!p) throw ApiError(400, "'prompt' is required", "prompt");
  std::vector<PromptInput> prompts;
  if (p->is_string()) {
    prompts.push_back({true, p->get<std::string>(), {}});
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    prompts.push_back({false, "", TokenIds(*p, "prompt")});
  } else if (p->is_array() && !p->empty()) {
    for (std::size_t i = 0; i < p->size(); ++i) {
      const OrderedJson& e = (*p)[i];
      if (e.is_string()) {
        prompts.push_back({true, e.get<std::string>(), {}});
      } else if (e.is_array() && !e.empty()) {
        prompts.push_back({false, "", TokenIds(e, StrCat("prompt[", i, "]"))});
      } else {
        throw ApiError(400, StrCat("'prompt[", i, "]' must be a string or a non-empty array of token ids"), "prompt");
      }
    }
  } else {
    throw ApiError(400, "'prompt' must be a string, an array of strings, token ids or arrays of token ids",
                   "prompt");
  }
  return prompts;
}

std::vector<std::string> StopStrings(const OrderedJson& body) {
  const OrderedJson* v = Field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw ApiError(400, "'stop' must be a string or an array of strings", "stop");
  std::vector<std::string> stops;
  for (const OrderedJson& s : *v) {
    if (!s.is_string()) throw ApiError(400, "'stop' entries must be strings", "stop");
    if (!s.get<std::string>().empty()) stops.push_back(s.get<std::string>());
  }
  return stops;
}

StreamOptions Streaming(const OrderedJson& body) {
  StreamOptions s;
  s.stream = Boolean(body, "stream", false);
  if (const OrderedJson* o = Field(body, "stream_options")) {
    if (!o->is_object()) throw ApiError(400, "'stream_options' must be an object", "stream_options");
    s.include_usage = Boolean(*o, "include_usage", false);
    s.continuous_usage_stats = Boolean(*o, "continuous_usage_stats", false);
  }
  return s;
}

void RejectUnsupported(const OrderedJson& body) {
  if (Field(body, "lora_path")) throw ApiError(400, "'lora_path' (adapters) is not supported", "lora_path");
  if (const OrderedJson* b = Field(body, "logit_bias"); b && !(b->is_object() && b->empty()))
    throw ApiError(400, "'logit_bias' is not supported", "logit_bias");
  if (const OrderedJson* s = Field(body, "suffix"); s && !(s->is_string() && s->get<std::string>().empty()))
    throw ApiError(400, "'suffix' is not supported", "suffix");
}

// The sampling fields shared by both routes: OpenAI's names plus SGLang's extras.
engine::SamplingParams Sampling(const OrderedJson& body) {
  engine::SamplingParams p;
  p.temperature = Number(body, "temperature", 1.0, 0.0, 1e6);
  p.top_p = Number(body, "top_p", 1.0, 0.0, 1.0);
  p.top_k = static_cast<std::int32_t>(Integer(body, "top_k", -1, -1, std::numeric_limits<std::int32_t>::max()));
  p.min_p = Number(body, "min_p", 0.0, 0.0, 1.0);
  p.n = static_cast<std::int32_t>(Integer(body, "n", 1, 1, 128));
  if (const OrderedJson* best_of = Field(body, "best_of"); best_of && Integer(body, "best_of", 1, 1, 128) != p.n)
    throw ApiError(400, "'best_of' different from 'n' is not supported", "best_of");
  p.stop = StopStrings(body);
  if (const OrderedJson* ids = Field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw ApiError(400, "'stop_token_ids' must be an array of token ids", "stop_token_ids");
    p.stop_token_ids = TokenIds(*ids, "stop_token_ids");
  }
  if (Field(body, "seed"))
    p.seed = static_cast<std::uint64_t>(Integer(body, "seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
  p.presence_penalty = Number(body, "presence_penalty", 0.0, -2.0, 2.0);
  p.frequency_penalty = Number(body, "frequency_penalty", 0.0, -2.0, 2.0);
  p.repetition_penalty = Number(body, "repetition_penalty", 1.0, 1e-6, 1e6);
  p.min_new_tokens = static_cast<std::int32_t>(Integer(body, "min_tokens", 0, 0, std::numeric_limits<std::int32_t>::max()));
  p.ignore_eos = Boolean(body, "ignore_eos", false);
  return p;
}

std::string Model(const OrderedJson& body) { return String(body, "model", ""); }

// SGLang's `rid`: a string, or a list of strings (one per prompt); /abort_request finds requests by it.
std::vector<std::string> Rids(const OrderedJson& body) {
  const OrderedJson* rid = Field(body, "rid");
  if (!rid) return {};
  std::optional<std::vector<std::string>> rids = StringOrStrings(*rid);
  if (!rids) throw ApiError(400, "'rid' must be a string or a list of strings", "rid");
  return *rids;
}

// The output's constraint (structured outputs): SGLang's extra fields and response_format.
std::optional<ConstraintSpec> Constraint(const OrderedJson& body) {
  try {
    return ReadConstraintFields(body, "", true);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
}

// A content given as parts (what the OpenAI SDKs send: [{"type": "text", "text": ...}]) becomes the
// string the chat templates expect: the text parts joined with newlines, as the reference servers
// join them. This model reads text only, so any other part type is refused.
void JoinTextParts(OrderedJson* message, std::size_t index) {
  if (!message->contains("content") || !(*message)["content"].is_array()) return;
  const OrderedJson& parts = (*message)["content"];
  std::string text;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const OrderedJson& part = parts[j];
    const std::string where = StrCat("messages[", index, "].content[", j, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw ApiError(400, StrCat("'", where, "' must be an object with a string 'type'"), "messages");
    const std::string type = part["type"].get<std::string>();
    if (type != "text")
      throw ApiError(400, StrCat("'", where, "' is a part of type '", Abbreviate(type),
                                 "'; this model reads text only (parts of type 'text')"), "messages");
    if (!part.contains("text") || !part["text"].is_string())
      throw ApiError(400, StrCat("'", where, ".text' must be a string"), "messages");
    if (j > 0) text += '\n';
    text += part["text"].get_ref<const std::string&>();
  }
  (*message)["content"] = text;
}

}  // namespace

CompletionRequest ParseCompletionRequest(const std::string& body_text) {
  const OrderedJson body = ParseBody(body_text);
  RejectUnsupported(body);
  CompletionRequest r;
  r.model = Model(body);
  r.rids = Rids(body);
  r.prompts = Prompts(body);
  r.params = Sampling(body);
  r.params.max_new_tokens =
      static_cast<std::int32_t>(Integer(body, "max_tokens", 16, 0, std::numeric_limits<std::int32_t>::max()));
  r.echo = Boolean(body, "echo", false);
  if (Field(body, "logprobs")) {
    if (body["logprobs"].is_boolean()) {
      r.logprobs = body["logprobs"].get<bool>() ? 0 : -1;
    } else {
      r.logprobs = static_cast<int>(Integer(body, "logprobs", -1, 0, engine::kMaxTopLogprobs));
    }
  }
  r.params.logprobs = r.logprobs >= 0;
  r.params.top_logprobs = std::max(r.logprobs, 0);
  r.params.prompt_logprobs = r.echo && r.logprobs >= 0;
  r.skip_special_tokens = Boolean(body, "skip_special_tokens", true);
  r.stream = Streaming(body);
  r.constraint = Constraint(body);
  return r;
}

ChatRequest ParseChatRequest(const std::string& body_text) {
  const OrderedJson body = ParseBody(body_text);
  RejectUnsupported(body);
  ChatRequest r;
  r.model = Model(body);
  r.rids = Rids(body);
  const OrderedJson* messages = Field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty())
    throw ApiError(400, "'messages' must be a non-empty array", "messages");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const OrderedJson& m = (*messages)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw ApiError(400, StrCat("'messages[", i, "]' must be an object with a string 'role'"), "messages");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer")
      throw ApiError(400, StrCat("'messages[", i, "].role' must be system, user, assistant, tool or developer, got '",
                                 Abbreviate(role), "'"), "messages");
    if (m.contains("content") && !m["content"].is_null() && !m["content"].is_string() && !m["content"].is_array())
      throw ApiError(400, StrCat("'messages[", i, "].content' must be a string or an array of parts"), "messages");
  }
  r.messages = *messages;
  for (std::size_t i = 0; i < r.messages.size(); ++i) JoinTextParts(&r.messages[i], i);
  if (const OrderedJson* tools = Field(body, "tools")) {
    if (!tools->is_array()) throw ApiError(400, "'tools' must be an array", "tools");
    for (std::size_t i = 0; i < tools->size(); ++i) {
      const OrderedJson& t = (*tools)[i];
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
          !t["function"]["name"].is_string())
        throw ApiError(400, StrCat("'tools[", i, "]' must be {\"type\": \"function\", \"function\": {\"name\": ...}}"),
                       "tools");
    }
    if (!tools->empty()) r.tools = *tools;
  }
  if (const OrderedJson* choice = Field(body, "tool_choice")) {
    const bool word = choice->is_string() && (*choice == "none" || *choice == "auto" || *choice == "required");
    const bool named = choice->is_object() && choice->contains("function") && (*choice)["function"].is_object() &&
                       (*choice)["function"].contains("name");
    if (!word && !named)
      throw ApiError(400, "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}",
                     "tool_choice");
    r.tool_choice = *choice;
  }
  r.parallel_tool_calls = Boolean(body, "parallel_tool_calls", true);
  if (const OrderedJson* format = Field(body, "response_format")) {
    if (!format->is_object()) throw ApiError(400, "'response_format' must be an object", "response_format");
    r.response_format = *format;
  }
  if (const OrderedJson* kwargs = Field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw ApiError(400, "'chat_template_kwargs' must be an object", "chat_template_kwargs");
    r.chat_template_kwargs = *kwargs;
  }
  if (const OrderedJson* effort = Field(body, "reasoning_effort"); effort != nullptr && !effort->is_null()) {
    if (!effort->is_string()) throw ApiError(400, "'reasoning_effort' must be a string", "reasoning_effort");
    r.reasoning_effort = *effort;
  }
  r.params = Sampling(body);
  const char* max_key = Field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (Field(body, max_key)) {
    r.params.max_new_tokens =
        static_cast<std::int32_t>(Integer(body, max_key, 0, 0, std::numeric_limits<std::int32_t>::max()));
    r.max_tokens_given = true;
  }
  r.logprobs = Boolean(body, "logprobs", false);
  r.top_logprobs = static_cast<int>(Integer(body, "top_logprobs", 0, 0, engine::kMaxTopLogprobs));
  if (r.top_logprobs > 0 && !r.logprobs) throw ApiError(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs");
  r.params.logprobs = r.logprobs;
  r.params.top_logprobs = r.top_logprobs;
  r.skip_special_tokens = Boolean(body, "skip_special_tokens", true);
  r.separate_reasoning = Boolean(body, "separate_reasoning", true);
  r.stream_reasoning = Boolean(body, "stream_reasoning", true);
  r.continue_final_message = Boolean(body, "continue_final_message", false);
  r.stream = Streaming(body);
  r.constraint = Constraint(body);
  return r;
}

}  // namespace fission::server
