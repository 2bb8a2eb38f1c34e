#include "server/request_decoding.h"

#include <algorithm>

#include "server/api_error.h"
#include "server/tool_call_grammar.h"

namespace fission::server {
namespace {

// As SGLang: a request may name any model (recipes hand the checkpoint's hub id to their clients)
// and its answer carries the name it sent; without one it gets the served name. Only a name no
// client would send is refused.
std::string ModelName(const std::string& requested, const RouteContext& c) {
  if (requested.size() > kMaxModelNameBytes)
    throw ApiError(400, StrCat("the model '", Abbreviate(requested), "' is a name longer than ", kMaxModelNameBytes,
                               " bytes"), "model");
  return requested.empty() ? c.served_model_name : requested;
}

void CheckChoices(std::size_t prompts, std::int32_t n) {
  if (prompts * static_cast<std::size_t>(std::max(n, 1)) > kMaxChoicesPerRequest)
    BadRequest("the request asks for ", prompts, " prompts x ", n, " completions; at most ", kMaxChoicesPerRequest,
               " completions per request");
}

std::vector<std::int32_t> Tokenize(const std::string& text, bool add_special_tokens, const RouteContext& c,
                                   const char* field) {
  if (text.size() > c.max_prompt_bytes)
    throw ApiError(400, StrCat("the prompt text of '", field, "' is ", text.size(),
                               " bytes; this server tokenizes at most ", c.max_prompt_bytes,
                               " bytes of text for its context of ", c.context_length, " tokens"),
                   field);
  return c.tokenizer->Encode(text, add_special_tokens);
}

void CheckTokenIds(const std::vector<std::int32_t>& ids, const RouteContext& c, const char* field) {
  for (std::int32_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      throw ApiError(400, StrCat("'", field, "' holds token id ", id, " outside the vocabulary of ", c.vocab_size),
                     field);
}

// 400 with both numbers when prompt + max_new_tokens exceeds the context.
void CheckContext(std::size_t prompt_tokens, std::int64_t max_new_tokens, const RouteContext& c) {
  if (prompt_tokens == 0) BadRequest("the prompt is empty");
  const std::int64_t total = static_cast<std::int64_t>(prompt_tokens) + max_new_tokens;
  if (total > c.context_length)
    throw ApiError(400, StrCat("This model's maximum context length is ", c.context_length,
                               " tokens. However, you requested ", total, " tokens (", prompt_tokens,
                               " in the prompt, ", max_new_tokens,
                               " for the completion). Please reduce the prompt or max_tokens."),
                   "max_tokens");
}

std::string RenderChat(const ChatRequest& request, const RouteContext& c) {
  if (c.chat_template == nullptr)
    BadRequest("this model has no chat template (", c.chat_template_error,
               "); pass --chat-template FILE or use /v1/completions");
  tokenizer::ChatRenderOptions render;
  render.add_generation_prompt = !request.continue_final_message;
  if (!(request.tool_choice.is_string() && request.tool_choice == "none")) render.tools = request.tools;
  render.extra = request.chat_template_kwargs;
  if (!request.response_format.is_null()) render.extra["response_format"] = request.response_format;
  try {
    std::string text = c.chat_template->Apply(request.messages, render, c.tokenizer->config());
    if (request.continue_final_message) {
      // Continue the last assistant message: drop whatever the template closed it with.
      const OrderedJson& last = request.messages.back();
      if (last.contains("content") && last["content"].is_string()) {
        const std::string& content = last["content"].get_ref<const std::string&>();
        const std::size_t at = text.rfind(content);
        if (at != std::string::npos) text.resize(at + content.size());
      }
    }
    return text;
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, StrCat("the chat template failed: ", Abbreviate(e.what(), 512)), "messages");
  }
}

std::vector<ToolSpec> ChatTools(const ChatRequest& request, const RouteContext& c) {
  const bool offered = request.tools.is_array() && !request.tools.empty() &&
                       !(request.tool_choice.is_string() && request.tool_choice == "none");
  if (!offered || !c.parses_tool_calls) return {};
  try {
    return ToolSpecsFromJson(Json::parse(request.tools.dump()));
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "tools");
  }
}

bool ForcesToolCalls(const ChatRequest& r) {
  return r.tool_choice.is_object() || (r.tool_choice.is_string() && r.tool_choice == "required");
}

// The forced tool calls as a constraint: the parser's markup around the offered tools' calls.
ConstraintSpec ToolCallsSpec(const ChatRequest& r, const RouteContext& c) {
  if (!r.tools.is_array() || r.tools.empty())
    throw ApiError(400, "'tool_choice' required or a named function needs 'tools'", "tool_choice");
  if (!c.parses_tool_calls)
    throw ApiError(400, "'tool_choice' required or a named function needs --tool-call-parser (the server parses the "
                        "calls it forces)", "tool_choice");
  if (!ToolCallGrammarSupports(c.tool_call_parser))
    throw ApiError(400, StrCat("'tool_choice' required or a named function is not enforced for --tool-call-parser ",
                               c.tool_call_parser),
                   "tool_choice");
  OrderedJson name = nullptr;
  if (r.tool_choice.is_object()) {
    const OrderedJson& n = r.tool_choice["function"]["name"];
    if (!n.is_string()) throw ApiError(400, "'tool_choice.function.name' must be a string", "tool_choice");
    name = n;
  }
  OrderedJson tools = OrderedJson::array();
  bool offered = name.is_null();
  for (const OrderedJson& t : r.tools) {
    const OrderedJson& f = t["function"];
    tools.push_back({{"name", f["name"]}, {"parameters", f.contains("parameters") ? f["parameters"] : OrderedJson()}});
    offered |= f["name"] == name;
  }
  if (!offered)
    throw ApiError(400, StrCat("'tool_choice' names the function '", Abbreviate(name.get<std::string>()),
                               "', which 'tools' does not offer"), "tool_choice");
  const OrderedJson description = {
      {"parser", c.tool_call_parser}, {"tools", tools}, {"name", name}, {"parallel", r.parallel_tool_calls}};
  return {"tool_calls", description.dump(), "tool_choice", ""};
}

engine::SamplingParams::ConstraintPtr Compile(const ConstraintSpec& spec, const RouteContext& c) {
  if (c.structured_outputs == nullptr)
    throw ApiError(400, StrCat("'", spec.field, "' asks for structured outputs, which this server has turned off "
                               "(--grammar-backend none)"), spec.field);
  return c.structured_outputs->Constraint(spec);
}

// The chat output's constraint: its own fields or the forced tool calls, after the reasoning
// block when the chat template opened one.
void ChatConstraint(DecodedChat* d, const RouteContext& c) {
  ChatRequest& r = d->request;
  std::optional<ConstraintSpec> spec = r.constraint;
  if (ForcesToolCalls(r)) {
    if (spec)
      throw ApiError(400, StrCat("'tool_choice' and '", spec->field, "' cannot both constrain the output"), "tool_choice");
    spec = ToolCallsSpec(r, c);
  }
  if (!spec) return;
  if (c.reasoning_parser != nullptr && r.separate_reasoning &&
      c.reasoning_parser->StartsInReasoning(Json::parse(r.chat_template_kwargs.dump())))
    spec->reasoning_end = c.reasoning_parser->think_end();
  r.params.constraint = Compile(*spec, c);
}

}  // namespace

