// A string that holds a secret (the API key).
#pragma once

#include <string>
#include <string_view>

namespace forkbox {

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
  // Zeroes every byte of the buffer (its spare capacity and a short string's inline buffer
  // too), then empties it.
  void clear();

  bool operator==(const SecretString& other) const = default;
  bool operator==(std::string_view other) const { return value_ == other; }

 private:
  std::string value_;
};

}  // namespace forkbox
