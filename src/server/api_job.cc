#include "server/api_job.h"

#include <random>

#include "server/api_error.h"
#include "server/response_format.h"

namespace fission::server {

std::string RandomHexId(int n) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < n; ++i) id.push_back(kHex[rng() % 16]);
  return id;
}

ApiJob::ApiJob(JobContext context, bool stream)
    : engine_(context.engine),
      metrics_(context.metrics),
      responder_(std::move(context.responder)),
      ticket_(std::move(context.ticket)),
      stream_(stream),
      id_(RandomHexId(24)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      start_(std::chrono::steady_clock::now()) {}

ApiJob::~ApiJob() = default;

void ApiJob::Submit(const std::vector<std::vector<std::int32_t>>& prompts, const engine::SamplingParams& params,
                    std::vector<std::string> rids) {
  if (prompts.empty()) BadRequest("the request has no prompt");
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    try {
      engine_.Validate(prompts[p], params);
    } catch (const Error& e) {
      throw ApiError(400, prompts.size() > 1 ? StrCat("prompt ", p, ": ", e.what()) : std::string(e.what()));
    }
  }
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    for (int i = 0; i < params.n; ++i) {
      ChoiceState c;
      c.prompt_index = static_cast<int>(p);
      c.prompt_ids = prompts[p];
      c.last_token_time = start_;
      choices_.push_back(std::move(c));
    }
  }
  unfinished_ = static_cast<int>(choices_.size());
  if (const std::string refusal = ticket_.Attach(weak_from_this(), std::move(rids)); !refusal.empty()) throw ApiError(503, refusal);
  metrics_.RequestStarted();
  std::weak_ptr<ApiJob> weak = shared_from_this();
  std::vector<std::int64_t> abort_now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      engine::Request request;
      request.prompt_ids = prompts[p];
      request.params = params;
      const int base = static_cast<int>(p) * params.n;
      auto self = shared_from_this();  // the engine's callback keeps the job alive until it finishes
      request.callback = [self, base](const engine::RequestOutput& out) { self->OnOutput(base + out.index, out); };
      request_ids_.push_back(engine_.Submit(std::move(request)));  // validated above: does not throw
    }
    // Cancelled between attaching and submitting: end at once, the same way.
    if (cancelled_) abort_now = request_ids_;
  }
  for (std::int64_t id : abort_now) engine_.Abort(id);
  responder_->OnDisconnect([weak] {
    if (auto job = weak.lock()) job->Abort();
  });
}

void ApiJob::Abort() {
  std::vector<std::int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    disconnected_ = true;
    ids = request_ids_;
  }
  for (std::int64_t id : ids) engine_.Abort(id);
}

void ApiJob::Cancel(const std::string& reason, int status) {
  std::vector<std::int64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
    cancel_reason_ = reason;
    cancel_status_ = status;
    ids = request_ids_;
  }
  for (std::int64_t id : ids) engine_.Abort(id);
}

void ApiJob::OnOutput(int choice, const engine::RequestOutput& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  ChoiceState& c = choices_.at(choice);
  const auto now = std::chrono::steady_clock::now();
  if (!out.token_ids.empty()) {
    const double gap = std::chrono::duration<double>(now - c.last_token_time).count();
    if (c.token_ids.empty()) {
      metrics_.FirstToken(gap);
      c.first_token_time = now;
    } else {
      metrics_.InterToken(gap / static_cast<double>(out.token_ids.size()));
    }
    c.last_token_time = now;
  }
  c.token_ids.insert(c.token_ids.end(), out.token_ids.begin(), out.token_ids.end());
  c.text += out.text;
  c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
  if (!out.prompt_logprobs.empty()) c.prompt_logprobs = out.prompt_logprobs;
  c.cached_tokens = out.cached_tokens;
  if (out.finished) {
    c.finished = true;
    if (c.token_ids.size() >= 2)
      metrics_.TimePerOutputToken(std::chrono::duration<double>(c.last_token_time - c.first_token_time).count() /
                                  static_cast<double>(c.token_ids.size() - 1));
    c.finish_reason = out.finish_reason;
    c.matched_stop_string = out.matched_stop_string;
    c.matched_stop_token = out.matched_stop_token;
    c.error = out.error;
    // The engine reports our own abort without a message: the cancellation's reason is the error.
    if (c.finish_reason == engine::FinishReason::kAbort && c.error.empty()) c.error = cancel_reason_;
  }
  if (disconnected_) {
    if (out.finished && --unfinished_ == 0) {
      const Usage u = TotalUsage();
      metrics_.RequestFinished("abort", u.prompt_tokens, u.completion_tokens,
                               std::chrono::duration<double>(now - start_).count());
    }
    return;
  }
  if (stream_) OnDelta(choice, out);
  if (out.finished && --unfinished_ == 0) {
    const Usage u = TotalUsage();
    const std::string error = FirstError();
    metrics_.RequestFinished(error.empty() ? "success" : "error", u.prompt_tokens, u.completion_tokens,
                             std::chrono::duration<double>(now - start_).count());
    OnComplete();
  }
}

void ApiJob::StartStreamOnce() {
  if (stream_started_) return;
  stream_started_ = true;
  responder_->StartStream(200, "text/event-stream");  // the server adds Cache-Control: no-cache
}

void ApiJob::EndStream(const std::string& error, Json usage_chunk) {
  StartStreamOnce();
  if (!error.empty()) responder_->Write(SseEvent({{"error", {{"message", error}, {"code", error_status()}}}}));
  if (!usage_chunk.is_null()) {
    usage_chunk["choices"] = Json::array();
    usage_chunk["usage"] = UsageJson(TotalUsage());
    responder_->Write(SseEvent(usage_chunk));
  }
  responder_->Write(kSseDone);
  responder_->Finish();
}

Usage ApiJob::TotalUsage() const {
  Usage u;
  int last_prompt = -1;
  for (const ChoiceState& c : choices_) {
    if (c.prompt_index != last_prompt) {  // n completions share their prompt
      u.prompt_tokens += static_cast<std::int64_t>(c.prompt_ids.size());
      u.cached_tokens += c.cached_tokens;
      last_prompt = c.prompt_index;
    }
    u.completion_tokens += static_cast<std::int64_t>(c.token_ids.size());
  }
  return u;
}

std::string ApiJob::FirstError() const {
  for (const ChoiceState& c : choices_)
    if (c.finish_reason == engine::FinishReason::kAbort && !c.error.empty()) return c.error;
  return "";
}

}  // namespace fission::server
