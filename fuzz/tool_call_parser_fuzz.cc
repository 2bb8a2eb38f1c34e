// Fuzzes the reasoning and tool-call parsers: any bytes, whole and streamed in pieces chosen by the
// input, must not crash, and streaming must give exactly the whole-text result.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace {

using fission::server::ReasoningParser;
using fission::server::ToolCallParser;
using fission::server::ToolSpec;

// Piece lengths from the first bytes of the input, so the fuzzer explores the cut points too.
std::vector<std::string_view> Pieces(std::string_view text, std::string_view shape) {
  std::vector<std::string_view> pieces;
  std::size_t i = 0, k = 0;
  while (i < text.size()) {
    const std::size_t len = shape.empty() ? 1 : 1 + static_cast<unsigned char>(shape[k++ % shape.size()]) % 7;
    pieces.push_back(text.substr(i, len));
    i += len;
  }
  return pieces;
}

const std::vector<ToolSpec>& Tools() {
  static const std::vector<ToolSpec> tools = fission::server::ToolSpecsFromJson(fission::Json::parse(R"([
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
      "zone": {"type": "string"}, "n": {"type": "integer"}, "on": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "f"}}])"));
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Long inputs only slow the search down: waiting states rescan their buffer on every piece.
  if (size > 16384) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::string_view shape = all.substr(0, std::min<std::size_t>(4, size));
  const std::string_view text = all.substr(shape.size());
  const auto pieces = Pieces(text, shape);

  for (const std::string& name : ReasoningParser::Names()) {
    auto parser = ReasoningParser::Create(name);
    for (bool forced : {false, true}) {
      const fission::server::ReasoningResult whole = parser->Parse(text, forced);
      auto stream = parser->NewStream(forced, /*stream_reasoning=*/(size & 1) != 0);
      std::string reasoning, content;
      for (std::string_view p : pieces) {
        auto d = stream->Feed(p);
        reasoning += d.reasoning;
        content += d.content;
      }
      auto d = stream->Finish();
      FISSION_CHECK(reasoning + d.reasoning == whole.reasoning_content, name);
      FISSION_CHECK(content + d.content == whole.content, name);
    }
  }
  for (const std::string& name : ToolCallParser::Names()) {
    auto parser = ToolCallParser::Create(name);
    for (const std::vector<ToolSpec>* tools : {&Tools(), static_cast<const std::vector<ToolSpec>*>(nullptr)}) {
      const std::vector<ToolSpec> list = tools == nullptr ? std::vector<ToolSpec>{} : *tools;
      const fission::server::ToolCallResult whole = parser->Parse(text, list, 1);
      auto stream = parser->NewStream(list, 1);
      std::string content;
      std::vector<std::string> args;
      auto take = [&](const fission::server::ToolCallChunk& chunk) {
        content += chunk.content;
        for (const auto& delta : chunk.tool_calls) {
          if (!delta.id.empty()) args.emplace_back();
          FISSION_CHECK(delta.index + 1 == static_cast<int>(args.size()), name);
          args.back() += delta.arguments;
        }
      };
      for (std::string_view p : pieces) take(stream->Feed(p));
      take(stream->Finish());
      FISSION_CHECK(content == whole.content, name);
      FISSION_CHECK(args.size() == whole.tool_calls.size(), name);
      for (std::size_t i = 0; i < args.size(); ++i) {
        FISSION_CHECK(args[i] == whole.tool_calls[i].arguments, name);
        // A call reported valid has JSON-object arguments.
        if (whole.tool_calls[i].valid) FISSION_CHECK(fission::Json::parse(args[i]).is_object(), name);
      }
    }
  }
  return 0;
}
