// A string that holds a secret (the API key), and the one wipe of a buffer that held one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace forkbox {

// Zeroes every byte `s` owns (explicit_bzero: its spare capacity and a short string's inline buffer
// too), then empties it; the buffer is kept. Every buffer below that held a secret goes this way.
void WipeString(std::string& s);

// Appends `more` (not a view of `s`) to `s`, a buffer that holds or will hold a secret. When `s`
// must grow, the new buffer is at least twice the old (256 bytes at first), and the old one is
// wiped before it is freed: a std::string that grows frees its old buffer as it was.
void AppendWiped(std::string& s, std::string_view more);

// Every buffer it lets go of is zeroed first (explicit_bzero), whole: when it is destroyed,
// assigned, moved from or cleared. A key held in one from the moment it is parsed is wiped on
// every path that drops it, a refused frame's included. The bytes are read through str(), and
// never changed in place: a string that grows frees its old buffer unwiped.
class SecretString {
 public:
  SecretString() = default;
  explicit SecretString(std::string_view value) : value_(value) {}
  SecretString(const SecretString& other) : value_(other.value_) {}
  SecretString(SecretString&& other) noexcept;
  SecretString& operator=(const SecretString& other);
  SecretString& operator=(SecretString&& other) noexcept;
  // Wipes the old value, then copies `value`.
  SecretString& operator=(std::string_view value);
  ~SecretString() { clear(); }

  const std::string& str() const { return value_; }
  bool empty() const { return value_.empty(); }
  size_t size() const { return value_.size(); }
  // Zeroes every byte of the buffer (WipeString), then empties it.
  void clear() { WipeString(value_); }

  bool operator==(const SecretString& other) const = default;
  bool operator==(std::string_view other) const { return value_ == other; }

 private:
  std::string value_;
};

// Lines of which some hold a secret (the request headers, one with the API key), read as one
// std::vector<std::string> (what the HTTP client takes). Every line is wiped (WipeString) before
// its memory is let go of: when the list is destroyed, assigned over or cleared, and when it grows
// (the old array holds a short line's bytes in place). Move-only: a copy would be freed unwiped.
class SecretLines {
 public:
  SecretLines() = default;
  SecretLines(SecretLines&& other) noexcept : lines_(std::move(other.lines_)) {}
  SecretLines& operator=(SecretLines&& other) noexcept;
  SecretLines(const SecretLines&) = delete;
  SecretLines& operator=(const SecretLines&) = delete;
  ~SecretLines() { clear(); }

  // Takes `line` over: a long one's buffer moves, a short one's bytes are copied and then wiped
  // where they were. Room for four lines at first: one allocation for a request's headers.
  void Add(std::string&& line);
  const std::vector<std::string>& lines() const { return lines_; }
  void clear();

 private:
  std::vector<std::string> lines_;
};

}  // namespace forkbox
