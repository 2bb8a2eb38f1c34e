#include "grammar/earley_chart.h"

#include "base/error.h"

namespace fission::grammar {
namespace {

std::uint64_t ItemKey(EarleyItem item) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(item.state)) << 32) |
         static_cast<std::uint32_t>(item.origin + 1);
}

std::size_t SlotOf(std::uint64_t key, std::size_t mask) {
  return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & mask;
}

}  // namespace

void EarleyChart::StartRoot() { Start({a_->rule_start(a_->root()), 0}); }

void EarleyChart::StartFrame(std::int32_t state) { Start({state, -1}); }

void EarleyChart::Start(EarleyItem item) {
  items_.clear();
  set_begin_.assign(1, 0);
  escaped_.assign(1, 0);
  BeginSet();
  Add(item);
  Close(0);
}

void EarleyChart::BeginSet() {
  if (table_.empty()) table_.resize(64);
  if (++stamp_ == 0) {  // the stamps wrapped: forget every slot
    for (Slot& s : table_) s.stamp = 0;
    stamp_ = 1;
  }
  in_table_ = 0;
}

void EarleyChart::Grow() {
  table_.assign(table_.size() * 2, Slot{});
  stamp_ = 1;
  const std::size_t mask = table_.size() - 1;
  for (std::size_t i = set_begin_.back(); i < items_.size(); ++i) {
    const std::uint64_t key = ItemKey(items_[i]);
    std::size_t at = SlotOf(key, mask);
    while (table_[at].stamp == stamp_) at = (at + 1) & mask;
    table_[at] = {key, stamp_};
  }
}

void EarleyChart::Add(EarleyItem item) {
  if ((in_table_ + 1) * 2 > table_.size()) Grow();
  const std::uint64_t key = ItemKey(item);
  const std::size_t mask = table_.size() - 1;
  std::size_t at = SlotOf(key, mask);
  while (table_[at].stamp == stamp_) {
    if (table_[at].key == key) return;
    at = (at + 1) & mask;
  }
  table_[at] = {key, stamp_};
  ++in_table_;
  items_.push_back(item);
}

void EarleyChart::Close(std::int32_t k) {
  for (std::size_t i = set_begin_[k]; i < items_.size(); ++i) {
    const EarleyItem item = items_[i];
    if (a_->accepting(item.state)) {
      if (item.origin < 0) {
        escaped_[k] = 1;
      } else {
        // Advance every caller of this rule in the origin set. When that set is this one, items
        // added meanwhile are read too (harmless: the nullable skip below has advanced them).
        const std::int32_t rule = a_->rule_of(item.state);
        for (std::size_t j = set_begin_[item.origin];
             j < (item.origin == k ? items_.size() : set_begin_[item.origin + 1]); ++j) {
          const EarleyItem caller = items_[j];
          for (const Automaton::Call& call : a_->calls(caller.state))
            if (call.rule == rule) Add({call.target, caller.origin});
        }
      }
    }
    for (const Automaton::Call& call : a_->calls(item.state)) {
      Add({a_->rule_start(call.rule), k});
      if (a_->nullable(call.rule)) Add({call.target, item.origin});
    }
  }
}

bool EarleyChart::Push(std::uint8_t byte) {
  const std::span<const EarleyItem> from = current();
  const std::size_t from_begin = from.data() - items_.data(), from_end = from_begin + from.size();
  // One item inside a rule's automaton (a regex, a string, a number): the next set is one item
  // too, and needs no closing unless it accepts or calls.
  if (from.size() == 1 && a_->calls(from[0].state).empty()) {
    const EarleyItem item = from[0];
    const std::int32_t next = a_->Next(item.state, byte);
    if (next < 0) return false;
    if (!a_->accepting(next) && a_->calls(next).empty()) {
      set_begin_.push_back(items_.size());
      escaped_.push_back(0);
      items_.push_back({next, item.origin});
      return true;
    }
  }
  set_begin_.push_back(items_.size());
  escaped_.push_back(0);
  BeginSet();
  for (std::size_t i = from_begin; i < from_end; ++i) {
    const std::int32_t next = a_->Next(items_[i].state, byte);
    if (next >= 0) Add({next, items_[i].origin});
  }
  if (items_.size() == set_begin_.back()) {
    set_begin_.pop_back();
    escaped_.pop_back();
    return false;
  }
  Close(depth());
  return true;
}

void EarleyChart::Pop() {
  FISSION_CHECK(depth() > 0);
  items_.resize(set_begin_.back());
  set_begin_.pop_back();
  escaped_.pop_back();
}

bool EarleyChart::RootComplete() const {
  for (const EarleyItem& item : current())
    if (item.origin == 0 && a_->accepting(item.state) && a_->rule_of(item.state) == a_->root()) return true;
  return false;
}

bool EarleyChart::CanScan() const {
  for (const EarleyItem& item : current())
    if (a_->has_bytes(item.state)) return true;
  return false;
}

}  // namespace fission::grammar
