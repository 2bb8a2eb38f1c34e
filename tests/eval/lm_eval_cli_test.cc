// `fission eval` driven with lm-eval's command line, as users type it for gsm8k, against the
// scripted mock server; and the files it writes, in lm-eval's layout and format. Hashes were
// computed with Python: hashlib.sha256(json.dumps(doc, indent=2, ensure_ascii=False).encode()).
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "eval/command.h"
#include "eval/gsm8k.h"
#include "eval/lm_eval_args.h"
#include "eval/output_files.h"
#include "eval/python_json.h"
#include "eval/sha256.h"
#include "testing/mock_openai_server.h"

namespace fission::eval {
namespace {

using serving_bench::ApiKind;
using serving_bench::MockOpenAiServer;
using serving_bench::MockReply;

std::string DemoData() { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo"; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Files in `dir` whose names start with `prefix`.
std::vector<std::string> Files(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

// Answers every question with the gold solution of the demo's held-out problem it quotes.
serving_bench::MockScript Gold() {
  auto test = std::make_shared<std::vector<Gsm8kDoc>>(LoadGsm8k(DemoData() + "/test.jsonl"));
  return [test](const Json& body, ApiKind, int) {
    const std::string text = body.contains("prompt") ? body["prompt"].get<std::string>()
                                                     : body["messages"].back()["content"].get<std::string>();
    MockReply r;
    r.chunks = {{0, "I do not know."}};
    for (const Gsm8kDoc& d : *test) {
      if (text.size() >= d.question.size() + 8 &&
          text.compare(text.size() - d.question.size() - 8, d.question.size(), d.question) == 0) {
        r.chunks = {{0, d.answer}};
      }
    }
    r.completion_tokens = 1;
    return r;
  };
}

int RunEval(const std::vector<std::string>& args, std::string* out) {
  std::ostringstream o, e;
  const int rc = RunEvalCommand(args, o, e);
  *out = o.str() + e.str();
  return rc;
}

TEST(LmEvalCliTest, CompletionsCommandLineAsUsersTypeIt) {
  MockOpenAiServer mock(Gold());
  const std::string dir = ::testing::TempDir() + "/fission_lm_eval_cli_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::string model_args =
      "base_url=" + mock.url().ToString() + "/v1/completions,model=demo,num_concurrent=4,tokenized_requests=False";
  std::string out;
  ASSERT_EQ(RunEval({"--model", "local-completions", "--model_args", model_args, "--tasks", "gsm8k", "--num_fewshot", "3",
                 "--gen_kwargs", "temperature=0,max_gen_toks=64,top_p=1", "--batch_size", "8", "--limit", "10",
                 "--log_samples", "--output_path", dir, "--data-dir", DemoData(), "--disable-tqdm"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("local-completions (" + model_args + "), gen_kwargs: (temperature=0,max_gen_toks=64,top_p=1), "
                     "limit: 10.0, num_fewshot: 3, batch_size: 8\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("|gsm8k|      3|flexible-extract|     3|exact_match|↑  |    1|±  |     0|"), std::string::npos)
      << out;
  // Requests as lm-eval's local-completions builds them.
  ASSERT_EQ(mock.requests_seen(), 10);
  const Json body = mock.bodies().front();
  EXPECT_EQ(body["model"], "demo");
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["top_p"], 1);
  EXPECT_EQ(body["seed"], 1234);
  EXPECT_EQ(body["stop"], Json::array({"Question:", "</s>", "<|im_end|>"}));
  EXPECT_FALSE(body.contains("do_sample"));
  // lm-eval's layout: <output_path>/<model>/results_<date>.json and samples_gsm8k_<date>.jsonl.
  const std::vector<std::string> results = Files(dir + "/demo", "results_");
  const std::vector<std::string> samples = Files(dir + "/demo", "samples_gsm8k_");
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(samples.size(), 1u);
  const Json r = ParseJson(ReadText(results[0]), "results");
  EXPECT_EQ(r["results"]["gsm8k"]["exact_match,flexible-extract"], 1.0);
  EXPECT_EQ(r["config"]["model"], "local-completions");
  EXPECT_EQ(r["config"]["model_args"], model_args);
  EXPECT_EQ(r["config"]["batch_size"], "8");
  EXPECT_EQ(r["config"]["limit"], 10.0);
  EXPECT_EQ(r["config"]["gen_kwargs"]["max_gen_toks"], 64);
  EXPECT_EQ(r["configs"]["gsm8k"]["num_fewshot"], 3);
  EXPECT_EQ(r["configs"]["gsm8k"]["generation_kwargs"]["top_p"], 1);
  EXPECT_EQ(r["n-samples"]["gsm8k"]["effective"], 10);
  EXPECT_EQ(r["model_name"], "demo");
  EXPECT_EQ(r["versions"]["gsm8k"], 3.0);
  EXPECT_EQ(r["task_hashes"]["gsm8k"].get<std::string>().size(), 64u);
  std::stringstream lines(ReadText(samples[0]));
  std::string first;
  std::getline(lines, first);
  const Json s = ParseJson(first, "sample");
  EXPECT_EQ(s["doc_id"], 0);
  EXPECT_EQ(s["filter"], "strict-match");
  EXPECT_EQ(s["doc_hash"], "ac4df2af5eb9db65ca9ba78cdcd18cbcc6db2c5ef99ab9e89dbe7aab07363305");
  EXPECT_EQ(s["target_hash"], "48dc3bebdb72f873210cec2e8474aeaf2a6904fdbd0773f42049b25ead24fbf0");
  EXPECT_EQ(s["prompt_hash"], Sha256Hex(s["arguments"]["gen_args_0"]["arg_0"].get<std::string>()));
  EXPECT_EQ(s["arguments"]["gen_args_0"]["arg_1"]["until"][0], "Question:");
  EXPECT_EQ(s["resps"], Json::array({Json::array({s["target"]})}));
  EXPECT_EQ(s["exact_match"], 1.0);
}

TEST(LmEvalCliTest, ChatCompletionsMultiturnAndEnvironmentData) {
  MockOpenAiServer mock(Gold());
  setenv("FISSION_GSM8K_DIR", DemoData().c_str(), 1);
  std::string out;
  const int rc = RunEval({"--model", "local-chat-completions", "--model_args",
                      "model=demo,base_url=" + mock.url().ToString() + "/v1/chat/completions,num_concurrent=2",
                      "--tasks", "gsm8k", "--apply_chat_template", "--fewshot_as_multiturn", "--num_fewshot", "2",
                      "--limit", "0.01", "--disable-tqdm"},
                     &out);
  unsetenv("FISSION_GSM8K_DIR");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(mock.requests_seen(), 5);  // ceil(500 * 0.01)
  const Json body = mock.bodies().front();
  ASSERT_TRUE(body.contains("messages"));
  EXPECT_EQ(body["messages"].size(), 5u);  // two exemplar pairs and the question
  EXPECT_EQ(body["stop"].size(), 3u);      // no EOS text for chats
  EXPECT_NE(out.find("local-chat-completions (model=demo,"), std::string::npos) << out;
}

TEST(LmEvalCliTest, EosStringAndBadShapes) {
  MockOpenAiServer mock(Gold());
  std::string out;
  ASSERT_EQ(RunEval({"--model", "local-completions", "--model_args",
                 "base_url=" + mock.url().ToString() + "/v1/completions,model=demo,eos_string=<eos>", "--limit", "1",
                 "--data-dir", DemoData(), "--disable-tqdm"},
                &out),
            0)
      << out;
  EXPECT_EQ(mock.bodies().front()["stop"].back(), "<eos>");
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--model", "local-completions", "--model_args", "model=m,tokenized_requests=True"},
           {"--model", "local-completions", "--model_args", "model=m,colour=blue"},
           {"--model", "local-completions", "--model_args", "model=m,num_concurrent=many"},
           {"--model", "local-chat-completions", "--model_args", "model=m"},  // needs --apply_chat_template
           {"--model", "local-completions", "--apply_chat_template"},
           {"--log_samples"},                                                 // needs --output_path
           {"--gen_kwargs", "{not json"},
           {"--limit", "2.5"},
           {"--tasks", "mmlu"},
       }) {
    EXPECT_THROW(RunEval(bad, &out), Error) << bad[0] << " " << bad[1];
  }
}

TEST(LmEvalArgsTest, ArgStringsReadAsLmEvalReadsThem) {
  const nlohmann::ordered_json j = ParseArgString("a=1, b=True,c=false,d=0.5,e=x=y,f=,g=-3");
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"], true);
  EXPECT_EQ(j["c"], false);
  EXPECT_EQ(j["d"], 0.5);
  EXPECT_EQ(j["e"], "x=y");
  EXPECT_EQ(j["f"], "");
  EXPECT_EQ(j["g"], -3.0);  // not all digits: a float, as handle_arg_string makes it
  EXPECT_EQ(ParseGenKwargs(R"({"until": ["A", "B"]})")["until"][1], "B");
  EXPECT_THROW(ParseArgString("novalue"), Error);
}

TEST(LmEvalFilesTest, PathsNamesAndPythonJson) {
  EXPECT_EQ(SanitizeModelName("org/model:v1"), "org__model__v1");
  EXPECT_EQ(ModelNameOf("base_url=http://h:1/v1/completions,model=deepseek-ai/V3,num_concurrent=8"), "deepseek-ai/V3");
  const OutputPaths dir = LmEvalOutputPaths("out", "model=a/b", "D");
  EXPECT_EQ(dir.results, "out/a__b/results_D.json");
  EXPECT_EQ(dir.samples, "out/a__b/samples_gsm8k_D.jsonl");
  const OutputPaths file = LmEvalOutputPaths("out/run.json", "model=a", "D");
  EXPECT_EQ(file.results, "out/run_D.json");
  EXPECT_EQ(file.samples, "out/samples_gsm8k_D.jsonl");
  EXPECT_EQ(DateId().size(), 26u);  // 2026-12-01T20-45-12.123456
  // json.dumps(..., ensure_ascii=False) and with indent=2.
  const nlohmann::ordered_json v = {{"a", {1, 2.0, true, nullptr, "x\xC3\xA9\n"}}, {"b", nlohmann::ordered_json::object()}};
  EXPECT_EQ(PythonJsonDumps(v), "{\"a\": [1, 2.0, true, null, \"x\xC3\xA9\\n\"], \"b\": {}}");
  EXPECT_EQ(PythonJsonDumps(v, 2), "{\n  \"a\": [\n    1,\n    2.0,\n    true,\n    null,\n    \"x\xC3\xA9\\n\"\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

}  // namespace
}  // namespace fission::eval
