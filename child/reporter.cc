#include "child/reporter.h"

#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/utf8.h"
#include "ipc/frame.h"

namespace forkbox::child {

void Reporter::CountUsage(const agent::Usage& usage) {
  // Each count is at most kMaxReportedCount (agent::UsageCount); their sums stop there too, or
  // the parent would refuse the frame and kill the task.
  constexpr int64_t kMax = ipc::kMaxReportedCount;
  input_tokens_ =
      std::min(kMax, input_tokens_ + usage.input_tokens + usage.cache_read_input_tokens +
                         usage.cache_creation_input_tokens);
  output_tokens_ = std::min(kMax, output_tokens_ + usage.output_tokens);
}

void Reporter::CountToolCall() { tool_calls_ = std::min(ipc::kMaxReportedCount, tool_calls_ + 1); }

Status Reporter::Event(int64_t turn, const std::string& tool, std::string_view detail) {
  ipc::EventMessage event;
  event.turn = turn;
  event.tool = ipc::MakeLabel(tool);  // The model names the tools it calls: any text.
  event.detail = ipc::MakeEventDetail(detail);
  event.input_tokens = input_tokens_;
  event.output_tokens = output_tokens_;
  event.tool_calls = tool_calls_;
  return ipc::WriteMessage(fd_, event);
}

Status Reporter::Result(const ipc::ResultMessage& result) { return ipc::WriteMessage(fd_, result); }

void Reporter::Error(const std::string& code, const std::string& message) {
  // Cut first: a model's error text has no bound, and a frame over the cap would not be sent.
  std::string text = CutUtf8WithNote(message, ipc::kMaxErrorMessageBytes, "error message");
  MakeValidUtf8(text);  // A frame's strings must be UTF-8: else the reason would not be sent.
  std::fprintf(stderr, "forkbox-child: %s: %s\n", code.c_str(), text.c_str());
  Status st = ipc::WriteMessage(fd_, ipc::ErrorMessage{code, text});
  if (!st.ok()) {
    std::fprintf(stderr, "forkbox-child: could not send the error frame: %s\n",
                 st.ToString().c_str());
  }
}

void Transcript::Write(const nlohmann::json& record) {
  if (fd_ < 0) return;
  nlohmann::json stamped = record;
  timeval tv{};
  ::gettimeofday(&tv, nullptr);
  stamped["time_ms"] = static_cast<int64_t>(tv.tv_sec) * 1000 + tv.tv_usec / 1000;
  // replace: tool output was already made valid UTF-8, but a record must never throw.
  std::string line = stamped.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  Status st = ipc::WriteAll(fd_, line);
  if (!st.ok()) {
    std::fprintf(stderr, "forkbox-child: transcript disabled after a failed write: %s\n",
                 st.ToString().c_str());
    fd_ = -1;
  }
}

}  // namespace forkbox::child
