// The operation table on the CPU reference (testing/op_cases.h): every case against torch's
// outputs for the same inputs, recorded by tools/golden/make_op_goldens.py into
// tests/fixtures/ops/op_goldens.safetensors ("<case>/in/<name>", "<case>/out/<name>").
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "io/safetensors.h"
#include "testing/op_cases.h"

namespace fission::testing {
namespace {

std::string GoldenPath() {
  const char* root = std::getenv("FISSION_SOURCE_DIR");
  return std::string(root != nullptr ? root : FISSION_SOURCE_DIR) + "/tests/fixtures/ops/op_goldens.safetensors";
}

HostTensor Read(const io::SafetensorsFile& file, const io::TensorInfo& info) {
  const Tensor view = file.View(info);
  HostTensor t;
  t.dtype = view.dtype;
  t.shape = view.shape;
  t.bytes.resize(view.bytes());
  std::memcpy(t.bytes.data(), view.data, view.bytes());
  return t;
}

// The fixture's inputs and outputs of every case, by case name.
struct Golden {
  Tensors inputs, outputs;
};
std::map<std::string, Golden> ReadGoldens(const std::string& path) {
  const io::SafetensorsFile file(path);
  std::map<std::string, Golden> goldens;
  for (const auto& [name, info] : file.tensors()) {
    const std::size_t a = name.find('/'), b = name.find('/', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    Golden& g = goldens[name.substr(0, a)];
    (name.substr(a + 1, b - a - 1) == "in" ? g.inputs : g.outputs)[name.substr(b + 1)] = Read(file, info);
  }
  return goldens;
}

TEST(OpTable, CpuMatchesTorchOnEveryCase) {
  const std::string path = GoldenPath();
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is missing: run tools/golden/make_op_goldens.py on a host with torch";
  const std::map<std::string, Golden> goldens = ReadGoldens(path);
  auto cpu = kernels::MakeCpuBackend();
  for (const OpCase& c : OpCases()) {
    SCOPED_TRACE(c.name);
    auto it = goldens.find(c.name);
    ASSERT_NE(it, goldens.end()) << "no torch golden for case " << c.name << " (regenerate " << path << ")";
    ASSERT_FALSE(it->second.outputs.empty());
    const Tensors got = RunCase(c, *cpu, it->second.inputs);
    EXPECT_EQ(CompareOutputs(c, got, it->second.outputs, c.tolerance), "");
  }
}

// Every case runs on the CPU on fresh inputs of two sizes, deterministically, with finite outputs.
TEST(OpTable, EveryCaseRunsAndRepeatsBitForBit) {
  auto cpu = kernels::MakeCpuBackend();
  std::set<std::string> names;
  for (const OpCase& c : OpCases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name).second) << "two cases named " << c.name;
    for (int scale : {1, 2}) {
      std::mt19937_64 rng(7 + scale);
      const Tensors in = c.inputs(rng, scale);
      const Tensors a = RunCase(c, *cpu, in), b = RunCase(c, *cpu, in);
      ASSERT_FALSE(a.empty());
      for (const auto& [name, t] : a) {
        EXPECT_EQ(t.bytes, b.at(name).bytes) << name << " differs between two runs";
        for (float v : t.Floats()) ASSERT_TRUE(std::isfinite(v)) << name;
      }
    }
  }
}

}  // namespace
}  // namespace fission::testing
