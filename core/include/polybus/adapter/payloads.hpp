// The payloads of one publish: one (publish) or several (publish_batch). One payload is held in
// place, so a single publish allocates no container for it; several are held in a vector.
// Iterates like a vector of strings (raw pointers as iterators).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace polybus {

class Payloads {
 public:
  Payloads() = default;
  explicit Payloads(std::string one) : one_(std::move(one)), single_(true) {}
  explicit Payloads(std::vector<std::string> many) : many_(std::move(many)) {}

  std::size_t size() const { return single_ ? 1 : many_.size(); }
  bool empty() const { return size() == 0; }
  std::string* begin() { return single_ ? &one_ : many_.data(); }
  std::string* end() { return begin() + size(); }
  const std::string* begin() const { return single_ ? &one_ : many_.data(); }
  const std::string* end() const { return begin() + size(); }
  std::string& operator[](std::size_t i) { return begin()[i]; }
  const std::string& operator[](std::size_t i) const { return begin()[i]; }
  std::string& front() { return *begin(); }
  const std::string& front() const { return *begin(); }

 private:
  std::string one_;
  std::vector<std::string> many_;
  bool single_ = false;
};

}  // namespace polybus
