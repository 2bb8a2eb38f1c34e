#include "serving_bench/command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/flag_reader.h"
#include "serving_bench/dataset.h"
#include "serving_bench/report.h"
#include "serving_bench/runner.h"
#include "http/client.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {

namespace {

constexpr const char* kUsage = R"(usage: fission bench [options]

The serving benchmark of sglang.bench_serving / vllm bench serve, against any OpenAI-compatible server.

server
  --backend NAME              sglang (/generate), sglang-oai, vllm, openai (/v1/completions),
                              openai-chat, sglang-oai-chat, vllm-chat (/v1/chat/completions); default sglang
  --base-url URL              server URL; otherwise --host and --port
  --host HOST --port N        default 127.0.0.1 and 30000 (8000 for vllm)
  --model NAME                model name (default: the server's first /v1/models entry)
  --tokenizer DIR             tokenizer folder (tokenizer.json); default --model when it is a folder
dataset
  --dataset-name NAME         random (default) or jsonl (--dataset-path: {"prompt", "output_len"} per line)
  --dataset-path FILE
  --num-prompts N             default 1000
  --random-input-len N        default 1024
  --random-output-len N       default 1024
  --random-range-ratio R      lengths uniform over [floor(L*R), L]; default 0.0
  --random-prefix-len N       shared prefix tokens; default 0
  --seed N                    default 1
traffic
  --request-rate R            requests/s; inf (default) sends all at once, else gamma-distributed gaps
  --burstiness B              gamma shape; 1 (default) is a Poisson process
  --max-concurrency N         requests in flight at most
  --num-warmups N             warm-up requests (alias --warmup-requests); default 1
  --ignore-eos                ask the server to ignore EOS (sglang backends do by default)
  --disable-ignore-eos        do not
  --disable-stream            non-streaming requests (TTFT = latency)
  --extra-request-body JSON   merged into every request body
metrics and output
  --percentile-metrics LIST   sections to print: ttft,tpot,itl,e2el (default all)
  --metric-percentiles LIST   percentiles, e.g. 50,90,99 (default bench_serving's fixed set)
  --goodput K:MS ...          SLOs for goodput: ttft:MS tpot:MS e2el:MS
  --output-file FILE          append the result as one JSON line (bench_serving)
  --output-details            include per-request details in it
  --save-result               write a result JSON (vllm bench serve) into --result-dir
  --result-dir DIR            default .
  --result-filename NAME      default {backend}-{rate}qps[-concurrency{N}]-{model}-{date}.json
  --metadata K=V ...          extra keys for the saved result
  --disable-tqdm              no progress bar
  --client-threads N          I/O threads of the client (default: a quarter of the cores, 1 to 4)
)";

struct Args {
  std::string backend = "sglang";
  std::string base_url, host = "127.0.0.1";
  std::optional<int> port;
  std::string model, tokenizer;
  std::string dataset_name = "random", dataset_path;
  int num_prompts = 1000;
  long long input_len = 1024, output_len = 1024, prefix_len = 0;
  double range_ratio = 0.0;
  std::uint64_t seed = 1;
  double request_rate = INFINITY, burstiness = 1.0;
  std::optional<int> max_concurrency;
  int num_warmups = 1;
  std::optional<bool> ignore_eos;
  bool stream = true;
  Json extra = Json::object();
  std::vector<std::string> percentile_metrics;
  std::vector<double> metric_percentiles;
  Goodput goodput;
  std::string output_file;
  bool output_details = false;
  bool save_result = false;
  std::string result_dir, result_filename;
  std::vector<std::pair<std::string, std::string>> metadata;
  bool progress = true;
  // A burst of tokens from many streams is stamped faster by several threads; leave cores to a
  // server on the same host.
  int client_threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u));
  bool help = false;
};

long long Integer(const std::string& flag, const std::string& v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno || x < lo || x > hi) {
    Fail(flag, ": expected an integer in [", lo, ", ", hi, "], got '", v, "'");
  }
  return x;
}

double Number(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || std::isnan(x)) Fail(flag, ": expected a number, got '", v, "'");
  return x;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    std::string part = s.substr(start, p - start);
    if (!part.empty()) out.push_back(part);
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

