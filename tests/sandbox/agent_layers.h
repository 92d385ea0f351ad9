// Runs a check of a confined agent in each layer this machine has, layer 1 as in a container
// that refuses user namespaces.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>

#include "sandbox/namespaces.h"
#include "sandbox/sandbox.h"
#include "tests/sandbox/probe_util.h"

namespace forkbox::sandbox::testing {

// `check` returns what failed, or "". Layer 1 runs first, in a fresh process (a death test,
// re-executed: Layer2Available keeps a process's first verdict, which forked probes inherit)
// that refuses user namespaces before anything probes them; then layer 2 where it works.
// In a forked child: as an agent confined by `policy` in that layer (false if it is another or
// entering failed), or unconfined if `policy` is null. Keeps `keep_fd` open.
inline bool BecomeAgent(const Policy* policy, bool layer1, int keep_fd) {
  if (policy == nullptr) return true;
  const int keep[] = {keep_fd};
  Result<Sandbox> agent = EnterAgentSandbox(*policy, keep);
  return agent.ok() && agent->report().layer == (layer1 ? 1 : 2);
}

inline void InEachLayer(const std::function<std::string(bool layer1)>& check) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const std::string failed = RefuseUserNamespaces() ? check(true) : "no seccomp filter";
        std::fprintf(stderr, "layer 1: %s\n", failed.c_str());
        RemoveTempDirsNow();  // The re-executed test made its own before this body.
        _exit(failed.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  if (Layer2Available()) {
    EXPECT_EQ(check(false), "") << "layer 2";
  }
}

}  // namespace forkbox::sandbox::testing
