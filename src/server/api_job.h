// One API request in flight: its engine requests (prompts × n completions), the state of every
// choice, the HTTP responder its answer goes to, and the request's ticket (it counts as in flight
// until the job is gone). Engine outputs arrive on the engine thread; a job streams deltas as they
// come or answers once every choice has finished. A client that disconnects has its engine
// requests aborted (their pages are freed at the end of the step); a job the server cancels
// (shutdown, /abort_request) still ends its answer properly.
//
// Subclasses format one API's responses: OpenAI completions, OpenAI chat, SGLang's /generate.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/json.h"
#include "engine/engine.h"
#include "http/server.h"
#include "server/metrics.h"
#include "server/request_tracker.h"

namespace fission::server {

struct ChoiceState {
  int prompt_index = 0;
  std::vector<std::int32_t> prompt_ids;
  std::vector<std::int32_t> token_ids;  // generated
  std::string text;                     // generated text so far
  std::vector<engine::TokenLogprob> logprobs;
  std::vector<engine::TokenLogprob> prompt_logprobs;
  engine::FinishReason finish_reason = engine::FinishReason::kNone;
  std::optional<std::string> matched_stop_string;
  std::optional<std::int32_t> matched_stop_token;
  std::string error;
  std::int32_t cached_tokens = 0;
  bool finished = false;
  bool started = false;  // the first delta went out (streaming)
  std::chrono::steady_clock::time_point last_token_time;
  std::chrono::steady_clock::time_point first_token_time;  // for the time per output token
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t cached_tokens = 0;
};

// What every job is made with.
struct JobContext {
  engine::Engine& engine;
  Metrics& metrics;
  std::shared_ptr<http::Responder> responder;
  RequestTracker::Ticket ticket;
};

class ApiJob : public std::enable_shared_from_this<ApiJob> {
 public:
  ApiJob(JobContext context, bool stream);
  virtual ~ApiJob();

  // Submits one engine request per prompt (each with `params.n` completions), attached to the
  // ticket under `rids` (SGLang's request ids; may be none). Every prompt is validated first: an invalid one is an
  // ApiError(400) and nothing is submitted; a server that has begun cancelling everything answers
  // 503.
  void Submit(const std::vector<std::vector<std::int32_t>>& prompts, const engine::SamplingParams& params,
              std::vector<std::string> rids = {});
  // The client disconnected: aborts the job's engine requests and writes nothing more.
  void Abort();
  // The server ends the job: its engine requests are aborted and the answer ends as it would on a
  // failure, with `reason` and `status` (503 at shutdown); with an empty reason the choices simply
  // finish with finish_reason "abort" (/abort_request).
  void Cancel(const std::string& reason, int status);

 protected:
  // Streaming: called (engine thread, under the job's lock) for each output of choice `choice`,
  // after its state is updated; `out` holds the delta.
  virtual void OnDelta(int choice, const engine::RequestOutput& out) {}
  // Called once when every choice has finished: write the answer (or the stream's end).
  virtual void OnComplete() = 0;

  Usage TotalUsage() const;
  bool stream() const { return stream_; }
  const std::vector<ChoiceState>& choices() const { return choices_; }
  std::vector<ChoiceState>& mutable_choices() { return choices_; }
  http::Responder& responder() { return *responder_; }
  // Starts the SSE response the first time it is called (one stream per job, whatever the choices).
  void StartStreamOnce();
  // Ends a stream: an error event if a choice failed, the usage chunk (`usage_chunk`'s fields plus
  // empty choices and the usage) unless it is null, then data: [DONE].
  void EndStream(const std::string& error, Json usage_chunk);
  std::int64_t created() const { return created_; }
  const std::string& id() const { return id_; }
  void set_id_prefix(const std::string& prefix) { id_ = prefix + id_; }
  // The first choice error, if a choice failed (not a client abort), and the status to answer it with.
  std::string FirstError() const;
  int error_status() const { return cancel_reason_.empty() ? 500 : cancel_status_; }

 private:
  void OnOutput(int choice, const engine::RequestOutput& out);

  engine::Engine& engine_;
  Metrics& metrics_;
  std::shared_ptr<http::Responder> responder_;
  RequestTracker::Ticket ticket_;
  bool stream_;
  std::string id_;
  std::int64_t created_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::vector<ChoiceState> choices_;
  std::vector<std::int64_t> request_ids_;
  int unfinished_ = 0;
  bool disconnected_ = false;
  bool cancelled_ = false;
  std::string cancel_reason_;
  int cancel_status_ = 500;
  bool stream_started_ = false;
};

// A fresh random id of `n` lowercase hex digits.
std::string RandomHexId(int n);

}  // namespace fission::server
