// `fission serve`: load the model and tokenizer, start the engine thread and the HTTP server, and
// serve until SIGTERM or SIGINT, then stop accepting, let in-flight requests finish for up to
// --graceful-shutdown-timeout seconds, cancel the rest (each answer still ends properly) and exit 0. With --nnodes N and --node-rank R > 0 it is a follower node: no tokenizer and no HTTP
// server, only its share of the ranks running node 0's steps until node 0 shuts down (then exit 0)
// or disappears (an error, exit 2); docs/multinode.md.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/log.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "io/generation_config.h"
#include "http/listen_address.h"
#include "http/server.h"
#include "io/model_config.h"
#include "model/registry.h"
#include "model/runtime/load_flags.h"
#include "model/runtime/parallel_model.h"
#include "model/runtime/model_loader.h"
#include "server/environment.h"
#include "server/server_args.h"
#include "server/service.h"
#include "server/tokenizer_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fission::cli {
namespace {

// The bundled demo model, served when no --model-path is given.
std::string DefaultModelPath() { return std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3"; }

// After the drain, the time connections get to send what is queued for them.
constexpr auto kFlushGrace = std::chrono::seconds(2);

// `max_total_tokens` is the KV pool's capacity as sized (docs/engine.md).
Json ServerInfo(const server::ServerArgs& a, std::int64_t max_total_tokens) {
  return {{"model_path", a.model_path},
          {"tokenizer_path", a.TokenizerPath()},
          {"served_model_name", a.ServedModelName()},
          {"host", a.host},
          {"port", a.port},
          {"tp_size", a.load.tp_size},
          {"attn_cp_size", a.load.attn_cp_size},
          {"nnodes", a.load.nodes.nnodes},
          {"nsa_prefill_cp_mode", a.load.cp_mode},
          {"page_size", a.engine.page_size},
          {"max_total_tokens", max_total_tokens},
          {"mem_fraction_static", a.engine.mem_fraction_static > 0 ? a.engine.mem_fraction_static
                                                                   : engine::kDefaultMemFractionStatic},
          {"chunked_prefill_size", a.engine.chunked_prefill_size},
          {"max_prefill_tokens", a.engine.max_prefill_tokens},
          {"max_running_requests", a.engine.max_running_requests},
          {"disable_radix_cache", a.engine.disable_radix_cache},
          {"reasoning_parser", a.reasoning_parser},
          {"tool_call_parser", a.tool_call_parser},
          {"grammar_backend", a.grammar_backend},
          {"device", a.device},
          {"graceful_shutdown_timeout", a.graceful_shutdown_timeout},
          {"ignored_flags", a.ignored_flags}};
}

// What can be checked before any weight loads, added to `problems`: config.json and whether a
// family builds its model_type, the files the flags name, and that the server can listen where
// asked (a follower node does not listen).
void CheckBeforeLoading(const server::ServerArgs& a, std::vector<std::string>* problems) {
  namespace fs = std::filesystem;
  auto check = [problems](auto&& f) { server::CollectProblem(problems, f); };
  if (!fs::is_regular_file(fs::path(a.model_path) / "config.json")) {
    problems->push_back(StrCat("--model-path ", a.model_path, ": no config.json there (a local checkpoint directory)"));
  } else {
    // The model family from config.json alone, so an unsupported one is said before any weight loads.
    check([&] { model::FactoryFor(io::LoadModelConfig(a.model_path, a.load.json_model_override_args)); });
  }
  const bool follower = a.load.nodes.node_rank > 0;
  if (!follower && !fs::is_regular_file(fs::path(a.TokenizerPath()) / "tokenizer.json"))
    problems->push_back(StrCat(a.tokenizer_path.empty() ? "--model-path " : "--tokenizer-path ", a.TokenizerPath(),
                               ": no tokenizer.json there"));
  if (!a.chat_template.empty() && !fs::is_regular_file(a.chat_template))
    problems->push_back(StrCat("--chat-template ", a.chat_template, ": no such file"));
  if (!follower) check([&] { http::CheckCanListen(a.host, a.port); });
}

int RunServe(const std::vector<std::string>& args) {
  std::vector<std::string> problems;
  server::ServerArgs flags = server::ParseServerArgs(args, &problems);
  if (flags.help) {
    std::fputs(server::ServerArgsHelp().c_str(), stdout);
    return 0;
  }
  if (flags.model_path.empty()) flags.model_path = DefaultModelPath();
  CheckBeforeLoading(flags, &problems);
  server::EnvironmentSettings environment;
  server::CollectProblem(&problems, [&] { environment = server::ReadEnvironment(server::ProcessEnvironment()); });
  if (!problems.empty()) Fail(server::JoinProblems(problems));
  flags.load.device = flags.device;
  flags.load.dtype = flags.dtype;
  flags.load.kv_cache_dtype = flags.kv_cache_dtype == "fp8_e4m3" ? "fp8_e4m3" : "auto";  // bf16 is auto's
  // As SGLang: no graph larger than the batch the engine can run.
  flags.load.cuda_graphs = {flags.disable_cuda_graph, flags.cuda_graph_bs,
                            flags.cuda_graph_max_bs > 0 ? flags.cuda_graph_max_bs : flags.engine.max_running_requests};
  SetLogLevel(ParseLogLevel(flags.log_level));
  if (!flags.ignored_flags.empty()) Log(LogLevel::kWarning, flags.IgnoredFlagsLine());
  for (const std::string& applied : environment.applied) Log(LogLevel::kInfo, "environment: ", applied);
  if (!environment.without_effect.empty()) {
    std::string names;
    for (const std::string& name : environment.without_effect) names += " " + name;
    Log(LogLevel::kWarning, "environment variables with no effect in Fission:", names);
  }
  if (flags.load.nodes.node_rank > 0) {
    auto model = model::LoadCausalLM(flags.model_path, flags.load);
    std::printf("fission serve: node %d of %d following %s (no HTTP server on this node)\n",
                flags.load.nodes.node_rank, flags.load.nodes.nnodes, flags.load.nodes.dist_init_addr.c_str());
    std::fflush(stdout);
    model::RunFollower(*model);
    return 0;
  }
  // Block the stop signals before any thread starts, so only the wait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const auto load_start = std::chrono::steady_clock::now();
  auto tokenizer = tokenizer::Tokenizer::Load(flags.TokenizerPath());
  auto model = model::LoadCausalLM(flags.model_path, flags.load);
  engine::EngineConfig engine_config = flags.engine;
  engine_config.eos_token_ids = io::ReadEosTokenIds(flags.model_path);
  server::TokenizerDetokenizer detokenizer(*tokenizer);
  engine::Engine engine(model.get(), engine_config, &detokenizer);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  server::ServiceOptions options;
  options.model_path = flags.model_path;
  options.served_model_name = flags.ServedModelName();
  options.tokenizer_path = flags.TokenizerPath();
  options.api_key = flags.api_key;
  if (!flags.chat_template.empty()) options.chat_template_file = flags.chat_template;
  options.model_type = io::LoadModelConfig(flags.model_path, flags.load.json_model_override_args).model_type;
  options.reasoning_parser = flags.reasoning_parser;
  options.tool_call_parser = flags.tool_call_parser;
  options.grammar_backend = flags.grammar_backend;
  options.default_chat_template_kwargs = environment.chat_template_kwargs;
  options.server_info = ServerInfo(flags, static_cast<std::int64_t>(engine.num_pages()) * engine_config.page_size);
  server::Service service(options, engine, *tokenizer);

  http::ServerOptions http_options;
  http_options.host = flags.host;
  http_options.port = flags.port;
  http::HttpServer http(http_options);
  service.Register(http);
  engine.Start();
  http.Start();
  std::printf("fission serve: %s on http://%s:%d (loaded in %.2f s; %d KV pages of %d tokens)\n",
              flags.ServedModelName().c_str(), flags.host.c_str(), http.port(), load_seconds, engine.num_pages(),
              engine.page_size());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log(LogLevel::kInfo, "signal ", signal_number, ": no new requests; finishing the ", service.in_flight(),
      " in flight");
  http.StopAccepting();
  service.Drain(std::chrono::milliseconds(static_cast<std::int64_t>(flags.graceful_shutdown_timeout * 1000)));
  http.Stop(kFlushGrace);
  engine.Stop();
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace

FISSION_COMMAND("serve", "the OpenAI-compatible server (SGLang's launch flags)", RunServe);

}  // namespace fission::cli
