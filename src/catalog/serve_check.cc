#include "catalog/serve_check.h"

#include <cctype>
#include <map>
#include <optional>

#include "catalog/command_template.h"
#include "catalog/runner.h"

namespace fission::catalog {

namespace {

// Stands for the binary while a template is expanded for checking (left unquoted by ShellQuote).
constexpr const char* kFissionWord = "@fission@";

bool IsAssignment(const std::string& word) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  for (size_t i = 0; i < eq; ++i) {
    const char c = word[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return !std::isdigit(static_cast<unsigned char>(word[0]));
}

// The words after `serve` when `command` runs `{fission} serve` (after any NAME=VALUE words).
std::optional<std::vector<std::string>> ServeArgs(const std::string& command) {
  const std::vector<std::string> words = ShellWords(command, "--server-cmd");
  size_t i = 0;
  while (i < words.size() && IsAssignment(words[i])) ++i;
  if (i + 1 >= words.size() || words[i] != kFissionWord || words[i + 1] != "serve") return std::nullopt;
  return std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(i) + 2, words.end());
}

}  // namespace

std::vector<std::string> ShellWords(const std::string& text, const std::string& where) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string::npos) Fail(where, ": unclosed ' in: ", text);
      word += text.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && std::string("\"\\$`\n").find(text[j + 1]) != std::string::npos) ++j;
        word += text[j];
      }
      if (j >= text.size()) Fail(where, ": unclosed \" in: ", text);
      i = j;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

void CheckServeCommands(std::vector<Cell>& cells, const std::string& server_cmd, const std::string& models_root,
                        const std::string& model_override_args, const ServeFlagCheck& check) {
  if (!check) return;
  std::map<std::string, std::string> verdicts;  // expanded command -> refusal
  for (Cell& c : cells) {
    const std::string path = models_root.empty() ? c.model->path : ResolveModelPath(*c.model, models_root);
    // Port 1 stands for the free port a run picks; the check is about the flags.
    const std::string command = ExpandTemplate(
        server_cmd, ServerTemplateVars(c, kFissionWord, path, model_override_args, 1), "--server-cmd");
    const std::optional<std::vector<std::string>> args = ServeArgs(command);
    if (!args) continue;
    auto it = verdicts.find(command);
    if (it == verdicts.end()) it = verdicts.emplace(command, check(*args)).first;
    c.serve_checked = true;
    c.serve_refusal = it->second;
  }
}

std::string RefusalSummary(const std::vector<Cell>& cells) {
  std::map<std::string, std::vector<std::string>> by_reason;
  size_t refused = 0;
  for (const Cell& c : cells) {
    if (c.serve_refusal.empty()) continue;
    ++refused;
    by_reason[c.serve_refusal].push_back(c.name);
  }
  if (refused == 0) return "";
  std::string out = StrCat(refused, " of ", cells.size(), " cells would be refused by fission serve:\n");
  for (const auto& [reason, names] : by_reason) {
    out += StrCat("  ", names.front(), names.size() > 1 ? StrCat(" and ", names.size() - 1, " more") : "", ": ",
                  reason, "\n");
  }
  return out;
}

}  // namespace fission::catalog
