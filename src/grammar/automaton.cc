#include "grammar/automaton.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "base/error.h"

namespace fission::grammar {
namespace {

using Kind = Grammar::Kind;

// Which rules must stay rules (the root, recursive ones, and ones too large to copy) and which are
// copied into their callers.
class InlinePlan {
 public:
  InlinePlan(const Grammar& g, std::int64_t budget) : g_(g), budget_(budget) {
    const std::int32_t n = g.num_rules();
    refs_.resize(n);
    for (std::int32_t r = 0; r < n; ++r) {
      if (g.rule(r).body < 0) continue;
      std::vector<char> seen(g.num_exprs(), 0);
      CollectRefs(g.rule(r).body, &seen, &refs_[r]);
    }
    FindRecursive();
    size_.assign(n, -1);
  }

  bool Inlined(std::int32_t rule) { return !recursive_[rule] && RuleSize(rule) <= budget_; }
  // A counted repetition whose copies together would be large calls its item as a rule instead of
  // copying it (an array of a hundred long strings would otherwise be a hundred string automata).
  bool Hoisted(const Grammar::Expr& repeat) {
    const std::int64_t copies = repeat.max == Grammar::kUnbounded ? repeat.min + 1 : std::max(repeat.max, 1);
    const std::int64_t item = NodeSize(repeat.children[0]);
    return item >= kHoistItem && item * copies > kHoistTotal;
  }

 private:
  static constexpr std::int64_t kHoistItem = 64, kHoistTotal = 20000;

  void CollectRefs(Grammar::Node node, std::vector<char>* seen, std::vector<std::int32_t>* out) {
    if ((*seen)[node]) return;
    (*seen)[node] = 1;
    const Grammar::Expr& e = g_.expr(node);
    if (e.kind == Kind::kRef) out->push_back(e.rule);
    for (Grammar::Node c : e.children) CollectRefs(c, seen, out);
  }

  // Tarjan's strongly connected components over rule references, without recursion on the stack.
  void FindRecursive() {
    const std::int32_t n = g_.num_rules();
    recursive_.assign(n, 0);
    std::vector<std::int32_t> index(n, -1), low(n, 0), stack;
    std::vector<char> on_stack(n, 0);
    std::int32_t counter = 0;
    for (std::int32_t root = 0; root < n; ++root) {
      if (index[root] >= 0) continue;
      std::vector<std::pair<std::int32_t, std::size_t>> frames = {{root, 0}};
      index[root] = low[root] = counter++;
      stack.push_back(root);
      on_stack[root] = 1;
      while (!frames.empty()) {
        auto& [v, i] = frames.back();
        if (i < refs_[v].size()) {
          const std::int32_t w = refs_[v][i++];
          if (w == v) recursive_[v] = 1;
          if (index[w] < 0) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack[w] = 1;
            frames.push_back({w, 0});
          } else if (on_stack[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        if (low[v] == index[v]) {
          std::vector<std::int32_t> component;
          std::int32_t w;
          do {
            w = stack.back();
            stack.pop_back();
            on_stack[w] = 0;
            component.push_back(w);
          } while (w != v);
          if (component.size() > 1)
            for (std::int32_t c : component) recursive_[c] = 1;
        }
        const std::int32_t done = v;
        frames.pop_back();
        if (!frames.empty()) low[frames.back().first] = std::min(low[frames.back().first], low[done]);
      }
    }
  }

  static std::int64_t Cap(std::int64_t x) { return std::min<std::int64_t>(x, std::int64_t{1} << 40); }

  std::int64_t RuleSize(std::int32_t rule) {
    if (size_[rule] >= 0) return size_[rule];
    if (g_.rule(rule).body < 0) return size_[rule] = 2;  // reported as undefined later
    return size_[rule] = NodeSize(g_.rule(rule).body);
  }

  // NFA states the expression expands to (an upper estimate).
  std::int64_t NodeSize(Grammar::Node node) {
    const Grammar::Expr& e = g_.expr(node);
    switch (e.kind) {
      case Kind::kEmpty:
        return 1;
      case Kind::kBytes:
        return 2;
      case Kind::kUntil:
        return static_cast<std::int64_t>(e.text.size()) + 1;
      case Kind::kRef:
        return Inlined(e.rule) ? RuleSize(e.rule) : 2;
      case Kind::kSeq:
      case Kind::kAlt: {
        std::int64_t s = 2;
        for (Grammar::Node c : e.children) s = Cap(s + NodeSize(c));
        return s;
      }
      case Kind::kRepeat: {
        const std::int64_t copies = e.max == Grammar::kUnbounded ? e.min + 1 : std::max(e.max, 1);
        if (Hoisted(e)) return Cap(4 * copies + 2);
        return Cap(Cap(NodeSize(e.children[0]) * copies) + 2 * copies + 2);
      }
    }
    return 1;
  }

  const Grammar& g_;
  std::int64_t budget_;
  std::vector<std::vector<std::int32_t>> refs_;
  std::vector<char> recursive_;
  std::vector<std::int64_t> size_;
};

struct NfaState {
  std::vector<std::int32_t> eps;
  std::vector<std::pair<std::int32_t, std::int32_t>> bytes;  // (byte set id, target)
  std::vector<std::pair<std::int32_t, std::int32_t>> calls;  // (automaton rule, target)
};

}  // namespace

// Builds the automaton: the NFA of every kept rule (Thompson's construction), the byte classes,
// one DFA per rule (subset construction), then removes what cannot reach acceptance and computes
// nullable rules and follow sets.
class AutomatonBuilder {
 public:
  AutomatonBuilder(const Grammar& g, const AutomatonLimits& limits)
      : g_(g), limits_(limits), plan_(g, limits.inline_budget) {}

