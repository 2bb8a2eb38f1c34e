#include "server/serve_process_testlib.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/error.h"

namespace fission::server {

std::string DemoModelDir() { return std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3"; }
std::string FissionBinary() { return std::string(FISSION_BINARY_DIR) + "/fission"; }

ServeProcess::ServeProcess(const std::vector<std::string>& args) {
  static int counter = 0;
  log_path_ = StrCat(::testing::TempDir(), "/serve_", ::getpid(), "_", counter++, ".log");
  std::vector<std::string> argv = {FissionBinary(), "serve", "--port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = ::fork();
  FISSION_CHECK(pid_ >= 0, "fork failed");
  if (pid_ == 0) {
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    FILE* log = std::freopen(log_path_.c_str(), "w", stdout);
    (void)log;
    ::dup2(::fileno(stdout), 2);
    ::execv(cargv[0], cargv.data());
    std::_Exit(127);
  }
  const std::regex address(R"(on http://[^:]+:(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string s = text.str();
    if (std::regex_search(s, m, address)) {
      port_ = std::stoi(m[1]);
      return;
    }
    if (!alive()) Fail("fission serve exited before it was ready:\n", s);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Fail("fission serve did not start within 60 s (log: ", log_path_, ")");
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) Stop();
}

bool ServeProcess::alive() const {
  if (pid_ <= 0) return false;
  return ::kill(pid_, 0) == 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0;
}

int ServeProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

http::HttpClient& Client() {
  static http::HttpClient client;
  return client;
}

Reply Finish(http::ClientResponse response) {
  Reply reply;
  reply.status = response.error.empty() ? response.status : -1;
  reply.body = response.error.empty() ? response.body : response.error;
  try {
    reply.json = Json::parse(reply.body);
  } catch (const std::exception&) {
  }
  return reply;
}

}  // namespace

Reply Post(int port, const std::string& path, const std::string& body, const std::vector<http::Header>& headers) {
  http::ClientRequest request = http::ClientRequest::Post(http::Url::Parse(StrCat("http://127.0.0.1:", port)), path, body);
  request.headers = headers;
  request.timeout = std::chrono::seconds(120);
  return Finish(Client().Fetch(std::move(request)));
}

Reply Get(int port, const std::string& path, const std::vector<http::Header>& headers) {
  http::ClientRequest request = http::ClientRequest::Get(http::Url::Parse(StrCat("http://127.0.0.1:", port)), path);
  request.headers = headers;
  request.timeout = std::chrono::seconds(60);
  return Finish(Client().Fetch(std::move(request)));
}

std::vector<Json> SseEvents(const std::string& body, bool* done) {
  std::vector<Json> events;
  if (done) *done = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string payload = line.substr(6);
    if (payload == "[DONE]") {
      if (done) *done = true;
      continue;
    }
    events.push_back(Json::parse(payload));
  }
  return events;
}

double MetricValue(const std::string& metrics, const std::string& name) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

}  // namespace fission::server
