#include "server/service.h"

#include <chrono>

#include "base/log.h"
#include "server/sampling_params_json.h"
#include "server/api_error.h"
#include "server/response_format.h"

namespace fission::server {
namespace {

void SendJson(const std::shared_ptr<http::Responder>& r, int status, const Json& body) {
  r->Send(status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace

Service::Service(ServiceOptions options, engine::Engine& engine, const tokenizer::Tokenizer& tokenizer)
    : options_(std::move(options)), engine_(engine), tokenizer_(tokenizer), metrics_(options_.served_model_name) {
  if (!options_.reasoning_parser.empty()) reasoning_parser_ = ReasoningParser::Create(options_.reasoning_parser);
  if (!options_.tool_call_parser.empty()) tool_call_parser_ = ToolCallParser::Create(options_.tool_call_parser);
  try {
    chat_template_.emplace(tokenizer::ChatTemplate::ForModel(tokenizer_.config(), options_.chat_template_file));
  } catch (const Error& e) {
    if (options_.chat_template_file) throw;  // an explicit --chat-template must load
    chat_template_error_ = e.what();       // chat requests will say why they cannot run
  }
}

http::Handler Service::Route(Handler handler, bool needs_auth) {
  return [this, handler, needs_auth](const http::Request& req, std::shared_ptr<http::Responder> r) {
    try {
      if (needs_auth && !options_.api_key.empty()) {
        const std::string* auth = req.FindHeader("Authorization");
        if (auth == nullptr || *auth != "Bearer " + options_.api_key)
          throw ApiError(401, auth == nullptr ? "missing API key: send 'Authorization: Bearer <key>'"
                                              : "invalid API key");
      }
      (this->*handler)(req, r);
    } catch (const ApiError& e) {
      r->Send(e.status(), "application/json", ErrorBody(e.status(), e.what(), e.param()));
    } catch (const Error& e) {
      r->Send(400, "application/json", ErrorBody(400, e.what()));
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "internal error on ", req.path, ": ", e.what());
      r->Send(500, "application/json", ErrorBody(500, StrCat("internal error: ", e.what())));
    }
  };
}

void Service::Register(http::HttpServer& server) {
  server.AddRoute("POST", "/v1/completions", Route(&Service::Completions, true));
  server.AddRoute("POST", "/v1/chat/completions", Route(&Service::ChatCompletions, true));
  server.AddRoute("POST", "/generate", Route(&Service::Generate, true));
  server.AddRoute("GET", "/v1/models", Route(&Service::Models, true));
  server.AddRoute("GET", "/get_model_info", Route(&Service::ModelInfo, true));
  server.AddRoute("GET", "/get_server_info", Route(&Service::ServerInfo, true));
  server.AddRoute("GET", "/health", Route(&Service::Health, false));
  server.AddRoute("GET", "/health_generate", Route(&Service::HealthGenerate, false));
  server.AddRoute("GET", "/metrics", Route(&Service::MetricsText, false));
  server.AddRoute("POST", "/flush_cache", Route(&Service::FlushCache, true));
  server.AddRoute("GET", "/flush_cache", Route(&Service::FlushCache, true));
  server.AddRoute("POST", "/abort_request", Route(&Service::AbortRequest, true));
}

void Service::CheckModel(const std::string& model) const {
  if (!model.empty() && model != options_.served_model_name && model != options_.model_path)
    throw ApiError(404, StrCat("the model '", model, "' does not exist; this server serves '",
                               options_.served_model_name, "'"), "model");
  if (metrics_.in_flight() >= options_.max_pending_requests)
    throw ApiError(503, StrCat("the server is overloaded (", options_.max_pending_requests,
                               " requests pending); retry later"));
}

void Service::CheckContext(std::size_t prompt_tokens, std::int64_t max_new_tokens) const {
  const std::int64_t context = engine_.context_length();
  if (prompt_tokens == 0) BadRequest("the prompt is empty");
  if (static_cast<std::int64_t>(prompt_tokens) + max_new_tokens > context)
    throw ApiError(400, StrCat("This model's maximum context length is ", context, " tokens. However, you requested ",
                               static_cast<std::int64_t>(prompt_tokens) + max_new_tokens, " tokens (",
                               prompt_tokens, " in the prompt, ", max_new_tokens,
                               " for the completion). Please reduce the prompt or max_tokens."),
                   "max_tokens");
}

void Service::CheckTokenIds(const std::vector<std::int32_t>& ids, const char* field) const {
  for (std::int32_t id : ids)
    if (id < 0 || id >= engine_.vocab_size())
      throw ApiError(400, StrCat("'", field, "' holds token id ", id, " outside the vocabulary of ",
                                 engine_.vocab_size()), field);
}

void Service::Completions(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  CompletionRequest request = ParseCompletionRequest(req.body);
  CheckModel(request.model);
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::string> texts;
  for (const PromptInput& p : request.prompts) {
    prompts.push_back(p.is_text ? tokenizer_.Encode(p.text, true) : p.ids);
    CheckTokenIds(prompts.back(), "prompt");
    CheckContext(prompts.back().size(), request.params.max_new_tokens);
    texts.push_back(p.is_text ? p.text : tokenizer_.Decode(p.ids, false));
  }
  auto job = std::make_shared<CompletionJob>(engine_, metrics_, r, tokenizer_,
                                             request.model.empty() ? options_.served_model_name : request.model,
                                             request, std::move(texts));
  job->Submit(prompts, request.params);
}

std::string Service::RenderChat(const ChatRequest& request) const {
  if (!chat_template_) BadRequest("this model has no chat template (", chat_template_error_,
                                  "); pass --chat-template FILE or use /v1/completions");
  tokenizer::ChatRenderOptions render;
  render.add_generation_prompt = !request.continue_final_message;
  if (!(request.tool_choice.is_string() && request.tool_choice == "none")) render.tools = request.tools;
  render.extra = request.chat_template_kwargs;
  if (!request.response_format.is_null()) render.extra["response_format"] = request.response_format;
  try {
    std::string text = chat_template_->Apply(request.messages, render, tokenizer_.config());
    if (request.continue_final_message) {
      // Continue the last assistant message: drop whatever the template closed it with.
      const OrderedJson& last = request.messages.back();
      if (last.contains("content") && last["content"].is_string()) {
        const std::string content = last["content"].get<std::string>();
        const std::size_t at = text.rfind(content);
        if (at != std::string::npos) text.resize(at + content.size());
      }
    }
    return text;
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, StrCat("the chat template failed: ", e.what()), "messages");
  }
}

SplitterFactory Service::SplittersFor(const ChatRequest& request) const {
  const ReasoningParser* reasoning = request.separate_reasoning ? reasoning_parser_.get() : nullptr;
  const bool tools_offered = request.tools.is_array() && !request.tools.empty() &&
                             !(request.tool_choice.is_string() && request.tool_choice == "none");
  const ToolCallParser* tools = tools_offered ? tool_call_parser_.get() : nullptr;
  if (!reasoning && !tools) return MakePlainSplitter;
  const Json kwargs = Json::parse(request.chat_template_kwargs.dump());
  const bool in_reasoning = reasoning && reasoning->StartsInReasoning(kwargs);
  std::vector<ToolSpec> specs;
  if (tools) {
    try {
      specs = ToolSpecsFromJson(Json::parse(request.tools.dump()));
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "tools");
    }
  }
  const bool stream_reasoning = request.stream_reasoning;
  return [reasoning, in_reasoning, stream_reasoning, tools, specs] {
    static std::atomic<std::uint64_t> next_seed{0x5eed};
    return MakeParsedSplitter(reasoning, in_reasoning, stream_reasoning, tools, specs, next_seed++);
  };
}

void Service::ChatCompletions(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  ChatRequest request = ParseChatRequest(req.body);
  CheckModel(request.model);
  const std::vector<std::int32_t> prompt = tokenizer_.Encode(RenderChat(request), false);
  if (!request.max_tokens_given)
    request.params.max_new_tokens =
        static_cast<std::int32_t>(std::max<std::int64_t>(0, engine_.context_length() - static_cast<std::int64_t>(prompt.size())));
  CheckContext(prompt.size(), request.params.max_new_tokens);
  auto job = std::make_shared<ChatJob>(engine_, metrics_, r, tokenizer_,
                                       request.model.empty() ? options_.served_model_name : request.model, request,
                                       request.params.n, SplittersFor(request));
  job->Submit({prompt}, request.params);
}

void Service::Generate(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const Json body = ParseJson(req.body, "request body");
  if (!body.is_object()) BadRequest("request body must be a JSON object");
  engine::SamplingParams defaults;
  engine::SamplingParams params = body.contains("sampling_params") && !body["sampling_params"].is_null()
                                      ? ParseSamplingParamsJson(body["sampling_params"], "sampling_params", defaults)
                                      : defaults;
  std::vector<std::vector<std::int32_t>> prompts;
  bool batch = false;
  if (body.contains("input_ids") && !body["input_ids"].is_null()) {
    const Json& ids = body["input_ids"];
    if (!ids.is_array() || ids.empty()) BadRequest("'input_ids' must be a non-empty array");
    batch = ids[0].is_array();
    for (const Json& p : batch ? ids : Json::array({ids})) {
      if (!p.is_array()) BadRequest("'input_ids' must be token ids or a list of them");
      std::vector<std::int32_t> prompt;
      for (const Json& id : p) {
        if (!id.is_number_integer()) BadRequest("'input_ids' entries must be integers");
        prompt.push_back(id.get<std::int32_t>());
      }
      prompts.push_back(std::move(prompt));
    }
  } else if (body.contains("text") && !body["text"].is_null()) {
    const Json& text = body["text"];
    batch = text.is_array();
    for (const Json& t : batch ? text : Json::array({text})) {
      if (!t.is_string()) BadRequest("'text' must be a string or a list of strings");
      prompts.push_back(tokenizer_.Encode(t.get<std::string>(), true));
    }
  } else {
    BadRequest("either 'text' or 'input_ids' is required");
  }
  const bool return_logprob = GetBool(body, "return_logprob", "request body", false);
  if (return_logprob) {
    params.logprobs = true;
    params.top_logprobs = static_cast<std::int32_t>(GetInt(body, "top_logprobs_num", "request body", 0));
  }
  for (const auto& p : prompts) {
    CheckTokenIds(p, "input_ids");
    CheckContext(p.size(), params.max_new_tokens);
  }
  if (batch && params.n > 1) BadRequest("'n' > 1 with a batch of prompts is not supported on /generate");
  const std::string rid = body.contains("rid") && body["rid"].is_string() ? body["rid"].get<std::string>() : "";
  auto job = std::make_shared<GenerateJob>(engine_, metrics_, r, GetBool(body, "stream", "request body", false),
                                           batch || params.n > 1, return_logprob, rid);
  job->Submit(prompts, params);
  if (!rid.empty()) {
    std::lock_guard<std::mutex> lock(rids_mutex_);
    rids_[rid] = job;
  }
}

void Service::Models(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  Json model = {{"id", options_.served_model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "fission"},
                {"root", options_.model_path}, {"max_model_len", engine_.context_length()}};
  SendJson(r, 200, {{"object", "list"}, {"data", Json::array({model})}});
}

void Service::ModelInfo(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  SendJson(r, 200, {{"model_path", options_.model_path}, {"tokenizer_path", options_.tokenizer_path},
                    {"served_model_name", options_.served_model_name}, {"is_generation", true},
                    {"context_length", engine_.context_length()}});
}

void Service::ServerInfo(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  Json info = options_.server_info;
  const engine::EngineStats s = engine_.stats();
  info["internal_states"] = Json::array({{{"num_running_reqs", s.running}, {"num_queue_reqs", s.waiting},
                                          {"kv_pages_total", engine_.num_pages()}, {"kv_pages_free", s.free_pages}}});
  SendJson(r, 200, info);
}

void Service::Health(const http::Request&, const std::shared_ptr<http::Responder>& r) { r->Send(200, "text/plain", ""); }

void Service::HealthGenerate(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  // One greedy token through the whole path proves the engine is alive.
  engine::SamplingParams params;
  params.temperature = 0.0;
  params.max_new_tokens = 1;
  auto job = std::make_shared<GenerateJob>(engine_, metrics_, r, false, false, false, "");
  const std::vector<std::int32_t> prompt = {tokenizer_.bos_token_id().value_or(0)};
  job->Submit({prompt}, params);
}

void Service::MetricsText(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  r->Send(200, "text/plain; version=0.0.4", metrics_.Render(engine_));
}

void Service::FlushCache(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  engine_.RequestFlushCache();
  r->Send(200, "text/plain", "Cache flushed.\n");
}

void Service::AbortRequest(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const Json body = ParseJson(req.body.empty() ? "{}" : req.body, "request body");
  const std::string rid = GetString(body, "rid", "request body", "");
  const bool abort_all = GetBool(body, "abort_all", "request body", false);
  std::vector<std::shared_ptr<ApiJob>> jobs;
  {
    std::lock_guard<std::mutex> lock(rids_mutex_);
    for (auto it = rids_.begin(); it != rids_.end();) {
      auto job = it->second.lock();
      if (!job) {
        it = rids_.erase(it);
        continue;
      }
      if (abort_all || it->first == rid) jobs.push_back(job);
      ++it;
    }
  }
  for (auto& job : jobs) job->Abort();
  SendJson(r, 200, {{"aborted", jobs.size()}});
}

}  // namespace fission::server
