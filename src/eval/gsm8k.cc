#include "eval/gsm8k.h"

#include <fstream>

#include "base/error.h"
#include "base/python_random.h"

namespace fission::eval {

const std::vector<std::string>& Gsm8kStops() {
  static const std::vector<std::string> kStops = {"Question:", "</s>", "<|im_end|>"};
  return kStops;
}

std::vector<Gsm8kDoc> LoadGsm8k(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail("cannot open gsm8k file '", path, "'");
  std::vector<Gsm8kDoc> docs;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = StrCat(path, ":", line_no);
    const Json j = ParseJson(line, where);
    docs.push_back({GetString(j, "question", where), GetString(j, "answer", where)});
  }
  if (docs.empty()) Fail("gsm8k file '", path, "' holds no documents");
  return docs;
}

std::string DocToText(const Gsm8kDoc& doc) { return "Question: " + doc.question + "\nAnswer:"; }

std::vector<Gsm8kRequest> BuildGsm8kRequests(const std::vector<Gsm8kDoc>& train, const std::vector<Gsm8kDoc>& test,
                                             const PromptOptions& o) {
  if (o.num_fewshot < 0) Fail("--num-fewshot must be >= 0, got ", o.num_fewshot);
  if (static_cast<size_t>(o.num_fewshot) > train.size()) {
    Fail("--num-fewshot ", o.num_fewshot, " exceeds the ", train.size(), " training documents");
  }
  const size_t n = o.limit < 0 ? test.size() : std::min(test.size(), static_cast<size_t>(o.limit));
  PythonRandom rnd(o.seed);
  std::vector<Gsm8kRequest> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Gsm8kRequest r;
    r.doc_id = static_cast<int>(i);
    r.doc = test[i];
    std::vector<const Gsm8kDoc*> shots;
    if (o.num_fewshot > 0) {
      for (size_t idx : rnd.Sample(train.size(), static_cast<size_t>(o.num_fewshot))) shots.push_back(&train[idx]);
    }
    // target_delimiter " ", fewshot_delimiter "\n\n".
    std::string context;
    for (const Gsm8kDoc* s : shots) context += DocToText(*s) + " " + s->answer + "\n\n";
    r.prompt = context + DocToText(r.doc);
    if (o.chat) {
      if (o.fewshot_as_multiturn) {
        for (const Gsm8kDoc* s : shots) {
          r.messages.push_back({"user", DocToText(*s)});
          r.messages.push_back({"assistant", s->answer});
        }
        r.messages.push_back({"user", DocToText(r.doc)});
      } else {
        r.messages.push_back({"user", r.prompt});
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace fission::eval
