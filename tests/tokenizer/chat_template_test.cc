#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "tokenizer/corpus_testlib.h"
#include "tokenizer/test_paths.h"

namespace fission::tokenizer {
namespace {

using nlohmann::ordered_json;

std::string RenderWith(const std::string& source, const ordered_json& context) {
  return ChatTemplate(source, "t.jinja").Render(context);
}

std::string ErrorOf(const std::string& source, const ordered_json& context = ordered_json::object()) {
  try {
    RenderWith(source, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Cases rendered by Jinja2 under transformers' settings (tools/golden/make_tokenizer_jinja_cases.py).
TEST(ChatTemplate, MatchesJinjaCases) {
  ordered_json fixture = ordered_json::parse(testing::ReadFile(testing::FixtureDir() + "/jinja_cases.json"));
  int n = 0;
  for (const ordered_json& c : fixture["cases"]) {
    std::string source = c["template"].get<std::string>();
    ++n;
    if (c.contains("error")) {
      EXPECT_THROW(RenderWith(source, fixture["context"]), Error) << source << "\nreference: " << c["reference_error"];
      continue;
    }
    try {
      EXPECT_EQ(RenderWith(source, fixture["context"]), c["output"].get<std::string>()) << source;
    } catch (const Error& e) {
      ADD_FAILURE() << source << "\n" << e.what();
    }
  }
  EXPECT_GE(n, 70);
}

TEST(ChatTemplate, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("line one\n{% if x %}\n  {{ x + }}\n{% endif %}"),
            "t.jinja:3:10: unexpected '}}' in expression");
  EXPECT_EQ(ErrorOf("{% for x in y %}\nno end"), "t.jinja:2:7: unexpected end of template, expected '{% else %}'");
  EXPECT_EQ(ErrorOf("ok\n  {% frobnicate %}"), "t.jinja:2:6: unknown or unsupported statement 'frobnicate'");
  EXPECT_EQ(ErrorOf("{{ 'unterminated }}"), "t.jinja:1:4: unterminated string literal");
  EXPECT_EQ(ErrorOf("{{ x"), "t.jinja:1:1: unterminated '{{'");
  EXPECT_EQ(ErrorOf("{# never closed"), "t.jinja:1:1: unterminated comment");
}

TEST(ChatTemplate, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("a\nb {{ raise_exception('No system role') }}"), "t.jinja:2:6: raise_exception: No system role");
  EXPECT_EQ(ErrorOf("\n\n  {{ m.content.x }}"), "t.jinja:3:7: 'm' is undefined");
  EXPECT_EQ(ErrorOf("{{ x | nofilter }}", {{"x", 1}}), "t.jinja:1:8: no filter named 'nofilter'");
  EXPECT_EQ(ErrorOf("{{ x is nottest }}", {{"x", 1}}), "t.jinja:1:6: no test named 'nottest'");
}

TEST(ChatTemplate, WrongTypesAndRunawayTemplatesFailCleanly) {
  EXPECT_EQ(ErrorOf("{{ 'a b'.split(1) }}"), "t.jinja:1:9: expected str, got int");
  EXPECT_EQ(ErrorOf("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(100) %}"
                    "{% endfor %}{% endfor %}{% endfor %}"),
            "t.jinja:1:56: template exceeds the evaluation budget");
  EXPECT_EQ(ErrorOf("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}").substr(0, 30), "t.jinja:1:70: nesting too deep");
  EXPECT_EQ(ErrorOf("{% set ns = namespace(x=[]) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}{% endfor %}"
                    "{{ ns.x }}"),
            "t.jinja:1:91: value nested too deeply");
}

TEST(ChatTemplate, IntegerOverflowAndHugeSizesAreErrors) {
  for (const char* source : {"{{ 4611686018427387904 * 4 }}", "{{ 9223372036854775807 + 1 }}", "{{ 2 ** 70 }}",
                             "{{ 1e300 | int }}", "{{ 'x' | indent(10**12) }}", "{{ [1] | tojson(indent=10**9) }}",
                             "{{ [9223372036854775807, 1] | sum }}", "{{ 'ab' * 10**12 }}",
                             "{{ 'ab' | center(10**10) }}", "{{ (-9223372036854775807 - 1) | abs }}"}) {
    EXPECT_THROW(RenderWith(source, ordered_json::object()), Error) << source;
  }
  EXPECT_EQ(RenderWith("{{ [1, 2, 3][::9223372036854775807] }} {{ range(0, 10, 9223372036854775807) | list }} "
                       "{{ (-1) ** 1000001 }} {{ 2 ** 62 }}",
                       ordered_json::object()),
            "[1] [0] -1 4611686018427387904");
  // An attribute path of digits too long for an index is a key.
  EXPECT_EQ(RenderWith("{{ xs | selectattr('99999999999999999999999') | list }}", {{"xs", {{{"a", 1}}}}}), "[]");
}

TEST(ChatTemplate, SplitFilterAndStrftime) {
  EXPECT_EQ(RenderWith("{{ 'a b,c' | split(',') }}", ordered_json::object()), "['a b', 'c']");
  EXPECT_EQ(RenderWith("{{ strftime_now('%Y') | length }}", ordered_json::object()), "4");
}

TEST(ChatTemplate, ApplyPassesSpecialTokensToolsAndKwargs) {
  TokenizerConfig config;
  config.bos_token = "<s>";
  config.eos_token = "</s>";
  ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if tools %}{{ tools | length }} tools{% endif %}{% if add_generation_prompt %}<gen>{% endif %}"
      "{{ eos_token }}{{ thinking | default('?') }}");
  ChatRenderOptions options;
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(t.Apply(messages, options, config), "<s>[user:hi]</s>?");
  options.add_generation_prompt = true;
  options.tools = ordered_json::parse(R"([{"type": "function"}])");
  options.extra = {{"thinking", true}};
  EXPECT_EQ(t.Apply(messages, options, config), "<s>[user:hi]1 tools<gen></s>True");
}

TEST(ChatTemplate, OverrideFileAndMissingTemplate) {
  TokenizerConfig config;
  EXPECT_THROW(ChatTemplate::ForModel(config, std::nullopt), Error);
  EXPECT_THROW(ChatTemplate::ForModel(config, std::string("/nonexistent/template.jinja")), Error);
  std::string path = std::string(FISSION_BINARY_DIR) + "/chat_template_override_test.jinja";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("{% for m in messages %}{{ m.content }}{% endfor %}\n", f);
    std::fclose(f);
  }
  config.chat_template = "unused";
  ChatTemplate t = ChatTemplate::ForModel(config, path);
  EXPECT_EQ(t.Apply(ordered_json::parse(R"([{"role": "user", "content": "x"}])"), {}, config), "x");
}

TEST(ChatTemplate, RealTemplatesRender) {
  ordered_json messages = ordered_json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])");
  ChatRenderOptions options;
  options.add_generation_prompt = true;
  auto deepseek = TokenizerConfig::Load(testing::DeepSeekDir());
  EXPECT_EQ(ChatTemplate::ForModel(deepseek, std::nullopt).Apply(messages, options, deepseek),
            "<｜begin▁of▁sentence｜>S<｜User｜>U<｜Assistant｜>");
  auto qwen = TokenizerConfig::Load(testing::QwenDir());
  options.extra = {{"enable_thinking", false}};
  EXPECT_EQ(ChatTemplate::ForModel(qwen, std::nullopt).Apply(messages, options, qwen),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace fission::tokenizer
