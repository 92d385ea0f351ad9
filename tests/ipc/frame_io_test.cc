// FrameReader / WriteAll over real pipes: partial I/O, EOF, caps, EINTR and EPIPE.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/process.h"
#include "ipc/frame.h"
#include "tests/ipc/test_util.h"

namespace forkbox::ipc {
namespace {

using ::testing::HasSubstr;
using testing::ReadAllFromFd;
using testing::SampleError;
using testing::SampleEvent;
using testing::SampleResult;
using testing::SampleStart;

std::string Encode(const Message& m) {
  Result<std::string> frame = EncodeMessage(m);
  EXPECT_TRUE(frame.ok()) << frame.status().ToString();
  return frame.ok() ? *frame : std::string();
}

// Runs body in a forked child that then exits; the handle reaps it.
ChildProcess ForkChild(const std::function<void()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  EXPECT_GT(pid, 0);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  EXPECT_GE(pidfd, 0);
  return ChildProcess(pid, UniqueFd(pidfd), /*own_group=*/false);
}

TEST(FrameReaderTest, ReadsFramesWrittenByteByByteByAnotherProcess) {
  const std::vector<Message> messages = {SampleStart(), SampleEvent(), SampleResult(),
                                         SampleError()};
  std::string stream;
  for (const Message& m : messages) stream += Encode(m);
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  ChildProcess writer = ForkChild([&] {
    p->read.reset();
    for (char c : stream) {
      if (!WriteAll(p->write.get(), std::string_view(&c, 1)).ok()) ::_exit(1);
    }
  });
  p->write.reset();
  FrameReader reader(p->read.get());
  for (const Message& want : messages) {
    Result<Message> got = reader.Read();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, want);
  }
  Result<Message> end = reader.Read();
  EXPECT_EQ(end.status().code(), Status::Code::kEndOfFile);
  EXPECT_EQ(end.status().message(), "peer closed the pipe");
  Result<int> status = writer.Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitCodeFromWaitStatus(*status), 0);
}

TEST(FrameReaderTest, EofBeforeAnyFrameIsEndOfFileEveryTime) {
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  p->write.reset();
  FrameReader reader(p->read.get());
  EXPECT_EQ(reader.Read().status().code(), Status::Code::kEndOfFile);
  EXPECT_EQ(reader.Read().status().code(), Status::Code::kEndOfFile);
}

TEST(FrameReaderTest, EofMidFrameIsAClearErrorNotAHang) {
  const std::string frame = Encode(SampleEvent());
  for (size_t cut : {size_t{2}, size_t{4}, frame.size() / 2, frame.size() - 1}) {
    Result<Pipe> p = MakePipe();
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(WriteAll(p->write.get(), std::string_view(frame).substr(0, cut)).ok());
    p->write.reset();
    FrameReader reader(p->read.get());
    Result<Message> r = reader.Read();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("truncated frame: got " + std::to_string(cut)));
  }
}

TEST(FrameReaderTest, HostileLengthFailsAtOnceWithTheWriterStillOpen) {
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(WriteAll(p->write.get(), std::string("\xFF\xFF\xFF\xFF", 4)).ok());
  FrameReader reader(p->read.get());  // If it waited for 4 GiB this would block forever.
  Result<Message> r = reader.Read();
  EXPECT_EQ(r.status().code(), Status::Code::kResourceExhausted);
}

TEST(FrameReaderTest, NeverReadsPastTheCurrentFrame) {
  const std::string first = Encode(SampleEvent());
  const std::string second = Encode(SampleError());
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(WriteAll(p->write.get(), first + second).ok());
  p->write.reset();
  FrameReader reader(p->read.get());
  Result<Message> m = reader.Read();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(ReadAllFromFd(p->read.get()), second);  // Still in the pipe for someone else.
}

TEST(FrameReaderTest, TotalCapStopsReadingAtTheCap) {
  const std::string frame = Encode(SampleEvent());
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(WriteAll(p->write.get(), frame + frame + frame).ok());
  p->write.reset();
  FrameReader reader(p->read.get(), kDefaultMaxFrameBytes, frame.size() * 2);
  ASSERT_TRUE(reader.Read().ok());
  ASSERT_TRUE(reader.Read().ok());
  Result<Message> third = reader.Read();
  EXPECT_EQ(third.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(ReadAllFromFd(p->read.get()), frame);  // Not a byte past the cap was consumed.
}

TEST(FrameReaderTest, BadPayloadAndBadFdAreErrors) {
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(WriteAll(p->write.get(), std::string("\x02\x00\x00\x00[]", 6)).ok());
  FrameReader reader(p->read.get());
  EXPECT_THAT(reader.Read().status().message(), HasSubstr("must be a JSON object"));

  FrameReader closed(p->write.get());  // The write end is not readable.
  Result<Message> r = closed.Read();
  EXPECT_THAT(r.status().message(), HasSubstr("read from fd " + std::to_string(p->write.get())));
}

TEST(FrameReaderTest, NonBlockingDescriptorIsWaitedOn) {
  Result<Pipe> p = MakePipe(O_NONBLOCK);
  ASSERT_TRUE(p.ok());
  const std::string frame = Encode(SampleResult());
  std::thread writer([&] {
    for (char c : frame) ASSERT_TRUE(WriteAll(p->write.get(), std::string_view(&c, 1)).ok());
  });
  FrameReader reader(p->read.get());
  Result<Message> m = reader.Read();
  writer.join();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, Message(SampleResult()));
}

