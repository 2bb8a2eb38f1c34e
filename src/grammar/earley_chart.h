// Earley recognition over an Automaton, one set per byte, with sets pushed and popped so that a
// walk over the vocabulary can try a token and take it back.
//
// An item is (state, origin): a rule's automaton is in `state`, having started at set `origin`.
// Closing a set predicts the rules its states call (skipping nullable ones at once, as Aycock and
// Horspool do) and completes rules whose state accepts, advancing their callers in the origin
// set. Left recursion and ambiguity are fine. A chart can also start from one state alone, as a
// frame whose context is unknown (origin -1): a completion of the frame's rule is then recorded
// as an escape of that set instead of advancing anything.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/automaton.h"

namespace fission::grammar {

struct EarleyItem {
  std::int32_t state;
  std::int32_t origin;  // -1: the frame of a chart started from one state
};

class EarleyChart {
 public:
  explicit EarleyChart(const Automaton* automaton) : a_(automaton) {}

  // Set 0 becomes the closure of the root's start.
  void StartRoot();
  // Set 0 becomes the closure of `state` as a frame.
  void StartFrame(std::int32_t state);
  // Scans `byte` into a new set; false (and no new set) when no item reads it.
  bool Push(std::uint8_t byte);
  // Removes the last set pushed.
  void Pop();
  // Sets pushed since set 0.
  std::int32_t depth() const { return static_cast<std::int32_t>(set_begin_.size()) - 1; }

  std::span<const EarleyItem> set(std::int32_t k) const {
    const std::size_t end = k + 1 < static_cast<std::int32_t>(set_begin_.size()) ? set_begin_[k + 1] : items_.size();
    return {items_.data() + set_begin_[k], items_.data() + end};
  }
  std::span<const EarleyItem> current() const { return set(depth()); }
  // The frame's rule completed in set k.
  bool escaped(std::int32_t k) const { return escaped_[k]; }
  // The root rule has completed over everything read.
  bool RootComplete() const;
  // Some item of the last set reads a byte.
  bool CanScan() const;
  const Automaton& automaton() const { return *a_; }

 private:
  void Start(EarleyItem item);
  void BeginSet();
  void Add(EarleyItem item);
  void Close(std::int32_t k);
  void Grow();

  const Automaton* a_;
  std::vector<EarleyItem> items_;
  std::vector<std::size_t> set_begin_;
  std::vector<std::uint8_t> escaped_;
  // Open addressing over the items of the set being built; a slot is current when its stamp is.
  struct Slot {
    std::uint64_t key = 0;
    std::uint32_t stamp = 0;
  };
  std::vector<Slot> table_;
  std::uint32_t stamp_ = 0;
  std::size_t in_table_ = 0;
};

}  // namespace fission::grammar
