#include "testing/mock_openai_server.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "http/server.h"

namespace fission::serving_bench {

namespace {

using http::Clock;

std::string Sse(const Json& j) { return "data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n"; }

Json TextChunk(ApiKind api, const std::string& model, const std::string& text, const std::string& cumulative,
               std::int64_t cumulative_tokens) {
  switch (api) {
    case ApiKind::kCompletions:
      return {{"id", "cmpl-mock"}, {"object", "text_completion"}, {"model", model},
              {"choices", Json::array({{{"index", 0}, {"text", text}, {"finish_reason", nullptr}}})}};
    case ApiKind::kChatCompletions:
      return {{"id", "chatcmpl-mock"}, {"object", "chat.completion.chunk"}, {"model", model},
              {"choices", Json::array({{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}}})}};
    case ApiKind::kSglangGenerate:
      return {{"text", cumulative}, {"meta_info", {{"id", "mock"}, {"completion_tokens", cumulative_tokens}}}};
  }
  return {};
}

Json Usage(const MockReply& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", *r.completion_tokens},
          {"total_tokens", r.prompt_tokens + *r.completion_tokens}};
}

}  // namespace

std::vector<TimedPiece> RenderStream(const MockReply& r, ApiKind api, const std::string& model) {
  std::vector<TimedPiece> out;
  double t = 0;
  std::string cumulative;
  std::int64_t tokens = 0;
  if (api != ApiKind::kSglangGenerate && api == ApiKind::kChatCompletions) {
    // OpenAI servers open a chat stream with an empty role delta: it carries no text.
    out.push_back({0, Sse({{"id", "chatcmpl-mock"}, {"object", "chat.completion.chunk"}, {"model", model},
                           {"choices", Json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}})}})});
  }
  for (const MockChunk& c : r.chunks) {
    t += c.delay_ms;
    cumulative += c.text;
    tokens += c.tokens;
    out.push_back({t, Sse(TextChunk(api, model, c.text, cumulative, tokens))});
  }
  if (r.drop_connection) {
    out.push_back({t, "", false, true});
    return out;
  }
  if (!r.stream_error.empty()) {
    out.push_back({t, Sse({{"error", {{"message", r.stream_error}, {"code", 500}}}})});
  }
  t += r.tail_delay_ms;
  std::string tail;
  if (api != ApiKind::kSglangGenerate) {
    Json finish = TextChunk(api, model, "", cumulative, tokens);
    if (api == ApiKind::kChatCompletions) finish["choices"][0]["delta"] = Json::object();
    finish["choices"][0]["finish_reason"] = "length";
    tail += Sse(finish);
    if (r.completion_tokens) {
      tail += Sse({{"id", "mock"}, {"object", "text_completion"}, {"model", model}, {"choices", Json::array()},
                   {"usage", Usage(r)}});
    }
  }
  tail += "data: [DONE]\n\n";
  out.push_back({t, tail, true});
  return out;
}

