// The three response formats built on ApiJob: OpenAI completions, OpenAI chat completions and
// SGLang's native /generate.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/api_job.h"
#include "server/chat_output.h"
#include "server/openai_protocol.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

class CompletionJob final : public ApiJob {
 public:
  // `prompt_texts[p]` is prompt p's text (echoed when asked).
  CompletionJob(JobContext context, const tokenizer::Tokenizer& tokenizer, std::string model,
                const CompletionRequest& request, std::vector<std::string> prompt_texts);

 private:
  void OnDelta(int choice, const engine::RequestOutput& out) override;
  void OnComplete() override;
  Json ChunkBase() const;
  Json Logprobs(const ChoiceState& c, bool with_prompt, std::size_t from) const;

  const tokenizer::Tokenizer& tokenizer_;
  std::string model_;
  CompletionRequest request_;
  std::vector<std::string> prompt_texts_;
  std::vector<std::size_t> streamed_logprobs_;
};

using SplitterFactory = std::function<std::unique_ptr<ChatOutputSplitter>()>;

class ChatJob final : public ApiJob {
 public:
  ChatJob(JobContext context, const tokenizer::Tokenizer& tokenizer, std::string model, const ChatRequest& request,
          int num_choices, const SplitterFactory& splitters);

 private:
  void OnDelta(int choice, const engine::RequestOutput& out) override;
  void OnComplete() override;
  Json Chunk(int choice, Json delta, Json finish_reason, Json logprobs) const;
  std::string FinishReason(int choice, const ChoiceState& c) const;

  const tokenizer::Tokenizer& tokenizer_;
  std::string model_;
  ChatRequest request_;
  std::vector<std::unique_ptr<ChatOutputSplitter>> splitters_;
  std::vector<ChatMessageBuilder> messages_;
};

// SGLang's /generate: {"text": ..., "output_ids": ..., "meta_info": {...}} per prompt; streamed events
// carry the cumulative text.
class GenerateJob final : public ApiJob {
 public:
  GenerateJob(JobContext context, bool stream, bool batch, bool return_logprob, std::string rid);

 private:
  void OnDelta(int choice, const engine::RequestOutput& out) override;
  void OnComplete() override;
  Json Result(int choice) const;

  bool batch_;
  bool return_logprob_;
  std::string rid_;
};

}  // namespace fission::server