Args Parse(const std::vector<std::string>& argv) {
  Args a;
  FlagReader reader(argv);
  while (reader.Next()) {
    const std::string flag = reader.flag();
    auto value = [&] { return reader.Value(); };
    auto values = [&] { return reader.Values(); };  // argparse nargs="+"
    if (flag == "--help" || flag == "-h") {
      a.help = true;
    } else if (flag == "--backend") {
      a.backend = value();
    } else if (flag == "--base-url") {
      a.base_url = value();
    } else if (flag == "--host") {
      a.host = value();
    } else if (flag == "--port") {
      a.port = static_cast<int>(Integer(flag, value(), 1, 65535));
    } else if (flag == "--model") {
      a.model = value();
    } else if (flag == "--tokenizer") {
      a.tokenizer = value();
    } else if (flag == "--dataset-name") {
      a.dataset_name = value();
      if (a.dataset_name != "random" && a.dataset_name != "jsonl") {
        Fail("--dataset-name: '", a.dataset_name, "' is not supported (random, jsonl)");
      }
    } else if (flag == "--dataset-path") {
      a.dataset_path = value();
    } else if (flag == "--num-prompts" || flag == "--num-prompt") {
      a.num_prompts = static_cast<int>(Integer(flag, value(), 1, 100000000));
    } else if (flag == "--random-input-len" || flag == "--random-input") {
      a.input_len = Integer(flag, value(), 1, 100000000);
    } else if (flag == "--random-output-len" || flag == "--random-output") {
      a.output_len = Integer(flag, value(), 1, 100000000);
    } else if (flag == "--random-range-ratio") {
      a.range_ratio = Number(flag, value());
    } else if (flag == "--random-prefix-len") {
      a.prefix_len = Integer(flag, value(), 0, 100000000);
    } else if (flag == "--seed") {
      a.seed = static_cast<std::uint64_t>(Integer(flag, value(), 0, INT64_MAX));
    } else if (flag == "--request-rate") {
      a.request_rate = Number(flag, value());
    } else if (flag == "--burstiness") {
      a.burstiness = Number(flag, value());
    } else if (flag == "--max-concurrency") {
      a.max_concurrency = static_cast<int>(Integer(flag, value(), 1, 10000000));
    } else if (flag == "--num-warmups" || flag == "--warmup-requests") {
      a.num_warmups = static_cast<int>(Integer(flag, value(), 0, 100000));
    } else if (flag == "--ignore-eos") {
      a.ignore_eos = true;
    } else if (flag == "--disable-ignore-eos") {
      a.ignore_eos = false;
    } else if (flag == "--disable-stream") {
      a.stream = false;
    } else if (flag == "--extra-request-body") {
      a.extra = ParseJson(value(), "--extra-request-body");
      if (!a.extra.is_object()) Fail("--extra-request-body: expected a JSON object");
    } else if (flag == "--percentile-metrics") {
      a.percentile_metrics = Split(value(), ',');
      for (const std::string& m : a.percentile_metrics) {
        if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el") {
          Fail("--percentile-metrics: unknown metric '", m, "' (ttft, tpot, itl, e2el)");
        }
      }
    } else if (flag == "--metric-percentiles") {
      for (const std::string& p : Split(value(), ',')) {
        const double x = Number(flag, p);
        if (!(x >= 0 && x <= 100)) Fail("--metric-percentiles: ", p, " is not in [0, 100]");
        a.metric_percentiles.push_back(x);
      }
    } else if (flag == "--goodput") {
      for (const std::string& slo : values()) {
        const size_t colon = slo.find(':');
        if (colon == std::string::npos) Fail("--goodput: expected KEY:MS, got '", slo, "'");
        const std::string key = slo.substr(0, colon);
        const double ms = Number("--goodput " + key, slo.substr(colon + 1));
        if (ms < 0) Fail("--goodput: ", key, " must not be negative");
        if (key == "ttft") {
          a.goodput.ttft_ms = ms;
        } else if (key == "tpot") {
          a.goodput.tpot_ms = ms;
        } else if (key == "e2el") {
          a.goodput.e2el_ms = ms;
        } else {
          Fail("--goodput: unknown metric '", key, "' (ttft, tpot, e2el)");
        }
      }
    } else if (flag == "--output-file") {
      a.output_file = value();
    } else if (flag == "--output-details") {
      a.output_details = true;
    } else if (flag == "--save-result") {
      a.save_result = true;
    } else if (flag == "--result-dir") {
      a.result_dir = value();
    } else if (flag == "--result-filename") {
      a.result_filename = value();
    } else if (flag == "--metadata") {
      for (const std::string& kv : values()) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) Fail("--metadata: expected KEY=VALUE, got '", kv, "'");
        a.metadata.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
      }
    } else if (flag == "--disable-tqdm") {
      a.progress = false;
    } else if (flag == "--client-threads") {
      a.client_threads = static_cast<int>(Integer(flag, value(), 1, 64));
    } else {
      Fail("unknown flag '", flag, "' (see fission bench --help)");
    }
  }
  return a;
}

