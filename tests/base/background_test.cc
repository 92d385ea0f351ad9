#include "base/background.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace forkbox {
namespace {

// The work runs on a thread of its own while the caller goes on: it waits for a signal that the
// caller sends only after the constructor returned. Run inline, it would time out.
TEST(Background, RunsTheWorkWhileTheCallerGoesOn) {
  std::promise<void> go;
  std::shared_future<void> signal = go.get_future().share();
  auto work = [signal]() -> Result<pthread_t> {
    if (signal.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return Status::Timeout("no signal: the caller was blocked");
    }
    return pthread_self();
  };
  Background<Result<pthread_t>> background(work);
  go.set_value();
  Result<pthread_t> ran_on = background.Get();
  ASSERT_TRUE(ran_on.ok()) << ran_on.status().ToString();
  EXPECT_FALSE(pthread_equal(*ran_on, pthread_self())) << "the work ran on the caller's thread";
}

// Get hands out what the work returned, errors included, once the work is done.
TEST(Background, GetReturnsTheWorksResult) {
  Background<Result<std::string>> ok([] { return Result<std::string>(std::string("pytest")); });
  Result<std::string> got = ok.Get();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "pytest");
  Background<Status> failed([] { return Status::PermissionDenied("refused"); });
  Status st = failed.Get();
  EXPECT_EQ(st.code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(st.message(), "refused");
}

// An exception thrown by the work does not cross the thread (that would end the process): it
// comes back as an Internal error naming it.
TEST(Background, AnExceptionBecomesAnError) {
  Background<Status> thrower([]() -> Status { throw std::runtime_error("boom"); });
  Status st = thrower.Get();
  EXPECT_EQ(st.code(), Status::Code::kInternal);
  EXPECT_NE(st.message().find("boom"), std::string::npos) << st.message();
}

// Dropped without Get, a Background still waits for its work: nothing it touches is used after
// its scope ends, and the process is single-threaded again (what Landlock and seccomp need).
TEST(Background, TheDestructorWaitsForTheWork) {
  std::atomic<bool> done{false};
  {
    Background<Status> background([&done] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      done = true;
      return Status::Ok();
    });
  }
  EXPECT_TRUE(done.load());
}

// At the process limit (RLIMIT_NPROC, e.g. a user with many processes) no thread can start:
// the work then runs in Get(), on the caller's thread, and the result is the same. The control:
// pthread_create fails there (std::thread threw std::system_error instead). Root ignores
// the limit, so a forked copy drops to nobody first.
TEST(Background, WithoutAThreadTheWorkRunsInGet) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0 &&
        (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) {
      _exit(2);
    }
    const rlimit none{0, 0};
    if (setrlimit(RLIMIT_NPROC, &none) != 0) _exit(3);
    pthread_t control;
    if (pthread_create(
            &control, nullptr, [](void*) -> void* { return nullptr; }, nullptr) != EAGAIN) {
      _exit(4);
    }
    Background<Result<pthread_t>> background([] { return Result<pthread_t>(pthread_self()); });
    Result<pthread_t> ran_on = background.Get();
    _exit(ran_on.ok() && pthread_equal(*ran_on, pthread_self()) ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: cannot drop to nobody, 3: setrlimit, 4: control: a thread started, 5: not inline";
}

// RunOn::kCaller starts no thread: the work has not run when the constructor returns, and it runs
// in Get(), on the caller's thread. The control is the default, RunOn::kThread, in the same shape.
TEST(Background, RunOnCallerRunsTheWorkInGetOnTheCallersThread) {
  for (RunOn where : {RunOn::kThread, RunOn::kCaller}) {
    std::atomic<bool> ran{false};
    std::promise<void> started;
    std::future<void> started_f = started.get_future();
    auto work = [&ran, &started]() -> Result<pthread_t> {
      ran = true;
      started.set_value();
      return pthread_self();
    };
    Background<Result<pthread_t>> background(work, where);
    EXPECT_EQ(background.on_thread(), where == RunOn::kThread);
    const bool ran_before_get =
        started_f.wait_for(std::chrono::seconds(where == RunOn::kThread ? 10 : 0)) ==
        std::future_status::ready;
    Result<pthread_t> ran_on = background.Get();
    ASSERT_TRUE(ran_on.ok());
    EXPECT_TRUE(ran.load());
    if (where == RunOn::kThread) {
      EXPECT_TRUE(ran_before_get) << "the control: a thread runs the work before Get()";
      EXPECT_FALSE(pthread_equal(*ran_on, pthread_self()));
    } else {
      EXPECT_FALSE(ran_before_get) << "RunOn::kCaller ran the work before Get()";
      EXPECT_TRUE(pthread_equal(*ran_on, pthread_self())) << "RunOn::kCaller used a thread";
    }
  }
}

// Dropped without Get, a RunOn::kCaller Background never runs its work.
TEST(Background, RunOnCallerWithoutGetNeverRuns) {
  std::atomic<bool> ran{false};
  {
    Background<Status> background(
        [&ran] {
          ran = true;
          return Status::Ok();
        },
        RunOn::kCaller);
  }
  EXPECT_FALSE(ran.load());
}

}  // namespace
}  // namespace forkbox