  Automaton Build() {
    if (g_.root() < 0 || g_.root() >= g_.num_rules()) Fail("the grammar has no root rule");
    RuleIndex(g_.root());
    for (std::size_t r = 0; r < kept_.size(); ++r) {  // kept_ grows as bodies refer to more rules
      const std::int32_t start = NewState(), end = NewState();
      const auto [s, e] = BuildNode(kept_[r], 0);
      nfa_[start].eps.push_back(s);
      nfa_[e].eps.push_back(end);
      nfa_start_.push_back(start);
      nfa_end_.push_back(end);
    }
    ComputeClasses();
    for (std::int32_t r = 0; r < static_cast<std::int32_t>(kept_.size()); ++r) BuildDfa(r);
    FlattenCalls();
    Trim();
    ComputeNullable();
    ComputeFollow();
    a_.root_ = 0;
    return std::move(a_);
  }

 private:
  using Fragment = std::pair<std::int32_t, std::int32_t>;

  std::int32_t RuleIndex(std::int32_t grammar_rule) {
    const Grammar::Rule& rule = g_.rule(grammar_rule);
    if (rule.body < 0) Fail("rule '", rule.name, "' is used but not defined");
    return BodyIndex(rule.body);
  }

  // The automaton rule whose body is `node` (a grammar rule's, or a hoisted repetition item).
  std::int32_t BodyIndex(Grammar::Node node) {
    auto [it, fresh] = rule_index_.emplace(node, static_cast<std::int32_t>(kept_.size()));
    if (fresh) kept_.push_back(node);
    return it->second;
  }

  std::int32_t NewState() {
    if (static_cast<std::int32_t>(nfa_.size()) >= limits_.max_nfa_states)
      Fail("the grammar is too large (more than ", limits_.max_nfa_states, " automaton states before determinization)");
    nfa_.emplace_back();
    return static_cast<std::int32_t>(nfa_.size() - 1);
  }

  std::int32_t SetId(const ByteSet& set) {
    auto [it, fresh] = set_ids_.emplace(set, static_cast<std::int32_t>(sets_.size()));
    if (fresh) sets_.push_back(set);
    return it->second;
  }