std::string Now(const char* format) {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, std::localtime(&t));
  return buf;
}

// A tqdm-like line: " 37%|███████             | 370/1000 [00:12, 30.1it/s]".
std::string ProgressLine(int done, int total, double elapsed) {
  const int width = 20;
  const double frac = total > 0 ? static_cast<double>(done) / total : 1.0;
  const int full = static_cast<int>(frac * width);
  std::string bar;
  for (int i = 0; i < width; ++i) bar += i < full ? "\u2588" : " ";
  char buf[200];
  const int secs = static_cast<int>(elapsed);
  std::snprintf(buf, sizeof(buf), "\r%3d%%|%s| %d/%d [%02d:%02d, %.2fit/s]", static_cast<int>(frac * 100),
                bar.c_str(), done, total, secs / 60, secs % 60, elapsed > 0 ? done / elapsed : 0.0);
  return buf;
}

http::ClientResponse Get(const http::Url& url, const std::string& path, const std::vector<http::Header>& headers) {
  http::HttpClient client;
  http::ClientRequest req = http::ClientRequest::Get(url, path);
  req.headers = headers;
  req.timeout = std::chrono::seconds(30);
  return client.Fetch(req);
}

std::string DiscoverModel(const http::Url& url, const std::vector<http::Header>& headers) {
  const http::ClientResponse r = Get(url, "/v1/models", headers);
  if (!r.error.empty() || r.status != 200) {
    Fail("--model not given and ", url.ToString(), "/v1/models failed (",
         r.error.empty() ? StrCat("HTTP ", r.status) : r.error, "); pass --model and check --host/--port");
  }
  const Json j = ParseJson(r.body, "/v1/models response");
  const Json& data = RequireField(j, "data", "/v1/models response");
  if (!data.is_array() || data.empty()) Fail("/v1/models lists no model; pass --model");
  return GetString(data[0], "id", "/v1/models entry");
}

