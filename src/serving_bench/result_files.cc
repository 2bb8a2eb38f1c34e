#include "serving_bench/result_files.h"

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace fission::serving_bench {

namespace {

std::string Now(const char* format) {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, std::localtime(&t));
  return buf;
}

std::string BaseName(const std::string& model) {
  const size_t slash = model.find_last_of('/');
  return slash == std::string::npos ? model : model.substr(slash + 1);
}

std::ofstream OpenForWriting(const std::filesystem::path& path, std::ios::openmode mode, const char* flag) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream f(path, mode);
  if (!f) Fail(flag, ": cannot write '", path.string(), "'");
  return f;
}

std::string Dump(const Json& j, int indent) { return j.dump(indent, ' ', false, Json::error_handler_t::replace); }

template <typename T>
Json Optional(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

Json ResultObject(const BenchArgs& a, const RunFacts& facts, const ReportConfig& c, const BenchmarkMetrics& m) {
  Json j = ResultJson(c, m);
  j["tag"] = a.tag.empty() ? Json(nullptr) : Json(a.tag);
  j["dataset_name"] = a.dataset_name;
  j["sharegpt_output_len"] = Optional(a.sharegpt_output_len);
  j["random_input_len"] = a.input_len;
  j["random_output_len"] = a.output_len;
  j["random_range_ratio"] = a.range_ratio;
  j["server_info"] = facts.server_info;
  return j;
}

Json ResultDetails(const std::vector<RequestOutput>& outputs, const BenchmarkMetrics& m) {
  Json d;
  d["input_lens"] = Json::array();
  d["ttfts"] = Json::array();
  d["itls"] = Json::array();
  d["generated_texts"] = Json::array();
  d["errors"] = Json::array();
  for (const RequestOutput& r : outputs) {
    d["input_lens"].push_back(r.prompt_len);
    d["ttfts"].push_back(r.ttft);
    d["itls"].push_back(r.itl);
    d["generated_texts"].push_back(r.generated_text);
    d["errors"].push_back(r.error);
  }
  d["output_lens"] = m.output_lens;
  return d;
}

void AppendOutputFile(const BenchArgs& a, const Json& result, const Json& details) {
  std::ofstream f = OpenForWriting(a.output_file, std::ios::app, "--output-file");
  Json line = result;
  if (a.output_details) line.update(details);
  f << Dump(line, -1) << "\n";
}

std::string SaveResultFile(const BenchArgs& a, const RunFacts& facts, const Json& result, const Json& details) {
  const std::string date = Now("%Y%m%d-%H%M%S");
  Json saved = {{"date", date},
                {"backend", a.backend},
                {"model_id", facts.model_id},
                {"tokenizer_id", facts.tokenizer_id},
                {"best_of", 1},
                {"num_prompts", facts.num_prompts},
                {"request_rate", std::isinf(a.request_rate) ? Json("inf") : Json(a.request_rate)},
                {"burstiness", a.burstiness},
                {"max_concurrency", Optional(a.max_concurrency)}};
  for (const auto& [k, v] : a.metadata) saved[k] = v;
  saved.update(result);
  saved.update(details);
  std::string name = a.result_filename;
  if (name.empty()) {
    name = StrCat(a.backend, "-", PythonFloat(a.request_rate), "qps",
                  a.max_concurrency ? StrCat("-concurrency", *a.max_concurrency) : "", "-", BaseName(facts.model_id),
                  "-", date, ".json");
  }
  const std::filesystem::path path = std::filesystem::path(a.result_dir.empty() ? "." : a.result_dir) / name;
  std::ofstream f = OpenForWriting(path, std::ios::trunc, "--save-result");
  f << Dump(saved, 2) << "\n";
  return path.string();
}

}  // namespace fission::serving_bench
