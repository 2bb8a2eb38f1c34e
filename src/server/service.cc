#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/log.h"
#include "server/api_error.h"
#include "server/api_key.h"
#include "server/response_format.h"

namespace fission::server {
namespace {

void SendError(const std::shared_ptr<http::Responder>& r, int status, const std::string& message,
               const std::string& param = "") {
  r->Send(status, "application/json", ErrorBody(status, message, param));
}

// Runs `body`, turning what it throws into a JSON error: an ApiError's own status, 400 for any
// other fission::Error (the client's input), 500 for anything else (our fault, logged).
template <typename F>
void AnswerErrors(const http::Request& req, const std::shared_ptr<http::Responder>& r, F&& body) {
  try {
    body();
  } catch (const ApiError& e) {
    SendError(r, e.status(), e.what(), e.param());
  } catch (const Error& e) {
    SendError(r, 400, e.what());
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "internal error on ", req.path, ": ", e.what());
    SendError(r, 500, StrCat("internal error: ", e.what()));
  }
}

int DecodeThreads(int requested) {
  if (requested > 0) return requested;
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 4, 2, 8);
}

// Cancelled requests normally answer within a step; this bounds the wait for a stuck one.
constexpr auto kCancelledAnswerWait = std::chrono::seconds(5);

}  // namespace

void Service::SendJson(const std::shared_ptr<http::Responder>& r, int status, const Json& body) {
  r->Send(status, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace));
}

Service::Service(ServiceOptions options, engine::Engine& engine, const tokenizer::Tokenizer& tokenizer)
    : options_(std::move(options)),
      engine_(engine),
      tokenizer_(tokenizer),
      metrics_(options_.served_model_name),
      tracker_(options_.max_pending_requests),
      work_(DecodeThreads(options_.decode_threads)) {
  if (!options_.reasoning_parser.empty()) reasoning_parser_ = ReasoningParser::Create(options_.reasoning_parser);
  if (!options_.tool_call_parser.empty()) tool_call_parser_ = ToolCallParser::Create(options_.tool_call_parser);
  RouteContext& c = route_context_;
  try {
    chat_template_ =
        tokenizer::ChatRendererForModel(tokenizer_.config(), options_.chat_template_file, options_.model_type);
    c.chat_template = chat_template_.get();
  } catch (const Error& e) {
    if (options_.chat_template_file) throw;  // an explicit --chat-template must load
    c.chat_template_error = e.what();        // chat requests will say why they cannot run
  }
  c.tokenizer = &tokenizer_;
  c.served_model_name = options_.served_model_name;
  c.model_path = options_.model_path;
  c.parses_tool_calls = tool_call_parser_ != nullptr;
  c.tool_call_parser = options_.tool_call_parser;
  c.reasoning_parser = reasoning_parser_.get();
  if (options_.grammar_backend != "none") {
    structured_outputs_ = std::make_unique<StructuredOutputs>(tokenizer_, engine_.vocab_size());
    c.structured_outputs = structured_outputs_.get();
  }
  c.context_length = engine_.context_length();
  c.vocab_size = engine_.vocab_size();
  c.kv_capacity_tokens = engine_.kv_capacity_tokens();
  c.max_prompt_bytes = MaxPromptBytes(tokenizer_, c.context_length);
  c.default_chat_template_kwargs = OrderedJson::parse(options_.default_chat_template_kwargs.dump());
}

bool Service::Authorized(const http::Request& req, const std::shared_ptr<http::Responder>& r) const {
  if (options_.api_key.empty()) return true;
  const std::string* auth = req.FindHeader("Authorization");
  if (ApiKeyMatches(auth, options_.api_key)) return true;
  SendError(r, 401, auth == nullptr ? "missing API key: send 'Authorization: Bearer <key>'" : "invalid API key");
  return false;
}

http::Handler Service::Route(Handler handler, bool needs_auth) {
  return [this, handler, needs_auth](const http::Request& req, std::shared_ptr<http::Responder> r) {
    if (needs_auth && !Authorized(req, r)) return;
    AnswerErrors(req, r, [&] { (this->*handler)(req, r); });
  };
}

