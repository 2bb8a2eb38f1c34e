// The HTTP API of `fission serve`: OpenAI routes (/v1/completions, /v1/chat/completions,
// /v1/models), SGLang's native routes (/generate, /get_model_info, /get_server_info,
// /flush_cache, /abort_request, /health, /health_generate) and Prometheus /metrics. Handlers parse
// and validate on the I/O thread, render chat templates, tokenize, and hand the work to the
// engine; answers go back through ApiJob. JSON stays in this layer.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "http/server.h"
#include "server/api_jobs.h"
#include "server/metrics.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

struct ServiceOptions {
  std::string model_path;
  std::string served_model_name;  // what /v1/models lists and requests must name (empty model = this)
  std::string tokenizer_path;
  std::string api_key;            // when set, every route but /health and /metrics needs "Bearer KEY"
  std::optional<std::string> chat_template_file;
  // --reasoning-parser and --tool-call-parser names; empty: none.
  std::string reasoning_parser;
  std::string tool_call_parser;
  // Requests accepted but not finished beyond which new ones get 503.
  std::int64_t max_pending_requests = 4096;
  Json server_info = Json::object();  // /get_server_info
};

class Service {
 public:
  Service(ServiceOptions options, engine::Engine& engine, const tokenizer::Tokenizer& tokenizer);
  void Register(http::HttpServer& server);
  Metrics& metrics() { return metrics_; }

 private:
  using Handler = void (Service::*)(const http::Request&, const std::shared_ptr<http::Responder>&);
  // Wraps a handler: authentication, overload, and errors turned into JSON answers.
  http::Handler Route(Handler handler, bool needs_auth);

  void Completions(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void ChatCompletions(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void Generate(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void Models(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void ModelInfo(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void ServerInfo(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void Health(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void HealthGenerate(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void MetricsText(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void FlushCache(const http::Request& req, const std::shared_ptr<http::Responder>& r);
  void AbortRequest(const http::Request& req, const std::shared_ptr<http::Responder>& r);

  void CheckModel(const std::string& model) const;
  // 400 with both numbers when prompt + max_new_tokens exceeds the context.
  void CheckContext(std::size_t prompt_tokens, std::int64_t max_new_tokens) const;
  void CheckTokenIds(const std::vector<std::int32_t>& ids, const char* field) const;
  std::string RenderChat(const ChatRequest& request) const;
  // How a request's generated text is split into content, reasoning and tool calls.
  SplitterFactory SplittersFor(const ChatRequest& request) const;

  ServiceOptions options_;
  engine::Engine& engine_;
  const tokenizer::Tokenizer& tokenizer_;
  std::optional<tokenizer::ChatTemplate> chat_template_;
  std::string chat_template_error_;
  std::unique_ptr<ReasoningParser> reasoning_parser_;
  std::unique_ptr<ToolCallParser> tool_call_parser_;
  Metrics metrics_;
  // SGLang's /abort_request names requests by "rid"; native requests register theirs here.
  std::mutex rids_mutex_;
  std::unordered_map<std::string, std::weak_ptr<ApiJob>> rids_;
};

}  // namespace fission::server
