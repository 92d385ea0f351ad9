// A session's token budget (--max-tokens-total), shared by the parent's loop and its tasks.
//
// Mechanism: each task is started with a task budget carved out of what is left (a reservation),
// enforced by the child's own loop, and gives back what it did not use when it ends. So parallel
// tasks can never overrun the session together, and no new frame or mid-task message is needed:
// the budget is enforced by the process that pays, with what it already knows. Not thread-safe
// (the parent runs its loop and its batches on one thread).
#pragma once

#include <cstdint>

namespace forkbox::agent {

class TokenBudget {
 public:
  explicit TokenBudget(int64_t total) : total_(total) {}

  int64_t total() const { return total_; }
  // What is neither spent nor reserved; never negative.
  int64_t Remaining() const;
  void Spend(int64_t tokens) { spent_ += tokens; }
  // Reserves up to `want` tokens and returns the amount: at least 1, so that a task budget is
  // never "0 = unlimited" (a task granted less than a request stops at once with `budget`).
  int64_t Reserve(int64_t want);
  // Ends a reservation of `reserved` tokens of which `used` were spent.
  void Release(int64_t reserved, int64_t used);

 private:
  int64_t total_;
  int64_t spent_ = 0;
  int64_t reserved_ = 0;
};

}  // namespace forkbox::agent
