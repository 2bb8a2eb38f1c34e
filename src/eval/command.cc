#include "eval/command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>

#include "base/error.h"
#include "base/flag_reader.h"
#include "eval/runner.h"
#include "http/client.h"

namespace fission::eval {

namespace {

constexpr const char* kUsage = R"(usage: fission eval [options]

gsm8k with lm-eval's semantics against an OpenAI-compatible server.

  --base-url URL            server, e.g. http://127.0.0.1:30000 (default http://127.0.0.1:30000)
  --model NAME              model name sent in requests (default: the server's first /v1/models entry)
  --tasks gsm8k             the task (only gsm8k)
  --data-dir DIR            folder with train.jsonl and test.jsonl (required)
  --num-fewshot N           exemplars from the train split (default 5)
  --limit N                 first N test questions (default all)
  --num-concurrent N        requests in flight (default 1)
  --seed N                  few-shot sampling seed (default 1234, as lm-eval)
  --max-gen-toks N          generation limit (default 256)
  --apply-chat-template     use /v1/chat/completions
  --fewshot-as-multiturn    exemplars as alternating chat turns (with --apply-chat-template)
  --output-path PATH        write results JSON and per-sample log (a .json file or a folder)
  --threshold X             exit 1 when flexible-extract exact_match is below X
  --disable-tqdm            no progress bar
)";

struct Args {
  std::string base_url = "http://127.0.0.1:30000";
  std::string model;
  std::string data_dir;
  int num_fewshot = 5;
  int limit = -1;
  int num_concurrent = 1;
  std::uint32_t seed = 1234;
  int max_gen_toks = kMaxGenTokens;
  bool chat = false;
  bool multiturn = false;
  std::string output_path;
  std::optional<double> threshold;
  bool progress = true;
  bool help = false;
};

long long ParseInteger(const std::string& flag, const std::string& v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    Fail(flag, ": expected an integer in [", lo, ", ", hi, "], got '", v, "'");
  }
  return x;
}

double ParseNumber(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') Fail(flag, ": expected a number, got '", v, "'");
  return x;
}

Args Parse(const std::vector<std::string>& argv) {
  Args a;
  FlagReader reader(argv);  // lm-eval spells flags with underscores; the reader accepts both
  while (reader.Next()) {
    const std::string flag = reader.flag();
    auto value = [&] { return reader.Value(); };
    if (flag == "--help" || flag == "-h") {
      a.help = true;
    } else if (flag == "--base-url") {
      a.base_url = value();
    } else if (flag == "--model") {
      a.model = value();
    } else if (flag == "--tasks") {
      const std::string t = value();
      if (t != "gsm8k") Fail("--tasks: only gsm8k is supported, got '", t, "'");
    } else if (flag == "--data-dir") {
      a.data_dir = value();
    } else if (flag == "--num-fewshot") {
      a.num_fewshot = static_cast<int>(ParseInteger(flag, value(), 0, 1000));
    } else if (flag == "--limit") {
      a.limit = static_cast<int>(ParseInteger(flag, value(), 1, 100000000));
    } else if (flag == "--num-concurrent") {
      a.num_concurrent = static_cast<int>(ParseInteger(flag, value(), 1, 100000));
    } else if (flag == "--seed") {
      a.seed = static_cast<std::uint32_t>(ParseInteger(flag, value(), 0, 0xffffffffll));
    } else if (flag == "--max-gen-toks") {
      a.max_gen_toks = static_cast<int>(ParseInteger(flag, value(), 1, 1000000));
    } else if (flag == "--apply-chat-template") {
      a.chat = true;
    } else if (flag == "--fewshot-as-multiturn") {
      a.multiturn = true;
    } else if (flag == "--output-path") {
      a.output_path = value();
    } else if (flag == "--threshold") {
      a.threshold = ParseNumber(flag, value());
    } else if (flag == "--disable-tqdm") {
      a.progress = false;
    } else {
      Fail("unknown flag '", flag, "' (see fission eval --help)");
    }
  }
  if (a.multiturn && !a.chat) Fail("--fewshot-as-multiturn needs --apply-chat-template");
  return a;
}

std::string Timestamp() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H-%M-%S", std::gmtime(&t));
  return buf;
}

