// JSON schemas into grammars: the subset xgrammar and outlines accept for structured outputs.
//
// Supported: `type` (object, array, string, number, integer, boolean, null, or a list of them),
// `properties` (written in the schema's order), `required`, `additionalProperties` (false, true or
// a schema; absent means false when `properties` is given, any member otherwise), `items`,
// `prefixItems`, `minItems`, `maxItems`, `minLength`, `maxLength`, `pattern`, `format` (date,
// time, date-time, uuid, email, ipv4), integer `minimum`, `maximum`, `exclusiveMinimum`,
// `exclusiveMaximum`, `enum`, `const`, `anyOf`, `oneOf` (as anyOf), `allOf` of one schema,
// `$ref` to `#`, `#/$defs/...`, `#/definitions/...` or any JSON pointer (recursion included),
// `nullable`, and annotations (title, description, default, examples, ...), which are ignored.
// Anything else is an Error naming the keyword and where it is (`#/properties/tags`).
#pragma once

#include "base/json.h"
#include "grammar/grammar.h"

namespace fission::grammar {

// The schema as an expression of `g` (rules for $ref targets and free-form values are added).
Grammar::Node JsonSchemaExpression(const OrderedJson& schema, Grammar* g);
// A grammar whose root is the schema.
Grammar JsonSchemaGrammar(const OrderedJson& schema);

}  // namespace fission::grammar
