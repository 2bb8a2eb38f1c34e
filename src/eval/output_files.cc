#include "eval/output_files.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>

#include "base/error.h"
#include "eval/python_json.h"
#include "eval/sha256.h"

namespace fission::eval {

namespace {

namespace fs = std::filesystem;
using OJson = nlohmann::ordered_json;

OJson Messages(const std::vector<ChatMessage>& messages) {
  OJson out = OJson::array();
  for (const ChatMessage& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

// The request's context as lm-eval hashes it: the prompt, or the chat as json.dumps(messages).
std::string Context(const Gsm8kRequest& r, bool chat) {
  return chat ? PythonJsonDumps(Messages(r.messages)) : r.prompt;
}

OJson Doc(const Gsm8kDoc& d) { return {{"question", d.question}, {"answer", d.answer}}; }

// gsm8k.yaml (version 3) as lm-eval records it under "configs".
OJson TaskConfig(const RunRecord& run) {
  const OJson filter_list = OJson::array(
      {{{"name", "strict-match"},
        {"filter", OJson::array({{{"function", "regex"}, {"regex_pattern", "#### (\\-?[0-9\\.\\,]+)"}},
                                 {{"function", "take_first"}}})}},
       {{"name", "flexible-extract"},
        {"filter", OJson::array({{{"function", "regex"}, {"group_select", -1},
                                  {"regex_pattern", "(-?[$0-9.,]{2,})|(-?[0-9]+)"}},
                                 {{"function", "take_first"}}})}}});
  return {{"task", "gsm8k"},
          {"tag", OJson::array({"math_word_problems"})},
          {"dataset_path", "gsm8k"},
          {"dataset_name", "main"},
          {"training_split", "train"},
          {"test_split", "test"},
          {"fewshot_split", "train"},
          {"doc_to_text", "Question: {{question}}\nAnswer:"},
          {"doc_to_target", "{{answer}}"},
          {"description", ""},
          {"target_delimiter", " "},
          {"fewshot_delimiter", "\n\n"},
          {"num_fewshot", run.num_fewshot},
          {"metric_list", OJson::array({{{"metric", "exact_match"},
                                         {"aggregation", "mean"},
                                         {"higher_is_better", true},
                                         {"ignore_case", true},
                                         {"ignore_punctuation", false},
                                         {"regexes_to_ignore", OJson::array({",", "\\$", "(?s).*#### ", "\\.$"})}}})},
          {"output_type", "generate_until"},
          {"generation_kwargs", run.request_kwargs},
          {"repeats", 1},
          {"filter_list", filter_list},
          {"should_decontaminate", false},
          {"metadata", {{"version", static_cast<double>(kGsm8kVersion)}}}};
}

OJson Stderr(const FilterScore& s) { return s.stderr_value ? OJson(*s.stderr_value) : OJson("N/A"); }

void WriteText(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream f(path);
  if (!f) Fail("--output-path: cannot write '", path.string(), "'");
  f << text;
  if (!f) Fail("--output-path: writing '", path.string(), "' failed");
}

}  // namespace

std::string ModelNameOf(const std::string& model_args) {
  for (const char* key : {"peft=", "delta=", "pretrained=", "model=", "path=", "engine="}) {
    const size_t at = model_args.find(key);
    if (at == std::string::npos) continue;
    const std::string rest = model_args.substr(at + std::string(key).size());
    return rest.substr(0, rest.find(','));
  }
  return "";
}

std::string SanitizeModelName(const std::string& name) {
  return std::regex_replace(name, std::regex(R"(["<>:/|\\?*\[\]]+)"), "__");
}

std::string DateId() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm local{};
  localtime_r(&t, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H-%M-%S", &local);
  char out[80];
  std::snprintf(out, sizeof(out), "%s.%06lld", buf, static_cast<long long>(micros));
  return out;
}

OutputPaths LmEvalOutputPaths(const std::string& output_path, const std::string& model_args, const std::string& date) {
  const fs::path path(output_path);
  if (path.extension() == ".json") {
    const fs::path dir = path.parent_path();
    return {(dir / (path.stem().string() + "_" + date + ".json")).string(),
            (dir / ("samples_gsm8k_" + date + ".jsonl")).string()};
  }
  const fs::path dir = path / SanitizeModelName(ModelNameOf(model_args));
  return {(dir / ("results_" + date + ".json")).string(), (dir / ("samples_gsm8k_" + date + ".jsonl")).string()};
}

std::vector<OJson> SampleObjects(const EvalResult& result, const RunRecord& run) {
  std::vector<OJson> out;
  for (const char* filter : {"strict-match", "flexible-extract"}) {
    const bool strict = std::string(filter) == "strict-match";
    for (const SampleResult& s : result.samples) {
      const std::string context = Context(s.request, run.chat);
      // A chat context is lm-eval's JsonChatStr, a one-field tuple: it is written as a list.
      const OJson arg0 = run.chat ? OJson::array({context}) : OJson(context);
      const double match = (strict ? s.strict_correct : s.flexible_correct) ? 1.0 : 0.0;
      out.push_back({{"doc_id", s.request.doc_id},
                     {"doc", Doc(s.request.doc)},
                     {"target", s.request.doc.answer},
                     {"arguments", {{"gen_args_0", {{"arg_0", arg0}, {"arg_1", run.request_kwargs}}}}},
                     {"resps", OJson::array({OJson::array({s.response})})},
                     {"filtered_resps", OJson::array({strict ? s.strict : s.flexible})},
                     {"filter", filter},
                     {"metrics", OJson::array({"exact_match"})},
                     {"doc_hash", Sha256Hex(PythonJsonDumps(Doc(s.request.doc), 2))},
                     {"prompt_hash", Sha256Hex(context)},
                     {"target_hash", Sha256Hex(s.request.doc.answer)},
                     {"exact_match", match}});
    }
  }
  return out;
}

OJson ResultsObject(const EvalResult& r, const RunRecord& run, const std::vector<OJson>& samples) {
  const OJson task = {{"alias", "gsm8k"},
                      {"exact_match,strict-match", r.strict.value},
                      {"exact_match_stderr,strict-match", Stderr(r.strict)},
                      {"exact_match,flexible-extract", r.flexible.value},
                      {"exact_match_stderr,flexible-extract", Stderr(r.flexible)}};
  OJson task_hashes = OJson::object();
  if (!samples.empty()) {
    std::string joined;
    for (const OJson& s : samples) {
      joined += s["doc_hash"].get<std::string>() + s["prompt_hash"].get<std::string>() +
                s["target_hash"].get<std::string>();
    }
    task_hashes["gsm8k"] = Sha256Hex(joined);
  }
  const std::string model_name = ModelNameOf(run.model_args);
  const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return {{"results", {{"gsm8k", task}}},
          {"group_subtasks", {{"gsm8k", OJson::array()}}},
          {"configs", {{"gsm8k", TaskConfig(run)}}},
          {"versions", {{"gsm8k", static_cast<double>(kGsm8kVersion)}}},
          {"n-shot", {{"gsm8k", run.num_fewshot}}},
          {"higher_is_better", {{"gsm8k", {{"exact_match", true}}}}},
          {"n-samples", {{"gsm8k", {{"original", run.test_size}, {"effective", r.samples.size()}}}}},
          {"config",
           {{"model", run.model_type},
            {"model_args", run.model_args},
            {"batch_size", run.batch_size},
            {"batch_sizes", OJson::array()},
            {"device", nullptr},
            {"use_cache", nullptr},
            {"limit", run.limit},
            {"bootstrap_iters", 100000},
            {"gen_kwargs", run.cli_gen_kwargs},
            {"random_seed", 0},
            {"numpy_seed", 1234},
            {"torch_seed", 1234},
            {"fewshot_seed", run.fewshot_seed}}},
          {"date", wall},
          {"task_hashes", task_hashes},
          {"model_source", run.model_type},
          {"model_name", model_name},
          {"model_name_sanitized", SanitizeModelName(model_name)},
          {"system_instruction", nullptr},
          {"system_instruction_sha", nullptr},
          {"fewshot_as_multiturn", run.multiturn},
          {"chat_template", nullptr},
          {"chat_template_sha", nullptr},
          {"start_time", run.start_time},
          {"end_time", run.end_time},
          {"total_evaluation_time_seconds", std::to_string(run.end_time - run.start_time)}};
}

OutputPaths WriteOutputs(const std::string& output_path, const EvalResult& result, const RunRecord& run,
                         bool log_samples) {
  const OutputPaths paths = LmEvalOutputPaths(output_path, run.model_args, DateId());
  const std::vector<OJson> samples = log_samples ? SampleObjects(result, run) : std::vector<OJson>{};
  WriteText(paths.results, PythonJsonDumps(ResultsObject(result, run, samples), 2));
  if (!log_samples) return {paths.results, ""};
  std::string lines;
  for (const OJson& s : samples) lines += PythonJsonDumps(s) + "\n";
  WriteText(paths.samples, lines);
  return paths;
}

}  // namespace fission::eval
