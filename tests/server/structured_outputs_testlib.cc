#include "server/structured_outputs_testlib.h"

#include <atomic>
#include <thread>

#include "http/client.h"
#include "server/json_schema_check_testlib.h"

namespace fission::server::testing {

std::vector<Reply> PostAll(int port, const std::string& path, const std::vector<Json>& bodies, int threads) {
  std::vector<Reply> replies(bodies.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      http::HttpClient client(http::ClientOptions{.io_threads = 1});
      for (std::size_t i = next++; i < bodies.size(); i = next++) replies[i] = Post(client, port, path, bodies[i].dump());
    });
  for (std::thread& w : workers) w.join();
  return replies;
}

Json PersonRequest(std::uint64_t seed, bool stream) {
  Json body = {{"messages", {{{"role", "user"}, {"content", "Describe a person as JSON: name, age, color, address."}}}},
               {"max_tokens", 1500},
               {"temperature", 0.8},
               {"seed", seed},
               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"strict", true},
                                                                             {"schema", PersonSchema()}}}}}};
  if (stream) body["stream"] = true;
  return body;
}

std::vector<std::string> PersonFailures(int port, int count, std::uint64_t first_seed) {
  std::vector<Json> bodies;
  for (int i = 0; i < count; ++i) bodies.push_back(PersonRequest(first_seed + i));
  const std::vector<Reply> replies = PostAll(port, "/v1/chat/completions", bodies);
  std::vector<std::string> failures;
  for (int i = 0; i < count; ++i) {
    const Reply& r = replies[i];
    const std::string which = StrCat("seed ", first_seed + i, ": ");
    if (r.status != 200) {
      failures.push_back(which + StrCat("status ", r.status, " ", r.body.substr(0, 200)));
      continue;
    }
    const Json& choice = r.json["choices"][0];
    const std::string content = choice["message"]["content"].get<std::string>();
    if (choice["finish_reason"] != "stop") failures.push_back(which + "finish_reason " + choice["finish_reason"].dump());
    Json value;
    try {
      value = Json::parse(content);
    } catch (const std::exception& e) {
      failures.push_back(which + "does not parse: " + content.substr(0, 200));
      continue;
    }
    if (std::string v = SchemaViolation(value, PersonSchema()); !v.empty()) failures.push_back(which + v + " in " + content);
  }
  return failures;
}

}  // namespace fission::server::testing
