#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace fission::tokenizer {
namespace {

// Per-thread match state: match data and a JIT stack large enough for long whitespace runs.
struct ThreadState {
  pcre2_match_data* data = pcre2_match_data_create(16, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    Fail(where, ": regex does not compile at offset ", offset, ": ", reinterpret_cast<char*>(message),
         " (pattern ", pattern, ")");
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::FindAll(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>* matches) const {
  auto* code = static_cast<pcre2_code*>(code_);
  ThreadState& state = State();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t start = 0;
  while (start <= text.size()) {
    int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, state.data, state.context)
                  : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      Fail("regex ", pattern_, ": matching failed: ", reinterpret_cast<char*>(message));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    std::size_t b = ovector[0], e = ovector[1];
    if (e > b) {
      matches->emplace_back(b, e);
      start = e;
    } else {
      // Empty match: step over one character.
      if (b >= text.size()) break;
      start = b + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
    }
  }
}

}  // namespace fission::tokenizer
