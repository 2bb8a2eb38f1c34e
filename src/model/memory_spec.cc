#include "model/memory_spec.h"

#include "kernels/mla_ops.h"

#include <algorithm>
#include <set>

#include "base/error.h"

namespace fission::model {

std::size_t CacheClass::entry_bytes() const {
  std::size_t bytes = 0;
  for (const CacheField& f : fields) bytes += f.bytes();
  return bytes;
}

std::size_t CacheClass::field_offset(const std::string& field) const {
  std::size_t offset = 0;
  for (const CacheField& f : fields) {
    if (f.name == field) return offset;
    offset += f.bytes();
  }
  Fail("cache class '", name, "' has no field '", field, "'");
}

std::int64_t CacheClass::entries_per_page(std::int64_t page_size) const {
  return std::max<std::int64_t>(1, page_size / tokens_per_entry);
}

bool MemorySpec::has_per_request_state() const {
  for (const CacheClass& c : classes)
    if (c.kind == CacheKind::kPerRequest) return true;
  return false;
}

std::int64_t MemorySpec::page_bytes(std::int64_t page_size) const {
  std::int64_t bytes = 0;
  for (const CacheClass& c : classes)
    if (c.kind == CacheKind::kPaged)
      bytes += c.layers * c.entries_per_page(page_size) * static_cast<std::int64_t>(c.entry_bytes());
  return bytes;
}

std::int64_t MemorySpec::state_slot_bytes() const {
  std::int64_t bytes = 0;
  for (const CacheClass& c : classes)
    if (c.kind == CacheKind::kPerRequest)
      bytes += static_cast<std::int64_t>(c.layers) * c.entries_per_request * static_cast<std::int64_t>(c.entry_bytes());
  return bytes;
}

double MemorySpec::bytes_per_token(std::int64_t page_size) const {
  return static_cast<double>(page_bytes(page_size)) / static_cast<double>(page_size);
}

void MemorySpec::Validate(std::int64_t page_size) const {
  std::string problems;
  auto problem = [&](const auto&... parts) { problems += StrCat(problems.empty() ? "" : "; ", parts...); };
  std::set<std::string> names;
  for (const CacheClass& c : classes) {
    const std::string who = StrCat("cache class '", c.name, "'");
    if (!names.insert(c.name).second) problem(who, " is declared twice");
    if (c.fields.empty()) problem(who, " has no fields");
    for (const CacheField& f : c.fields)
      if (f.count <= 0) problem(who, ": field '", f.name, "' has ", f.count, " elements");
    if (c.layers < 1) problem(who, " has ", c.layers, " layers");
    if (c.kind == CacheKind::kPaged) {
      const std::int64_t r = c.tokens_per_entry;
      if (r < 1 || (page_size % r != 0 && r % page_size != 0))
        problem(who, " covers ", r, " tokens per entry; it and --page-size ", page_size,
                " must divide one another");
    } else if (c.entries_per_request < 1) {
      problem(who, " has ", c.entries_per_request, " entries per request");
    }
  }
  if (!problems.empty()) Fail("the model's memory: ", problems);
}

int MemorySpec::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < classes.size(); ++i)
    if (classes[i].name == name) return static_cast<int>(i);
  Fail("the model declares no cache class '", name, "'");
}

std::int64_t PagedEntrySlot(const CacheClass& c, std::span<const std::int32_t> table, std::int64_t page_size,
                            std::int64_t pos) {
  return kernels::EntrySlot(table, page_size, c.tokens_per_entry, pos / c.tokens_per_entry);
}

}  // namespace fission::model
