// The prompts a `fission bench` command line asks for: the dataset it names, wrapped in the chat
// template with --apply-chat-template, each request's LoRA adapter with --lora-name, and the
// token-id JSON-lines file --save-dataset writes (so another client, or another run, can send
// exactly the same prompts).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "serving_bench/bench_args.h"
#include "serving_bench/metrics.h"

namespace fission::tokenizer {
class Tokenizer;
}

namespace fission::serving_bench {

// sglang.bench_serving's --apply-chat-template: the prompt as one user turn with the generation
// prompt, rendered by the tokenizer's chat template, the BOS token's text removed (the server adds
// it when it encodes the prompt).
std::function<std::string(const std::string&)> ChatTemplateWrapper(const tokenizer::Tokenizer& tok);

// Builds the rows; `out` gets the lines bench_serving prints while it samples. Errors name the
// flag or file at fault.
std::vector<DatasetRow> BuildDataset(const BenchArgs& args, const tokenizer::Tokenizer* tok, std::ostream& out);

// Gives each row an adapter from `names`, uniformly (bench_serving's random.choice) from `seed`.
void AssignLoraNames(std::vector<DatasetRow>& rows, const std::vector<std::string>& names, std::uint32_t seed);

// One line per row: {"prompt", "prompt_ids", "prompt_len", "output_len"}. Text prompts are written
// with the ids the tokenizer makes of them (special tokens included, as a server encodes a
// completion prompt), so reading the file back with --dataset-name jsonl sends those ids.
void SaveDataset(const std::string& path, const std::vector<DatasetRow>& rows, const tokenizer::Tokenizer* tok);

}  // namespace fission::serving_bench
