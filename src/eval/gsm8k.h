// The gsm8k task with lm-eval's semantics: documents from train/test JSON-lines, few-shot
// exemplars drawn from train with Python's random.Random(seed).sample (one draw per evaluated
// document, in order, as lm-eval draws them), prompts "Question: {q}\nAnswer:" with exemplars
// " {answer}" joined by blank lines, and the chat forms (one user turn, or multi-turn exemplars).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::eval {

struct Gsm8kDoc {
  std::string question;
  std::string answer;  // full solution ending in "#### N"
};

struct ChatMessage {
  std::string role;
  std::string content;
};

// One evaluated document with its prompt.
struct Gsm8kRequest {
  int doc_id = 0;
  Gsm8kDoc doc;
  std::string prompt;                 // completions form
  std::vector<ChatMessage> messages;  // chat form (filled when chat is asked for)
};

inline constexpr int kGsm8kVersion = 3;
inline constexpr int kMaxGenTokens = 256;
// Generation stops ("until").
const std::vector<std::string>& Gsm8kStops();

// Reads `path` (one {"question", "answer"} object per line); errors name the file and line.
std::vector<Gsm8kDoc> LoadGsm8k(const std::string& path);

std::string DocToText(const Gsm8kDoc& doc);

struct PromptOptions {
  int num_fewshot = 5;
  std::uint32_t seed = 1234;  // lm-eval's default few-shot seed
  bool chat = false;          // --apply-chat-template
  bool fewshot_as_multiturn = false;
  int limit = -1;  // first `limit` test documents; -1: all
};

std::vector<Gsm8kRequest> BuildGsm8kRequests(const std::vector<Gsm8kDoc>& train, const std::vector<Gsm8kDoc>& test,
                                             const PromptOptions& options);

}  // namespace fission::eval