std::string RenderJson(const MockReply& r, ApiKind api, const std::string& model) {
  std::string text;
  std::int64_t tokens = 0;
  for (const MockChunk& c : r.chunks) {
    text += c.text;
    tokens += c.tokens;
  }
  Json j;
  switch (api) {
    case ApiKind::kCompletions:
      j = {{"id", "cmpl-mock"}, {"object", "text_completion"}, {"model", model},
           {"choices", Json::array({{{"index", 0}, {"text", text}, {"finish_reason", "length"}}})}};
      break;
    case ApiKind::kChatCompletions:
      j = {{"id", "chatcmpl-mock"}, {"object", "chat.completion"}, {"model", model},
           {"choices", Json::array({{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", text}}},
                                      {"finish_reason", "length"}}})}};
      break;
    case ApiKind::kSglangGenerate:
      j = {{"text", text}, {"meta_info", {{"id", "mock"}, {"completion_tokens", tokens}}}};
      break;
  }
  if (r.completion_tokens && api != ApiKind::kSglangGenerate) j["usage"] = Usage(r);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Runs actions at their due times on one thread, so thousands of slow streams need no threads.
class Timer {
 public:
  Timer() : thread_([this] { Loop(); }) {}
  ~Timer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void At(Clock::time_point when, std::function<void()> action) {
    {
      std::lock_guard lock(mu_);
      queue_.emplace(when, std::move(action));
    }
    cv_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (queue_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = queue_.begin();
      if (first->first > Clock::now()) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      auto action = std::move(first->second);
      queue_.erase(first);
      lock.unlock();
      action();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

class MockOpenAiServer::Impl {
 public:
  Impl(MockScript s, Options o)
      : script(std::move(s)), options(std::move(o)), server(http::ServerOptions{.io_threads = options.io_threads}) {}

  void Handle(ApiKind api, const http::Request& req, std::shared_ptr<http::Responder> r) {
    Json body = ParseJson(req.body, "mock request body");
    int index;
    {
      std::lock_guard lock(mu);
      index = static_cast<int>(received.size());
      received.push_back(body);
    }
    const MockReply reply = script(body, api, index);
    if (reply.status != 200) {
      r->Send(reply.status, "application/json",
              Json{{"error", {{"message", "scripted failure"}, {"code", reply.status}}}}.dump(-1, ' ', false, Json::error_handler_t::replace));
      return;
    }
    const bool stream = body.value("stream", false);
    const Clock::time_point arrived = Clock::now();
    if (!stream) {
      double total = reply.tail_delay_ms;
      for (const MockChunk& c : reply.chunks) total += c.delay_ms;
      std::string json = RenderJson(reply, api, options.model);
      auto send = [r, json] { r->Send(200, "application/json", json); };
      if (total <= 0) {
        send();
      } else {
        timer.At(arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(total)),
                 send);
      }
      return;
    }
    r->StartStream(200, "text/event-stream");
    for (TimedPiece& piece : RenderStream(reply, api, options.model)) {
      auto act = [r, bytes = std::move(piece.bytes), finish = piece.finish, abort = piece.abort] {
        if (abort) return r->Abort();
        r->Write(bytes);
        if (finish) r->Finish();
      };
      if (piece.at_ms <= 0) {
        act();
      } else {
        timer.At(arrived + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double, std::milli>(piece.at_ms)),
                 std::move(act));
      }
    }
  }

  MockScript script;
  Options options;
  mutable std::mutex mu;
  std::vector<Json> received;
  std::vector<std::string> controls;
  Timer timer;
  http::HttpServer server;  // declared last: stopped first, before the timer and script go
};

MockOpenAiServer::MockOpenAiServer(MockScript script, Options options)
    : impl_(std::make_unique<Impl>(std::move(script), std::move(options))) {
  Impl* impl = impl_.get();
  auto route = [impl](ApiKind api) {
    return [impl, api](const http::Request& req, std::shared_ptr<http::Responder> r) { impl->Handle(api, req, r); };
  };
  impl->server.AddRoute("POST", "/v1/completions", route(ApiKind::kCompletions));
  impl->server.AddRoute("POST", "/v1/chat/completions", route(ApiKind::kChatCompletions));
  impl->server.AddRoute("POST", "/generate", route(ApiKind::kSglangGenerate));
  impl->server.AddRoute("GET", "/v1/models", [impl](const http::Request&, std::shared_ptr<http::Responder> r) {
    r->Send(200, "application/json",
            Json{{"object", "list"}, {"data", Json::array({{{"id", impl->options.model}, {"object", "model"}}})}}.dump(-1, ' ', false, Json::error_handler_t::replace));
  });
  impl->server.AddRoute("GET", "/get_server_info", [impl](const http::Request&, std::shared_ptr<http::Responder> r) {
    Json state = Json::object();
    if (impl->options.accept_length) state["avg_spec_accept_length"] = *impl->options.accept_length;
    r->Send(200, "application/json", Json{{"internal_states", Json::array({state})}}.dump(-1, ' ', false, Json::error_handler_t::replace));
  });
  impl->server.AddRoute("GET", "/health", [](const http::Request&, std::shared_ptr<http::Responder> r) {
    r->Send(200, "text/plain", "");
  });
  // The profiler's control routes record the order of their calls among the requests.
  for (const char* path : {"/start_profile", "/stop_profile"}) {
    impl->server.AddRoute("POST", path, [impl, path](const http::Request&, std::shared_ptr<http::Responder> r) {
      {
        std::lock_guard lock(impl->mu);
        impl->controls.push_back(StrCat(path, "@", impl->received.size()));
      }
      r->Send(200, "application/json", "{}");
    });
  }
  impl->server.Start();
}

MockOpenAiServer::~MockOpenAiServer() { impl_->server.Stop(std::chrono::milliseconds(0)); }

http::Url MockOpenAiServer::url() const {
  return http::Url::Parse("http://127.0.0.1:" + std::to_string(impl_->server.port()));
}

int MockOpenAiServer::requests_seen() const {
  std::lock_guard lock(impl_->mu);
  return static_cast<int>(impl_->received.size());
}

std::vector<Json> MockOpenAiServer::bodies() const {
  std::lock_guard lock(impl_->mu);
  return impl_->received;
}

std::vector<std::string> MockOpenAiServer::control_calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->controls;
}

}  // namespace fission::serving_bench
