#include "eval/command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "eval/eval_args.h"
#include "eval/output_files.h"
#include "eval/runner.h"
#include "http/client.h"

namespace fission::eval {

namespace {

using OJson = nlohmann::ordered_json;

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

std::string DataDir(const EvalArgs& a) {
  if (!a.data_dir.empty()) return a.data_dir;
  if (const char* env = std::getenv("FISSION_GSM8K_DIR"); env && *env) return env;
  Fail("no gsm8k data: pass --data-dir DIR (a folder with train.jsonl and test.jsonl) or set FISSION_GSM8K_DIR");
}

// The server and the route: model_args' base_url is the full URL lm-eval posts to.
void ResolveEndpoint(const EvalArgs& a, EvalOptions& o) {
  const std::string default_path = a.chat ? "/v1/chat/completions" : "/v1/completions";
  if (a.endpoint_url.empty()) {
    o.base_url = http::Url::Parse(a.base_url);
    o.path = default_path;
    return;
  }
  o.base_url = http::Url::Parse(a.endpoint_url);
  o.path = o.base_url.path.empty() ? default_path : o.base_url.path;
  o.base_url.path.clear();
}

// The tokenizer's EOS text when the model name is a local checkpoint, as lm-eval appends it to
// the stops of completion requests; "" when unknown.
std::string LocalEosString(const std::string& model) {
  const std::filesystem::path config = std::filesystem::path(model) / "tokenizer_config.json";
  std::error_code ec;
  if (model.empty() || !std::filesystem::is_regular_file(config, ec)) return "";
  const Json j = ReadJsonFile(config.string());
  auto it = j.find("eos_token");
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"];
  return "";
}

// The task's generation kwargs updated with --gen_kwargs, as every request records them.
OJson RequestKwargs(const EvalArgs& a) {
  OJson kwargs = {{"until", Gsm8kStops()}, {"do_sample", false}, {"temperature", 0.0}};
  if (a.gen_kwargs.is_object()) kwargs.update(a.gen_kwargs);
  return kwargs;
}

// lm-eval's API models turn the kwargs into request fields: do_sample is dropped, max_tokens or
// max_gen_toks caps the generation, until becomes stop (with the EOS text for completions; at
// most four for chats), anything else is sent as it is.
GenerationSettings Generation(const EvalArgs& a, OJson kwargs, const std::string& eos) {
  GenerationSettings g;
  g.seed = a.request_seed;
  kwargs.erase("do_sample");
  g.max_tokens = a.max_gen_toks;
  for (const char* key : {"max_gen_toks", "max_tokens"}) {
    if (!kwargs.contains(key)) continue;
    if (!kwargs[key].is_number_integer()) Fail("--gen_kwargs ", key, ": expected an integer");
    g.max_tokens = kwargs[key].get<int>();
    kwargs.erase(key);
  }
  if (kwargs.contains("temperature")) {
    if (!kwargs["temperature"].is_number()) Fail("--gen_kwargs temperature: expected a number");
    g.temperature = kwargs["temperature"].get<double>();
    kwargs.erase("temperature");
  }
  g.stop.clear();
  const OJson until = kwargs.value("until", OJson(nullptr));
  kwargs.erase("until");
  if (until.is_string()) {
    g.stop.push_back(until.get<std::string>());
  } else if (until.is_array()) {
    for (const OJson& s : until) {
      if (!s.is_string()) Fail("--gen_kwargs until: expected strings");
      g.stop.push_back(s.get<std::string>());
    }
  } else if (!until.is_null()) {
    Fail("--gen_kwargs until: expected a string or a list of strings");
  }
  if (!a.chat && !eos.empty() && std::find(g.stop.begin(), g.stop.end(), eos) == g.stop.end()) g.stop.push_back(eos);
  if (a.chat && g.stop.size() > 4) g.stop.resize(4);
  g.extra = kwargs;
  return g;
}

// The model_args string Fission's spelling stands for, so the files name the run the same way.
std::string ImpliedModelArgs(const EvalOptions& o) {
  return StrCat("model=", o.model, ",base_url=", o.base_url.ToString(), o.path, ",num_concurrent=", o.num_concurrent);
}

std::string Limit(const EvalArgs& a) {
  if (!a.limit) return "None";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", *a.limit);
  std::string s = buf;
  return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
}

int DocumentLimit(const EvalArgs& a, size_t test_size) {
  if (!a.limit) return -1;
  if (*a.limit < 1) return static_cast<int>(std::ceil(static_cast<double>(test_size) * *a.limit));
  return static_cast<int>(*a.limit);
}

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int RunEvalCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  const EvalArgs a = ParseEvalArgs(argv);
  if (a.help) {
    out << EvalUsage();
    return 0;
  }
  const std::string data_dir = DataDir(a);
  http::RaiseOpenFileLimit();
  EvalOptions o;
  ResolveEndpoint(a, o);
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && *key) {
    o.headers.push_back({"Authorization", StrCat("Bearer ", key)});
  }
  o.model = a.model.empty() ? DiscoverModel(o.base_url, o.headers) : a.model;
  o.chat = a.chat;
  o.num_concurrent = a.num_concurrent;
  o.max_retries = a.max_retries;
  o.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  const OJson request_kwargs = RequestKwargs(a);
  o.generation = Generation(a, request_kwargs, a.eos_string.empty() ? LocalEosString(o.model) : a.eos_string);
  const bool tty = isatty(fileno(stderr)) != 0;
  int last_tenth = -1;
  if (a.progress) {
    o.progress = [&err, tty, &last_tenth](int done, int total) {
      if (tty) {
        err << "\rRunning generate_until requests: " << done << "/" << total << std::flush;
      } else if (const int tenth = total > 0 ? done * 10 / total : 10; tenth > last_tenth) {
        last_tenth = tenth;
        err << "Running generate_until requests: " << done << "/" << total << "\n" << std::flush;
      }
    };
  }
  const auto train = LoadGsm8k(data_dir + "/train.jsonl");
  const auto test = LoadGsm8k(data_dir + "/test.jsonl");
  PromptOptions p;
  p.num_fewshot = a.Fewshot();
  p.seed = a.fewshot_seed;
  p.chat = a.chat;
  p.fewshot_as_multiturn = a.multiturn;
  p.limit = DocumentLimit(a, test.size());
  const auto requests = BuildGsm8kRequests(train, test, p);
  const double start = Seconds();
  const EvalResult result = RunGsm8k(o, requests);
  const double end = Seconds();
  if (a.progress && tty) err << "\n";