std::size_t MaxPromptBytes(const tokenizer::Tokenizer& tokenizer, std::int64_t context_length) {
  std::size_t longest = 1;
  for (std::int64_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (const auto token = tokenizer.IdToToken(static_cast<std::int32_t>(id))) longest = std::max(longest, token->size());
  return 2 * longest * static_cast<std::size_t>(std::max<std::int64_t>(context_length, 1));
}

DecodedCompletion DecodeCompletion(const std::string& body, const RouteContext& c) {
  DecodedCompletion d;
  d.request = ParseCompletionRequest(body);
  d.model = ModelName(d.request.model, c);
  CheckChoices(d.request.prompts.size(), d.request.params.n);
  for (const PromptInput& p : d.request.prompts) {
    d.prompts.push_back(p.is_text ? Tokenize(p.text, true, c, "prompt") : p.ids);
    CheckTokenIds(d.prompts.back(), c, "prompt");
    CheckContext(d.prompts.back().size(), d.request.params.max_new_tokens, c);
    d.texts.push_back(p.is_text ? p.text : c.tokenizer->Decode(p.ids, false));
  }
  if (d.request.constraint) d.request.params.constraint = Compile(*d.request.constraint, c);
  return d;
}

DecodedChat DecodeChat(const std::string& body, const RouteContext& c) {
  DecodedChat d;
  d.request = ParseChatRequest(body);
  d.model = ModelName(d.request.model, c);
  // As SGLang passes it to a template: the request's reasoning_effort, under its own kwargs and
  // over the environment's default.
  if (!d.request.reasoning_effort.is_null() && !d.request.chat_template_kwargs.contains("reasoning_effort"))
    d.request.chat_template_kwargs["reasoning_effort"] = d.request.reasoning_effort;
  for (const auto& [key, value] : c.default_chat_template_kwargs.items())
    if (!d.request.chat_template_kwargs.contains(key)) d.request.chat_template_kwargs[key] = value;
  CheckChoices(1, d.request.params.n);
  d.tools = ChatTools(d.request, c);
  d.prompt = Tokenize(RenderChat(d.request, c), false, c, "messages");
  if (!d.request.max_tokens_given) {
    // Up to the rest of the context, and never more than the KV cache could hold with the prompt.
    const std::int64_t prompt = static_cast<std::int64_t>(d.prompt.size());
    const std::int64_t room = std::min(c.context_length - prompt, c.kv_capacity_tokens - prompt + 1);
    d.request.params.max_new_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(0, room));
  }
  CheckContext(d.prompt.size(), d.request.params.max_new_tokens, c);
  ChatConstraint(&d, c);
  return d;
}

DecodedGenerate DecodeGenerate(const std::string& body, const RouteContext& c) {
  DecodedGenerate d;
  d.request = ParseGenerateRequest(body);
  CheckChoices(d.request.num_prompts(), d.request.params.n);
  if (d.request.is_text) {
    for (const std::string& text : d.request.texts) d.prompts.push_back(Tokenize(text, true, c, "text"));
  } else {
    d.prompts = d.request.input_ids;
  }
  for (const auto& p : d.prompts) {
    CheckTokenIds(p, c, "input_ids");
    CheckContext(p.size(), d.request.params.max_new_tokens, c);
  }
  if (d.request.constraint) d.request.params.constraint = Compile(*d.request.constraint, c);
  return d;
}

}  // namespace fission::server
