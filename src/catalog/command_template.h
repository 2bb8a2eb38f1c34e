// Command templates: shell command lines with {name} placeholders, run through /bin/sh -c.
//
// A placeholder is replaced by its value: "quoted" values are single-quoted for the shell when they
// contain anything but [A-Za-z0-9_./:=@%+,-], "raw" values (flag strings such as {server_args}) are
// inserted as written. "{{" and "}}" stand for literal braces. An unknown placeholder or an unclosed
// brace is an Error naming the template.
#pragma once

#include <map>
#include <string>

namespace fission::catalog {

struct TemplateValue {
  std::string text;
  bool raw = false;
};
using TemplateVars = std::map<std::string, TemplateValue>;

std::string ShellQuote(const std::string& s);

// `what` names the template in errors (for example "--server-cmd").
std::string ExpandTemplate(const std::string& tmpl, const TemplateVars& vars, const std::string& what);

// The default templates. {fission} is this executable unless --fission-bin says otherwise.
inline constexpr const char* kDefaultServerCommand =
    "{fission} serve --model-path {path} {server_args} --host 127.0.0.1 --port {port}";
inline constexpr const char* kDefaultBenchCommand =
    "{fission} bench --backend sglang-oai --base-url http://127.0.0.1:{port} --model {path} "
    "--dataset-name random --random-input-len {isl} --random-output-len {osl} --random-range-ratio {ratio} "
    "--max-concurrency {conc} --num-prompts {prompts} --num-warmups {warmups} --save-result "
    "--result-dir {result_dir} --result-filename {name}.json {bench_args}";
inline constexpr const char* kDefaultEvalCommand =
    "{fission} eval --base-url http://127.0.0.1:{port} --model {path} --tasks gsm8k --num-fewshot 5 "
    "--output-path {output}";

}  // namespace fission::catalog