  Fragment BuildNode(Grammar::Node node, int depth) {
    if (depth > 10000) Fail("the grammar nests too deeply");
    const Grammar::Expr& e = g_.expr(node);
    switch (e.kind) {
      case Kind::kEmpty: {
        const std::int32_t s = NewState();
        return {s, s};
      }
      case Kind::kBytes: {
        const std::int32_t s = NewState(), t = NewState();
        nfa_[s].bytes.push_back({SetId(e.bytes), t});
        return {s, t};
      }
      case Kind::kSeq: {
        Fragment f = BuildNode(e.children[0], depth + 1);
        for (std::size_t i = 1; i < e.children.size(); ++i) {
          const Fragment next = BuildNode(e.children[i], depth + 1);
          nfa_[f.second].eps.push_back(next.first);
          f.second = next.second;
        }
        return f;
      }
      case Kind::kAlt: {
        const std::int32_t s = NewState(), t = NewState();
        for (Grammar::Node c : e.children) {
          const Fragment f = BuildNode(c, depth + 1);
          nfa_[s].eps.push_back(f.first);
          nfa_[f.second].eps.push_back(t);
        }
        return {s, t};
      }
      case Kind::kRepeat:
        return BuildRepeat(e, depth);
      case Kind::kRef: {
        if (g_.rule(e.rule).body < 0) Fail("rule '", g_.rule(e.rule).name, "' is used but not defined");
        if (plan_.Inlined(e.rule)) return BuildNode(g_.rule(e.rule).body, depth + 1);
        const std::int32_t s = NewState(), t = NewState();
        nfa_[s].calls.push_back({RuleIndex(e.rule), t});
        return {s, t};
      }
      case Kind::kUntil:
        return BuildUntil(e.text);
    }
    FISSION_CHECK(false);
  }

  // One copy of a repetition's item: its automaton, or a call when the item is hoisted.
  Fragment BuildItem(const Grammar::Expr& e, bool hoisted, int depth) {
    if (!hoisted) return BuildNode(e.children[0], depth + 1);
    const std::int32_t s = NewState(), t = NewState();
    nfa_[s].calls.push_back({BodyIndex(e.children[0]), t});
    return {s, t};
  }

  Fragment BuildRepeat(const Grammar::Expr& e, int depth) {
    const bool hoisted = plan_.Hoisted(e);
    const std::int32_t s = NewState();
    std::int32_t end = s;
    for (std::int32_t i = 0; i < e.min; ++i) {
      const Fragment f = BuildItem(e, hoisted, depth);
      nfa_[end].eps.push_back(f.first);
      end = f.second;
    }
    if (e.max == Grammar::kUnbounded) {
      const std::int32_t loop = NewState();
      nfa_[end].eps.push_back(loop);
      const Fragment f = BuildItem(e, hoisted, depth);
      nfa_[loop].eps.push_back(f.first);
      nfa_[f.second].eps.push_back(loop);
      return {s, loop};
    }
    const std::int32_t t = NewState();
    nfa_[end].eps.push_back(t);
    for (std::int32_t i = e.min; i < e.max; ++i) {  // each further copy is optional
      const Fragment f = BuildItem(e, hoisted, depth);
      nfa_[end].eps.push_back(f.first);
      nfa_[f.second].eps.push_back(t);
      end = f.second;
    }
    return {s, t};
  }

  // Knuth-Morris-Pratt: state k = the longest suffix read that is a proper prefix of `stop`.
  Fragment BuildUntil(const std::string& stop) {
    const std::int32_t n = static_cast<std::int32_t>(stop.size());
    std::vector<std::int32_t> fail(n, 0);
    for (std::int32_t i = 1, k = 0; i < n; ++i) {
      while (k > 0 && stop[i] != stop[k]) k = fail[k - 1];
      if (stop[i] == stop[k]) ++k;
      fail[i] = k;
    }
    std::vector<std::int32_t> states(n + 1);
    for (std::int32_t k = 0; k <= n; ++k) states[k] = NewState();
    for (std::int32_t k = 0; k < n; ++k) {
      std::vector<ByteSet> to(n + 1);
      for (int b = 0; b < 256; ++b) {
        std::int32_t j = k;
        while (j > 0 && static_cast<std::uint8_t>(stop[j]) != b) j = fail[j - 1];
        if (static_cast<std::uint8_t>(stop[j]) == b) ++j;
        to[j].Add(static_cast<std::uint8_t>(b));
      }
      for (std::int32_t j = 0; j <= n; ++j)
        if (!to[j].Empty()) nfa_[states[k]].bytes.push_back({SetId(to[j]), states[j]});
    }
    return {states[0], states[n]};
  }

