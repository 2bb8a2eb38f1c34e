#include "scenario.h"

#include "base/error.h"

namespace fission::serving_bench::testing {

DatasetRow ScenarioRow(int i) { return {"req-" + std::to_string(i), 10 * (i + 1), 16, {}, {}}; }

MockReply ScenarioReply(int i) {
  MockReply r;
  switch (i) {
    case 0:
      r.chunks = {{100, "a"}, {50, "b"}, {50, "c"}, {50, "d"}};
      r.completion_tokens = 4;
      break;
    case 1:
      r.chunks = {{200, "ee", 2}, {100, "fff", 3}};
      r.completion_tokens = 5;
      r.tail_delay_ms = 20;
      break;
    case 2:
      r.chunks = {{50, "g"}};
      r.completion_tokens = 1;
      break;
    case 3:
      r.status = 500;
      break;
    case 4:
      r.chunks = {{80, "h"}};
      r.stream_error = "boom";
      r.completion_tokens = 1;
      break;
    case 5:
      r.chunks = {{60, "i"}, {30, "j"}, {30, "k"}};
      break;
    default:
      Fail("no scenario request ", i);
  }
  return r;
}

int ScenarioIndex(const Json& body) {
  std::string prompt;
  if (body.contains("prompt")) {
    prompt = body["prompt"].get<std::string>();
  } else if (body.contains("messages")) {
    prompt = body["messages"].back()["content"].get<std::string>();
  } else {
    prompt = body.at("text").get<std::string>();
  }
  return std::stoi(prompt.substr(prompt.find('-') + 1));
}

MockScript ScenarioScript() {
  return [](const Json& body, ApiKind, int) { return ScenarioReply(ScenarioIndex(body)); };
}

}  // namespace fission::serving_bench::testing