http::Handler Service::PooledRoute(Handler handler) {
  return [this, handler](http::Request req, std::shared_ptr<http::Responder> r) {
    if (!Authorized(req, r)) return;
    auto request = std::make_shared<http::Request>(std::move(req));
    work_.Post([this, handler, request, r] { AnswerErrors(*request, r, [&] { (this->*handler)(*request, r); }); });
  };
}

http::Handler Service::GenerationRoute(GenerationHandler handler) {
  return [this, handler](http::Request req, std::shared_ptr<http::Responder> r) {
    if (!Authorized(req, r)) return;
    if (draining_) return SendError(r, 503, "the server is shutting down");
    std::optional<Ticket> ticket = tracker_.Admit();
    if (!ticket)
      return SendError(r, 503, StrCat("the server is overloaded (", options_.max_pending_requests,
                                      " requests pending); retry later"));
    // The ticket travels with the work: whatever happens to the request, it is released.
    struct Work {
      http::Request request;
      std::shared_ptr<http::Responder> responder;
      Ticket ticket;
    };
    auto work = std::make_shared<Work>(Work{std::move(req), std::move(r), std::move(*ticket)});
    work_.Post([this, handler, work] {
      AnswerErrors(work->request, work->responder,
                   [&] { (this->*handler)(work->request, work->responder, std::move(work->ticket)); });
    });
  };
}

void Service::Register(http::HttpServer& server) {
  server.AddRoute("POST", "/v1/completions", GenerationRoute(&Service::Completions));
  server.AddRoute("POST", "/v1/chat/completions", GenerationRoute(&Service::ChatCompletions));
  server.AddRoute("POST", "/generate", GenerationRoute(&Service::Generate));
  server.AddRoute("GET", "/v1/models", Route(&Service::Models, true));
  server.AddRoute("GET", "/get_model_info", Route(&Service::ModelInfo, true));
  server.AddRoute("GET", "/get_server_info", Route(&Service::ServerInfo, true));
  server.AddRoute("GET", "/health", Route(&Service::Health, false));
  server.AddRoute("GET", "/health_generate", Route(&Service::HealthGenerate, false));
  server.AddRoute("GET", "/metrics", Route(&Service::MetricsText, false));
  server.AddRoute("POST", "/flush_cache", Route(&Service::FlushCache, true));
  server.AddRoute("GET", "/flush_cache", Route(&Service::FlushCache, true));
  server.AddRoute("POST", "/abort_request", Route(&Service::AbortRequest, true));
  server.AddRoute("GET", "/v1/models/*", Route(&Service::RetrieveModel, true));
  for (const char* path : {"/tokenize", "/v1/tokenize"}) server.AddRoute("POST", path, PooledRoute(&Service::Tokenize));
  for (const char* path : {"/detokenize", "/v1/detokenize"})
    server.AddRoute("POST", path, PooledRoute(&Service::Detokenize));
  server.AddRoute("GET", "/get_load", Route(&Service::GetLoad, true));
  for (const char* method : {"GET", "POST"}) {
    server.AddRoute(method, "/start_profile", Route(&Service::StartProfile, true));
    server.AddRoute(method, "/stop_profile", Route(&Service::StopProfile, true));
  }
}

void Service::Drain(std::chrono::milliseconds grace) {
  draining_ = true;
  const auto start = std::chrono::steady_clock::now();
  if (tracker_.WaitIdle(start + grace)) return;
  Log(LogLevel::kInfo, "shutdown: ", tracker_.in_flight(), " requests still in flight after ", grace.count() / 1000.0,
      " s; cancelling them");
  // The jobs are let go of before waiting: a job's ticket is released only when the job is gone.
  for (const auto& job : tracker_.CancelAll("the server is shutting down")) job->Cancel("the server is shutting down", 503);
  tracker_.WaitIdle(std::chrono::steady_clock::now() + kCancelledAnswerWait);
}

SplitterFactory Service::SplittersFor(const DecodedChat& chat) const {
  const ChatRequest& request = chat.request;
  const ReasoningParser* reasoning = request.separate_reasoning ? reasoning_parser_.get() : nullptr;
  const bool tools_offered = request.tools.is_array() && !request.tools.empty() &&
                             !(request.tool_choice.is_string() && request.tool_choice == "none");
  const ToolCallParser* tools = tools_offered ? tool_call_parser_.get() : nullptr;
  if (!reasoning && !tools) return MakePlainSplitter;
  const Json kwargs = Json::parse(request.chat_template_kwargs.dump());
  const bool in_reasoning = reasoning && reasoning->StartsInReasoning(kwargs);
  const bool stream_reasoning = request.stream_reasoning;
  return [reasoning, in_reasoning, stream_reasoning, tools, specs = chat.tools] {
    static std::atomic<std::uint64_t> next_seed{0x5eed};
    return MakeParsedSplitter(reasoning, in_reasoning, stream_reasoning, tools, specs, next_seed++);
  };
}

