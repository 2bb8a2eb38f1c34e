// The checks both DeepSeek encoders (V3.2, V4) run against their recorded reference outputs
// (tools/golden/make_dsv{32,4}_encoding_goldens.py): the same fixture layout, the same loops.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_renderer.h"

namespace fission::tokenizer::testing {

using nlohmann::ordered_json;

// tests/fixtures/tokenizer/`file`.
ordered_json EncodingFixture(const std::string& file);

// A "request" case's render options: add_generation_prompt, tools and chat_template_kwargs.
ChatRenderOptions RequestOptions(const ordered_json& c);

// Every case renders (`render`: the server's renderer for a request case, the bare encoder for an
// encoder case) to the recorded output, or is refused where the reference refused it; at least
// `min_outputs` and `min_errors` of each ran.
void ExpectMatchesReference(const ordered_json& fixture, const std::function<std::string(const ordered_json&)>& render,
                            int min_outputs, int min_errors);

// The request cases also record what SGLang hands the encoder; `encode(case)`, the encoder alone on
// case["encoder_messages"], gives the same up to the continued assistant text. At least `min` ran.
void ExpectEncoderMatchesShapedRequests(const ordered_json& fixture,
                                        const std::function<std::string(const ordered_json&)>& encode, int min);

}  // namespace fission::tokenizer::testing
