// The accuracy catalog and `fission catalog accuracy`.
//
// The catalog is a JSON array of entries {model_name, model_path, extraArgs | extra_args, env_vars,
// runner, test_level, accuracy_threshold | accuracy_test_threshold, ...}: exactly one spelling of the
// threshold, a number in [0, 1]; at most one spelling of the extra arguments (a string or a list joined
// with spaces); env_vars a string or a list joined with newlines. Unknown keys are kept and reported.
// Each entry runs a server, then the eval command (gsm8k), and passes when the flexible-extract exact
// match score is at least the threshold.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "catalog/command_template.h"

namespace fission::catalog {

struct AccuracyEntry {
  int index = 0;
  std::string model_name;
  std::string model_path;
  std::string extra_args;
  std::vector<EnvVar> env;
  std::string runner;
  std::string test_level;
  double threshold = 0;
  std::string threshold_field;  // which spelling the entry used
  Json unknown = Json::object();
  std::string Where() const;
};

struct AccuracyCatalog {
  std::string source;
  std::vector<AccuracyEntry> entries;
  std::vector<std::string> warnings;
};

AccuracyCatalog ParseAccuracyCatalog(const Json& document, const std::string& source);
AccuracyCatalog LoadAccuracyCatalog(const std::string& path);

// The flexible-extract exact-match score of an eval results document: results.<task> (gsm8k first)
// field "exact_match,flexible-extract", or the same field at the top level. Error naming `where`.
double FlexibleExtractScore(const Json& results, const std::string& where);

// Reads eval output at `path`: a JSON file; for a missing X.json, the newest X_<date>.json beside
// it; or a directory in which the newest *.json (searched recursively) is taken. Those are the
// places lm-eval's --output_path (and fission eval's) writes to.
Json ReadEvalOutput(const std::string& path);

struct AccuracyOptions {
  std::string out_dir;
  std::string server_cmd = kDefaultServerCommand;
  std::string eval_cmd = kDefaultEvalCommand;
  std::string fission_bin;
  std::string models_root;
  std::string model_override_args;
  int port = 0;
  double health_timeout_s = 900;
  double stop_timeout_s = 30;
  double eval_timeout_s = 7200;
  size_t log_tail_lines = 30;
  bool dry_run = false;
};

// Runs every entry of `entries`; writes accuracy.json under out_dir. Returns 0 when all pass, 1 when
// any fails or errors, 130 when stopped by a signal.
int RunAccuracy(const std::vector<const AccuracyEntry*>& entries, const AccuracyOptions& options, std::ostream& out,
                std::ostream& progress);

}  // namespace fission::catalog
