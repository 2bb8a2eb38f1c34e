#include "server/api_jobs.h"

#include "server/api_error.h"
#include "server/response_format.h"

namespace fission::server {

// ---- /v1/completions --------------------------------------------------------------------------

CompletionJob::CompletionJob(JobContext context, const tokenizer::Tokenizer& tokenizer, std::string model,
                             const CompletionRequest& request, std::vector<std::string> prompt_texts)
    : ApiJob(std::move(context), request.stream.stream),
      tokenizer_(tokenizer),
      model_(std::move(model)),
      request_(request),
      prompt_texts_(std::move(prompt_texts)) {
  set_id_prefix("cmpl-");
  streamed_logprobs_.assign(request.prompts.size() * request.params.n, 0);
}

Json CompletionJob::ChunkBase() const {
  return {{"id", id()}, {"object", "text_completion"}, {"created", created()}, {"model", model_}};
}

Json CompletionJob::Logprobs(const ChoiceState& c, bool with_prompt, std::size_t from) const {
  if (request_.logprobs < 0) return nullptr;
  const std::vector<engine::TokenLogprob> part(c.logprobs.begin() + static_cast<std::ptrdiff_t>(from), c.logprobs.end());
  return CompletionLogprobsJson(tokenizer_, with_prompt ? &c.prompt_ids : nullptr,
                                with_prompt ? &c.prompt_logprobs : nullptr, part, 0);
}

void CompletionJob::OnDelta(int choice, const engine::RequestOutput& out) {
  ChoiceState& c = mutable_choices()[choice];
  const bool first = !c.started;
  StartStreamOnce();
  c.started = true;
  if (out.text.empty() && out.token_ids.empty() && !out.finished && !(first && request_.echo)) return;
  const std::string text = (first && request_.echo ? prompt_texts_[c.prompt_index] : "") + out.text;
  Json chunk = ChunkBase();
  const bool with_prompt = first && request_.echo;
  Json logprobs = Logprobs(c, with_prompt, streamed_logprobs_[choice]);
  streamed_logprobs_[choice] = c.logprobs.size();
  chunk["choices"] = Json::array(
      {{{"index", choice}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", FinishReasonJson(c)},
        {"matched_stop", MatchedStopJson(c)}}});
  if (request_.stream.continuous_usage_stats) chunk["usage"] = UsageJson(TotalUsage());
  responder().Write(SseEvent(chunk));
}

void CompletionJob::OnComplete() {
  const std::string error = FirstError();
  if (stream()) return EndStream(error, request_.stream.include_usage ? ChunkBase() : Json());
  if (!error.empty()) return responder().Send(error_status(), "application/json", ErrorBody(error_status(), error));
  Json choices = Json::array();
  for (std::size_t i = 0; i < this->choices().size(); ++i) {
    const ChoiceState& c = this->choices()[i];
    const std::string text = (request_.echo ? prompt_texts_[c.prompt_index] : "") + c.text;
    choices.push_back({{"index", i}, {"text", text}, {"logprobs", Logprobs(c, request_.echo, 0)},
                       {"finish_reason", FinishReasonJson(c)}, {"matched_stop", MatchedStopJson(c)}});
  }
  Json body = ChunkBase();
  body["choices"] = choices;
  body["usage"] = UsageJson(TotalUsage());
  responder().Send(200, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// ---- /v1/chat/completions ---------------------------------------------------------------------

ChatJob::ChatJob(JobContext context, const tokenizer::Tokenizer& tokenizer, std::string model,
                 const ChatRequest& request, int num_choices, const SplitterFactory& splitters)
    : ApiJob(std::move(context), request.stream.stream),
      tokenizer_(tokenizer),
      model_(std::move(model)),
      request_(request),
      messages_(num_choices) {
  set_id_prefix("chatcmpl-");
  for (int i = 0; i < num_choices; ++i) splitters_.push_back(splitters());
}

Json ChatJob::Chunk(int choice, Json delta, Json finish_reason, Json logprobs) const {
  Json chunk = {{"id", id()}, {"object", "chat.completion.chunk"}, {"created", created()}, {"model", model_}};
  chunk["choices"] = Json::array(
      {{{"index", choice}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
        {"finish_reason", std::move(finish_reason)}}});
  if (request_.stream.continuous_usage_stats) chunk["usage"] = UsageJson(TotalUsage());
  return chunk;
}

std::string ChatJob::FinishReason(int choice, const ChoiceState& c) const {
  if (c.finish_reason == engine::FinishReason::kStop && messages_[choice].has_tool_calls()) return "tool_calls";
  return std::string(engine::FinishReasonName(c.finish_reason));
}

void ChatJob::OnDelta(int choice, const engine::RequestOutput& out) {
  ChoiceState& c = mutable_choices()[choice];
  StartStreamOnce();
  if (!c.started) {
    c.started = true;
    responder().Write(SseEvent(Chunk(choice, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)));
  }
  ChatDelta delta = splitters_[choice]->Feed(out.text);
  if (out.finished) {
    ChatDelta rest = splitters_[choice]->Finish();
    delta.content += rest.content;
    delta.reasoning += rest.reasoning;
    for (const Json& t : rest.tool_calls) delta.tool_calls.push_back(t);
  }
  messages_[choice].Add(delta);
  Json logprobs = nullptr;
  if (request_.logprobs && !out.logprobs.empty())
    logprobs = {{"content", ChatLogprobsContentJson(tokenizer_, out.logprobs)}};
  if (!delta.empty() || !logprobs.is_null()) {
    Json d = Json::object();
    if (!delta.content.empty()) d["content"] = delta.content;
    if (!delta.reasoning.empty()) d["reasoning_content"] = delta.reasoning;
    if (!delta.tool_calls.empty()) d["tool_calls"] = delta.tool_calls;
    responder().Write(SseEvent(Chunk(choice, d, nullptr, logprobs)));
  }
  if (out.finished) responder().Write(SseEvent(Chunk(choice, Json::object(), FinishReason(choice, c), nullptr)));
}

void ChatJob::OnComplete() {
  const std::string error = FirstError();
  if (stream()) {
    Json usage_chunk;
    if (request_.stream.include_usage)
      usage_chunk = {{"id", id()}, {"object", "chat.completion.chunk"}, {"created", created()}, {"model", model_}};
    return EndStream(error, usage_chunk);
  }
  if (!error.empty()) return responder().Send(error_status(), "application/json", ErrorBody(error_status(), error));
  Json choices = Json::array();
  for (std::size_t i = 0; i < this->choices().size(); ++i) {
    const ChoiceState& c = this->choices()[i];
    messages_[i].Add(splitters_[i]->Feed(c.text));
    messages_[i].Add(splitters_[i]->Finish());
    Json logprobs = nullptr;
    if (request_.logprobs) logprobs = {{"content", ChatLogprobsContentJson(tokenizer_, c.logprobs)}};
    choices.push_back({{"index", i}, {"message", messages_[i].Message()}, {"logprobs", logprobs},
                       {"finish_reason", FinishReason(static_cast<int>(i), c)}, {"matched_stop", MatchedStopJson(c)}});
  }
  Json body = {{"id", id()}, {"object", "chat.completion"}, {"created", created()}, {"model", model_},
               {"choices", choices}, {"usage", UsageJson(TotalUsage())}};
  responder().Send(200, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace));
}

// ---- /generate (SGLang native) ----------------------------------------------------------------

GenerateJob::GenerateJob(JobContext context, bool stream, bool batch, bool return_logprob, std::string rid)
    : ApiJob(std::move(context), stream),
      batch_(batch),
      return_logprob_(return_logprob),
      rid_(std::move(rid)) {}

Json GenerateJob::Result(int choice) const {
  const ChoiceState& c = choices()[choice];
  Json finish = nullptr;
  if (c.finished) {
    finish = {{"type", std::string(engine::FinishReasonName(c.finish_reason))}};
    if (c.finish_reason == engine::FinishReason::kLength) finish["length"] = c.token_ids.size();
    if (c.finish_reason == engine::FinishReason::kStop) finish["matched"] = MatchedStopJson(c);
    if (c.finish_reason == engine::FinishReason::kAbort) finish["message"] = c.error.empty() ? "aborted" : c.error;
  }
  Json meta = {{"id", rid_.empty() ? id() : rid_},
               {"finish_reason", finish},
               {"prompt_tokens", c.prompt_ids.size()},
               {"completion_tokens", c.token_ids.size()},
               {"cached_tokens", c.cached_tokens}};
  if (return_logprob_) {
    Json lps = Json::array();
    for (const engine::TokenLogprob& lp : c.logprobs) lps.push_back({lp.logprob, lp.token_id, nullptr});
    meta["output_token_logprobs"] = lps;
  }
  return {{"text", c.text}, {"output_ids", c.token_ids}, {"meta_info", meta}};
}

void GenerateJob::OnDelta(int choice, const engine::RequestOutput& out) {
  ChoiceState& c = mutable_choices()[choice];
  StartStreamOnce();
  c.started = true;
  if (out.token_ids.empty() && out.text.empty() && !out.finished) return;
  Json event = Result(choice);
  if (batch_) event["index"] = choice;
  responder().Write(SseEvent(event));
}

void GenerateJob::OnComplete() {
  const std::string error = FirstError();
  if (stream()) return EndStream(error, Json());
  if (!error.empty()) {
    responder().Send(error_status(), "application/json", ErrorBody(error_status(), error));
    return;
  }
  Json body;
  if (batch_) {
    body = Json::array();
    for (std::size_t i = 0; i < choices().size(); ++i) body.push_back(Result(static_cast<int>(i)));
  } else {
    body = Result(0);
  }
  responder().Send(200, "application/json", body.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace fission::server