  // Bytes are in one class when every byte set of the grammar holds both or neither.
  void ComputeClasses() {
    std::vector<std::int32_t> cls(256, 0);
    std::int32_t count = 1;
    for (const ByteSet& set : sets_) {
      std::map<std::pair<std::int32_t, bool>, std::int32_t> split;
      for (int b = 0; b < 256; ++b) {
        const auto key = std::make_pair(cls[b], set.Has(static_cast<std::uint8_t>(b)));
        auto [it, fresh] = split.emplace(key, static_cast<std::int32_t>(split.size()));
        cls[b] = it->second;
      }
      count = static_cast<std::int32_t>(split.size());
    }
    a_.num_classes_ = count;
    for (int b = 0; b < 256; ++b) a_.byte_class_[b] = static_cast<std::uint8_t>(cls[b]);
    set_classes_.assign(sets_.size(), {});
    for (std::size_t i = 0; i < sets_.size(); ++i) {
      std::vector<char> has(count, 0);
      for (int b = 0; b < 256; ++b)
        if (sets_[i].Has(static_cast<std::uint8_t>(b))) has[cls[b]] = 1;
      for (std::int32_t c = 0; c < count; ++c)
        if (has[c]) set_classes_[i].push_back(c);
    }
  }

  std::vector<std::int32_t> Closure(std::vector<std::int32_t> states) {
    std::vector<std::int32_t> stack = states;
    mark_.resize(nfa_.size(), 0);
    for (std::int32_t s : states) mark_[s] = 1;
    while (!stack.empty()) {
      const std::int32_t s = stack.back();
      stack.pop_back();
      for (std::int32_t t : nfa_[s].eps)
        if (!mark_[t]) {
          mark_[t] = 1;
          states.push_back(t);
          stack.push_back(t);
        }
    }
    for (std::int32_t s : states) mark_[s] = 0;
    std::sort(states.begin(), states.end());
    states.erase(std::unique(states.begin(), states.end()), states.end());
    return states;
  }

  struct VectorHash {
    std::size_t operator()(const std::vector<std::int32_t>& v) const {
      std::size_t h = v.size();
      for (std::int32_t x : v) h = (h ^ static_cast<std::size_t>(x)) * 0x100000001b3ull;
      return h;
    }
  };

  // Subset construction of one rule's DFA, appended to the automaton's states.
  void BuildDfa(std::int32_t rule) {
    std::unordered_map<std::vector<std::int32_t>, std::int32_t, VectorHash> ids;
    std::vector<std::vector<std::int32_t>> pending;
    const std::int32_t nc = a_.num_classes_;
    auto id_of = [&](std::vector<std::int32_t> set) {
      auto [it, fresh] = ids.emplace(std::move(set), static_cast<std::int32_t>(a_.rule_of_.size()));
      if (fresh) {
        if (static_cast<std::int32_t>(a_.rule_of_.size()) >= limits_.max_dfa_states)
          Fail("the grammar is too large (more than ", limits_.max_dfa_states, " automaton states)");
        a_.rule_of_.push_back(rule);
        a_.accepting_.push_back(0);
        a_.has_bytes_.push_back(0);
        a_.next_.resize(a_.next_.size() + nc, -1);
        state_calls_.emplace_back();
        pending.push_back(it->first);
      }
      return it->second;
    };
    a_.rule_start_.push_back(id_of(Closure({nfa_start_[rule]})));
    std::vector<std::vector<std::int32_t>> buckets(nc);
    while (!pending.empty()) {
      const std::vector<std::int32_t> set = std::move(pending.back());
      pending.pop_back();
      const std::int32_t d = ids.at(set);
      std::map<std::int32_t, std::vector<std::int32_t>> calls;
      for (std::int32_t s : set) {
        if (s == nfa_end_[rule]) a_.accepting_[d] = 1;
        for (const auto& [set_id, target] : nfa_[s].bytes)
          for (std::int32_t c : set_classes_[set_id]) buckets[c].push_back(target);
        for (const auto& [callee, target] : nfa_[s].calls) calls[callee].push_back(target);
      }
      for (std::int32_t c = 0; c < nc; ++c) {
        if (buckets[c].empty()) continue;
        const std::int32_t next = id_of(Closure(std::move(buckets[c])));
        buckets[c].clear();
        a_.next_[static_cast<std::size_t>(d) * nc + c] = next;
      }
      for (auto& [callee, targets] : calls) {
        const std::int32_t next = id_of(Closure(std::move(targets)));
        state_calls_[d].push_back({callee, next});
      }
    }
  }

