// An independent check of JSON values against the JSON schema keywords the structured-output
// tests use (type, properties, required, additionalProperties, items, minItems, maxItems,
// minLength, maxLength, pattern, enum, const, anyOf, minimum, maximum): the oracle that the
// constrained outputs are compared with, sharing no code with the grammar compiler.
#pragma once

#include <string>

#include "base/json.h"

namespace fission::server::testing {

// "" when `value` satisfies `schema`, else what and where it violates.
std::string SchemaViolation(const Json& value, const Json& schema, const std::string& path = "$");

// The schema of the structured-output tests: nested objects and arrays, enums, bounded strings
// and integers, a pattern, anyOf and required fields; every output it allows is finite.
Json PersonSchema();

}  // namespace fission::server::testing
