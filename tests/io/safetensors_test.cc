// safetensors parsing: well-formed files round-trip; every malformation is one clear Error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace fission::io {
namespace {

std::string Image(const std::string& header, std::size_t data_bytes, std::uint64_t declared_len = ~0ull) {
  const std::uint64_t len = declared_len == ~0ull ? header.size() : declared_len;
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  out += header;
  out.append(data_bytes, '\x01');
  return out;
}

std::string ParseError(const std::string& image) {
  try {
    ParseSafetensorsHeader(reinterpret_cast<const std::uint8_t*>(image.data()), image.size(), "f.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ParsesWellFormedHeader) {
  const std::string image =
      Image(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
            R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})",
            32);
  const SafetensorsHeader h =
      ParseSafetensorsHeader(reinterpret_cast<const std::uint8_t*>(image.data()), image.size(), "f");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors.at("a").shape, (Shape{2, 3}));
  EXPECT_EQ(h.tensors.at("b").dtype, DType::kBF16);
  EXPECT_EQ(h.metadata.at("format"), "pt");
}

struct Malformed {
  const char* what;
  std::string image;
  const char* must_mention;
};

TEST(Safetensors, EveryMalformationIsAClearError) {
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<Malformed> cases = {
      {"truncated", std::string(5, '\0'), "truncated"},
      {"header past end", Image("{}", 0, 1000), "past the end"},
      {"huge header", Image("{}", 0, 1ull << 40), "100 MB"},
      {"bad json", Image("{\"w\":", 0), "invalid JSON"},
      {"not object", Image("[1,2]", 0), "not a JSON object"},
      {"unknown dtype", Image(R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype"},
      {"offsets out of range", Image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})", 8), "outside"},
      {"offsets reversed", Image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), "outside"},
      {"size mismatch", Image(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "need 12"},
      {"negative shape", Image(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative"},
      {"missing offsets", Image(R"({"w":{"dtype":"F32","shape":[2]}})", 8), "data_offsets"},
      {"missing dtype", Image(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8), "dtype"},
      {"overlap",
       Image("{" + ok_entry + R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlap"},
      {"bad metadata", Image(R"({"__metadata__":{"a":1}})", 0), "__metadata__"},
      {"huge shape", Image(R"({"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,8]}})", 8),
       "too large"},
  };
  for (const Malformed& m : cases) {
    const std::string err = ParseError(m.image);
    EXPECT_NE(err.find(m.must_mention), std::string::npos) << m.what << ": got '" << err << "'";
    EXPECT_NE(err.find("f.safetensors"), std::string::npos) << m.what << " must name the file: " << err;
  }
}

TEST(Safetensors, TensorErrorsNameTheTensor) {
  const std::string err =
      ParseError(Image(R"({"layers.0.w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(err.find("layers.0.w"), std::string::npos) << err;
}

// Random truncations and byte flips of a valid file never crash: they parse or raise Error.
TEST(Safetensors, CorruptedFilesNeverCrash) {
  const std::string good =
      Image(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[24,28]}})",
            28);
  std::uint64_t state = 12345;
  for (int i = 0; i < 5000; ++i) {
    std::string img = good;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    if (i % 2 == 0) {
      img.resize(state % (good.size() + 1));
    } else {
      img[state % img.size()] = static_cast<char>(state >> 40);
    }
    ParseError(img);  // must return, whatever it says
  }
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ckpt_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf " + dir_ + " && mkdir -p " + dir_).c_str());
  }
  void WriteText(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  std::string dir_;
};

TEST_F(CheckpointTest, ShardedIndexAndFp8BlockDequantization) {
  // A 130x3 fp8 weight (two row blocks of 128) with its block scales, in a second shard.
  std::vector<std::uint8_t> q(130 * 3);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = F32ToF8E4M3(static_cast<float>(i % 7) - 3.0f);
  Buffer scale = MakeF32Buffer(Shape{2, 1}, {0.5f, 4.0f});
  Tensor qt{q.data(), DType::kF8E4M3, Shape{130, 3}, Device::Cpu()};
  Buffer norm = MakeF32Buffer(Shape{3}, {1, 2, 3});
  WriteSafetensors(dir_ + "/a.safetensors", {{"norm", norm}});
  WriteSafetensors(dir_ + "/b.safetensors", {{"w", qt}, {"w_scale_inv", scale}});
  WriteText("model.safetensors.index.json",
            R"({"weight_map":{"norm":"a.safetensors","w":"b.safetensors","w_scale_inv":"b.safetensors"}})");
  Checkpoint ckpt(dir_);
  EXPECT_EQ(ckpt.Names().size(), 3u);
  Buffer w = ckpt.LoadF32("w", Shape{130, 3});
  for (std::int64_t r = 0; r < 130; ++r)
    for (std::int64_t c = 0; c < 3; ++c)
      ASSERT_EQ(w.ptr<float>()[r * 3 + c], F8E4M3ToF32(q[r * 3 + c]) * (r < 128 ? 0.5f : 4.0f));
  Buffer rows = ckpt.LoadF32Rows("w", Shape{130, 3}, 127, 129);
  EXPECT_EQ(rows.ptr<float>()[0], w.ptr<float>()[127 * 3]);
  EXPECT_EQ(rows.ptr<float>()[3], w.ptr<float>()[128 * 3]);
  try {
    ckpt.LoadF32("norm", Shape{4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'norm' has shape [3], expected [4]"), std::string::npos) << e.what();
  }
  try {
    ckpt.LoadF32("missing.weight", Shape{1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor 'missing.weight'"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, IndexNamingAbsentTensorIsAnError) {
  Buffer norm = MakeF32Buffer(Shape{1}, {1});
  WriteSafetensors(dir_ + "/a.safetensors", {{"norm", norm}});
  EXPECT_THROW(Checkpoint no_model_file(dir_), Error);  // a.safetensors is not a model file
  WriteText("model.safetensors.index.json", R"({"weight_map":{"other":"a.safetensors"}})");
  try {
    Checkpoint ckpt(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'other'"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, EmptyDirectoryIsAnError) {
  EXPECT_THROW(Checkpoint ckpt(dir_), Error);
}

}  // namespace
}  // namespace fission::io
