#include "server/response_format.h"

namespace fission::server {

Json FinishReasonJson(const ChoiceState& c) {
  if (!c.finished) return nullptr;
  return std::string(engine::FinishReasonName(c.finish_reason));
}

Json MatchedStopJson(const ChoiceState& c) {
  if (c.matched_stop_string) return *c.matched_stop_string;
  if (c.matched_stop_token) return *c.matched_stop_token;
  return nullptr;
}

Json UsageJson(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string TokenText(const tokenizer::Tokenizer& tokenizer, std::int32_t id) { return tokenizer.Decode({id}, false); }

namespace {

Json TopDict(const tokenizer::Tokenizer& tokenizer, const engine::TokenLogprob& lp) {
  Json top = Json::object();
  for (const engine::TopLogprob& t : lp.top) {
    const std::string text = TokenText(tokenizer, t.token_id);
    if (!top.contains(text)) top[text] = t.logprob;
  }
  return top;
}

Json Bytes(const std::string& s) {
  Json bytes = Json::array();
  for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

Json CompletionLogprobsJson(const tokenizer::Tokenizer& tokenizer, const std::vector<std::int32_t>* prompt_ids,
                            const std::vector<engine::TokenLogprob>* prompt_logprobs,
                            const std::vector<engine::TokenLogprob>& logprobs, std::size_t text_offset_base) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  std::size_t offset = text_offset_base;
  auto add = [&](std::int32_t id, Json lp, Json alternatives) {
    const std::string text = TokenText(tokenizer, id);
    tokens.push_back(text);
    token_logprobs.push_back(std::move(lp));
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += text.size();
  };
  if (prompt_ids != nullptr) {
    for (std::size_t i = 0; i < prompt_ids->size(); ++i) {
      // Prompt token i has logprob entry i - 1 (the first token has none).
      if (i == 0 || prompt_logprobs == nullptr || i - 1 >= prompt_logprobs->size()) {
        add((*prompt_ids)[i], nullptr, nullptr);
      } else {
        const engine::TokenLogprob& lp = (*prompt_logprobs)[i - 1];
        add((*prompt_ids)[i], lp.logprob, TopDict(tokenizer, lp));
      }
    }
  }
  for (const engine::TokenLogprob& lp : logprobs) add(lp.token_id, lp.logprob, TopDict(tokenizer, lp));
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json ChatLogprobsContentJson(const tokenizer::Tokenizer& tokenizer, const std::vector<engine::TokenLogprob>& logprobs) {
  Json content = Json::array();
  for (const engine::TokenLogprob& lp : logprobs) {
    const std::string text = TokenText(tokenizer, lp.token_id);
    Json top = Json::array();
    for (const engine::TopLogprob& t : lp.top) {
      const std::string alt = TokenText(tokenizer, t.token_id);
      top.push_back({{"token", alt}, {"logprob", t.logprob}, {"bytes", Bytes(alt)}});
    }
    content.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", Bytes(text)}, {"top_logprobs", top}});
  }
  return content;
}

std::string SseEvent(const Json& json) {
  return "data: " + json.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

}  // namespace fission::server
