#include "parent/terminal.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "base/status.h"
#include "parent/exit_codes.h"
#include "parent/signals.h"

namespace forkbox::parent {
namespace {

void AppendHex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, digits, value);
  out += buf;
}

// Length of the valid UTF-8 sequence at the start of `s` and its code point; 0 when invalid.
size_t DecodeUtf8(std::string_view s, unsigned* cp) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t len;
  unsigned min;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, *cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, *cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, *cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

// The Unicode bidirectional controls: they reorder what a terminal shows (Trojan Source,
// CVE-2021-42574), so a command shown can differ from the one that runs.
bool IsBidiControl(unsigned cp) {
  return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string NeutraliseControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    unsigned cp = 0;
    const size_t len = DecodeUtf8(text, &cp);
    if (len == 0) {
      AppendHex(out, "\\x", static_cast<unsigned char>(text[0]), 2);
      text.remove_prefix(1);
      continue;
    }
    if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F) {
      AppendHex(out, "\\x", cp, 2);
    } else if ((cp >= 0x80 && cp <= 0x9F) || IsBidiControl(cp)) {
      AppendHex(out, "\\u", cp, 4);
    } else {
      out.append(text.substr(0, len));
    }
    text.remove_prefix(len);
  }
  return out;
}

int WriteAll(int fd, std::string_view text) {
  std::string neutralised;
  if (isatty(fd)) {
    neutralised = NeutraliseControls(text);
    text = neutralised;
  }
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;  // No progress on a non-empty write: never retried forever.
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

void WriteText(int fd, std::string_view text) {
  if (const int err = WriteAll(fd, text); err != 0 && fd == STDERR_FILENO) RecordStderrFailure(err);
}

bool TakesCursorControls(int fd) {
  if (::isatty(fd) == 0) return false;
  const char* term = std::getenv("TERM");
  return term != nullptr && term[0] != '\0' && std::string_view(term) != "dumb";
}

int PrintOutput(std::string_view text, int code) {
  const int err = WriteAll(STDOUT_FILENO, text);
  if (err == 0) return code;
  WriteText(STDERR_FILENO,
            "forkbox: " + Status::FromErrno(err, "cannot write to stdout").message() + "\n");
  return err == EPIPE ? kExitBrokenPipe : kExitFailure;
}

}  // namespace forkbox::parent
