// `fission serve` flags: SGLang's launch_server names, aliases and defaults, so that a recipe runs
// by replacing `python3 -m sglang.launch_server` with `fission serve`.
//
// Every flag is one of three kinds (docs/server_parsers.md has the table and the reasons):
//   applied     Fission honours it;
//   ignored     accepted, has no effect in Fission, and listed once at start-up;
//   not landed  recognised, but a value that needs the missing feature is an Error saying so.
// Flags that the engine or the model loader already parse (EngineConfig, model::LoadOptions) are
// handed to their parsers, so each flag has exactly one parser.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/engine_config.h"
#include "model/runtime/model_loader.h"

namespace fission::server {

enum class FlagKind { kApplied, kIgnored, kNotLanded };
enum class FlagType { kBool, kInt, kFloat, kString, kIntList };
// Who parses the value: this file, engine::ParseEngineFlag or model::ParseLoadFlag.
enum class FlagParser { kServer, kEngine, kLoad };

struct FlagInfo {
  std::string_view name;  // canonical spelling
  std::vector<std::string_view> aliases;
  FlagType type;
  FlagKind kind;
  FlagParser parser;
  std::string_view value_name;  // for --help ("N", "PATH", ...)
  std::string_view default_text;
  std::string_view help;
};

// The table of every flag `fission serve` accepts.
const std::vector<FlagInfo>& ServerFlags();
const char* FlagKindName(FlagKind kind);

struct ServerArgs {
  std::string model_path;         // --model-path (empty: the caller's default model)
  std::string tokenizer_path;     // empty: model_path
  std::string served_model_name;  // empty: model_path
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string device = "auto";  // auto | cpu | cuda; auto picks cuda when the build and host have it

  engine::EngineConfig engine;  // page size, token budgets, radix cache, random seed, context length
  model::LoadOptions load;      // tp and attention-cp sizes, cp mode, load format, config overrides, nodes

  std::string kv_cache_dtype = "auto";
  std::string dtype = "auto";
  std::string chat_template;
  std::string reasoning_parser;
  std::string tool_call_parser;
  std::string grammar_backend = "xgrammar";  // every name but none means this server's own engine
  std::string api_key;
  std::string log_level = "info";
  double graceful_shutdown_timeout = 30;  // seconds

  // Accepted for recipes; no effect until CUDA graphs land (listed as ignored).
  std::vector<int> cuda_graph_bs;
  int cuda_graph_max_bs = 0;
  bool disable_cuda_graph = false;


  bool help = false;                       // -h / --help was given
  std::vector<std::string> ignored_flags;  // canonical names, once each, in order of appearance

  // The line start-up prints when ignored_flags is not empty.
  std::string IgnoredFlagsLine() const;
  // The names with their defaults resolved (both default to the model path).
  const std::string& ServedModelName() const { return served_model_name.empty() ? model_path : served_model_name; }
  const std::string& TokenizerPath() const { return tokenizer_path.empty() ? model_path : tokenizer_path; }
};

// Parses `args` (the words after `fission serve`). Bad input throws fission::Error naming every bad
// flag at once: an unknown flag (with the closest known one), a missing or malformed value, a value
// outside the flag's choices, or a feature that has not landed.
ServerArgs ParseServerArgs(const std::vector<std::string>& args);
// The same, adding every problem to `problems` (one per bad flag or failed check) instead of
// throwing at the first; the result then holds the flags that parsed.
ServerArgs ParseServerArgs(const std::vector<std::string>& args, std::vector<std::string>* problems);
// Runs `check`, adding the fission::Error it throws to `problems` instead of stopping there, so a
// caller can report every problem at once.
template <typename F>
void CollectProblem(std::vector<std::string>* problems, F&& check) {
  try {
    check();
  } catch (const Error& e) {
    problems->push_back(e.what());
  }
}

// One message for several problems: the problem itself when there is one, else "N problems:" and a
// line each.
std::string JoinProblems(const std::vector<std::string>& problems);

// `fission serve --help`: every flag, its default and its kind.
std::string ServerArgsHelp();

}  // namespace fission::server
