#include "eval/runner.h"

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "eval/filters.h"
#include "http/client.h"

namespace fission::eval {

Json BuildEvalRequest(const EvalOptions& o, const Gsm8kRequest& r) {
  const GenerationSettings& g = o.generation;
  Json body = {{"model", o.model}, {"max_tokens", g.max_tokens}, {"temperature", g.temperature},
               {"stop", g.stop}, {"seed", g.seed}};
  if (o.chat) {
    Json messages = Json::array();
    for (const ChatMessage& m : r.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = messages;
  } else {
    body["prompt"] = r.prompt;
  }
  for (const auto& [key, value] : g.extra.items()) body[key] = Json::parse(value.dump());
  return body;
}

std::string ParseEvalResponse(const std::string& body, bool chat, const std::vector<std::string>& stops) {
  const Json j = ParseJson(body, "server response");
  const Json& choices = RequireField(j, "choices", "server response");
  if (!choices.is_array() || choices.empty()) Fail("server response: 'choices' is empty");
  std::string text;
  if (chat) {
    const Json& message = RequireField(choices[0], "message", "server response choice");
    text = GetString(message, "content", "server response message", "");
  } else {
    text = GetString(choices[0], "text", "server response choice");
  }
  // The server should have stopped there already; cut anyway, as lm-eval's "until" means.
  size_t cut = text.size();
  for (const std::string& stop : stops) cut = std::min(cut, text.find(stop));
  return text.substr(0, cut);
}

namespace {

FilterScore MeanAndStderr(const std::vector<double>& xs) {
  FilterScore s;
  if (xs.empty()) return s;
  double sum = 0;
  for (double x : xs) sum += x;
  s.value = sum / static_cast<double>(xs.size());
  if (xs.size() > 1) {
    double sq = 0;
    for (double x : xs) sq += (x - s.value) * (x - s.value);
    const double sample_std = std::sqrt(sq / static_cast<double>(xs.size() - 1));
    s.stderr_value = sample_std / std::sqrt(static_cast<double>(xs.size()));
  }
  return s;
}

}  // namespace

EvalResult Score(std::vector<SampleResult> samples) {
  EvalResult r;
  std::vector<double> strict, flexible;
  for (SampleResult& s : samples) {
    s.strict = StrictMatch(s.response);
    s.flexible = FlexibleExtract(s.response);
    s.strict_correct = ExactMatch(s.strict, s.request.doc.answer);
    s.flexible_correct = ExactMatch(s.flexible, s.request.doc.answer);
    strict.push_back(s.strict_correct ? 1.0 : 0.0);
    flexible.push_back(s.flexible_correct ? 1.0 : 0.0);
  }
  r.strict = MeanAndStderr(strict);
  r.flexible = MeanAndStderr(flexible);
  r.samples = std::move(samples);
  return r;
}

EvalResult RunGsm8k(const EvalOptions& o, const std::vector<Gsm8kRequest>& requests) {
  if (o.num_concurrent <= 0) Fail("--num-concurrent must be positive, got ", o.num_concurrent);
  http::HttpClient client(http::ClientOptions{.io_threads = 1});
  std::vector<SampleResult> samples(requests.size());
  std::vector<std::string> errors(requests.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0, done = 0;

  std::function<void(size_t, int)> start = [&](size_t i, int attempt) {
    http::ClientRequest req = http::ClientRequest::Post(o.base_url, o.path, BuildEvalRequest(o, requests[i]).dump(-1, ' ', false, Json::error_handler_t::replace));
    req.headers = o.headers;
    req.timeout = o.timeout;
    auto status = std::make_shared<int>(0);
    auto body = std::make_shared<std::string>();
    http::ResponseHandlers h;
    h.on_headers = [status](int s, const std::vector<http::Header>&, http::Clock::time_point) { *status = s; };
    h.on_data = [body](std::string_view d, http::Clock::time_point) { body->append(d); };
    h.on_complete = [&, i, attempt, status, body](const std::string& error, http::Clock::time_point) {
      std::string failure = error;
      if (failure.empty() && *status != 200) failure = StrCat("HTTP ", *status, ": ", body->substr(0, 300));
      const bool retryable = !error.empty() || *status >= 500 || *status == 429;
      if (!failure.empty() && retryable && attempt < o.max_retries) return start(i, attempt + 1);
      SampleResult s;
      s.request = requests[i];
      if (failure.empty()) {
        try {
          s.response = ParseEvalResponse(*body, o.chat, o.generation.stop);
        } catch (const Error& e) {
          failure = e.what();
        }
      }
      std::optional<size_t> follow;
      {
        std::lock_guard lock(mu);
        samples[i] = std::move(s);
        errors[i] = failure;
        ++done;
        if (next < requests.size()) follow = next++;
        cv.notify_all();
      }
      if (follow) start(*follow, 0);
    };
    client.Start(std::move(req), std::move(h));
  };

  {
    std::lock_guard lock(mu);
    next = std::min<size_t>(requests.size(), static_cast<size_t>(o.num_concurrent));
  }
  for (size_t i = 0; i < std::min<size_t>(requests.size(), static_cast<size_t>(o.num_concurrent)); ++i) start(i, 0);
  {
    std::unique_lock lock(mu);
    while (done < requests.size()) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      if (o.progress) o.progress(static_cast<int>(done), static_cast<int>(requests.size()));
    }
  }
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].empty()) Fail("gsm8k doc ", requests[i].doc_id, ": request failed: ", errors[i]);
  }
  return Score(std::move(samples));
}

std::vector<TableRow> ResultRows(const EvalResult& r, int num_fewshot) {
  // lm-eval lists the filters in name order.
  return {{"gsm8k", kGsm8kVersion, "flexible-extract", num_fewshot, "exact_match", r.flexible.value,
           r.flexible.stderr_value},
          {"gsm8k", kGsm8kVersion, "strict-match", num_fewshot, "exact_match", r.strict.value, r.strict.stderr_value}};
}

}  // namespace fission::eval