  RunRecord run;
  run.model_type = a.model_type.empty() ? (a.chat ? "local-chat-completions" : "local-completions") : a.model_type;
  run.model_args = a.model_args.empty() ? ImpliedModelArgs(o) : a.model_args;
  run.batch_size = a.batch_size;
  run.limit = a.limit ? OJson(*a.limit) : OJson(nullptr);
  run.cli_gen_kwargs = a.gen_kwargs;
  run.request_kwargs = request_kwargs;
  run.num_fewshot = a.Fewshot();
  run.fewshot_seed = a.fewshot_seed;
  run.chat = a.chat;
  run.multiturn = a.multiturn;
  run.test_size = test.size();
  run.start_time = start;
  run.end_time = end;
  // lm-eval's header line, then its table.
  out << run.model_type << " (" << run.model_args << "), gen_kwargs: ("
      << (a.gen_kwargs_text.empty() ? "None" : a.gen_kwargs_text) << "), limit: " << Limit(a)
      << ", num_fewshot: " << (a.num_fewshot ? std::to_string(*a.num_fewshot) : "None")
      << ", batch_size: " << a.batch_size << "\n";
  out << FormatResultsTable(ResultRows(result, a.Fewshot()));
  if (!a.output_path.empty()) {
    const OutputPaths paths = WriteOutputs(a.output_path, result, run, a.log_samples);
    out << "results: " << paths.results << "\n";
    if (!paths.samples.empty()) out << "samples: " << paths.samples << "\n";
  }
  if (a.threshold && result.flexible.value < *a.threshold) {
    err << "fission eval: flexible-extract exact_match " << result.flexible.value << " is below the threshold "
        << *a.threshold << "\n";
    return 1;
  }
  return 0;
}

}  // namespace fission::eval
