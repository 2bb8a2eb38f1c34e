#include "serving_bench/command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "http/client.h"
#include "serving_bench/bench_args.h"
#include "serving_bench/dataset.h"
#include "serving_bench/dataset_choice.h"
#include "serving_bench/progress.h"
#include "serving_bench/report.h"
#include "serving_bench/result_files.h"
#include "serving_bench/runner.h"
#include "serving_bench/server_control.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {

namespace {

RunOptions BuildRunOptions(const BenchArgs& a) {
  RunOptions o;
  o.backend = Backend::Parse(a.backend);
  const int port = a.port.value_or(a.backend.rfind("vllm", 0) == 0 ? 8000 : 30000);
  o.base_url = http::Url::Parse(a.base_url.empty() ? StrCat("http://", a.host, ":", port) : a.base_url);
  if (const char* key = std::getenv("OPENAI_API_KEY"); key && *key) {
    o.headers.push_back({"Authorization", StrCat("Bearer ", key)});
  }
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
  return o;
}

// bench_serving prints these around the run; a failure is reported and the run goes on.
void Profile(const RunOptions& o, const char* path, const char* doing, const char* done, std::ostream& out,
             std::ostream& err) {
  out << doing << "\n" << std::flush;
  const std::string error = PostControl(o.base_url, path, o.headers);
  if (error.empty()) {
    out << done << "\n" << std::flush;
  } else {
    err << "fission bench: " << o.base_url.ToString() << path << " failed: " << error << "\n";
  }
}

// Token-id prompts have no chat form; said before the first request rather than by one of them.
void CheckPromptsFitTheRoute(const Backend& backend, const std::vector<DatasetRow>& rows) {
  if (backend.api != ApiKind::kChatCompletions) return;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].prompt_ids.empty()) {
      Fail("prompt ", i + 1, " is token ids, which --backend ", backend.name,
           " cannot send: use a completions backend (sglang, sglang-oai, vllm, openai)");
    }
  }
}

ReportConfig BuildReportConfig(const BenchArgs& a, double duration_s, std::optional<double> accept_length) {
  ReportConfig c;
  c.backend = a.backend;
  c.request_rate = a.request_rate;
  c.max_concurrency = a.max_concurrency;
  c.duration_s = duration_s;
  c.goodput = a.goodput.enabled();
  c.accept_length = accept_length;
  c.percentile_metrics = a.percentile_metrics;
  c.metric_percentiles = a.metric_percentiles;
  return c;
}

}  // namespace

int RunBenchCommand(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err,
                    const TokenizerLoader& load_tokenizer) {
  const BenchArgs a = ParseBenchArgs(argv);
  if (a.help) {
    out << BenchUsage();
    return 0;
  }
  http::RaiseOpenFileLimit();
  RunOptions o = BuildRunOptions(a);
  const std::string model = a.model.empty() ? DiscoverModel(o.base_url, o.headers) : a.model;
  o.settings.model = a.served_model_name.empty() ? model : a.served_model_name;

  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::string tokenizer_id = a.tokenizer;
  if (tokenizer_id.empty() && std::filesystem::is_directory(model)) tokenizer_id = model;
  if (!tokenizer_id.empty()) tok = load_tokenizer(tokenizer_id);

  std::vector<DatasetRow> rows = BuildDataset(a, tok.get(), out);
  CheckPromptsFitTheRoute(o.backend, rows);
  AssignLoraNames(rows, a.lora_names, a.seed);
  if (!a.save_dataset.empty()) {
    SaveDataset(a.save_dataset, rows, tok.get());
    out << "Saved the prompts to " << a.save_dataset << "\n";
  }
  out << DescribeLengths(rows);
  out << "Starting warmup with " << a.num_warmups << " sequences...\n" << std::flush;

  ProgressReporter progress(err, isatty(fileno(stderr)) != 0);
  if (a.progress) o.progress = [&progress](int done, int total) { progress.Update(done, total); };
  o.after_warmup = [&] {
    out << "Warmup completed with " << a.num_warmups << " sequences. Starting main benchmark run...\n" << std::flush;
    if (a.profile) Profile(o, "/start_profile", "Starting profiler...", "Profiler started", out, err);
  };
  const RunResult run = RunBenchmark(o, rows);
  if (a.progress) progress.Finish();
  if (a.profile) Profile(o, "/stop_profile", "Stopping profiler...", "Profiler stopped", out, err);

  RunFacts facts;
  facts.model_id = o.settings.model;
  facts.tokenizer_id = tokenizer_id;
  facts.num_prompts = rows.size();
  std::optional<double> accept_length;
  if (a.backend.find("sglang") != std::string::npos) {
    facts.server_info = FetchServerInfo(o.base_url, o.headers);
    accept_length = AcceptLength(facts.server_info);
  }

  const BenchmarkMetrics m = CalculateMetrics(run.outputs, run.duration_s, tok.get(), a.goodput);
  const ReportConfig c = BuildReportConfig(a, run.duration_s, accept_length);
  const std::string block =
      a.report_format == ReportFormat::kVllm ? FormatVllmResultBlock(c, m) : FormatResultBlock(c, m);
  out << "\n" << FormatFailures(m) << block << std::flush;

  const Json result = ResultObject(a, facts, c, m);
  const Json details = ResultDetails(run.outputs, m);
  if (!a.output_file.empty()) AppendOutputFile(a, result, details);
  if (a.save_result) out << "Saved the result to " << SaveResultFile(a, facts, result, details) << "\n";
  return 0;
}

}  // namespace fission::serving_bench