  void FlattenCalls() {
    a_.call_begin_.assign(1, 0);
    for (const auto& calls : state_calls_) {
      a_.calls_.insert(a_.calls_.end(), calls.begin(), calls.end());
      a_.call_begin_.push_back(static_cast<std::int32_t>(a_.calls_.size()));
    }
  }

  // Keeps only states that can reach acceptance, through bytes and calls of rules that can
  // complete; edges into the others go.
  void Trim() {
    const std::int32_t n = a_.num_states(), nc = a_.num_classes_;
    const std::int32_t rules = static_cast<std::int32_t>(kept_.size());
    std::vector<std::vector<std::int32_t>> byte_pred(n);
    std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> call_pred(n);  // (state, rule)
    for (std::int32_t s = 0; s < n; ++s) {
      for (std::int32_t c = 0; c < nc; ++c) {
        const std::int32_t t = a_.next_[static_cast<std::size_t>(s) * nc + c];
        if (t >= 0) byte_pred[t].push_back(s);
      }
      for (const Automaton::Call& call : a_.calls(s)) call_pred[call.target].push_back({s, call.rule});
    }
    std::vector<char> live(n, 0), productive(rules, 0);
    std::vector<std::vector<std::int32_t>> waiting(rules);
    std::vector<std::int32_t> queue;
    auto mark = [&](std::int32_t s) {
      if (live[s]) return;
      live[s] = 1;
      queue.push_back(s);
    };
    for (std::int32_t s = 0; s < n; ++s)
      if (a_.accepting_[s]) mark(s);
    while (!queue.empty()) {
      const std::int32_t t = queue.back();
      queue.pop_back();
      const std::int32_t r = a_.rule_of_[t];
      if (t == a_.rule_start_[r] && !productive[r]) {
        productive[r] = 1;
        for (std::int32_t s : waiting[r]) mark(s);
        waiting[r].clear();
      }
      for (std::int32_t s : byte_pred[t]) mark(s);
      for (const auto& [s, callee] : call_pred[t]) {
        if (productive[callee]) {
          mark(s);
        } else {
          waiting[callee].push_back(s);
        }
      }
    }
    if (!live[a_.rule_start_[0]]) Fail("the grammar matches no text");
    std::vector<Automaton::Call> calls;
    std::vector<std::int32_t> begin = {0};
    for (std::int32_t s = 0; s < n; ++s) {
      bool bytes = false;
      for (std::int32_t c = 0; c < nc; ++c) {
        std::int32_t& t = a_.next_[static_cast<std::size_t>(s) * nc + c];
        if (t >= 0 && !live[t]) t = -1;
        bytes |= t >= 0;
      }
      a_.has_bytes_[s] = live[s] && bytes;
      if (live[s])
        for (const Automaton::Call& call : a_.calls(s))
          if (live[call.target] && productive[call.rule]) calls.push_back(call);
      begin.push_back(static_cast<std::int32_t>(calls.size()));
    }
    a_.calls_ = std::move(calls);
    a_.call_begin_ = std::move(begin);
  }

