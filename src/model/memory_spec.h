// What a model keeps per sequence between steps, as the model declares it and the engine sizes it.
//
// A model's memory is a list of named cache classes. A *paged* class has entries that scale with a
// sequence's tokens: one entry covers `tokens_per_entry` consecutive positions (1 for MLA latent
// rows and DSA index keys, 4 or 128 for compressed entries). A *per-request* class has a fixed
// number of entries per running sequence (a sliding-window ring, compressor carry-over, recurrent
// state). An entry holds one or more typed fields packed in order (an e4m3 latent, its scales, a
// bf16 rope part). Every class has `layers` independent copies (one per model layer using it).
//
// **Decision**: all paged classes share one page index space. A page holds `page_size`
// consecutive positions of one sequence and, for each paged class, the entries of those positions:
// max(1, page_size / tokens_per_entry) of them (an entry wider than a page lives in the page of its
// first position). So the engine keeps one block table per sequence whatever the classes, and the
// prefix cache shares pages of every class at once. Per-request classes are indexed by a state
// slot the engine reserves for a running sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace fission::model {

struct CacheField {
  std::string name;
  DType dtype = DType::kF32;
  std::int64_t count = 0;  // elements in one entry
  std::size_t bytes() const { return DTypeBytes(dtype, count); }
};

enum class CacheKind : std::uint8_t { kPaged, kPerRequest };

struct CacheClass {
  std::string name;
  CacheKind kind = CacheKind::kPaged;
  std::int32_t tokens_per_entry = 1;     // paged classes
  std::int32_t entries_per_request = 0;  // per-request classes
  std::int32_t layers = 1;
  std::vector<CacheField> fields;

  std::size_t entry_bytes() const;
  // The byte offset of a field inside an entry; an Error naming the class when it has none.
  std::size_t field_offset(const std::string& field) const;
  // Entries of this (paged) class in one page of `page_size` tokens.
  std::int64_t entries_per_page(std::int64_t page_size) const;
};

struct MemorySpec {
  std::vector<CacheClass> classes;

  bool has_per_request_state() const;
  // Bytes of one page over every paged class and layer.
  std::int64_t page_bytes(std::int64_t page_size) const;
  // Bytes of one state slot over every per-request class and layer.
  std::int64_t state_slot_bytes() const;
  // Bytes per token of the paged classes (page_bytes / page_size), for logs.
  double bytes_per_token(std::int64_t page_size) const;
  // An Error naming the class and what is wrong: no fields, a field without elements, a paged class
  // whose tokens_per_entry and `page_size` do not divide one another, a per-request class without
  // entries, duplicate names.
  void Validate(std::int64_t page_size) const;
  // The index of the class named `name`; an Error when there is none.
  int index_of(const std::string& name) const;
};

// How much of each the engine gives a model: pages (of `page_size` tokens) for the paged classes,
// state slots for the per-request ones.
struct MemoryPlan {
  std::int64_t num_pages = 0;
  std::int64_t page_size = 0;
  std::int64_t num_state_slots = 0;
  bool operator==(const MemoryPlan&) const = default;
};

// The slot (entry index in a paged class's storage) of the entry holding position `pos` of a
// sequence with block table `table`.
std::int64_t PagedEntrySlot(const CacheClass& c, std::span<const std::int32_t> table, std::int64_t page_size,
                            std::int64_t pos);

}  // namespace fission::model
