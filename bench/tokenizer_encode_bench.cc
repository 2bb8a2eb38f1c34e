// Single-thread encode throughput (MB/s) on the tokenizer corpus: the committed strings plus the
// first 700 gsm8k test rows, encoded one string at a time without special tokens, the same work
// tools/golden/tokenizer_bench_reference.py times for the Rust tokenizers library.
//
// usage: tokenizer_encode_bench --source-dir DIR [--repeat N] NAME=MODEL_DIR...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) fission::Fail(path, ": cannot open");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> Corpus(const std::string& source_dir) {
  std::vector<std::string> texts;
  for (const auto& line : ReadLines(source_dir + "/tests/fixtures/tokenizer/corpus.jsonl")) {
    texts.push_back(fission::Json::parse(line).get<std::string>());
  }
  auto rows = ReadLines(source_dir + "/../shared/datasets/gsm8k/test.jsonl");
  for (std::size_t i = 0; i < rows.size() && i < 700; ++i) {
    fission::Json row = fission::Json::parse(rows[i]);
    texts.push_back(row["question"].get<std::string>());
    texts.push_back(row["answer"].get<std::string>());
  }
  return texts;
}

double EncodeAll(const fission::tokenizer::Tokenizer& tok, const std::vector<std::string>& texts, std::size_t* ids) {
  auto start = std::chrono::steady_clock::now();
  std::size_t n = 0;
  for (const auto& t : texts) n += tok.Encode(t, false).size();
  *ids = n;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string source_dir = ".";
  int repeat = 5;
  std::vector<std::pair<std::string, std::string>> models;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--source-dir" && i + 1 < argc) {
        source_dir = argv[++i];
      } else if (a == "--repeat" && i + 1 < argc) {
        repeat = std::max(1, std::atoi(argv[++i]));
      } else if (a.find('=') != std::string::npos) {
        models.emplace_back(a.substr(0, a.find('=')), a.substr(a.find('=') + 1));
      } else {
        fission::Fail("usage: tokenizer_encode_bench --source-dir DIR [--repeat N] NAME=MODEL_DIR...");
      }
    }
    std::vector<std::string> texts = Corpus(source_dir);
    std::size_t bytes = 0;
    for (const auto& t : texts) bytes += t.size();
    for (const auto& [name, dir] : models) {
      // A fresh tokenizer measures the first pass (empty word cache); later passes reuse it, as
      // the reference's repeated runs do.
      auto cold_tok = fission::tokenizer::Tokenizer::Load(dir);
      std::size_t ids = 0;
      double cold = EncodeAll(*cold_tok, texts, &ids);
      double best = 1e30;
      for (int r = 0; r < repeat; ++r) best = std::min(best, EncodeAll(*cold_tok, texts, &ids));
      std::printf(
          "{\"tokenizer\": \"%s\", \"library\": \"fission\", \"strings\": %zu, \"bytes\": %zu, \"ids\": %zu, "
          "\"first_pass_seconds\": %.4f, \"first_pass_mb_per_s\": %.2f, \"best_seconds\": %.4f, \"mb_per_s\": %.2f}\n",
          name.c_str(), texts.size(), bytes, ids, cold, bytes / cold / 1e6, best, bytes / best / 1e6);
    }
  } catch (const fission::Error& e) {
    std::fprintf(stderr, "tokenizer_encode_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
