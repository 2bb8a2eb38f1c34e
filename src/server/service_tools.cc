// SGLang's utility routes beside generation: /v1/models/{id}, /tokenize and /detokenize (also
// under /v1), /get_load, and /start_profile + /stop_profile (a window of engine counters written
// as JSON).
#include <chrono>
#include <filesystem>
#include <fstream>

#include "base/log.h"
#include "server/api_error.h"
#include "server/string_fields.h"
#include "server/service.h"

namespace fission::server {
namespace {

Json BodyObject(const http::Request& req) {
  Json body = ParseJson(req.body.empty() ? "{}" : req.body, "request body");
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return body;
}

// A string or a list of strings at `key`, and whether it was a list.
std::vector<std::string> Strings(const Json& body, const char* key, bool* is_list) {
  const auto it = body.find(key);
  if (it == body.end()) throw ApiError(400, StrCat("'", key, "' is required"), key);
  *is_list = it->is_array();
  std::optional<std::vector<std::string>> strings = StringOrStrings(*it);
  if (!strings) throw ApiError(400, StrCat("'", key, "' must be a string or a list of strings"), key);
  return *strings;
}

// A list of token ids or a list of such lists at `key`, each id inside the vocabulary.
std::vector<std::vector<std::int32_t>> IdLists(const Json& body, const char* key, std::int64_t vocab, bool* nested) {
  const auto it = body.find(key);
  if (it == body.end() || !it->is_array()) throw ApiError(400, StrCat("'", key, "' must be a list of token ids"), key);
  *nested = !it->empty() && (*it)[0].is_array();
  std::vector<std::vector<std::int32_t>> lists;
  auto read = [&](const Json& list, std::size_t index) {
    std::vector<std::int32_t> ids;
    for (const Json& v : list) {
      const std::optional<std::int64_t> id = v.is_number() ? ExactInt64(v) : std::nullopt;
      if (!id || *id < 0 || *id >= vocab)
        throw ApiError(400, StrCat("'", key, *nested ? StrCat("[", index, "]") : std::string(), "' holds ",
                                   JsonPreview(v), ", not a token id in [0, ", vocab, ")"), key);
      ids.push_back(static_cast<std::int32_t>(*id));
    }
    lists.push_back(std::move(ids));
  };
  if (!*nested) {
    read(*it, 0);
    return lists;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_array()) throw ApiError(400, StrCat("'", key, "[", i, "]' must be a list of token ids"), key);
    read((*it)[i], i);
  }
  return lists;
}

}  // namespace

void Service::RetrieveModel(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const std::string id = req.path.substr(std::string("/v1/models/").size());
  if (id != options_.served_model_name)
    throw ApiError(404, StrCat("The model '", Abbreviate(id), "' does not exist"), "model");
  SendJson(r, 200, ModelCard());
}

void Service::Tokenize(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const Json body = BodyObject(req);
  bool is_list = false;
  const std::vector<std::string> prompts = Strings(body, "prompt", &is_list);
  const bool add_special = GetBool(body, "add_special_tokens", "request body", true);
  Json tokens = Json::array(), counts = Json::array();
  for (const std::string& text : prompts) {
    if (text.size() > route_context_.max_prompt_bytes)
      throw ApiError(400, StrCat("a prompt of ", text.size(), " bytes; this server tokenizes at most ",
                                 route_context_.max_prompt_bytes, " bytes"), "prompt");
    const std::vector<std::int32_t> ids = tokenizer_.Encode(text, add_special);
    tokens.push_back(ids);
    counts.push_back(ids.size());
  }
  SendJson(r, 200, {{"tokens", is_list ? tokens : tokens[0]}, {"count", is_list ? counts : counts[0]},
                    {"max_model_len", engine_.context_length()}});
}

void Service::Detokenize(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const Json body = BodyObject(req);
  bool nested = false;
  const auto lists = IdLists(body, "tokens", engine_.vocab_size(), &nested);
  const bool skip_special = GetBool(body, "skip_special_tokens", "request body", true);
  Json texts = Json::array();
  for (const auto& ids : lists) texts.push_back(tokenizer_.Decode(ids, skip_special));
  SendJson(r, 200, {{"text", nested ? texts : texts[0]}});
}

void Service::GetLoad(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  const engine::EngineStats s = engine_.stats();
  const std::int64_t used_tokens = static_cast<std::int64_t>(engine_.num_pages() - s.free_pages) * engine_.page_size();
  SendJson(r, 200, Json::array({{{"dp_rank", 0}, {"num_reqs", s.running + s.waiting},
                                 {"num_waiting_reqs", s.waiting}, {"num_tokens", used_tokens}}}));
}

void Service::StartProfile(const http::Request& req, const std::shared_ptr<http::Responder>& r) {
  const Json body = BodyObject(req);
  std::lock_guard<std::mutex> lock(profile_mutex_);
  if (profile_) throw ApiError(400, "a profile is already running; POST /stop_profile first");
  const char* env_dir = std::getenv("SGLANG_TORCH_PROFILER_DIR");
  Profile p;
  p.output_dir = GetString(body, "output_dir", "request body", env_dir ? env_dir : "/tmp");
  if (!std::filesystem::is_directory(p.output_dir))
    throw ApiError(400, StrCat("'output_dir' ", Abbreviate(p.output_dir), " is not a directory"), "output_dir");
  p.start = engine_.stats();
  p.start_time = std::chrono::steady_clock::now();
  profile_ = p;
  r->Send(200, "text/plain", "Start profiling.\n");
}

void Service::StopProfile(const http::Request&, const std::shared_ptr<http::Responder>& r) {
  std::lock_guard<std::mutex> lock(profile_mutex_);
  if (!profile_) throw ApiError(400, "no profile is running; POST /start_profile first");
  const engine::EngineStats a = profile_->start, b = engine_.stats();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - profile_->start_time).count();
  const Json report = {{"seconds", seconds},
                       {"steps", b.steps - a.steps},
                       {"prompt_tokens_computed", b.computed_prompt_tokens - a.computed_prompt_tokens},
                       {"prefix_hit_tokens", b.prefix_hit_tokens - a.prefix_hit_tokens},
                       {"generated_tokens", b.generated_tokens - a.generated_tokens},
                       {"decode_only_tokens", b.decode_only_tokens - a.decode_only_tokens},
                       {"prefill_step_seconds", b.prefill_seconds - a.prefill_seconds},
                       {"decode_step_seconds", b.decode_seconds - a.decode_seconds},
                       {"preemptions", b.preemptions - a.preemptions}};
  const auto stamp = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  const std::filesystem::path path = std::filesystem::path(profile_->output_dir) / StrCat("fission-profile-", stamp, ".json");
  profile_.reset();
  std::ofstream(path) << report.dump(2) << "\n";
  Log(LogLevel::kInfo, "profile written to ", path.string());
  SendJson(r, 200, {{"path", path.string()}, {"profile", report}});
}

}  // namespace fission::server
