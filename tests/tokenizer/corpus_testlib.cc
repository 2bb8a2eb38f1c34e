#include "tokenizer/corpus_testlib.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/test_paths.h"

namespace fission::tokenizer::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool FileExists(const std::string& path) { return std::filesystem::exists(path); }

std::vector<Json> ReadJsonLines(const std::string& path) {
  std::vector<Json> out;
  std::istringstream in(ReadFile(path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty()) out.push_back(ParseJson(line, StrCat(path, ":", n)));
  }
  return out;
}

std::vector<std::string> CommittedCorpus() {
  std::vector<std::string> out;
  for (const Json& j : ReadJsonLines(FixtureDir() + "/corpus.jsonl")) out.push_back(j.get<std::string>());
  return out;
}

std::vector<std::string> Gsm8kStrings(const std::string& file, int rows) {
  std::vector<std::string> out;
  std::vector<Json> lines = ReadJsonLines(Gsm8kDir() + "/" + file);
  for (int i = 0; i < rows && i < static_cast<int>(lines.size()); ++i) {
    out.push_back(lines[i]["question"].get<std::string>());
    out.push_back(lines[i]["answer"].get<std::string>());
  }
  return out;
}

bool HaveGsm8k(const std::string& file) { return FileExists(Gsm8kDir() + "/" + file); }

}  // namespace fission::tokenizer::testing