// SGLang reports the speculative accept length in /get_server_info.
std::optional<double> AcceptLength(const Json& info) {
  const Json* root = &info;
  if (info.is_object() && info.contains("decode") && info["decode"].is_array() && !info["decode"].empty()) {
    root = &info["decode"][0];
  }
  if (!root->is_object() || !root->contains("internal_states")) return std::nullopt;
  const Json& states = (*root)["internal_states"];
  if (!states.is_array() || states.empty() || !states[0].is_object()) return std::nullopt;
  auto it = states[0].find("avg_spec_accept_length");
  if (it == states[0].end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string BaseName(const std::string& model) {
  const size_t slash = model.find_last_of('/');
  return slash == std::string::npos ? model : model.substr(slash + 1);
}

}  // namespace

int RunBenchCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                    const TokenizerLoader& load_tokenizer) {
  const Args a = Parse(argv);
  if (a.help) {
    out << kUsage;
    return 0;
  }
  http::RaiseOpenFileLimit();
  RunOptions o;
  o.backend = Backend::Parse(a.backend);
  const int port = a.port.value_or(a.backend.rfind("vllm", 0) == 0 ? 8000 : 30000);
  o.base_url = http::Url::Parse(a.base_url.empty() ? StrCat("http://", a.host, ":", port) : a.base_url);
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && *key) {
    o.headers.push_back({"Authorization", StrCat("Bearer ", key)});
  }
  o.settings.model = a.model.empty() ? DiscoverModel(o.base_url, o.headers) : a.model;
  o.settings.stream = a.stream;
  // bench_serving sends ignore_eos unless told not to; the OpenAI-style tools only on request.
  o.settings.ignore_eos = a.ignore_eos.value_or(a.backend.find("sglang") != std::string::npos);
  o.settings.extra_body = a.extra;
  o.request_rate = a.request_rate;
  o.burstiness = a.burstiness;
  o.max_concurrency = a.max_concurrency;
  o.num_warmups = a.num_warmups;
  o.seed = a.seed;
  o.client_threads = a.client_threads;

  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::string tokenizer_id = a.tokenizer;
  if (tokenizer_id.empty() && std::filesystem::is_directory(o.settings.model)) tokenizer_id = o.settings.model;
  if (!tokenizer_id.empty()) tok = load_tokenizer(tokenizer_id);

  std::vector<DatasetRow> rows;
  if (a.dataset_name == "random") {
    if (!tok) Fail("the random dataset needs a tokenizer: pass --tokenizer DIR (a folder with tokenizer.json)");
    RandomDatasetOptions d;
    d.num_prompts = a.num_prompts;
    d.input_len = a.input_len;
    d.output_len = a.output_len;
    d.range_ratio = a.range_ratio;
    d.prefix_len = a.prefix_len;
    d.seed = a.seed;
    rows = SampleRandomRequests(d, *tok);
  } else {
    if (a.dataset_path.empty()) Fail("--dataset-name jsonl needs --dataset-path");
    rows = LoadJsonlRequests(a.dataset_path, a.num_prompts, a.output_len, tok.get());
  }
  out << DescribeLengths(rows);
  out << "Starting warmup with " << a.num_warmups << " sequences...\n" << std::flush;

  const bool bar = a.progress && isatty(fileno(stderr));
  const auto started = http::Clock::now();
  if (bar) {
    o.progress = [&err, started](int done, int total) {
      err << ProgressLine(done, total, std::chrono::duration<double>(http::Clock::now() - started).count())
          << std::flush;
    };
  }
  o.after_warmup = [&out, &a] {
    out << "Warmup completed with " << a.num_warmups << " sequences. Starting main benchmark run...\n" << std::flush;
  };
  const RunResult run = RunBenchmark(o, rows);
  if (bar) err << "\n";

  std::optional<double> accept_length;
  Json server_info = nullptr;
  if (a.backend.find("sglang") != std::string::npos) {
    const http::ClientResponse r = Get(o.base_url, "/get_server_info", o.headers);
    if (r.error.empty() && r.status == 200) {
      try {
        server_info = Json::parse(r.body);
        accept_length = AcceptLength(server_info);
      } catch (const Json::exception&) {
        server_info = nullptr;
      }
    }
  }

  const BenchmarkMetrics m = CalculateMetrics(run.outputs, run.duration_s, tok.get(), a.goodput);
  ReportConfig c;
  c.backend = a.backend;
  c.request_rate = a.request_rate;
  c.max_concurrency = a.max_concurrency;
  c.duration_s = run.duration_s;
  c.goodput = a.goodput.enabled();
  c.accept_length = accept_length;
  c.percentile_metrics = a.percentile_metrics;
  c.metric_percentiles = a.metric_percentiles;
  out << "\n" << FormatFailures(m) << FormatResultBlock(c, m) << std::flush;

  Json result = ResultJson(c, m);
  result["dataset_name"] = a.dataset_name;
  result["random_input_len"] = a.input_len;
  result["random_output_len"] = a.output_len;
  result["random_range_ratio"] = a.range_ratio;
  result["server_info"] = server_info;
  Json details;
  details["input_lens"] = Json::array();
  details["ttfts"] = Json::array();
  details["itls"] = Json::array();
  details["generated_texts"] = Json::array();
  details["errors"] = Json::array();
  for (const RequestOutput& r : run.outputs) {
    details["input_lens"].push_back(r.prompt_len);
    details["ttfts"].push_back(r.ttft);
    details["itls"].push_back(r.itl);
    details["generated_texts"].push_back(r.generated_text);
    details["errors"].push_back(r.error);
  }
  details["output_lens"] = m.output_lens;

  if (!a.output_file.empty()) {
    std::error_code ec;
    const std::filesystem::path path(a.output_file);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    std::ofstream f(path, std::ios::app);
    if (!f) Fail("--output-file: cannot write '", a.output_file, "'");
    Json line = result;
    if (a.output_details) line.update(details);
    f << line.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  }
  if (a.save_result) {
    Json saved = {{"date", Now("%Y%m%d-%H%M%S")},
                  {"backend", a.backend},
                  {"model_id", o.settings.model},
                  {"tokenizer_id", tokenizer_id},
                  {"num_prompts", rows.size()},
                  {"request_rate", std::isinf(a.request_rate) ? Json("inf") : Json(a.request_rate)},
                  {"burstiness", a.burstiness},
                  {"max_concurrency", a.max_concurrency ? Json(*a.max_concurrency) : Json(nullptr)}};
    for (const auto& [k, v] : a.metadata) saved[k] = v;
    saved.update(result);
    saved.update(details);
    std::string name = a.result_filename;
    if (name.empty()) {
      name = StrCat(a.backend, "-", PythonFloat(a.request_rate), "qps",
                    a.max_concurrency ? StrCat("-concurrency", *a.max_concurrency) : "", "-",
                    BaseName(o.settings.model), "-", Now("%Y%m%d-%H%M%S"), ".json");
    }
    const std::filesystem::path path = std::filesystem::path(a.result_dir.empty() ? "." : a.result_dir) / name;
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    std::ofstream f(path);
    if (!f) Fail("--save-result: cannot write '", path.string(), "'");
    f << saved.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
    out << "Saved the result to " << path.string() << "\n";
  }
  return 0;
}

}  // namespace fission::serving_bench
