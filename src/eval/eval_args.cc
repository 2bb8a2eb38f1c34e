#include "eval/eval_args.h"

#include <set>

#include "base/error.h"
#include "base/flag_reader.h"
#include "eval/lm_eval_args.h"

namespace fission::eval {

namespace {

constexpr const char* kUsage = R"usage(usage: fission eval [options]

gsm8k with lm-eval's semantics against an OpenAI-compatible server. Flags are accepted in
Fission's spelling (--base-url, --num-fewshot) and in lm-eval's (--model_args, --num_fewshot).

  --base-url URL            server root, e.g. http://127.0.0.1:30000 (default http://127.0.0.1:30000)
  --model NAME              the served model name (default: the server's first /v1/models entry);
                            local-completions or local-chat-completions select lm-eval's API model
  --model_args K=V,...      lm-eval's: base_url (the full .../v1/completions URL), model,
                            num_concurrent, tokenized_requests (False), max_retries, timeout,
                            max_gen_toks, seed, eos_string; tokenizer and tokenizer_backend accepted
  --tasks gsm8k             the task (only gsm8k)
  --data-dir DIR            folder with train.jsonl and test.jsonl (default $FISSION_GSM8K_DIR)
  --num-fewshot N           exemplars from the train split (default 5, the task's)
  --limit N                 first N test questions, or a fraction of them below 1 (default all)
  --num-concurrent N        requests in flight (default 1)
  --seed N                  few-shot sampling seed (default 1234); lm-eval's four-seed list is read too
  --max-gen-toks N          generation limit (default 256)
  --gen_kwargs K=V,...      generation arguments over the task's (until, temperature, max_gen_toks,
                            do_sample; others are sent as request fields); a JSON object works too
  --batch_size N            accepted and recorded; every request carries one prompt
  --apply-chat-template     use /v1/chat/completions
  --fewshot-as-multiturn    exemplars as alternating chat turns (with --apply-chat-template)
  --output-path PATH        lm-eval's results file: PATH/<model>/results_<date>.json, or
                            <stem>_<date>.json beside PATH when it ends in .json
  --log-samples             also write samples_gsm8k_<date>.jsonl there (needs --output-path)
  --threshold X             exit 1 when flexible-extract exact_match is below X
  --disable-tqdm            no progress output
  --trust-remote-code, --device D, --verbosity V, --write-out, --show-config: accepted, no effect
)usage";

// lm-eval's model types that talk to an OpenAI-compatible server.
bool IsModelType(const std::string& v) {
  return v == "local-completions" || v == "local-chat-completions" || v == "openai-completions" ||
         v == "openai-chat-completions";
}

std::string Text(const nlohmann::ordered_json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

long long Whole(const std::string& key, const nlohmann::ordered_json& v, long long lo, long long hi) {
  if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi) {
    Fail("--model_args ", key, ": expected an integer in [", lo, ", ", hi, "], got '", Text(v), "'");
  }
  return v.get<long long>();
}

// --model_args, as lm-eval's TemplateAPI takes them.
void ApplyModelArgs(const std::string& text, EvalArgs& a) {
  static const std::set<std::string> kAccepted = {"tokenizer", "tokenizer_backend", "max_length",
                                                  "verify_certificate", "batch_size", "pretrained"};
  const nlohmann::ordered_json args = ParseArgString(text);
  for (const auto& [key, v] : args.items()) {
    if (key == "base_url") {
      a.endpoint_url = Text(v);
    } else if (key == "model") {
      a.model = Text(v);
    } else if (key == "num_concurrent") {
      a.num_concurrent = static_cast<int>(Whole(key, v, 1, 100000));
    } else if (key == "max_retries") {
      a.max_retries = static_cast<int>(Whole(key, v, 0, 100));
    } else if (key == "timeout") {
      if (!v.is_number()) Fail("--model_args timeout: expected seconds, got '", Text(v), "'");
      a.timeout_s = v.get<double>();
    } else if (key == "max_gen_toks") {
      a.max_gen_toks = static_cast<int>(Whole(key, v, 1, 1000000));
    } else if (key == "seed") {
      a.request_seed = Whole(key, v, 0, INT64_MAX);
    } else if (key == "eos_string") {
      a.eos_string = Text(v);
    } else if (key == "tokenized_requests") {
      if (!v.is_boolean()) Fail("--model_args tokenized_requests: expected True or False, got '", Text(v), "'");
      if (v.get<bool>()) {
        Fail("--model_args tokenized_requests=True: fission eval sends text prompts; pass tokenized_requests=False");
      }
    } else if (!kAccepted.count(key)) {
      Fail("--model_args: unknown key '", key, "' (known: base_url, model, num_concurrent, tokenized_requests, "
           "max_retries, timeout, max_gen_toks, seed, eos_string, tokenizer, tokenizer_backend, max_length)");
    }
  }
}

// lm-eval's --seed: one integer for every seed, or "random,numpy,torch,fewshot".
std::uint32_t FewshotSeed(const std::string& v) {
  const size_t last = v.rfind(',');
  const std::string fewshot = last == std::string::npos ? v : v.substr(last + 1);
  return static_cast<std::uint32_t>(IntegerValue("--seed", fewshot, 0, 0xffffffffll));
}

void ParseLimit(const std::string& v, EvalArgs& a) {
  const double x = NumberValue("--limit", v);
  if (!(x > 0)) Fail("--limit: expected a positive count or fraction, got '", v, "'");
  if (x >= 1 && x != static_cast<double>(static_cast<long long>(x))) {
    Fail("--limit: a count must be whole, got '", v, "'");
  }
  a.limit = x;
}

// lm-eval's short flags.
std::string LongFlag(const std::string& flag) {
  if (flag == "-m") return "--model";
  if (flag == "-a") return "--model-args";
  if (flag == "-t") return "--tasks";
  if (flag == "-f") return "--num-fewshot";
  if (flag == "-b") return "--batch-size";
  if (flag == "-o") return "--output-path";
  if (flag == "-L") return "--limit";
  if (flag == "-s") return "--log-samples";
  if (flag == "-v") return "--verbosity";
  if (flag == "-w") return "--write-out";
  return flag;
}

bool ParseRunFlag(const std::string& flag, FlagReader& r, EvalArgs& a) {
  if (flag == "--base-url") {
    a.base_url = r.Value();
  } else if (flag == "--model") {
    const std::string v = r.Value();
    (IsModelType(v) ? a.model_type : a.model) = v;
  } else if (flag == "--model-args") {
    a.model_args = r.Value();
    ApplyModelArgs(a.model_args, a);
  } else if (flag == "--tasks") {
    const std::string t = r.Value();
    if (t != "gsm8k") Fail("--tasks: only gsm8k is supported, got '", t, "'");
  } else if (flag == "--data-dir") {
    a.data_dir = r.Value();
  } else if (flag == "--num-fewshot") {
    a.num_fewshot = static_cast<int>(IntegerValue(flag, r.Value(), 0, 1000));
  } else if (flag == "--limit") {
    ParseLimit(r.Value(), a);
  } else if (flag == "--num-concurrent") {
    a.num_concurrent = static_cast<int>(IntegerValue(flag, r.Value(), 1, 100000));
  } else if (flag == "--seed") {
    a.fewshot_seed = FewshotSeed(r.Value());
  } else if (flag == "--max-gen-toks") {
    a.max_gen_toks = static_cast<int>(IntegerValue(flag, r.Value(), 1, 1000000));
  } else if (flag == "--gen-kwargs") {
    a.gen_kwargs_text = r.Value();
    a.gen_kwargs = ParseGenKwargs(a.gen_kwargs_text);
  } else if (flag == "--batch-size") {
    a.batch_size = r.Value();
  } else if (flag == "--apply-chat-template") {
    a.chat = true;
  } else if (flag == "--fewshot-as-multiturn") {
    a.multiturn = true;
  } else {
    return false;
  }
  return true;
}

bool ParseOutputFlag(const std::string& flag, FlagReader& r, EvalArgs& a) {
  if (flag == "--output-path") {
    a.output_path = r.Value();
  } else if (flag == "--log-samples") {
    a.log_samples = true;
  } else if (flag == "--threshold") {
    a.threshold = NumberValue(flag, r.Value());
  } else if (flag == "--disable-tqdm") {
    a.progress = false;
  } else if (flag == "--device" || flag == "--verbosity") {
    r.Value();  // no effect: the server owns the device, and logging is Fission's
  } else if (flag == "--trust-remote-code" || flag == "--write-out" || flag == "--show-config") {
    // no effect
  } else {
    return false;
  }
  return true;
}

}  // namespace

EvalArgs ParseEvalArgs(const std::vector<std::string>& argv) {
  EvalArgs a;
  FlagReader reader(argv);  // lm-eval spells flags with underscores; the reader accepts both
  while (reader.Next()) {
    const std::string flag = LongFlag(reader.flag());
    if (flag == "--help" || flag == "-h") {
      a.help = true;
    } else if (!ParseRunFlag(flag, reader, a) && !ParseOutputFlag(flag, reader, a)) {
      Fail("unknown flag '", reader.flag(), "' (see fission eval --help)");
    }
  }
  if (a.multiturn && !a.chat) Fail("--fewshot-as-multiturn needs --apply-chat-template");
  if (a.log_samples && a.output_path.empty()) Fail("--log-samples needs --output-path");
  const bool chat_model = a.model_type == "local-chat-completions" || a.model_type == "openai-chat-completions";
  if (chat_model && !a.chat) Fail("--model ", a.model_type, " needs --apply_chat_template, as in lm-eval");
  if (!a.model_type.empty() && !chat_model && a.chat) {
    Fail("--model ", a.model_type, " with --apply_chat_template renders the template client-side in lm-eval; "
         "use --model local-chat-completions to send chats");
  }
  return a;
}

const char* EvalUsage() { return kUsage; }

}  // namespace fission::eval
