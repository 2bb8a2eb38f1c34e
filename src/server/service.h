// The HTTP API of `fission serve`: OpenAI routes (/v1/completions, /v1/chat/completions,
// /v1/models, /v1/models/{id}), SGLang's native routes (/generate, /get_model_info,
// /get_server_info, /flush_cache, /abort_request, /health, /health_generate, /tokenize,
// /detokenize, /get_load, /start_profile, /stop_profile) and Prometheus /metrics.
//
// A generation route is admitted on the I/O thread (authentication, then a ticket: 503 when
// max_pending_requests are in flight) and decoded on the work pool (parse, validate, render the
// chat template, tokenize: request_decoding.h), then handed to the engine; answers go back through
// ApiJob. /tokenize and /detokenize run on the work pool too; every other route answers on the I/O
// thread. JSON stays in this layer.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "http/server.h"
#include "server/api_jobs.h"
#include "server/metrics.h"
#include "server/reasoning_parser.h"
#include "server/request_decoding.h"
#include "server/request_tracker.h"
#include "server/structured_output.h"
#include "server/tool_call_parser.h"
#include "server/work_pool.h"
#include "tokenizer/chat_renderer.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

struct ServiceOptions {
  std::string model_path;
  std::string served_model_name;  // what /v1/models lists and answers name when a request names none
  std::string tokenizer_path;
  std::string api_key;            // when set, every route but /health and /metrics needs "Bearer KEY"
  std::optional<std::string> chat_template_file;
  // config.json's model_type: deepseek_v32 without a chat template renders with its own encoder.
  std::string model_type;
  // --reasoning-parser and --tool-call-parser names; empty: none.
  std::string reasoning_parser;
  std::string tool_call_parser;
  // --grammar-backend: "none" turns structured outputs off; any other name is this server's own.
  std::string grammar_backend = "xgrammar";
  // Requests accepted but not answered beyond which new ones get 503.
  std::int64_t max_pending_requests = 4096;
  // Threads that decode requests (0: a quarter of the cores, between 2 and 8).
  int decode_threads = 0;
  Json server_info = Json::object();  // /get_server_info
  // chat_template_kwargs every chat request starts from (its own keys win): the environment's.
  Json default_chat_template_kwargs = Json::object();
};

class Service {
 public:
  Service(ServiceOptions options, engine::Engine& engine, const tokenizer::Tokenizer& tokenizer);
  void Register(http::HttpServer& server);
  Metrics& metrics() { return metrics_; }

  // Shutdown: new generation requests get 503 (and /health too, so balancers stop sending); the
  // requests in flight get until `grace` passes to finish, then the rest are cancelled, each
  // ending its answer properly (an error event and [DONE] for a stream, a 503 otherwise). Returns
  // once nothing is in flight, or after a last few seconds for the cancelled ones to answer.
  void Drain(std::chrono::milliseconds grace);
  std::int64_t in_flight() const { return tracker_.in_flight(); }

 private:
  using Ticket = RequestTracker::Ticket;
  using Handler = void (Service::*)(const http::Request&, const std::shared_ptr<http::Responder>&);
  using GenerationHandler = void (Service::*)(const http::Request&, const std::shared_ptr<http::Responder>&,
                                              Ticket);
  // A route answered on the I/O thread, with authentication when `needs_auth`.
  http::Handler Route(Handler handler, bool needs_auth);
  // A route answered on the work pool (its work grows with the request: tokenizing), with
  // authentication.
  http::Handler PooledRoute(Handler handler);
  // A generation route: authentication and admission here, the handler on the work pool.
  http::Handler GenerationRoute(GenerationHandler handler);
  // 401 when the API key is required and missing or wrong (compared in constant time).
  bool Authorized(const http::Request& req, const std::shared_ptr<http::Responder>& r) const;

  void Completions(const http::Request& req, const std::shared_ptr<http::Responder>& r, Ticket ticket);
  void ChatCompletions(const http::Request& req, const std::shared_ptr<http::Responder>& r, Ticket ticket);
  void Generate(const http::Request& req, const std::shared_ptr<http::Responder>& r, Ticket ticket);
  void Models(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void ModelInfo(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void ServerInfo(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void Health(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void HealthGenerate(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void MetricsText(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void FlushCache(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void AbortRequest(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  // service_tools.cc
  void RetrieveModel(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void Tokenize(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void Detokenize(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void GetLoad(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void StartProfile(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void StopProfile(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  // The /v1/models entry of the served model.
  Json ModelCard() const;
  // A JSON answer (invalid UTF-8 in strings replaced, never a throw).
  static void SendJson(const std::shared_ptr<http::Responder>& r, int status, const Json& body);

  JobContext Context(const std::shared_ptr<http::Responder>& r, Ticket ticket) {
    return {engine_, metrics_, r, std::move(ticket)};
  }
  // How a request's generated text is split into content, reasoning and tool calls.
  SplitterFactory SplittersFor(const DecodedChat& chat) const;

  ServiceOptions options_;
  engine::Engine& engine_;
  const tokenizer::Tokenizer& tokenizer_;
  std::unique_ptr<tokenizer::ChatRenderer> chat_template_;
  std::unique_ptr<ReasoningParser> reasoning_parser_;
  std::unique_ptr<ToolCallParser> tool_call_parser_;
  std::unique_ptr<StructuredOutputs> structured_outputs_;  // null with --grammar-backend none
  RouteContext route_context_;
  Metrics metrics_;
  RequestTracker tracker_;
  std::atomic<bool> draining_{false};
  // Between /start_profile and /stop_profile: the engine's counters at the start.
  struct Profile {
    std::string output_dir;
    engine::EngineStats start;
    std::chrono::steady_clock::time_point start_time;
  };
  std::mutex profile_mutex_;
  std::optional<Profile> profile_;
  // Last member: its destructor runs the queued work, which uses everything above.
  WorkPool work_;
};

}  // namespace fission::server
