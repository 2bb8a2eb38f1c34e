// Tool-call parsers (--tool-call-parser): turn a model's tool-call markup into OpenAI `tool_calls`,
// whole or as a stream of deltas.
//
// Every format is parsed by one incremental state machine; the whole-text Parse feeds it the text
// in one piece, so streaming and non-streaming agree however the text is cut. Formats and the
// handling of malformed markup are in docs/server_parsers.md.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace fission::server {

// A tool a request offers: its function name and JSON-schema `parameters` (null when absent).
struct ToolSpec {
  std::string name;
  Json parameters;
};

// Reads a request's `tools` array ([{"type": "function", "function": {"name", "parameters"}}]).
// A malformed entry is an Error naming its index.
std::vector<ToolSpec> ToolSpecsFromJson(const Json& tools);

// Tool-call ids `call_` + 24 lowercase hex digits from a seeded generator, so tests are
// deterministic and a server can seed per request.
class ToolCallIds {
 public:
  explicit ToolCallIds(std::uint64_t seed) : state_(seed) {}
  std::string Next();

 private:
  std::uint64_t NextWord();
  std::uint64_t state_;
};

struct ToolCall {
  int index = 0;          // position among this output's calls (OpenAI `index`)
  std::string id;
  std::string name;
  std::string arguments;  // the JSON text of the arguments, as OpenAI returns it
  bool complete = false;  // the markup closed; false when the output ended inside the call
  bool valid = false;     // complete and `arguments` is a JSON object
};

struct ToolCallResult {
  std::string content;  // the text outside tool-call markup
  std::vector<ToolCall> tool_calls;
};

// One OpenAI tool-call delta. The first delta of a call carries id and name (arguments empty);
// later ones carry only argument text, which concatenates to the call's final `arguments`.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ToolCallChunk {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
};

// Streaming parse of one output. Feed text deltas, then Finish once.
class ToolCallStream {
 public:
  virtual ~ToolCallStream() = default;
  ToolCallChunk Feed(std::string_view delta);
  // Flushes what was held back; a call still open is closed with complete = false.
  ToolCallChunk Finish();
  // The calls so far, with their accumulated arguments.
  const std::vector<ToolCall>& calls() const { return calls_; }

 protected:
  ToolCallStream(std::vector<ToolSpec> tools, std::uint64_t id_seed);
  // Consumes what it can from buffer_. Returns true while it makes progress; at_end means no more
  // input will come, so partial markup must be resolved.
  virtual bool Step(bool at_end) = 0;

  // Scans content for the earliest of `markers`: emits the text before it (without the whitespace
  // right before it), consumes the marker and returns true with its index in *which. Without a
  // marker, emits what cannot start one and returns false.
  bool ScanContent(std::initializer_list<std::string_view> markers, bool at_end, std::size_t* which);
  void EmitContent(std::string_view text);
  // Opens a call. False (and nothing emitted) when the tools are known and `name` is not one.
  bool BeginCall(std::string_view name);
  void AppendArguments(std::string_view text);
  void EndCall(bool complete);
  bool call_open() const { return call_open_; }
  // The JSON schema of a parameter of the open call's tool, or nullptr.
  const Json* ParameterSchema(std::string_view parameter) const;
  // Whitespace after a call block is not content.
  void AfterBlock() { after_block_ = true; }

  std::string buffer_;

 private:
  std::vector<ToolSpec> tools_;
  ToolCallIds ids_;
  std::vector<ToolCall> calls_;
  ToolCallChunk* out_ = nullptr;
  bool call_open_ = false;
  bool after_block_ = false;
  bool finished_ = false;
};

// One --tool-call-parser format. Immutable and shareable between requests and threads.
class ToolCallParser {
 public:
  static const std::vector<std::string>& Names();
  // An unknown name is an Error listing the valid ones.
  static std::unique_ptr<ToolCallParser> Create(std::string_view name);

  const std::string& name() const { return name_; }
  // Whether `text` contains the start of this format's tool-call markup.
  bool HasToolCall(std::string_view text) const;
  // An empty `tools` accepts any function name; otherwise calls to other names are dropped.
  ToolCallResult Parse(std::string_view text, const std::vector<ToolSpec>& tools, std::uint64_t id_seed) const;
  std::unique_ptr<ToolCallStream> NewStream(std::vector<ToolSpec> tools, std::uint64_t id_seed) const;

 private:
  explicit ToolCallParser(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// Converts a parameter value written as text (GLM's <arg_value>) to JSON using the parameter's
// schema: strings stay strings; numbers, booleans, arrays and objects are parsed when the schema
// allows them; without a schema a value that parses as JSON is taken as such.
// Objects keep the model's key order (OrderedJson, base/json.h).
OrderedJson ConvertArgumentValue(std::string_view raw, const Json* schema);
// Whether a parameter's schema allows only strings: such a value is written as it is in the
// tagged formats (GLM's <arg_value>, DSML's string="true"), every other as JSON.
bool IsStringOnlySchema(const Json& schema);
// Compact JSON text; invalid UTF-8 is replaced rather than thrown on.
std::string DumpJson(const OrderedJson& value);

}  // namespace fission::server
