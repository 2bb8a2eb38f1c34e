// Parity with the reference (transformers + tokenizers): ids, decodes and chat renderings recorded
// by tools/golden/make_tokenizer_goldens.py into tests/fixtures/tokenizer/tokenizer_golden_*.jsonl.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "tokenizer/chat_template.h"
#include "tokenizer/corpus_testlib.h"
#include "tokenizer/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace fission::tokenizer {
namespace {

using nlohmann::ordered_json;
using testing::FileExists;
using testing::FixtureDir;

std::string GoldenDir() {
  const char* dir = std::getenv("FISSION_TOKENIZER_GOLDEN_DIR");
  return dir ? dir : FixtureDir();
}

struct Golden {
  Json meta;
  std::vector<Json> encodes, chats;
};

Golden LoadGolden(const std::string& name) {
  Golden g;
  for (Json& j : testing::ReadJsonLines(GoldenDir() + "/tokenizer_golden_" + name + ".jsonl")) {
    if (j.contains("meta")) {
      g.meta = j["meta"];
    } else if (j.value("kind", "") == "encode") {
      g.encodes.push_back(std::move(j));
    } else if (j.value("kind", "") == "chat") {
      g.chats.push_back(std::move(j));
    }
  }
  return g;
}

// transformers may swap tokenizer.json's pre-tokenizer or decoder for its own (LlamaTokenizer does
// so for DeepSeek-V3's ByteLevel pipeline); the golden then holds PreTrainedTokenizerFast's ids,
// which follow tokenizer.json, under *_fast keys.
bool AutoIsFaithful(const Json& meta) {
  const Json& f = meta["auto_matches_tokenizer_json"];
  return f.value("pre_tokenizer", true) && f.value("normalizer", true) && f.value("decoder", true);
}

const std::string& Text(const Json& rec, const std::vector<std::string>& corpus,
                        const std::map<std::string, std::vector<Json>>& datasets) {
  static std::string scratch;
  if (rec["source"] == "corpus") return corpus.at(rec["index"].get<std::size_t>());
  std::string file = rec["source"].get<std::string>().substr(std::string("gsm8k/").size());
  scratch = datasets.at(file).at(rec["line"].get<std::size_t>())[rec["field"].get<std::string>()].get<std::string>();
  return scratch;
}

std::string Show(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (auto id : ids) s += std::to_string(id) + " ";
  return s;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = GoldenDir() + "/tokenizer_golden_" + GetParam() + ".jsonl";
    if (!FileExists(path_)) GTEST_SKIP() << path_ << " not recorded yet";
    golden_ = LoadGolden(GetParam());
    tokenizer_ = Tokenizer::Load(testing::NpmModels("tokenizer-" + GetParam()));
  }
  std::string path_;
  Golden golden_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(GoldenTest, EncodeDecodeMatchReference) {
  std::vector<std::string> corpus = testing::CommittedCorpus();
  std::map<std::string, std::vector<Json>> datasets;
  datasets["test.jsonl"] = testing::ReadJsonLines(testing::Gsm8kDir() + "/test.jsonl");
  bool faithful = AutoIsFaithful(golden_.meta);
  int checked = 0, special_checked = 0, failures = 0;
  for (const Json& rec : golden_.encodes) {
    ASSERT_FALSE(rec.contains("error")) << "reference failed on a corpus string: " << rec.dump();
    const std::string& text = Text(rec, corpus, datasets);
    auto pick = [&](const char* key) -> const Json& {
      std::string fast = std::string(key) + "_fast";
      return !faithful && rec.contains(fast) ? rec[fast] : rec[key];
    };
    auto want = pick("ids").get<std::vector<std::int32_t>>();
    auto got = tokenizer_->Encode(text, false);
    ++checked;
    if (got != want && ++failures <= 10) {
      ADD_FAILURE() << GetParam() << " " << rec.dump().substr(0, 120) << "\ntext " << Json(text).dump()
                    << "\n got  " << Show(got) << "\n want " << Show(want);
    }
    std::string want_decode = faithful && rec.contains("decode") ? rec["decode"].get<std::string>() : text;
    EXPECT_EQ(tokenizer_->Decode(want), want_decode) << rec.dump().substr(0, 120);
    if (rec.contains("ids_special")) {
      ++special_checked;
      auto want_special = pick("ids_special").get<std::vector<std::int32_t>>();
      EXPECT_EQ(Show(tokenizer_->Encode(text, true)), Show(want_special)) << Json(text).dump();
      EXPECT_EQ(tokenizer_->Decode(want_special, false), pick("decode_special").get<std::string>());
      EXPECT_EQ(tokenizer_->Decode(want_special, true), pick("decode_special_skip").get<std::string>());
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << checked << " strings differ";
  EXPECT_GE(checked, 2000);
  EXPECT_GT(special_checked, 100);
}

TEST_P(GoldenTest, ChatRenderingsMatchReference) {
  ordered_json conversations = ordered_json::parse(testing::ReadFile(FixtureDir() + "/chat_conversations.json"));
  ChatTemplate chat = ChatTemplate::ForModel(tokenizer_->config(), std::nullopt);
  int rendered = 0;
  for (const Json& rec : golden_.chats) {
    const ordered_json& conv = conversations.at(rec["conversation"].get<std::size_t>());
    ChatRenderOptions options;
    options.add_generation_prompt = conv["add_generation_prompt"].get<bool>();
    options.tools = conv["tools"];
    options.extra = conv["kwargs"];
    if (rec.contains("error")) {
      EXPECT_THROW(chat.Apply(conv["messages"], options, tokenizer_->config()), Error)
          << conv["name"] << ": the reference fails with " << rec["error"];
      continue;
    }
    std::string got;
    try {
      got = chat.Apply(conv["messages"], options, tokenizer_->config());
    } catch (const Error& e) {
      ADD_FAILURE() << conv["name"] << ": " << e.what();
      continue;
    }
    EXPECT_EQ(got, rec["text"].get<std::string>()) << conv["name"];
    ++rendered;
  }
  EXPECT_GE(rendered, 40);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, GoldenTest, ::testing::Values("deepseek_v3", "qwen3"));

}  // namespace
}  // namespace fission::tokenizer
