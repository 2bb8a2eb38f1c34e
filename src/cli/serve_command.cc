// `fission serve`: load the model and tokenizer, start the engine thread and the HTTP server, and
// serve until SIGTERM or SIGINT, then stop accepting, let in-flight requests finish (bounded) and
// exit 0.
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
#include "engine/offline.h"
#include "http/server.h"
#include "model/load_flags.h"
#include "model/registry.h"
#include "server/service.h"
#include "server/tokenizer_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fission::cli {
namespace {

// The bundled demo model, served when no --model-path is given.
std::string DefaultModelPath() { return std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3"; }

struct ServeFlags {
  std::string model_path;
  std::string tokenizer_path;
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string api_key;
  std::optional<std::string> chat_template;
  double shutdown_grace_seconds = 30.0;
  engine::EngineConfig engine;
  model::LoadOptions load;
};

int ParsePort(const std::string& value) {
  try {
    std::size_t used = 0;
    const int port = std::stoi(value, &used);
    if (used == value.size() && port >= 0 && port <= 65535) return port;
  } catch (const std::exception&) {
  }
  Fail("--port expects a port number in [0, 65535], got '", value, "'");
}

ServeFlags ParseFlags(const std::vector<std::string>& args) {
  ServeFlags f;
  for (std::size_t i = 0; i < args.size();) {
    if (engine::ParseEngineFlag(args, &i, &f.engine)) continue;
    if (model::ParseLoadFlag(args, &i, &f.load)) continue;
    std::string flag = args[i], value;
    const auto eq = flag.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[i + 1];
    } else {
      Fail("unknown flag or missing value: ", flag, " (see fission serve --help)");
    }
    if (flag == "--model-path" || flag == "--model") {
      f.model_path = value;
    } else if (flag == "--tokenizer-path") {
      f.tokenizer_path = value;
    } else if (flag == "--served-model-name") {
      f.served_model_name = value;
    } else if (flag == "--host") {
      f.host = value;
    } else if (flag == "--port") {
      f.port = ParsePort(value);
    } else if (flag == "--api-key") {
      f.api_key = value;
    } else if (flag == "--chat-template") {
      f.chat_template = value;
    } else if (flag == "--log-level") {
      SetLogLevel(ParseLogLevel(value));
    } else {
      Fail("unknown flag: ", flag, " (see fission serve --help)");
    }
    i += inline_value ? 1 : 2;
  }
  if (f.model_path.empty()) f.model_path = DefaultModelPath();
  if (f.tokenizer_path.empty()) f.tokenizer_path = f.model_path;
  if (f.served_model_name.empty()) f.served_model_name = f.model_path;
  f.engine.Validate();
  model::ValidateLoadOptions(f.load);
  return f;
}

void PrintHelp() {
  std::printf(
      "usage: fission serve [--model-path DIR] [options]\n\n"
      "Serves the OpenAI-compatible API (and SGLang's native routes). Without --model-path it serves\n"
      "the bundled demo model.\n\n"
      "  --model-path DIR          checkpoint directory (config.json, *.safetensors, tokenizer files)\n"
      "  --tokenizer-path DIR      tokenizer directory (default: the model's)\n"
      "  --served-model-name NAME  the model id clients use (default: the model path)\n"
      "  --host ADDR               (default 127.0.0.1)\n"
      "  --port N                  (default 30000)\n"
      "  --api-key KEY             require 'Authorization: Bearer KEY' (not on /health, /metrics)\n"
      "  --chat-template FILE      a Jinja chat template replacing the model's\n"
      "  --log-level L             debug | info | warning | error\n"
      "model:\n%s"
      "engine:\n%s",
      model::LoadFlagsHelp().c_str(), engine::EngineFlagsHelp().c_str());
}

Json ServerInfo(const ServeFlags& f) {
  return {{"model_path", f.model_path},
          {"tokenizer_path", f.tokenizer_path},
          {"served_model_name", f.served_model_name},
          {"host", f.host},
          {"port", f.port},
          {"tp_size", f.load.tp_size},
          {"attn_cp_size", f.load.attn_cp_size},
          {"page_size", f.engine.page_size},
          {"max_total_tokens", f.engine.max_total_tokens},
          {"chunked_prefill_size", f.engine.chunked_prefill_size},
          {"max_prefill_tokens", f.engine.max_prefill_tokens},
          {"max_running_requests", f.engine.max_running_requests},
          {"disable_radix_cache", f.engine.disable_radix_cache},
          {"device", "cpu"}};
}

int RunServe(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      PrintHelp();
      return 0;
    }
  const ServeFlags flags = ParseFlags(args);
  // Block the stop signals before any thread starts, so only the wait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const auto load_start = std::chrono::steady_clock::now();
  auto tokenizer = tokenizer::Tokenizer::Load(flags.tokenizer_path);
  auto model = model::LoadCausalLM(flags.model_path, flags.load);
  engine::EngineConfig engine_config = flags.engine;
  engine_config.eos_token_ids = engine::ReadEosTokenIds(flags.model_path);
  server::TokenizerDetokenizer detokenizer(*tokenizer);
  engine::Engine engine(model.get(), engine_config, &detokenizer);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  server::ServiceOptions options;
  options.model_path = flags.model_path;
  options.served_model_name = flags.served_model_name;
  options.tokenizer_path = flags.tokenizer_path;
  options.api_key = flags.api_key;
  options.chat_template_file = flags.chat_template;
  options.server_info = ServerInfo(flags);
  server::Service service(options, engine, *tokenizer);

  http::ServerOptions http_options;
  http_options.host = flags.host;
  http_options.port = flags.port;
  http::HttpServer http(http_options);
  service.Register(http);
  engine.Start();
  http.Start();
  std::printf("fission serve: %s on http://%s:%d (loaded in %.2f s; %d KV pages of %d tokens)\n",
              flags.served_model_name.c_str(), flags.host.c_str(), http.port(), load_seconds, engine.num_pages(),
              engine.page_size());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  Log(LogLevel::kInfo, "signal ", signal_number, ": no new requests; finishing those in flight");
  http.Stop(std::chrono::milliseconds(static_cast<int>(flags.shutdown_grace_seconds * 1000)));
  engine.Stop();
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace

FISSION_COMMAND("serve", "the OpenAI-compatible server (SGLang's launch flags)", RunServe);

}  // namespace fission::cli
