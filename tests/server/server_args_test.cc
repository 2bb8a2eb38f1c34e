#include "server/server_args.h"

#include <gtest/gtest.h>

#include <set>

#include "base/error.h"

namespace fission::server {
namespace {

ServerArgs Parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"--model-path", "/models/tiny"});
  return ParseServerArgs(args);
}

// The Error message of parsing `args`, or "" when it parses.
std::string ErrorOf(std::vector<std::string> args, bool add_model = true) {
  if (add_model) args.insert(args.begin(), {"--model-path", "/models/tiny"});
  try {
    ParseServerArgs(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ServerArgsTest, Defaults) {
  ServerArgs a = Parse({});
  EXPECT_EQ(a.model_path, "/models/tiny");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 30000);
  EXPECT_EQ(a.load.tp_size, 1);
  EXPECT_EQ(a.load.attn_cp_size, 1);
  EXPECT_EQ(a.load.dp_size, 1);
  EXPECT_EQ(a.kv_cache_dtype, "auto");
  EXPECT_EQ(a.device, "auto");
  EXPECT_FALSE(a.engine.disable_radix_cache);
  EXPECT_TRUE(a.ignored_flags.empty());
  EXPECT_EQ(a.IgnoredFlagsLine(), "");
  EXPECT_EQ(a.ServedModelName(), "/models/tiny");
  EXPECT_EQ(a.TokenizerPath(), "/models/tiny");
}

TEST(ServerArgsTest, RepeatedIgnoredFlagIsListedOnce) {
  ServerArgs a = Parse({"--trust-remote-code", "--enable-torch-compile", "--trust-remote-code"});
  EXPECT_EQ(a.ignored_flags, (std::vector<std::string>{"--trust-remote-code", "--enable-torch-compile"}));
  EXPECT_EQ(a.IgnoredFlagsLine(), "ignored flags (no effect in Fission): --trust-remote-code --enable-torch-compile");
}

TEST(ServerArgsTest, ThePublishedRecipeParses) {
  ServerArgs a = Parse({"--tp-size", "4", "--attn-cp-size", "2", "--enable-nsa-prefill-context-parallel",
                        "--nsa-prefill-cp-mode", "round-robin-split", "--chunked-prefill-size", "30720",
                        "--max-prefill-tokens", "30720", "--mem-fraction-static", "0.85", "--disable-radix-cache",
                        "--kv-cache-dtype", "bf16", "--host", "0.0.0.0", "--port", "8000", "--trust-remote-code",
                        "--reasoning-parser", "deepseek-v3", "--tool-call-parser", "deepseekv31"});
  EXPECT_EQ(a.load.tp_size, 4);
  EXPECT_EQ(a.load.attn_cp_size, 2);
  EXPECT_EQ(a.load.cp_mode, "round-robin-split");
  EXPECT_EQ(a.engine.chunked_prefill_size, 30720);
  EXPECT_EQ(a.engine.max_prefill_tokens, 30720);
  EXPECT_DOUBLE_EQ(a.engine.mem_fraction_static, 0.85);
  EXPECT_TRUE(a.engine.disable_radix_cache);
  EXPECT_EQ(a.host, "0.0.0.0");
  EXPECT_EQ(a.port, 8000);
  EXPECT_EQ(a.reasoning_parser, "deepseek-v3");
  EXPECT_EQ(a.tool_call_parser, "deepseekv31");
  EXPECT_EQ(a.ignored_flags, std::vector<std::string>{"--trust-remote-code"});
}

TEST(ServerArgsTest, EveryFlagOfTheIssueIsKnown) {
  const std::vector<std::string> issue = {
      "--model-path", "--tokenizer-path", "--served-model-name", "--host", "--port", "--tp-size",
      "--tensor-parallel-size", "--dp-size", "--data-parallel-size", "--ep-size", "--expert-parallel-size",
      "--enable-dp-attention", "--attn-cp-size", "--enable-nsa-prefill-context-parallel", "--nsa-prefill-cp-mode",
      "--chunked-prefill-size", "--max-prefill-tokens", "--max-running-requests", "--max-total-tokens",
      "--mem-fraction-static", "--page-size", "--disable-radix-cache", "--kv-cache-dtype", "--context-length",
      "--swa-full-tokens-ratio", "--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
      "--speculative-num-draft-tokens", "--speculative-draft-model-path", "--cuda-graph-bs", "--cuda-graph-max-bs",
      "--disable-cuda-graph", "--model-loader-extra-config", "--load-format", "--json-model-override-args", "--dtype",
      "--quantization", "--chat-template", "--reasoning-parser", "--tool-call-parser", "--api-key", "--random-seed",
      "--log-level", "--trust-remote-code", "--attention-backend", "--disable-shared-experts-fusion",
      "--enable-torch-compile", "--nnodes", "--node-rank", "--dist-init-addr", "--device"};
  std::set<std::string> known;
  for (const FlagInfo& f : ServerFlags()) {
    known.insert(std::string(f.name));
    for (std::string_view a : f.aliases) known.insert(std::string(a));
  }
  for (const std::string& flag : issue) EXPECT_TRUE(known.count(flag)) << flag;
  const std::string help = ServerArgsHelp();
  for (const std::string& flag : known) EXPECT_TRUE(Contains(help, flag)) << flag;
}

TEST(ServerArgsTest, EachFlagParsesWithATypicalValue) {
  ServerArgs a = Parse({"--tokenizer-path", "/tok", "--served-model-name", "tiny", "--tensor-parallel-size=2",
                        "--dp-size", "1", "--ep-size", "1", "--max-running-requests", "64", "--max-total-tokens",
                        "8192", "--page-size", "32", "--context-length", "4096", "--swa-full-tokens-ratio", "0.5",
                        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                        "--speculative-num-draft-tokens", "4", "--speculative-draft-model-path", "/draft",
                        "--cuda-graph-bs", "1", "2", "4", "8", "--cuda-graph-max-bs", "160", "--disable-cuda-graph",
                        "--model-loader-extra-config", "{\"x\": 1}", "--load-format", "dummy",
                        "--json-model-override-args", "{\"num_hidden_layers\": 2}", "--dtype", "bfloat16",
                        "--quantization", "fp8", "--chat-template", "/t.jinja", "--api-key", "sk-1", "--random-seed",
                        "7", "--log-level", "warning", "--attention-backend", "fa3",
                        "--disable-shared-experts-fusion", "--enable-torch-compile", "--nnodes", "1", "--node-rank",
                        "0", "--dist-init-addr", "10.0.0.1:5000", "--device", "cpu"});
  EXPECT_EQ(a.tokenizer_path, "/tok");
  EXPECT_EQ(a.served_model_name, "tiny");
  EXPECT_EQ(a.ServedModelName(), "tiny");
  EXPECT_EQ(a.TokenizerPath(), "/tok");
  EXPECT_EQ(a.load.tp_size, 2);
  EXPECT_EQ(a.engine.max_running_requests, 64);
  EXPECT_EQ(a.engine.max_total_tokens, 8192);
  EXPECT_EQ(a.engine.page_size, 32);
  EXPECT_EQ(a.engine.context_length, 4096);
  EXPECT_EQ(a.cuda_graph_bs, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(a.cuda_graph_max_bs, 160);
  EXPECT_TRUE(a.disable_cuda_graph);
  EXPECT_EQ(a.load.load_format, "dummy");
  EXPECT_EQ(a.load.json_model_override_args, "{\"num_hidden_layers\": 2}");
  EXPECT_EQ(a.dtype, "bfloat16");
  EXPECT_EQ(a.load.quantization, "fp8");
  EXPECT_EQ(a.load.model_loader_extra_config, "{\"x\": 1}");
  EXPECT_EQ(a.chat_template, "/t.jinja");
  EXPECT_EQ(a.api_key, "sk-1");
  EXPECT_EQ(a.engine.random_seed, 7u);
  EXPECT_EQ(a.log_level, "warning");
  EXPECT_EQ(a.load.nodes.dist_init_addr, "10.0.0.1:5000");
  EXPECT_EQ(a.device, "cpu");
  // Ignored flags are listed once each, in order of appearance.
  EXPECT_EQ(a.engine.speculative.num_steps, 3);
  EXPECT_EQ(a.engine.speculative.num_draft_tokens, 4);
  EXPECT_EQ(a.load.draft_model_path, "/draft");
  EXPECT_FALSE(a.load.load_draft) << "no algorithm: no draft layer";
  const std::vector<std::string> ignored = {"--swa-full-tokens-ratio",
                                            "--attention-backend", "--disable-shared-experts-fusion",
                                            "--enable-torch-compile"};
  EXPECT_EQ(a.ignored_flags, ignored);
  EXPECT_TRUE(Contains(a.IgnoredFlagsLine(), "--enable-torch-compile"));
}

TEST(ServerArgsTest, AliasesAndEqualsForm) {
  EXPECT_EQ(Parse({"--tp", "2"}).load.tp_size, 2);
  EXPECT_EQ(Parse({"--tp-size=3"}).load.tp_size, 3);
  EXPECT_EQ(Parse({"--data-parallel-size=1"}).load.dp_size, 1);
  EXPECT_EQ(Parse({"--expert-parallel-size", "1"}).load.ep_size, 1);
  EXPECT_EQ(ParseServerArgs({"--model", "/m"}).model_path, "/m");
  EXPECT_EQ(Parse({"--cuda-graph-bs=1,2,4"}).cuda_graph_bs, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(Parse({"--nccl-init-addr", "h:1"}).load.nodes.dist_init_addr, "h:1");
  EXPECT_EQ(Parse({"--chunked-prefill-size", "-1"}).engine.chunked_prefill_size, -1);
  EXPECT_EQ(Parse({"--port", "1", "--port", "2"}).port, 2);  // the last one wins, as in argparse
}

TEST(ServerArgsTest, BadValuesNameTheFlag) {
  EXPECT_TRUE(Contains(ErrorOf({"--port", "http"}), "--port"));
  EXPECT_TRUE(Contains(ErrorOf({"--port", "70000"}), "--port"));
  EXPECT_TRUE(Contains(ErrorOf({"--tp-size", "two"}), "--tp-size"));
  EXPECT_TRUE(Contains(ErrorOf({"--tp", "0"}), "--tp-size"));
  EXPECT_TRUE(Contains(ErrorOf({"--page-size", "1.5"}), "--page-size"));
  EXPECT_TRUE(Contains(ErrorOf({"--page-size", "0"}), "--page-size"));
  EXPECT_TRUE(Contains(ErrorOf({"--mem-fraction-static", "1.5"}), "--mem-fraction-static"));
  EXPECT_TRUE(Contains(ErrorOf({"--mem-fraction-static", "lots"}), "--mem-fraction-static"));
  EXPECT_TRUE(Contains(ErrorOf({"--swa-full-tokens-ratio", "x"}), "--swa-full-tokens-ratio"));
  EXPECT_TRUE(Contains(ErrorOf({"--cuda-graph-bs", "1", "x"}), "--cuda-graph-bs"));
  EXPECT_TRUE(Contains(ErrorOf({"--log-level", "loud"}), "--log-level"));
  EXPECT_TRUE(Contains(ErrorOf({"--device", "tpu"}), "--device"));
  EXPECT_TRUE(Contains(ErrorOf({"--kv-cache-dtype", "int3"}), "--kv-cache-dtype"));
  EXPECT_TRUE(Contains(ErrorOf({"--reasoning-parser", "nope"}), "--reasoning-parser"));
  EXPECT_TRUE(Contains(ErrorOf({"--tool-call-parser", "nope"}), "--tool-call-parser"));
  EXPECT_TRUE(Contains(ErrorOf({"--attn-cp-size", "3", "--tp-size", "4"}), "attn"));
  EXPECT_TRUE(Contains(ErrorOf({"--nsa-prefill-cp-mode", "in-seq-split"}), "--nsa-prefill-cp-mode"));
  EXPECT_TRUE(Contains(ErrorOf({"--port"}), "--port needs a value"));
  EXPECT_TRUE(Contains(ErrorOf({"--host", "--port", "1"}), "--host needs a value"));
  EXPECT_TRUE(Contains(ErrorOf({"--disable-radix-cache=true"}), "--disable-radix-cache takes no value"));
  EXPECT_TRUE(Contains(ErrorOf({"model"}), "unexpected argument 'model'"));
  // No --model-path is allowed: `fission serve` then serves the bundled demo model.
  EXPECT_EQ(ErrorOf({}, /*add_model=*/false), "");
}

TEST(ServerArgsTest, UnknownFlagSuggestsTheClosest) {
  EXPECT_TRUE(Contains(ErrorOf({"--tp-sise", "2"}), "did you mean --tp-size?"));
  EXPECT_TRUE(Contains(ErrorOf({"--chunked-prefil-size", "2"}), "did you mean --chunked-prefill-size?"));
  EXPECT_TRUE(Contains(ErrorOf({"--disable-radx-cache"}), "did you mean --disable-radix-cache?"));
  EXPECT_TRUE(Contains(ErrorOf({"--mem-fraction-statc=0.9"}), "did you mean --mem-fraction-static?"));
  EXPECT_TRUE(Contains(ErrorOf({"--frobnicate"}), "unknown flag '--frobnicate'"));
}

TEST(ServerArgsTest, UnambiguousPrefixesAreAcceptedAsArgparseDoes) {
  EXPECT_DOUBLE_EQ(Parse({"--mem-fraction", "0.9"}).engine.mem_fraction_static, 0.9);
  EXPECT_TRUE(Parse({"--disable-radix"}).engine.disable_radix_cache);
  EXPECT_EQ(Parse({"--served-model=x"}).served_model_name, "x");
  EXPECT_TRUE(Parse({"--disable-c"}).disable_cuda_graph);
  const std::string msg = ErrorOf({"--disable"});
  EXPECT_TRUE(Contains(msg, "ambiguous flag '--disable'")) << msg;
  EXPECT_TRUE(Contains(msg, "--disable-cuda-graph")) << msg;
  EXPECT_TRUE(Contains(msg, "--disable-radix-cache")) << msg;
}

TEST(ServerArgsTest, FeaturesNotLandedAreErrorsThatSaySo) {
  const std::vector<std::vector<std::string>> cases = {
      {"--speculative-algorithm", "EAGLE3"}, {"--dp-size", "2", "--tp-size", "2"},
      {"--kv-cache-dtype", "fp8_e5m2"},     {"--dtype", "float16"},    {"--quantization", "awq"}};
  for (const auto& c : cases) {
    const std::string msg = ErrorOf(c);
    EXPECT_TRUE(Contains(msg, c[0])) << msg;
    EXPECT_TRUE(Contains(msg, "not landed") || Contains(msg, "has landed") || Contains(msg, "have landed")) << msg;
  }
  // fp8_e4m3 has landed on both backends.
  EXPECT_EQ(ErrorOf({"--kv-cache-dtype", "fp8_e4m3", "--device", "cpu"}), "");
  EXPECT_EQ(ErrorOf({"--kv-cache-dtype", "fp8_e4m3", "--device", "cuda"}), "");
  // NEXTN and EAGLE have landed (chained drafts, topk 1); a tree or a mismatched count has not.
  EXPECT_EQ(ErrorOf({"--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"}),
            "");
  EXPECT_TRUE(Parse({"--speculative-algorithm", "EAGLE"}).load.load_draft);
  EXPECT_TRUE(Contains(ErrorOf({"--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "4"}), "tree drafts"));
  EXPECT_TRUE(Contains(ErrorOf({"--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                                "--speculative-num-draft-tokens", "8"}),
                       "--speculative-num-draft-tokens"));
  // The benchmark mode that accepts every draft: off unless given, and only with an algorithm.
  EXPECT_FALSE(Parse({"--speculative-algorithm", "NEXTN"}).engine.speculative.accept_all_for_benchmark);
  EXPECT_TRUE(Parse({"--speculative-algorithm", "NEXTN", "--speculative-accept-all-for-benchmark"})
                  .engine.speculative.accept_all_for_benchmark);
  EXPECT_TRUE(Contains(ErrorOf({"--speculative-accept-all-for-benchmark"}), "--speculative-algorithm"));
  // The same flags with their neutral values are fine.
  EXPECT_EQ(ErrorOf({"--dp-size", "1", "--ep-size", "1", "--nnodes", "1", "--node-rank", "0"}), "");
}

// DP attention and expert parallelism go to the loader (and the balancer to the engine); a layout
// that does not divide is an Error naming the flags.
TEST(ServerArgsTest, DataParallelAttentionAndExpertParallelFlags) {
  const ServerArgs a = Parse({"--tp-size", "4", "--enable-dp-attention", "--dp-size", "2", "--ep-size", "4",
                              "--load-balance-method", "shortest_queue"});
  EXPECT_TRUE(a.load.enable_dp_attention);
  EXPECT_EQ(a.load.dp_size, 2);
  EXPECT_EQ(a.load.ep_size, 4);
  EXPECT_EQ(a.engine.load_balance_method, "shortest_queue");
  EXPECT_TRUE(Contains(ErrorOf({"--ep-size", "8"}), "--ep-size (8) must divide --tp-size (1)"));
  EXPECT_TRUE(Contains(ErrorOf({"--tp-size", "4", "--enable-dp-attention", "--dp-size", "3"}),
                       "--dp-size (3) must divide --tp-size (4)"));
  EXPECT_TRUE(Contains(ErrorOf({"--load-balance-method", "minimum_tokens"}), "--load-balance-method"));
}

TEST(ServerArgsTest, MultiNodeFlags) {
  ServerArgs a = Parse({"--tp-size", "4", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:5000",
                        "--dist-timeout", "60"});
  EXPECT_EQ(a.load.nodes.nnodes, 2);
  EXPECT_EQ(a.load.nodes.node_rank, 1);
  EXPECT_EQ(a.load.nodes.timeout_s, 60);
  EXPECT_TRUE(a.ignored_flags.empty());
  EXPECT_EQ(Parse({"--pcp-min-tokens", "64"}).load.pcp_min_tokens, 64);
  EXPECT_TRUE(Contains(ErrorOf({"--tp-size", "2", "--nnodes", "2"}), "needs --dist-init-addr"));
  EXPECT_TRUE(Contains(ErrorOf({"--tp-size", "3", "--nnodes", "2", "--dist-init-addr", "h:1"}),
                       "--tp-size 3 cannot be split evenly over --nnodes 2"));
  EXPECT_TRUE(Contains(ErrorOf({"--node-rank", "1"}), "--node-rank 1 is outside [0, 1)"));
  EXPECT_TRUE(Contains(ErrorOf({"--tp-size", "2", "--nnodes", "2", "--dist-init-addr", "h"}),
                       "--dist-init-addr 'h' has no port"));
  EXPECT_TRUE(Contains(ErrorOf({"--tp-size", "2", "--nnodes", "2", "--dist-init-addr", "h:65536"}),
                       "--dist-init-addr 'h:65536'"));
}

TEST(ServerArgsTest, HelpNeedsNoModelAndDocumentsKinds) {
  ServerArgs a = ParseServerArgs({"--help"});
  EXPECT_TRUE(a.help);
  const std::string help = ServerArgsHelp();
  EXPECT_TRUE(Contains(help, "Default: 30000"));
  EXPECT_TRUE(Contains(help, "[ignored]"));
  EXPECT_TRUE(Contains(help, "[not landed]"));
  EXPECT_TRUE(Contains(help, "[applied]"));
}

TEST(ServerArgsTest, TableIsConsistent) {
  std::set<std::string_view> names;
  for (const FlagInfo& f : ServerFlags()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    for (std::string_view a : f.aliases) EXPECT_TRUE(names.insert(a).second) << a;
    EXPECT_EQ(f.name.substr(0, 2), "--");
    // Bool flags take no value name; valued flags have one.
    EXPECT_EQ(f.type == FlagType::kBool, f.value_name.empty()) << f.name;
  }
}

}  // namespace
}  // namespace fission::server

namespace fission::server {
namespace {

// One run names every problem: a recipe should not take seven starts to learn its faults.
TEST(ServerArgsTest, EveryProblemIsReportedAtOnce) {
  const std::string e = ErrorOf({"--port", "http", "--no-such-flag", "3", "--dp-size", "4", "--kv-cache-dtype", "fp8_e5m2",
                                 "--speculative-algorithm", "NGRAM", "--tp-size", "two"});
  EXPECT_TRUE(Contains(e, "6 problems:")) << e;
  for (const char* flag : {"--port", "--no-such-flag", "--dp-size", "--kv-cache-dtype", "--speculative-algorithm",
                           "--tp-size"})
    EXPECT_TRUE(Contains(e, flag)) << flag << " missing from: " << e;
  // The value after an unknown flag is not reported again as a stray argument.
  EXPECT_FALSE(Contains(e, "unexpected argument '3'")) << e;
  std::vector<std::string> problems;
  const ServerArgs partial = ParseServerArgs({"--model-path", "/m", "--port", "x", "--host", "localhost"}, &problems);
  EXPECT_EQ(problems.size(), 1u);
  EXPECT_EQ(partial.host, "localhost") << "the flags that parsed are kept";
}

}  // namespace
}  // namespace fission::server
