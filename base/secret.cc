#include "base/secret.h"

#include <string.h>

#include <utility>

namespace forkbox {

SecretString::SecretString(SecretString&& other) noexcept : value_(std::move(other.value_)) {
  other.clear();  // A short string's bytes were copied, and stay in its inline buffer.
}

SecretString& SecretString::operator=(const SecretString& other) {
  if (this != &other) *this = std::string_view(other.value_);
  return *this;
}

SecretString& SecretString::operator=(SecretString&& other) noexcept {
  if (this == &other) return *this;
  clear();
  value_ = std::move(other.value_);
  other.clear();
  return *this;
}

SecretString& SecretString::operator=(std::string_view value) {
  clear();
  value_.assign(value);
  return *this;
}

void SecretString::clear() {
  // Resized within its capacity: no new buffer, and every byte it owns is then its own to zero.
  value_.resize(value_.capacity());
  ::explicit_bzero(value_.data(), value_.size());
  value_.clear();
}

}  // namespace forkbox
