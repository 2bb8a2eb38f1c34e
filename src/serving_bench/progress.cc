#include "serving_bench/progress.h"

#include <cstdio>

namespace fission::serving_bench {

std::string ProgressBar(int done, int total, double elapsed) {
  const int width = 20;
  const double frac = total > 0 ? static_cast<double>(done) / total : 1.0;
  const int full = static_cast<int>(frac * width);
  std::string bar;
  for (int i = 0; i < width; ++i) bar += i < full ? "\u2588" : " ";
  char buf[200];
  const int secs = static_cast<int>(elapsed);
  std::snprintf(buf, sizeof(buf), "%3d%%|%s| %d/%d [%02d:%02d, %.2fit/s]", static_cast<int>(frac * 100), bar.c_str(),
                done, total, secs / 60, secs % 60, elapsed > 0 ? done / elapsed : 0.0);
  return buf;
}

std::string ProgressLine(int done, int total, double elapsed) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "progress: %d/%d requests (%d%%) after %.1f s, %.2f requests/s", done, total,
                total > 0 ? done * 100 / total : 100, elapsed, elapsed > 0 ? done / elapsed : 0.0);
  return buf;
}

ProgressReporter::ProgressReporter(std::ostream& err, bool terminal) : err_(err), terminal_(terminal) {}

void ProgressReporter::Update(int done, int total) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (terminal_) {
    err_ << "\r" << ProgressBar(done, total, elapsed) << std::flush;
    drew_ = true;
    return;
  }
  const int tenth = total > 0 ? done * 10 / total : 10;
  if (tenth <= last_tenth_ || (done == 0 && last_tenth_ >= 0)) return;
  last_tenth_ = tenth;
  err_ << ProgressLine(done, total, elapsed) << "\n" << std::flush;
}

void ProgressReporter::Finish() {
  if (terminal_ && drew_) err_ << "\n" << std::flush;
}

}  // namespace fission::serving_bench
