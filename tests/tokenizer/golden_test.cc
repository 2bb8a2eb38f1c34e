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

// FISSION_TOKENIZER_GOLDEN_DIR points the test at freshly recorded goldens before they are committed.
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

// transformers may replace tokenizer.json's pre-tokenizer and decoder by its own for a tokenizer
// class (LlamaTokenizer does so for DeepSeek-V3's ByteLevel pipeline, see
// huggingface/transformers#45488). When AutoTokenizer's ids disagree with those of
// PreTrainedTokenizerFast, which runs tokenizer.json as written, the latter is the reference: the
// golden holds its ids and decodes under *_fast keys wherever they differ.
bool UseFastReference(const Json& meta) { return meta["counts"].value("fast_differs", 0) > 0; }

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
    ASSERT_TRUE(FileExists(path_)) << path_ << " is missing: run tools/golden/make_tokenizer_goldens.py";
    golden_ = LoadGolden(GetParam());
    tokenizer_ = Tokenizer::Load(testing::NpmModels("tokenizer-" + GetParam()));
  }
  std::string path_;
  Golden golden_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

struct EncodeCounts {
  int checked = 0, special_checked = 0, decode_special_checked = 0;
};

// Checks the golden's encode records of one source: the committed corpus, or gsm8k's test split
// (read from ../shared, which a clone of the repository does not have).
EncodeCounts CheckEncodes(const Golden& golden, const Tokenizer& tokenizer, const std::string& name, bool gsm8k) {
  std::vector<std::string> corpus = testing::CommittedCorpus();
  std::map<std::string, std::vector<Json>> datasets;
  if (gsm8k) datasets["test.jsonl"] = testing::ReadJsonLines(testing::Gsm8kDir() + "/test.jsonl");
  const bool fast = UseFastReference(golden.meta);
  const TokenizerConfig& config = tokenizer.config();
  EncodeCounts n;
  int failures = 0;
  for (const Json& rec : golden.encodes) {
    if ((rec["source"] != "corpus") != gsm8k) continue;
    EXPECT_FALSE(rec.contains("error")) << "the reference failed on a corpus string: " << rec.dump();
    if (rec.contains("error")) continue;
    const std::string& text = Text(rec, corpus, datasets);
    auto ref = [&](const char* key) -> const Json* {
      std::string fast_key = std::string(key) + "_fast";
      if (fast && rec.contains(fast_key)) return &rec[fast_key];
      return rec.contains(key) ? &rec[key] : nullptr;
    };
    auto want = ref("ids")->get<std::vector<std::int32_t>>();
    auto got = tokenizer.Encode(text, false);
    ++n.checked;
    if (got != want && ++failures <= 10) {
      ADD_FAILURE() << name << " " << rec.dump().substr(0, 120) << "\ntext " << Json(text).dump()
                    << "\n got  " << Show(got) << "\n want " << Show(want);
    }
    // The reference's decode of its own ids (recorded where it differs from the text).
    const Json* decode = fast ? (rec.contains("decode_fast") ? &rec["decode_fast"] : nullptr) : ref("decode");
    EXPECT_EQ(tokenizer.Decode(want), decode ? decode->get<std::string>() : text) << rec.dump().substr(0, 120);
    if (!rec.contains("ids_special")) continue;
    ++n.special_checked;
    auto want_special = ref("ids_special")->get<std::vector<std::int32_t>>();
    // transformers 5 adds no special tokens for these tokenizers; we honour tokenizer_config.json's
    // add_bos_token / add_eos_token as transformers 4 and the serving engines built on it do.
    EXPECT_EQ(Show(want_special), Show(want)) << "the reference added special tokens: update this test";
    std::vector<std::int32_t> expected_special;
    if (config.add_bos_token.value_or(false)) expected_special.push_back(*tokenizer.bos_token_id());
    expected_special.insert(expected_special.end(), want_special.begin(), want_special.end());
    if (config.add_eos_token.value_or(false)) expected_special.push_back(*tokenizer.eos_token_id());
    EXPECT_EQ(Show(tokenizer.Encode(text, true)), Show(expected_special)) << Json(text).dump();
    // Decodes of the reference's ids with and without skip_special_tokens. In fast mode the
    // AutoTokenizer decodes are not the pipeline's, so only the recorded fast ones are compared.
    bool have = !fast || rec.contains("decode_special_fast");
    if (have) {
      ++n.decode_special_checked;
      EXPECT_EQ(tokenizer.Decode(want_special, false), ref("decode_special")->get<std::string>());
      EXPECT_EQ(tokenizer.Decode(want_special, true), ref("decode_special_skip")->get<std::string>());
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << n.checked << " strings differ";
  return n;
}

TEST_P(GoldenTest, EncodeDecodeMatchReference) {
  const EncodeCounts n = CheckEncodes(golden_, *tokenizer_, GetParam(), /*gsm8k=*/false);
  EXPECT_GE(n.checked, 850);
  EXPECT_GT(n.special_checked, 150);
  EXPECT_GT(n.decode_special_checked, 0);
}

TEST_P(GoldenTest, EncodeDecodeMatchReferenceOnGsm8k) {
  const std::string test = testing::Gsm8kDir() + "/test.jsonl";
  if (!FileExists(test)) GTEST_SKIP() << "no gsm8k data at " << test << " (the records of its strings are skipped)";
  const EncodeCounts n = CheckEncodes(golden_, *tokenizer_, GetParam(), /*gsm8k=*/true);
  EXPECT_GE(n.checked, 1400);
  EXPECT_GT(n.special_checked, 250);
  EXPECT_GT(n.decode_special_checked, 0);
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
