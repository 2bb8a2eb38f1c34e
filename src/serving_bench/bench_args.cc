#include "serving_bench/bench_args.h"

#include "base/error.h"
#include "base/flag_reader.h"

namespace fission::serving_bench {

namespace {

constexpr const char* kUsage = R"usage(usage: fission bench [options]

The serving benchmark of sglang.bench_serving / vllm bench serve, against any OpenAI-compatible server.

server
  --backend NAME              sglang (/generate), sglang-oai, vllm, openai (/v1/completions),
                              openai-chat, sglang-oai-chat, vllm-chat (/v1/chat/completions); default sglang
  --base-url URL              server URL; otherwise --host and --port
  --host HOST --port N        default 127.0.0.1 and 30000 (8000 for vllm)
  --model NAME                model name (default: the server's first /v1/models entry)
  --served-model-name NAME    the name sent in requests when it differs from --model
  --tokenizer DIR             tokenizer folder (tokenizer.json); default --model when it is a folder
  --trust-remote-code         accepted (tokenizers are read from tokenizer.json; no code runs)
dataset
  --dataset-name NAME         random (default), random-ids, sharegpt, generated-shared-prefix, or
                              jsonl (--dataset-path: {"prompt" | "prompt_ids", "output_len"} per line)
  --dataset-path FILE         the jsonl file, or a local ShareGPT JSON for sharegpt (never downloaded)
  --num-prompts N             default 1000
  --random-input-len N        default 1024
  --random-output-len N       default 1024
  --random-range-ratio R      lengths uniform over [floor(L*R), L]; default 0.0
  --random-prefix-len N       shared prefix tokens (random); default 0
  --sharegpt-output-len N     fixed output length for sharegpt (default: the completion's length)
  --sharegpt-context-len N    drop sharegpt prompts whose prompt + output exceed N tokens
  --gsp-num-groups N          generated-shared-prefix: groups sharing a system prompt (default 64)
  --gsp-prompts-per-group N   prompts per group (default 16)
  --gsp-system-prompt-len N   system prompt tokens (default 2048)
  --gsp-question-len N        question tokens (default 128)
  --gsp-output-len N          output tokens (default 256)
  --gsp-range-ratio R         length range ratio (default 1.0)
  --gsp-ordered               keep the groups in order (default: shuffled)
  --apply-chat-template       wrap each prompt as a user turn in the tokenizer's chat template
  --tokenize-prompt           send token ids instead of text (random-ids; completions and /generate)
  --save-dataset FILE         write the prompts as JSON lines {"prompt", "prompt_ids", "prompt_len",
                              "output_len"}, readable by --dataset-name jsonl
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
  --lora-name NAME ...        LoRA adapters; each request names one, picked uniformly
  --profile                   POST /start_profile before the run and /stop_profile after it
metrics and output
  --report-format F           sglang (default: sglang.bench_serving's block) or vllm (the block of
                              vLLM's benchmark_serving: "Total Token throughput", "Mean E2EL (ms)")
  --percentile-metrics LIST   sections: ttft,tpot,itl,e2el (default all; vllm format ttft,tpot,itl)
  --metric-percentiles LIST   percentiles, e.g. 50,90,99 (default the sglang block's fixed set; vllm 99)
  --goodput K:MS ...          SLOs for goodput: ttft:MS tpot:MS e2el:MS
  --output-file FILE          append the result as one JSON line (bench_serving)
  --output-details            include per-request details in it
  --save-result               write the result JSON (sglang's and vLLM's keys) into --result-dir
  --result-dir DIR            default .
  --result-filename NAME      default {backend}-{rate}qps[-concurrency{N}]-{model}-{date}.json
  --metadata K=V ...          extra keys for the saved result
  --tag TEXT                  the "tag" key of the result
  --disable-tqdm              no progress output
  --client-threads N          I/O threads of the client (default: a quarter of the cores, 1 to 4)
)usage";

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

const std::vector<std::string>& DatasetNames() {
  static const std::vector<std::string> kNames = {"random", "random-ids", "sharegpt", "generated-shared-prefix",
                                                  "jsonl"};
  return kNames;
}

void ParseGoodput(const std::vector<std::string>& slos, Goodput* g) {
  for (const std::string& slo : slos) {
    const size_t colon = slo.find(':');
    if (colon == std::string::npos) Fail("--goodput: expected KEY:MS, got '", slo, "'");
    const std::string key = slo.substr(0, colon);
    const double ms = NumberValue("--goodput " + key, slo.substr(colon + 1));
    if (ms < 0) Fail("--goodput: ", key, " must not be negative");
    if (key == "ttft") {
      g->ttft_ms = ms;
    } else if (key == "tpot") {
      g->tpot_ms = ms;
    } else if (key == "e2el") {
      g->e2el_ms = ms;
    } else {
      Fail("--goodput: unknown metric '", key, "' (ttft, tpot, e2el)");
    }
  }
}

std::vector<std::string> ParsePercentileMetrics(const std::string& value) {
  std::vector<std::string> metrics = Split(value, ',');
  for (const std::string& m : metrics) {
    if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el") {
      Fail("--percentile-metrics: unknown metric '", m, "' (ttft, tpot, itl, e2el)");
    }
  }
  return metrics;
}

std::vector<double> ParsePercentiles(const std::string& flag, const std::string& value) {
  std::vector<double> out;
  for (const std::string& p : Split(value, ',')) {
    const double x = NumberValue(flag, p);
    if (!(x >= 0 && x <= 100)) Fail(flag, ": ", p, " is not in [0, 100]");
    out.push_back(x);
  }
  return out;
}

// Flags about what is sent and to whom. Returns false when `flag` is not one of them.
bool ParseServerFlag(const std::string& flag, FlagReader& r, BenchArgs& a) {
  if (flag == "--backend") {
    a.backend = r.Value();
  } else if (flag == "--base-url") {
    a.base_url = r.Value();
  } else if (flag == "--host") {
    a.host = r.Value();
  } else if (flag == "--port") {
    a.port = static_cast<int>(IntegerValue(flag, r.Value(), 1, 65535));
  } else if (flag == "--model") {
    a.model = r.Value();
  } else if (flag == "--served-model-name") {
    a.served_model_name = r.Value();
  } else if (flag == "--tokenizer") {
    a.tokenizer = r.Value();
  } else if (flag == "--trust-remote-code") {
    // Tokenizers are read from tokenizer.json; there is no remote code to trust.
  } else if (flag == "--request-rate") {
    a.request_rate = NumberValue(flag, r.Value());
  } else if (flag == "--burstiness") {
    a.burstiness = NumberValue(flag, r.Value());
  } else if (flag == "--max-concurrency") {
    a.max_concurrency = static_cast<int>(IntegerValue(flag, r.Value(), 1, 10000000));
  } else if (flag == "--num-warmups" || flag == "--warmup-requests") {
    a.num_warmups = static_cast<int>(IntegerValue(flag, r.Value(), 0, 100000));
  } else if (flag == "--ignore-eos") {
    a.ignore_eos = true;
  } else if (flag == "--disable-ignore-eos") {
    a.ignore_eos = false;
  } else if (flag == "--disable-stream") {
    a.stream = false;
  } else if (flag == "--extra-request-body") {
    a.extra = ParseJson(r.Value(), "--extra-request-body");
    if (!a.extra.is_object()) Fail("--extra-request-body: expected a JSON object");
  } else if (flag == "--lora-name") {
    a.lora_names = r.Values();
  } else if (flag == "--profile") {
    a.profile = true;
  } else if (flag == "--client-threads") {
    a.client_threads = static_cast<int>(IntegerValue(flag, r.Value(), 1, 64));
  } else {
    return false;
  }
  return true;
}

// Flags that choose and shape the prompts.
bool ParseDatasetFlag(const std::string& flag, FlagReader& r, BenchArgs& a) {
  constexpr long long kMaxLen = 100000000;
  if (flag == "--dataset-name") {
    a.dataset_name = r.Value();
    bool known = false;
    for (const std::string& n : DatasetNames()) known = known || n == a.dataset_name;
    if (!known) {
      Fail("--dataset-name: '", a.dataset_name, "' is not supported (random, random-ids, sharegpt, "
           "generated-shared-prefix, jsonl)");
    }
  } else if (flag == "--dataset-path") {
    a.dataset_path = r.Value();
  } else if (flag == "--num-prompts" || flag == "--num-prompt") {
    a.num_prompts = static_cast<int>(IntegerValue(flag, r.Value(), 1, kMaxLen));
  } else if (flag == "--random-input-len" || flag == "--random-input") {
    a.input_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--random-output-len" || flag == "--random-output") {
    a.output_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--random-range-ratio") {
    a.range_ratio = NumberValue(flag, r.Value());
  } else if (flag == "--random-prefix-len") {
    a.prefix_len = IntegerValue(flag, r.Value(), 0, kMaxLen);
  } else if (flag == "--sharegpt-output-len") {
    a.sharegpt_output_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--sharegpt-context-len") {
    a.sharegpt_context_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--gsp-num-groups") {
    a.gsp_num_groups = static_cast<int>(IntegerValue(flag, r.Value(), 1, 1000000));
  } else if (flag == "--gsp-prompts-per-group") {
    a.gsp_prompts_per_group = static_cast<int>(IntegerValue(flag, r.Value(), 1, 1000000));
  } else if (flag == "--gsp-system-prompt-len") {
    a.gsp_system_prompt_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--gsp-question-len") {
    a.gsp_question_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--gsp-output-len") {
    a.gsp_output_len = IntegerValue(flag, r.Value(), 1, kMaxLen);
  } else if (flag == "--gsp-range-ratio") {
    a.gsp_range_ratio = NumberValue(flag, r.Value());
  } else if (flag == "--gsp-ordered") {
    a.gsp_ordered = true;
  } else if (flag == "--apply-chat-template") {
    a.apply_chat_template = true;
  } else if (flag == "--tokenize-prompt") {
    a.tokenize_prompt = true;
  } else if (flag == "--save-dataset") {
    a.save_dataset = r.Value();
  } else if (flag == "--seed") {
    // numpy seeds are 32-bit; Python's generator is seeded from the same value.
    a.seed = static_cast<std::uint32_t>(IntegerValue(flag, r.Value(), 0, 0xffffffffll));
  } else {
    return false;
  }
  return true;
}

// Flags about what is printed and written.
bool ParseOutputFlag(const std::string& flag, FlagReader& r, BenchArgs& a) {
  if (flag == "--report-format") {
    const std::string v = r.Value();
    if (v == "sglang") {
      a.report_format = ReportFormat::kSglang;
    } else if (v == "vllm") {
      a.report_format = ReportFormat::kVllm;
    } else {
      Fail("--report-format: '", v, "' is not sglang or vllm");
    }
  } else if (flag == "--percentile-metrics") {
    a.percentile_metrics = ParsePercentileMetrics(r.Value());
  } else if (flag == "--metric-percentiles") {
    a.metric_percentiles = ParsePercentiles(flag, r.Value());
  } else if (flag == "--goodput") {
    ParseGoodput(r.Values(), &a.goodput);
  } else if (flag == "--output-file") {
    a.output_file = r.Value();
  } else if (flag == "--output-details") {
    a.output_details = true;
  } else if (flag == "--save-result") {
    a.save_result = true;
  } else if (flag == "--result-dir") {
    a.result_dir = r.Value();
  } else if (flag == "--result-filename") {
    a.result_filename = r.Value();
  } else if (flag == "--metadata") {
    for (const std::string& kv : r.Values()) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) Fail("--metadata: expected KEY=VALUE, got '", kv, "'");
      a.metadata.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
  } else if (flag == "--tag") {
    a.tag = r.Value();
  } else if (flag == "--disable-tqdm") {
    a.progress = false;
  } else {
    return false;
  }
  return true;
}

}  // namespace

BenchArgs ParseBenchArgs(const std::vector<std::string>& argv) {
  BenchArgs a;
  FlagReader reader(argv);
  while (reader.Next()) {
    const std::string flag = reader.flag();
    if (flag == "--help" || flag == "-h") {
      a.help = true;
    } else if (!ParseServerFlag(flag, reader, a) && !ParseDatasetFlag(flag, reader, a) &&
               !ParseOutputFlag(flag, reader, a)) {
      Fail("unknown flag '", flag, "' (see fission bench --help)");
    }
  }
  if (a.tokenize_prompt && a.dataset_name != "random-ids" && a.dataset_name != "jsonl") {
    Fail("--tokenize-prompt needs --dataset-name random-ids (jsonl files carry their own prompt_ids)");
  }
  return a;
}

const char* BenchUsage() { return kUsage; }

}  // namespace fission::serving_bench