void Service::Completions(const http::Request& req, const std::shared_ptr<http::Responder>& r, Ticket ticket) {
  DecodedCompletion d = DecodeCompletion(req.body, route_context_);
  auto job = std::make_shared<CompletionJob>(Context(r, std::move(ticket)), tokenizer_, d.model, d.request,
                                             std::move(d.texts));
  job->Submit(d.prompts, d.request.params, d.request.rids);
}

void Service::ChatCompletions(const http::Request& req, const std::shared_ptr<http::Responder>& r, Ticket ticket) {
  DecodedChat d = DecodeChat(req.body, route_context_);
  auto job = std::make_shared<ChatJob>(Context(r, std::move(ticket)), tokenizer_, d.model, d.request,
                                       d.request.params.n, SplittersFor(d));
  job->Submit({d.prompt}, d.request.params, d.request.rids);
}

void Service::Generate(const http::Request& req, const std::shared_ptr<http::Responder>& r, Ticket ticket) {
  DecodedGenerate d = DecodeGenerate(req.body, route_context_);
  const GenerateRequest& g = d.request;
  auto job = std::make_shared<GenerateJob>(Context(r, std::move(ticket)), g.stream, g.batch || g.params.n > 1,
                                           g.return_logprob, g.rid);
  job->Submit(d.prompts, g.params, g.rid.empty() ? std::vector<std::string>{} : std::vector<std::string>{g.rid});
}

Json Service::ModelCard() const {
  return {{"id", options_.served_model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "fission"},
          {"root", options_.model_path}, {"max_model_len", engine_.context_length()}};
}

void Service::Models(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  SendJson(r, 200, {{"object", "list"}, {"data", Json::array({ModelCard()})}});
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
  // SGLang's speculative fields, where `fission bench` (and sglang.bench_serving) read the accept length.
  if (engine_.speculative()) {
    info["internal_states"][0]["avg_spec_accept_length"] = s.spec_accept_length();
    info["internal_states"][0]["spec_accept_rate"] = s.spec_accept_rate();
  }
  SendJson(r, 200, info);
}

void Service::Health(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  if (draining_) return SendError(r, 503, "the server is shutting down");
  r->Send(200, "text/plain", "");
}

void Service::HealthGenerate(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  // One greedy token through the whole path proves the engine is alive.
  if (draining_) return SendError(r, 503, "the server is shutting down");
  std::optional<Ticket> ticket = tracker_.Admit();
  if (!ticket) return SendError(r, 503, "the server is overloaded; retry later");
  engine::SamplingParams params;
  params.temperature = 0.0;
  params.max_new_tokens = 1;
  auto job = std::make_shared<GenerateJob>(Context(r, std::move(*ticket)), false, false, false, "");
  const std::vector<std::int32_t> prompt = {tokenizer_.bos_token_id().value_or(0)};
  job->Submit({prompt}, params);
}

void Service::MetricsText(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  r->Send(200, "text/plain; version=0.0.4", metrics_.Render(engine_, tracker_.in_flight()));
}

void Service::FlushCache(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  engine_.RequestFlushCache();
  r->Send(200, "text/plain", "Cache flushed.\n");
}

void Service::AbortRequest(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const Json body = ParseJson(req.body.empty() ? "{}" : req.body, "request body");
  const std::string rid = GetString(body, "rid", "request body", "");
  const bool abort_all = GetBool(body, "abort_all", "request body", false);
  // The aborted requests answer as usual, with finish_reason "abort".
  const std::vector<std::shared_ptr<ApiJob>> jobs = tracker_.Find(rid, abort_all);
  for (const auto& job : jobs) job->Cancel("", 0);
  SendJson(r, 200, {{"aborted", jobs.size()}});
}

}  // namespace fission::server
