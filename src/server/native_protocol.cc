#include "server/native_protocol.h"

#include "base/json.h"
#include "server/api_error.h"
#include "server/sampling_params_json.h"

namespace fission::server {
namespace {

const Json* Field(const Json& body, const char* key) {
  auto it = body.find(key);
  return (it == body.end() || it->is_null()) ? nullptr : &*it;
}

// `input_ids`: token ids, or a non-empty list of non-empty lists of them.
void ReadInputIds(const Json& ids, GenerateRequest* r) {
  if (!ids.is_array() || ids.empty())
    throw ApiError(400, "'input_ids' must be a non-empty array of token ids or of arrays of them", "input_ids");
  r->is_text = false;
  r->batch = ids[0].is_array();
  if (!r->batch) {
    r->input_ids.push_back(ParseTokenIds(ids, "input_ids"));
    return;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string where = StrCat("input_ids[", i, "]");
    if (!ids[i].is_array() || ids[i].empty()) throw ApiError(400, where + " must be a non-empty array of token ids", "input_ids");
    r->input_ids.push_back(ParseTokenIds(ids[i], where));
  }
}

// `text`: a string, or a non-empty list of strings.
void ReadText(const Json& text, GenerateRequest* r) {
  r->batch = text.is_array();
  if (r->batch && text.empty()) throw ApiError(400, "'text' must be a string or a non-empty list of strings", "text");
  for (const Json& t : r->batch ? text : Json::array({text})) {
    if (!t.is_string()) throw ApiError(400, "'text' must be a string or a non-empty list of strings", "text");
    r->texts.push_back(t.get<std::string>());
  }
}

GenerateRequest Read(const Json& body) {
  if (!body.is_object()) BadRequest("request body must be a JSON object");
  GenerateRequest r;
  if (const Json* params = Field(body, "sampling_params"))
    r.params = ParseSamplingParamsJson(*params, "'sampling_params'", engine::SamplingParams{}, &r.constraint);
  if (const Json* ids = Field(body, "input_ids")) {
    ReadInputIds(*ids, &r);
  } else if (const Json* text = Field(body, "text")) {
    ReadText(*text, &r);
  } else {
    BadRequest("either 'text' or 'input_ids' is required");
  }
  r.return_logprob = GetBool(body, "return_logprob", "request body", false);
  const std::int64_t top = GetInt(body, "top_logprobs_num", "request body", 0);
  if (top < 0 || top > engine::kMaxTopLogprobs)
    throw ApiError(400, StrCat("'top_logprobs_num' must be in [0, ", engine::kMaxTopLogprobs, "], got ", top),
                   "top_logprobs_num");
  if (r.return_logprob) {
    r.params.logprobs = true;
    r.params.top_logprobs = static_cast<std::int32_t>(top);
  }
  if (r.batch && r.params.n > 1) BadRequest("'n' > 1 with a batch of prompts is not supported on /generate");
  r.stream = GetBool(body, "stream", "request body", false);
  // SGLang also takes a list of rids for a batch; only a single one names a request here.
  if (const Json* rid = Field(body, "rid"); rid && rid->is_string()) r.rid = rid->get<std::string>();
  return r;
}

}  // namespace

GenerateRequest ParseGenerateRequest(const std::string& body) {
  // Field errors from the shared readers are fission::Errors: all of them are the client's.
  try {
    return Read(ParseJson(body, "request body"));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
}

}  // namespace fission::server
