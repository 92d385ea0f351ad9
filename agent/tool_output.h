// Bounded collection of tool output: however much a command prints, the collector holds at most
// a few times max_chars bytes, keeping the head and the tail (where build and test errors are)
// and counting what it dropped in between.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/utf8.h"

namespace forkbox::agent {

class BoundedOutput {
 public:
  explicit BoundedOutput(int64_t max_chars);
  void Append(std::string_view bytes);
  int64_t total_bytes() const { return total_bytes_; }
  // The kept text made valid UTF-8, at most max_chars characters plus a marker naming the
  // dropped bytes (and the replaced invalid sequences, if any).
  std::string Finish();

 private:
  int64_t max_chars_;
  int64_t head_chars_limit_;
  Utf8CharStarts chars_;
  std::string head_;
  int64_t head_chars_ = 0;
  bool in_tail_ = false;
  std::string tail_;  // Raw bytes after the head; trimmed from the front when too big.
  int64_t tail_chars_ = 0;
  bool over_cap_ = false;  // More characters came than max_chars: something is dropped.
  int64_t tail_trimmed_bytes_ = 0;
  int64_t total_bytes_ = 0;
};

}  // namespace forkbox::agent
