// JSON schemas compiled to grammars: which texts each accepts, and the errors that name a keyword
// and where it is.
#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/grammar_testlib.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"

namespace fission::grammar {
namespace {

using testing::Compile;
using testing::IsPrefix;
using testing::Matches;

std::shared_ptr<const CompiledGrammar> Schema(const std::string& json) {
  return Compile(JsonSchemaGrammar(OrderedJson::parse(json)));
}

std::string ErrorOf(const std::string& json) {
  try {
    Schema(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonSchema, ObjectWithRequiredAndOptionalProperties) {
  const auto g = Schema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name"]})");
  for (const char* yes : {R"({"name": "Ann"})", R"({"name":"Ann","age":3})", R"({ "name" : "x" , "tags" : [ ] })",
                          R"({"name": "a", "age": -12, "tags": ["x", "y"]})", "{\n  \"name\": \"\\u00e9\\n\"\n}"})
    EXPECT_TRUE(Matches(g, yes)) << yes;
  for (const char* no : {"{}", R"({"age": 3})", R"({"age": 3, "name": "x"})", R"({"name": "x",})",
                         R"({"name": "x", "other": 1})", R"({"name": 5})", R"({"name": "x", "age": 1.5})",
                         R"({"name": "x", "age": 01})", R"({"name": "a\qb"})", "{\"name\": \"a\x01\"}"})
    EXPECT_FALSE(Matches(g, no)) << no;
}

TEST(JsonSchema, OnlyOptionalPropertiesAllowTheEmptyObject) {
  const auto g = Schema(R"({"properties": {"a": {"type": "boolean"}, "b": {"type": "null"}}})");
  EXPECT_TRUE(Matches(g, "{}"));
  EXPECT_TRUE(Matches(g, R"({"b": null})"));
  EXPECT_TRUE(Matches(g, R"({"a": true, "b": null})"));
  EXPECT_FALSE(Matches(g, R"({"b": null, "a": true})")) << "properties come in the schema's order";
  EXPECT_FALSE(Matches(g, R"({,"b": null})"));
}

TEST(JsonSchema, AdditionalProperties) {
  const auto free = Schema(R"({"type": "object"})");
  EXPECT_TRUE(Matches(free, R"({"x": [1, {"y": null}], "z": "w"})"));
  const auto typed = Schema(R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                                "additionalProperties": {"type": "number"}})");
  EXPECT_TRUE(Matches(typed, R"({"id": 1, "x": 2.5e3, "y": -1})"));
  EXPECT_FALSE(Matches(typed, R"({"id": 1, "x": "s"})"));
  const auto closed = Schema(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(Matches(closed, "{}"));
  EXPECT_FALSE(Matches(closed, R"({"a": 1})"));
}

TEST(JsonSchema, ArraysWithBounds) {
  const auto g = Schema(R"({"type": "array", "items": {"enum": ["a", "b", 3]}, "minItems": 1, "maxItems": 3})");
  EXPECT_TRUE(Matches(g, R"(["a"])"));
  EXPECT_TRUE(Matches(g, R"(["a", 3, "b"])"));
  EXPECT_FALSE(Matches(g, "[]"));
  EXPECT_FALSE(Matches(g, R"(["a", "a", "a", "a"])"));
  EXPECT_FALSE(Matches(g, R"(["c"])"));
  const auto tuple = Schema(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})");
  EXPECT_TRUE(Matches(tuple, "[]"));
  EXPECT_TRUE(Matches(tuple, "[1]"));
  EXPECT_TRUE(Matches(tuple, R"([1, "x"])"));
  EXPECT_FALSE(Matches(tuple, R"([1, "x", 2])"));
  EXPECT_FALSE(Matches(tuple, R"(["x"])"));
}

TEST(JsonSchema, StringsWithLengthPatternAndFormat) {
  const auto bounded = Schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(Matches(bounded, R"("ab")"));
  EXPECT_TRUE(Matches(bounded, R"("a\"c")")) << "an escape is one character";
  EXPECT_TRUE(Matches(bounded, "\"\xC3\xA9\xC3\xA9\"")) << "characters, not bytes";
  EXPECT_FALSE(Matches(bounded, R"("a")"));
  EXPECT_FALSE(Matches(bounded, R"("abcd")"));
  const auto pattern = Schema(R"({"type": "string", "pattern": "^[A-Z][a-z]+ \"[0-9]{2}\"$"})");
  EXPECT_TRUE(Matches(pattern, R"("Paris \"75\"")"));
  EXPECT_FALSE(Matches(pattern, R"("paris \"75\"")"));
  const auto date = Schema(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(Matches(date, R"("2026-12-01")"));
  EXPECT_FALSE(Matches(date, R"("2026-13-01")"));
  EXPECT_TRUE(Matches(Schema(R"({"format": "uuid"})"), R"("123e4567-e89b-12d3-a456-426614174000")"));
}

TEST(JsonSchema, NumbersIntegersAndRanges) {
  const auto number = Schema(R"({"type": "number"})");
  for (const char* yes : {"0", "-1", "3.25", "1e10", "-0.5E-3"}) EXPECT_TRUE(Matches(number, yes)) << yes;
  for (const char* no : {"01", "1.", ".5", "+1", "1e", "--1"}) EXPECT_FALSE(Matches(number, no)) << no;
  const auto range = Schema(R"({"type": "integer", "minimum": -3, "exclusiveMaximum": 20})");
  EXPECT_TRUE(Matches(range, "-3"));
  EXPECT_TRUE(Matches(range, "19"));
  EXPECT_FALSE(Matches(range, "20"));
  EXPECT_FALSE(Matches(range, "-4"));
}

TEST(JsonSchema, ConstEnumAnyOfAndTypeLists) {
  EXPECT_TRUE(Matches(Schema(R"({"const": {"a": [1, "x"]}})"), R"({"a":[1,"x"]})"));
  const auto any = Schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})");
  EXPECT_TRUE(Matches(any, "7"));
  EXPECT_TRUE(Matches(any, R"("q")"));
  EXPECT_FALSE(Matches(any, R"("qq")"));
  const auto nullable = Schema(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(Matches(nullable, "null"));
  EXPECT_TRUE(Matches(nullable, R"("s")"));
  EXPECT_FALSE(Matches(nullable, "1"));
  EXPECT_TRUE(Matches(Schema(R"({"enum": ["caf\u00e9", null, 2]})"), "\"caf\xC3\xA9\""));
}

TEST(JsonSchema, ReferencesIncludingRecursion) {
  const auto g = Schema(R"({
    "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(Matches(g, R"({"v": 1})"));
  EXPECT_TRUE(Matches(g, R"({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]})"));
  EXPECT_FALSE(Matches(g, R"({"v": 1, "kids": [{"kids": []}]})"));
  const auto pointer = Schema(R"({"properties": {"a": {"type": "boolean"}, "b": {"$ref": "#/properties/a"}}})");
  EXPECT_TRUE(Matches(pointer, R"({"a": true, "b": false})"));
  const auto root_ref = Schema(R"({"type": "array", "items": {"$ref": "#"}, "maxItems": 2})");
  EXPECT_TRUE(Matches(root_ref, "[[], [[]]]"));
}

TEST(JsonSchema, AnnotationsAreIgnored) {
  EXPECT_TRUE(Matches(Schema(R"({"title": "T", "description": "d", "type": "boolean", "default": true,
                                 "examples": [false], "$schema": "x"})"), "true"));
}

TEST(JsonSchema, UnsupportedKeywordsNameTheirPath) {
  EXPECT_NE(ErrorOf(R"({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}})")
                .find("unsupported JSON schema keyword 'uniqueItems' at #/properties/tags"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"properties": {"a": {"type": "number", "minimum": 0}}})")
                .find("'minimum' for type number at #/properties/a"),
            std::string::npos) << ErrorOf(R"({"properties": {"a": {"type": "number", "minimum": 0}}})");
  EXPECT_NE(ErrorOf(R"({"type": "strin"})").find("unsupported type 'strin' at #"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"$ref": "#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"$ref": "http://x/y"})").find("only local references"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"required": ["a"], "properties": {}})").find("'required' names 'a'"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type": "string", "format": "hostname"})").find("unsupported string format 'hostname'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type": "string", "pattern": "(a"})").find("the 'pattern' at #"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"allOf": [{"type": "string"}, {"maxLength": 2}]})").find("'allOf'"), std::string::npos);
  EXPECT_NE(ErrorOf("false").find("matches nothing"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"patternProperties": {}})").find("'patternProperties' at #"), std::string::npos);
}

TEST(JsonSchema, JsonObjectGrammarAcceptsAnyObject) {
  const auto g = Compile(JsonObjectGrammar());
  EXPECT_TRUE(Matches(g, R"({"a": {"b": [1, 2.5, true, null, "s", {}]}, "c": []})"));
  EXPECT_FALSE(Matches(g, "[1]"));
  EXPECT_FALSE(Matches(g, R"({"a": })"));
  EXPECT_TRUE(IsPrefix(g, R"({"a": [{"b": [)"));
  EXPECT_FALSE(Matches(g, "{" + std::string(kMaxJsonWhitespace + 1, ' ') + "}")) << "whitespace runs are bounded";
}

}  // namespace
}  // namespace fission::grammar
