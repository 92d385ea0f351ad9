// Background<T>: one piece of start-up work on a thread of its own, so that it overlaps the
// caller's next steps (an https model's TLS set-up in the parent and the child, the child's tool
// prewarm). Worth it only for work well above what a thread costs the whole process: its start
// (stack mapping, clone), and every later mapping change or vfork-style clone of a two-threaded
// process, which must reach the other CPU too. On the VM of the README's twelfth round that was
// more than an http model's module load (0.31 ms inline against 0.51 ms for pthread_create
// alone), so callers choose.
#ifndef FORKBOX_BASE_BACKGROUND_H_
#define FORKBOX_BASE_BACKGROUND_H_

#include <pthread.h>

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "base/status.h"

namespace forkbox {

// Starts `work` at construction, on a thread of its own unless told RunOn::kCaller. Get() waits for
// it and hands out the result, once. The destructor waits too, so the work never outlives the scope
// that started it: a caller that must be single-threaded next (unshare, Landlock, seccomp) lets it
// go or calls Get() first. T is built from a Status when `work` throws (no exception leaves the
// thread): Status or Result. With RunOn::kCaller, or when no thread can be started (EAGAIN), the
// work runs in Get() instead: the same result, late.
enum class RunOn { kThread, kCaller };
template <typename T>
class Background {
 public:
  explicit Background(std::function<T()> work, RunOn where = RunOn::kThread)
      : work_(std::move(work)) {
    if (where == RunOn::kThread) {
      started_ = pthread_create(&thread_, nullptr, &Background::Main, this) == 0;
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() { Join(); }

  // True while the work has a thread of its own that Get() or the destructor has yet to join.
  bool on_thread() const { return started_; }

  // The work's result. Must not be called twice.
  T Get() {
    Join();
    if (!result_) Run();
    return std::move(*result_);
  }

 private:
  static void* Main(void* self) {
    static_cast<Background*>(self)->Run();
    return nullptr;
  }
  void Run() {
    try {
      result_.emplace(work_());
    } catch (const std::exception& e) {
      result_.emplace(Status::Internal(std::string("background work: ") + e.what()));
    } catch (...) {
      result_.emplace(Status::Internal("background work: unknown exception"));
    }
  }
  void Join() {
    if (!started_) return;
    started_ = false;
    (void)pthread_join(thread_, nullptr);  // Fails only for a bad or self handle: never here.
  }

  std::function<T()> work_;
  std::optional<T> result_;
  pthread_t thread_{};
  bool started_ = false;
};

}  // namespace forkbox

#endif  // FORKBOX_BASE_BACKGROUND_H_
