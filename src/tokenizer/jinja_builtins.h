// Built-in filters, tests, methods and global functions of the chat-template interpreter, with
// the semantics of Jinja 2/3 as transformers configures it (and Python's str/list/dict methods).
#pragma once

#include <string>

#include "tokenizer/jinja_value.h"

namespace fission::tokenizer::jinja {

// Applies a filter, a test or a global function, or binds a method. Errors (fission::Error) do not
// carry a location: the evaluator adds it.
class Builtins {
 public:
  // `call` lets filters such as map() and select() apply other filters and tests by name.
  static Value Filter(const std::string& name, const Value& input, Args& args);
  static bool Test(const std::string& name, const Value& input, Args& args);
  static bool HasTest(const std::string& name);
  // obj.name for strings, lists and dicts (bound methods); undefined when there is none.
  static Value Method(const Value& object, const std::string& name);
  // Global functions: range, namespace, dict, raise_exception, strftime_now, joiner-free subset.
  static Value Global(const std::string& name);
};

// Shared helpers the evaluator uses too.
std::int64_t PyLen(const Value& v);  // code points for strings
Value GetItem(const Value& object, const Value& key);
Value GetAttr(const Value& object, const std::string& name);
Value SliceValue(const Value& object, const Value& start, const Value& stop, const Value& step);
ValueList Iterate(const Value& v);  // Python iteration (dict: keys; string: characters)
bool Contains(const Value& container, const Value& item);
int Compare(const Value& a, const Value& b, const char* op);  // <0, 0, >0; throws on bad types

}  // namespace fission::tokenizer::jinja
