// Progress of the measured requests on stderr. On a terminal a tqdm-like bar is redrawn in place;
// otherwise (a log file, a pipe, a catalog run) one line is written whenever another tenth of the
// requests has completed, so the output shows progress without a bar's carriage returns.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace fission::serving_bench {

// " 37%|███████             | 370/1000 [00:12, 30.10it/s]", without the leading carriage return.
std::string ProgressBar(int done, int total, double elapsed_s);
// "progress: 370/1000 requests (37%) after 12.3 s, 30.10 requests/s".
std::string ProgressLine(int done, int total, double elapsed_s);

class ProgressReporter {
 public:
  ProgressReporter(std::ostream& err, bool terminal);
  // (done, total) as the runner reports it, about ten times a second.
  void Update(int done, int total);
  // Ends the bar's line (terminal mode).
  void Finish();

 private:
  std::ostream& err_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int last_tenth_ = -1;  // line mode: the last tenth written
  bool drew_ = false;
};

}  // namespace fission::serving_bench