TEST(WriteAllTest, NonBlockingDescriptorGetsEverything) {
  Result<Pipe> p = MakePipe(O_NONBLOCK);
  ASSERT_TRUE(p.ok());
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  ASSERT_TRUE(SetNonBlocking(p->read.get(), false).ok());
  std::string got;
  std::thread reader([&] {
    char buf[4096];
    while (got.size() < big.size()) {
      ssize_t n = ::read(p->read.get(), buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  });
  Status st = WriteAll(p->write.get(), big);
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got, big);
}

// --- EINTR: a SIGUSR1 handler installed without SA_RESTART, sent with pthread_kill once the
// target thread is provably blocked in the syscall (no timers, no sleeps). ---

std::atomic<int> g_signals{0};
int g_signal_pipe = -1;

void OnSignal(int) {
  g_signals.fetch_add(1);
  char c = 's';
  (void)!::write(g_signal_pipe, &c, 1);  // Wakes the helper that waits for delivery.
}

class ScopedSigusr1 {
 public:
  explicit ScopedSigusr1(int notify_fd) {
    g_signals = 0;
    g_signal_pipe = notify_fd;
    struct sigaction sa = {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // No SA_RESTART: blocking calls fail with EINTR.
    ::sigaction(SIGUSR1, &sa, &old_);
  }
  ~ScopedSigusr1() { ::sigaction(SIGUSR1, &old_, nullptr); }

 private:
  struct sigaction old_;
};

// Spins (yielding) until thread tid sleeps inside syscall nr, per /proc/self/task/tid/syscall,
// which the kernel only reports for a task that is not running.
void WaitUntilBlockedIn(pid_t tid, long nr) {
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/syscall";
  for (;;) {
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << "cannot read " << path;
    std::string first;
    in >> first;
    if (first == std::to_string(nr)) return;
    ::sched_yield();
  }
}

void WaitForHandler(int fd) {
  char c;
  while (::read(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

TEST(EintrTest, ReadIsRetriedBeforeAndInsideAFrame) {
  Result<Pipe> data = MakePipe();
  Result<Pipe> notify = MakePipe();
  ASSERT_TRUE(data.ok() && notify.ok());
  ScopedSigusr1 handler(notify->write.get());
  const pid_t reader_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  const pthread_t reader_thread = ::pthread_self();
  const std::string frame = Encode(SampleEvent());
  std::thread helper([&] {
    WaitUntilBlockedIn(reader_tid, SYS_read);
    ::pthread_kill(reader_thread, SIGUSR1);  // Interrupts a read with nothing buffered.
    WaitForHandler(notify->read.get());
    ASSERT_TRUE(WriteAll(data->write.get(), std::string_view(frame).substr(0, 7)).ok());
    WaitUntilBlockedIn(reader_tid, SYS_read);
    ::pthread_kill(reader_thread, SIGUSR1);  // Interrupts a read in the middle of a frame.
    WaitForHandler(notify->read.get());
    ASSERT_TRUE(WriteAll(data->write.get(), std::string_view(frame).substr(7)).ok());
  });
  FrameReader reader(data->read.get());
  Result<Message> m = reader.Read();
  helper.join();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, Message(SampleEvent()));
  EXPECT_EQ(g_signals.load(), 2);
}

TEST(EintrTest, WriteIsRetriedAndCompletesAfterPartialWrites) {
  Result<Pipe> data = MakePipe();
  Result<Pipe> notify = MakePipe();
  ASSERT_TRUE(data.ok() && notify.ok());
  ScopedSigusr1 handler(notify->write.get());
  const pid_t writer_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  const pthread_t writer_thread = ::pthread_self();
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::string got;
  std::thread helper([&] {
    for (int i = 0; i < 3; ++i) {
      WaitUntilBlockedIn(writer_tid, SYS_write);  // The pipe is full.
      ::pthread_kill(writer_thread, SIGUSR1);
      WaitForHandler(notify->read.get());
      char buf[16384];  // Drain a little so the next write makes progress, then block again.
      ssize_t n = ::read(data->read.get(), buf, sizeof buf);
      ASSERT_GT(n, 0);
      got.append(buf, static_cast<size_t>(n));
    }
    char buf[65536];
    while (got.size() < big.size()) {
      ssize_t n = ::read(data->read.get(), buf, sizeof buf);
      ASSERT_GT(n, 0);
      got.append(buf, static_cast<size_t>(n));
    }
  });
  Status st = WriteAll(data->write.get(), big);
  helper.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(g_signals.load(), 3);
  EXPECT_TRUE(got == big) << "payload corrupted across partial writes";
}

TEST(EpipeTest, WriteToAClosedPipeIsAnErrorNotADeath) {
  struct sigaction dfl = {}, old = {};
  dfl.sa_handler = SIG_DFL;  // Default SIGPIPE would kill the process if it were delivered.
  ::sigaction(SIGPIPE, &dfl, &old);
  Result<Pipe> p = MakePipe();
  ASSERT_TRUE(p.ok());
  p->read.reset();
  Status st = WriteAll(p->write.get(), "hello");
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("write to fd " + std::to_string(p->write.get()) +
                                      ": Broken pipe (errno 32)"));
  st = WriteMessage(p->write.get(), SampleEvent());
  EXPECT_THAT(st.message(), HasSubstr("Broken pipe"));
  sigset_t pending, mask;
  ::sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE)) << "SIGPIPE left pending";
  ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE)) << "signal mask not restored";
  ::sigaction(SIGPIPE, &old, nullptr);
}

}  // namespace
}  // namespace forkbox::ipc