  // A rule is nullable when its start reaches acceptance through calls of nullable rules alone.
  void ComputeNullable() {
    const std::int32_t rules = static_cast<std::int32_t>(kept_.size());
    a_.nullable_.assign(rules, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::int32_t r = 0; r < rules; ++r) {
        if (a_.nullable_[r]) continue;
        if (EndsWithoutBytes(a_.rule_start_[r])) {
          a_.nullable_[r] = 1;
          changed = true;
        }
      }
    }
  }

  bool EndsWithoutBytes(std::int32_t start) const {
    std::vector<std::int32_t> stack = {start};
    std::vector<std::int32_t> seen = {start};
    while (!stack.empty()) {
      const std::int32_t s = stack.back();
      stack.pop_back();
      if (a_.accepting_[s]) return true;
      for (const Automaton::Call& call : a_.calls(s))
        if (a_.nullable_[call.rule] && std::find(seen.begin(), seen.end(), call.target) == seen.end()) {
          seen.push_back(call.target);
          stack.push_back(call.target);
        }
    }
    return false;
  }

  // first(s): bytes that can be read first from state s; follow(r): bytes after r completes.
  void ComputeFollow() {
    const std::int32_t n = a_.num_states(), nc = a_.num_classes_;
    const std::int32_t rules = static_cast<std::int32_t>(kept_.size());
    std::vector<ByteSet> class_bytes(nc);
    for (int b = 0; b < 256; ++b) class_bytes[a_.byte_class_[b]].Add(static_cast<std::uint8_t>(b));
    std::vector<ByteSet> first(n);
    std::vector<char> ends(n, 0);
    for (std::int32_t s = 0; s < n; ++s) {
      for (std::int32_t c = 0; c < nc; ++c)
        if (a_.next_[static_cast<std::size_t>(s) * nc + c] >= 0) first[s].AddAll(class_bytes[c]);
      ends[s] = a_.accepting_[s];
    }
    std::vector<std::int32_t> with_calls;
    for (std::int32_t s = 0; s < n; ++s)
      if (!a_.calls(s).empty()) with_calls.push_back(s);
    for (bool changed = true; changed;) {
      changed = false;
      for (std::int32_t s : with_calls)
        for (const Automaton::Call& call : a_.calls(s)) {
          ByteSet f = first[s];
          f.AddAll(first[a_.rule_start_[call.rule]]);
          if (a_.nullable_[call.rule]) {
            f.AddAll(first[call.target]);
            if (ends[call.target] && !ends[s]) {
              ends[s] = 1;
              changed = true;
            }
          }
          if (!(f == first[s])) {
            first[s] = f;
            changed = true;
          }
        }
    }
    a_.follow_.assign(rules, ByteSet{});
    for (bool changed = true; changed;) {
      changed = false;
      for (std::int32_t s : with_calls)
        for (const Automaton::Call& call : a_.calls(s)) {
          ByteSet f = a_.follow_[call.rule];
          f.AddAll(first[call.target]);
          if (ends[call.target]) f.AddAll(a_.follow_[a_.rule_of_[s]]);
          if (!(f == a_.follow_[call.rule])) {
            a_.follow_[call.rule] = f;
            changed = true;
          }
        }
    }
  }

  const Grammar& g_;
  AutomatonLimits limits_;
  InlinePlan plan_;
  Automaton a_;
  std::vector<NfaState> nfa_;
  struct ByteSetHash {
    std::size_t operator()(const ByteSet& s) const { return static_cast<std::size_t>(s.Hash()); }
  };
  std::vector<ByteSet> sets_;
  std::unordered_map<ByteSet, std::int32_t, ByteSetHash> set_ids_;
  std::vector<std::vector<std::int32_t>> set_classes_;
  std::vector<Grammar::Node> kept_;  // automaton rule -> its body
  std::map<std::int32_t, std::int32_t> rule_index_;
  std::vector<std::int32_t> nfa_start_, nfa_end_;
  std::vector<std::vector<Automaton::Call>> state_calls_;
  std::vector<char> mark_;
};

Automaton Automaton::Compile(const Grammar& grammar, const AutomatonLimits& limits) {
  return AutomatonBuilder(grammar, limits).Build();
}

}  // namespace fission::grammar
