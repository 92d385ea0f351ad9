// The fork bomb, in its own binary so CTest runs it serially: RLIMIT_NPROC counts every process
// of the user, so a bomb running next to other tests of the same user would starve them.
#include <cstdlib>
#include <string>

#include "tests/escape/fixture.h"

namespace forkbox::escape {
namespace {

class ForkBomb : public EscapeTest {};

TEST_P(ForkBomb, IsCapped) {
  // Far above the policy's cap, far below pid_max; the bomb releases its children when done,
  // and the kill switch bounds the whole run.
  constexpr long kMax = 4096;
  RunResult r = Probe({"fork_bomb", std::to_string(kMax)}, KillSwitch(240));
  long forked = -1;
  if (size_t at = r.out.find("FORKED "); at != std::string::npos) {
    forked = atol(r.out.c_str() + at + 7);
  }
  const RunResult& check = CheckOutput(GetParam());
  Verdict(r, forked >= kMax || r.out.find("RESULT escaped") != std::string::npos, Control::kNone,
          "fork bomb got " + std::to_string(forked) + " of " + std::to_string(kMax) +
              " processes; --check says:\n" + check.out);
}

// Unsandboxed the bomb would not be capped: sandboxed modes only. No control run: 4096
// unconfined processes would starve every other test of the machine; the limit it meets has one
// (EscapeTest.ProcessLimitStaysAfterRaisingSoftLimit for RLIMIT_NPROC).
INSTANTIATE_TEST_SUITE_P(Modes, ForkBomb,
                         ::testing::Values(Mode::kRoot, Mode::kUser, Mode::kRootNoUserns,
                                           Mode::kUserNoUserns),
                         ModeName);

}  // namespace
}  // namespace forkbox::escape
