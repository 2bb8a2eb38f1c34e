#include "server/tool_call_parser.h"

#include <set>
#include <utility>

#include "base/error.h"
#include "server/text_scan.h"
#include "server/tool_call_formats.h"

namespace fission::server {

std::vector<ToolSpec> ToolSpecsFromJson(const Json& tools) {
  std::vector<ToolSpec> specs;
  if (tools.is_null()) return specs;
  if (!tools.is_array()) Fail("'tools' must be an array");
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string where = StrCat("tools[", i, "]");
    if (!tool.is_object()) Fail(where, " must be an object");
    if (tool.contains("type") && tool["type"] != "function") Fail(where, ".type must be \"function\"");
    auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) Fail(where, ".function must be an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
      Fail(where, ".function.name must be a non-empty string");
    ToolSpec spec{name->get<std::string>(), Json()};
    if (auto params = fn->find("parameters"); params != fn->end() && !params->is_null()) {
      if (!params->is_object()) Fail(where, ".function.parameters must be an object");
      spec.parameters = *params;
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::uint64_t ToolCallIds::NextWord() {
  // splitmix64: a full-period sequence, enough to make ids unique within a server's lifetime.
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string ToolCallIds::Next() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  std::uint64_t a = NextWord(), b = NextWord();
  for (int i = 0; i < 16; ++i, a >>= 4) id += kHex[a & 15];
  for (int i = 0; i < 8; ++i, b >>= 4) id += kHex[b & 15];
  return id;
}

std::string DumpJson(const OrderedJson& value) {
  return value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

namespace {

// The JSON types a schema allows ("integer" counts as "number"); empty when it does not say.
void CollectTypes(const Json& schema, std::set<std::string>* types, int depth) {
  if (!schema.is_object() || depth > 8) return;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) types->insert(t->get<std::string>());
    if (t->is_array())
      for (const Json& e : *t)
        if (e.is_string()) types->insert(e.get<std::string>());
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    for (const Json& v : *e) {
      if (v.is_string()) types->insert("string");
      if (v.is_number()) types->insert("number");
      if (v.is_boolean()) types->insert("boolean");
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (auto b = schema.find(key); b != schema.end() && b->is_array())
      for (const Json& branch : *b) CollectTypes(branch, types, depth + 1);
  }
  if (types->count("integer")) types->insert("number");
  if (schema.contains("properties")) types->insert("object");
  if (schema.contains("items")) types->insert("array");
}

std::string JsonTypeName(const OrderedJson& v) {
  if (v.is_string()) return "string";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

}  // namespace

bool IsStringOnlySchema(const Json& schema) {
  std::set<std::string> types;
  CollectTypes(schema, &types, 0);
  return types.size() == 1 && types.count("string");
}

OrderedJson ConvertArgumentValue(std::string_view raw, const Json* schema) {
  if (schema != nullptr && IsStringOnlySchema(*schema)) return OrderedJson(std::string(raw));
  std::set<std::string> types;
  if (schema != nullptr) CollectTypes(*schema, &types, 0);
  const std::string_view trimmed = TrimSpace(raw);
  OrderedJson parsed = OrderedJson::parse(trimmed.begin(), trimmed.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded() && (types.empty() || types.count(JsonTypeName(parsed)))) return parsed;
  // Python spellings of booleans, as models trained on Python tool calls sometimes write.
  if (types.count("boolean") && (trimmed == "True" || trimmed == "False")) return OrderedJson(trimmed == "True");
  return OrderedJson(std::string(raw));
}

ToolCallStream::ToolCallStream(std::vector<ToolSpec> tools, std::uint64_t id_seed)
    : tools_(std::move(tools)), ids_(id_seed) {}

ToolCallChunk ToolCallStream::Feed(std::string_view delta) {
  FISSION_CHECK(!finished_, "ToolCallStream fed after Finish");
  ToolCallChunk out;
  buffer_.append(delta);
  out_ = &out;
  while (Step(/*at_end=*/false)) {
  }
  out_ = nullptr;
  return out;
}

ToolCallChunk ToolCallStream::Finish() {
  ToolCallChunk out;
  if (finished_) return out;
  out_ = &out;
  while (Step(/*at_end=*/true)) {
  }
  if (call_open_) EndCall(/*complete=*/false);
  EmitContent(buffer_);  // a format leaves nothing here; kept so no text is ever lost
  buffer_.clear();
  out_ = nullptr;
  finished_ = true;
  return out;
}

bool ToolCallStream::ScanContent(std::initializer_list<std::string_view> markers, bool at_end, std::size_t* which) {
  if (after_block_) {
    buffer_.erase(0, LeadingSpace(buffer_));
    if (buffer_.empty()) return false;
    after_block_ = false;
  }
  const std::size_t at = FindFirstOf(buffer_, markers, 0, which);
  if (at != std::string::npos) {
    std::string_view before(buffer_.data(), at);
    before.remove_suffix(TrailingSpace(before));
    EmitContent(before);
    buffer_.erase(0, at + markers.begin()[*which].size());
    return true;
  }
  if (at_end) {
    EmitContent(buffer_);
    buffer_.clear();
    return false;
  }
  std::string_view safe(buffer_.data(), buffer_.size() - PartialTagSuffix(buffer_, markers));
  safe.remove_suffix(TrailingSpace(safe));  // it may turn out to precede a call
  EmitContent(safe);
  buffer_.erase(0, safe.size());
  return false;
}

void ToolCallStream::EmitContent(std::string_view text) {
  if (out_ != nullptr) out_->content.append(text);
}

bool ToolCallStream::BeginCall(std::string_view name) {
  FISSION_CHECK(!call_open_);
  if (!tools_.empty()) {
    bool known = false;
    for (const ToolSpec& t : tools_) known = known || t.name == name;
    if (!known) return false;
  }
  ToolCall call;
  call.index = static_cast<int>(calls_.size());
  call.id = ids_.Next();
  call.name = std::string(name);
  out_->tool_calls.push_back(ToolCallDelta{call.index, call.id, call.name, ""});
  calls_.push_back(std::move(call));
  call_open_ = true;
  return true;
}

void ToolCallStream::AppendArguments(std::string_view text) {
  FISSION_CHECK(call_open_);
  if (text.empty()) return;
  ToolCall& call = calls_.back();
  call.arguments.append(text);
  auto& deltas = out_->tool_calls;
  if (!deltas.empty() && deltas.back().index == call.index && deltas.back().id.empty()) {
    deltas.back().arguments.append(text);
  } else {
    deltas.push_back(ToolCallDelta{call.index, "", "", std::string(text)});
  }
}

void ToolCallStream::EndCall(bool complete) {
  FISSION_CHECK(call_open_);
  ToolCall& call = calls_.back();
  call.complete = complete;
  const std::string_view args = TrimSpace(call.arguments);
  call.valid = complete && !args.empty() && args.front() == '{' && Json::accept(args);
  call_open_ = false;
}

const Json* ToolCallStream::ParameterSchema(std::string_view parameter) const {
  if (calls_.empty()) return nullptr;
  for (const ToolSpec& t : tools_) {
    if (t.name != calls_.back().name || !t.parameters.is_object()) continue;
    auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) return nullptr;
    auto p = props->find(std::string(parameter));
    return p == props->end() ? nullptr : &*p;
  }
  return nullptr;
}

const std::vector<std::string>& ToolCallParser::Names() {
  static const std::vector<std::string> names = {"deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4",
                                                  "glm45",      "glm47",       "qwen"};
  return names;
}

std::unique_ptr<ToolCallParser> ToolCallParser::Create(std::string_view name) {
  for (const std::string& n : Names())
    if (n == name) return std::unique_ptr<ToolCallParser>(new ToolCallParser(n));
  std::string valid;
  for (const std::string& n : Names()) valid += StrCat(valid.empty() ? "" : ", ", n);
  Fail("unknown --tool-call-parser '", name, "' (valid: ", valid, ")");
}

bool ToolCallParser::HasToolCall(std::string_view text) const {
  if (name_ == "deepseekv3" || name_ == "deepseekv31")
    return text.find("<｜tool▁calls▁begin｜>") != std::string_view::npos ||
           text.find("<｜tool▁call▁begin｜>") != std::string_view::npos;
  if (name_ == "deepseekv32") return text.find("<｜DSML｜function_calls>") != std::string_view::npos;
  if (name_ == "deepseekv4") return text.find("<｜DSML｜tool_calls>") != std::string_view::npos;
  return text.find("<tool_call>") != std::string_view::npos;
}

std::unique_ptr<ToolCallStream> ToolCallParser::NewStream(std::vector<ToolSpec> tools, std::uint64_t id_seed) const {
  if (name_ == "deepseekv3") return NewDeepSeekV3Stream(/*fenced=*/true, std::move(tools), id_seed);
  if (name_ == "deepseekv31") return NewDeepSeekV3Stream(/*fenced=*/false, std::move(tools), id_seed);
  if (name_ == "deepseekv32") return NewDeepSeekV32Stream(std::move(tools), id_seed);
  if (name_ == "deepseekv4") return NewDeepSeekV4Stream(std::move(tools), id_seed);
  if (name_ == "glm45" || name_ == "glm47") return NewGlmStream(std::move(tools), id_seed);
  FISSION_CHECK(name_ == "qwen", "no stream for ", name_);
  return NewQwenStream(std::move(tools), id_seed);
}

ToolCallResult ToolCallParser::Parse(std::string_view text, const std::vector<ToolSpec>& tools,
                                     std::uint64_t id_seed) const {
  std::unique_ptr<ToolCallStream> stream = NewStream(tools, id_seed);
  ToolCallResult result;
  result.content = stream->Feed(text).content;
  result.content += stream->Finish().content;
  result.tool_calls = stream->calls();
  return result;
}

}  // namespace fission::server
