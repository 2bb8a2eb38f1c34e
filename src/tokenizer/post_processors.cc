#include "tokenizer/post_processors.h"

#include "tokenizer/component_json.h"

namespace fission::tokenizer {
namespace {

// Wraps the sequence in fixed id lists.
class AffixProcessor : public PostProcessor {
 public:
  AffixProcessor(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void Process(std::vector<std::int32_t>* ids) const override {
    ids->insert(ids->begin(), prefix_.begin(), prefix_.end());
    ids->insert(ids->end(), suffix_.begin(), suffix_.end());
  }

 private:
  std::vector<std::int32_t> prefix_, suffix_;
};

// TemplateProcessing's single-sequence template: special tokens around the "A" sequence.
class TemplateProcessor : public PostProcessor {
 public:
  struct Item {
    bool is_sequence;
    std::vector<std::int32_t> ids;
  };
  explicit TemplateProcessor(std::vector<Item> items) : items_(std::move(items)) {}
  void Process(std::vector<std::int32_t>* ids) const override {
    std::vector<std::int32_t> out;
    out.reserve(ids->size() + 4);
    for (const Item& item : items_) {
      if (item.is_sequence) {
        out.insert(out.end(), ids->begin(), ids->end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    *ids = std::move(out);
  }

 private:
  std::vector<Item> items_;
};

class NoOpProcessor : public PostProcessor {
 public:
  void Process(std::vector<std::int32_t>*) const override {}
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void Process(std::vector<std::int32_t>* ids) const override {
    for (const auto& p : parts_) p->Process(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::int32_t PairId(const Json& j, const char* key, const std::string& where) {
  const Json& pair = RequireField(j, key, where);
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    Fail(where, ".", key, ": expected [token, id]");
  }
  return pair[1].get<std::int32_t>();
}

std::unique_ptr<PostProcessor> MakeTemplate(const Json& j, const std::string& at) {
  const Json& single = RequireArray(j, "single", at);
  const Json& specials = RequireField(j, "special_tokens", at);
  std::vector<TemplateProcessor::Item> items;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const Json& piece = single[i];
    std::string pw = StrCat(at, ".single[", i, "]");
    if (piece.is_object() && piece.contains("Sequence")) {
      items.push_back({true, {}});
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      std::string name = GetString(piece["SpecialToken"], "id", pw);
      auto it = specials.find(name);
      if (it == specials.end()) Fail(pw, ": special token \"", name, "\" missing from special_tokens");
      const Json& ids = RequireArray(*it, "ids", StrCat(at, ".special_tokens[\"", name, "\"]"));
      TemplateProcessor::Item item{false, {}};
      for (const Json& id : ids) {
        if (!id.is_number_integer()) Fail(at, ".special_tokens[\"", name, "\"].ids: expected integers");
        item.ids.push_back(id.get<std::int32_t>());
      }
      items.push_back(std::move(item));
    } else {
      Fail(pw, ": expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix) {
  return std::make_unique<AffixProcessor>(std::move(prefix), std::move(suffix));
}

std::unique_ptr<PostProcessor> MakePostProcessor(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = ComponentType(j, where);
  std::string at = StrCat(where, " (", type, ")");
  if (type == "ByteLevel") return std::make_unique<NoOpProcessor>();  // only adjusts offsets
  if (type == "TemplateProcessing") return MakeTemplate(j, at);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return std::make_unique<AffixProcessor>(std::vector<std::int32_t>{PairId(j, "cls", at)},
                                            std::vector<std::int32_t>{PairId(j, "sep", at)});
  }
  if (type == "Sequence") {
    const Json& list = RequireArray(j, "processors", at);
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto p = MakePostProcessor(list[i], StrCat(where, ".processors[", i, "]"));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  Fail(where, ": unsupported post-processor type \"", type, "\"");
}

}  // namespace fission::tokenizer