std::string DiscoverModel(const http::Url& url, const std::vector<http::Header>& headers) {
  http::HttpClient client;
  http::ClientRequest req = http::ClientRequest::Get(url, "/v1/models");
  req.headers = headers;
  req.timeout = std::chrono::seconds(30);
  const http::ClientResponse r = client.Fetch(req);
  if (!r.error.empty() || r.status != 200) {
    Fail("--model not given and ", url.ToString(), "/v1/models failed: ", r.error.empty() ? StrCat("HTTP ", r.status) : r.error);
  }
  const Json j = ParseJson(r.body, "/v1/models response");
  const Json& data = RequireField(j, "data", "/v1/models response");
  if (!data.is_array() || data.empty()) Fail("/v1/models lists no model; pass --model");
  return GetString(data[0], "id", "/v1/models entry");
}

}  // namespace

int RunEvalCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  const Args a = Parse(argv);
  if (a.help) {
    out << kUsage;
    return 0;
  }
  if (a.data_dir.empty()) Fail("--data-dir is required (a folder with train.jsonl and test.jsonl)");
  http::RaiseOpenFileLimit();
  EvalOptions o;
  o.base_url = http::Url::Parse(a.base_url);
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && *key) {
    o.headers.push_back({"Authorization", StrCat("Bearer ", key)});
  }
  o.model = a.model.empty() ? DiscoverModel(o.base_url, o.headers) : a.model;
  o.chat = a.chat;
  o.num_concurrent = a.num_concurrent;
  o.seed = a.seed;
  o.max_gen_toks = a.max_gen_toks;
  const bool tty = a.progress && isatty(fileno(stderr));
  if (tty) {
    o.progress = [&err](int done, int total) {
      err << "\rRunning generate_until requests: " << done << "/" << total << std::flush;
    };
  }
  const auto train = LoadGsm8k(a.data_dir + "/train.jsonl");
  const auto test = LoadGsm8k(a.data_dir + "/test.jsonl");
  PromptOptions p;
  p.num_fewshot = a.num_fewshot;
  p.seed = a.seed;
  p.chat = a.chat;
  p.fewshot_as_multiturn = a.multiturn;
  p.limit = a.limit;
  const auto requests = BuildGsm8kRequests(train, test, p);
  const EvalResult result = RunGsm8k(o, requests);
  if (tty) err << "\n";

  out << (o.chat ? "local-chat-completions" : "local-completions") << " (model=" << o.model
      << ",base_url=" << o.base_url.ToString() << (o.chat ? "/v1/chat/completions" : "/v1/completions")
      << ",num_concurrent=" << o.num_concurrent << "), gen_kwargs: (None), limit: "
      << (a.limit < 0 ? std::string("None") : StrCat(a.limit, ".0")) << ", num_fewshot: " << a.num_fewshot
      << ", batch_size: 1\n";
  out << FormatResultsTable(ResultRows(result, a.num_fewshot));

  if (!a.output_path.empty()) {
    namespace fs = std::filesystem;
    fs::path results_path, samples_path;
    if (fs::path(a.output_path).extension() == ".json") {
      results_path = a.output_path;
      samples_path = fs::path(a.output_path).replace_extension("").string() + "_samples_gsm8k.jsonl";
    } else {
      const std::string ts = Timestamp();
      results_path = fs::path(a.output_path) / ("results_" + ts + ".json");
      samples_path = fs::path(a.output_path) / ("samples_gsm8k_" + ts + ".jsonl");
    }
    std::error_code ec;
    if (results_path.has_parent_path()) fs::create_directories(results_path.parent_path(), ec);
    std::ofstream results(results_path);
    if (!results) Fail("--output-path: cannot write '", results_path.string(), "'");
    results << ResultsJson(result, o, a.num_fewshot, a.limit, test.size()).dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    std::ofstream samples(samples_path);
    if (!samples) Fail("--output-path: cannot write '", samples_path.string(), "'");
    for (const SampleResult& s : result.samples) samples << SampleJson(s).dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    out << "results: " << results_path.string() << "\nsamples: " << samples_path.string() << "\n";
  }
  if (a.threshold && result.flexible.value < *a.threshold) {
    err << "fission eval: flexible-extract exact_match " << result.flexible.value << " is below the threshold "
        << *a.threshold << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fission::eval
