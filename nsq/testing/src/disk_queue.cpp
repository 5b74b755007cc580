// SPDX-License-Identifier: Apache-2.0
#include "disk_queue.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "broker.hpp"
#include "polybus/text/big_endian.hpp"

namespace polybus::nsq::testing::detail {
namespace {

// nsqd's message on disk: 8-byte timestamp (ns), 2-byte attempts, 16-byte id, then the body.
constexpr std::size_t kHeader = 8 + 2 + 16;

}  // namespace

std::uint64_t disk_record_bytes(std::size_t body_size) {
  return 4 + kHeader + body_size;
}

// ---------------------------------------------------------------------------------------------
// DiskFolder

DiskFolder::DiskFolder(std::string data_path, std::uint64_t max_disk_bytes,
                       std::uint64_t max_bytes_per_file,
                       std::function<void(const std::string&)> log)
    : data_path_(std::move(data_path)),
      max_bytes_per_file_(max_bytes_per_file),
      log_(std::move(log)) {
  account_.limit = max_disk_bytes;
}

DiskFolder::~DiskFolder() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

const std::filesystem::path& DiskFolder::path() {
  if (!path_.empty()) return path_;
  const std::filesystem::path base = data_path_.empty() ? std::filesystem::temp_directory_path()
                                                        : std::filesystem::path(data_path_);
  // A folder of its own: never another process's files, a real nsqd's among them.
  std::string pattern = (base / "polybus-nsqd-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(),
                            "nsqd: cannot make a folder for the disk queues in " + base.string());
  path_ = pattern;
  return path_;
}

// ---------------------------------------------------------------------------------------------
// DiskQueue

DiskQueue::DiskQueue(DiskFolder& folder, std::string name)
    : folder_(folder), name_(std::move(name)) {}

DiskQueue::~DiskQueue() {
  clear();
}

std::filesystem::path DiskQueue::file_path(std::uint64_t number) const {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, ".diskqueue.%06llu.dat",
                static_cast<unsigned long long>(number));
  return folder_.path() / (name_ + suffix);
}

void DiskQueue::close_files() {
  if (writer_ != nullptr) std::fclose(writer_);
  if (reader_ != nullptr) std::fclose(reader_);
  writer_ = reader_ = nullptr;
  writer_dirty_ = false;
}

void DiskQueue::clear() {
  close_files();
  std::error_code ignored;
  for (const File& file : files_) std::filesystem::remove(file_path(file.number), ignored);
  files_.clear();
  folder_.account().used -= std::min(folder_.account().used, bytes_);
  bytes_ = 0;
  depth_ = 0;
}

bool DiskQueue::push(const Message& message) {
  const std::string& body = message.body->bytes();
  const std::uint64_t record = disk_record_bytes(body.size());
  DiskAccount& account = folder_.account();
  if (account.used + record > account.limit) return false;
  try {
    const std::uint64_t limit = folder_.max_bytes_per_file();
    if (writer_ == nullptr || (files_.back().bytes > 0 && files_.back().bytes + record > limit)) {
      if (writer_ != nullptr) {
        std::fclose(writer_);
        writer_ = nullptr;
        writer_dirty_ = false;
      }
      const std::uint64_t number = next_number_++;
      writer_ = std::fopen(file_path(number).c_str(), "wb");
      if (writer_ == nullptr)
        throw std::system_error(errno, std::generic_category(), file_path(number).string());
      files_.push_back(File{number, 0, 0});
    }
  } catch (const std::exception& e) {
    folder_.log("nsqd: disk queue " + name_ + ": cannot write: " + e.what());
    return false;
  }
  scratch_.clear();
  append_big_endian<4>(scratch_, kHeader + body.size());
  append_big_endian<8>(scratch_, static_cast<std::uint64_t>(message.timestamp_ns));
  append_big_endian<2>(scratch_, message.attempts);
  scratch_.append(message.id.text.data(), message.id.text.size());
  if (std::fwrite(scratch_.data(), 1, scratch_.size(), writer_) != scratch_.size() ||
      std::fwrite(body.data(), 1, body.size(), writer_) != body.size()) {
    folder_.log("nsqd: disk queue " + name_ + ": cannot write " +
                file_path(files_.back().number).string() + ": " + std::strerror(errno));
    // The file may end in part of a record: the next one goes into a new file, and only the
    // records counted are ever read from this one.
    std::fclose(writer_);
    writer_ = nullptr;
    writer_dirty_ = false;
    return false;
  }
  writer_dirty_ = true;
  files_.back().bytes += record;
  ++files_.back().records;
  ++depth_;
  bytes_ += record;
  account.used += record;
  return true;
}

void DiskQueue::drop_read_file() {
  if (reader_ != nullptr) std::fclose(reader_);
  reader_ = nullptr;
  std::error_code ignored;
  std::filesystem::remove(file_path(files_.front().number), ignored);
  files_.pop_front();
}

std::optional<Message> DiskQueue::pop(const std::shared_ptr<MemoryAccount>& memory) {
  if (depth_ == 0) return std::nullopt;
  while (files_.front().records == 0) drop_read_file();  // a later file holds the rest
  File& file = files_.front();
  const auto fail = [&](const std::string& why) -> std::optional<Message> {
    folder_.log("nsqd: disk queue " + name_ + ": cannot read " + file_path(file.number).string() +
                ": " + why + "; its " + std::to_string(depth_) + " messages are dropped");
    clear();
    return std::nullopt;
  };
  if (writer_dirty_ && &file == &files_.back()) {
    if (std::fflush(writer_) != 0) return fail(std::strerror(errno));
    writer_dirty_ = false;
  }
  if (reader_ == nullptr) {
    reader_ = std::fopen(file_path(file.number).c_str(), "rb");
    if (reader_ == nullptr) return fail(std::strerror(errno));
  }
  char header[4 + kHeader];
  std::clearerr(reader_);  // read up to the end before the writer's last flush
  if (std::fread(header, 1, sizeof header, reader_) != sizeof header)
    return fail("a record ends early");
  const std::uint64_t size = read_big_endian<4>(header);
  if (size < kHeader || size > file.bytes)
    return fail("a record's size is " + std::to_string(size));
  std::string body(size - kHeader, '\0');
  if (!body.empty() && std::fread(body.data(), 1, body.size(), reader_) != body.size())
    return fail("a record ends early");
  Message message;
  message.timestamp_ns = static_cast<std::int64_t>(read_big_endian<8>(header + 4));
  message.attempts = static_cast<std::uint16_t>(read_big_endian<2>(header + 12));
  message.id = MessageId::from_wire(std::string_view(header + 14, 16));
  message.body = std::make_shared<const StoredBody>(std::move(body), memory);
  const std::uint64_t record = 4 + size;
  --file.records;
  --depth_;
  bytes_ -= record;
  folder_.account().used -= std::min(folder_.account().used, record);
  if (depth_ == 0) {
    clear();  // the next push starts a new file
  } else if (file.records == 0 && &file != &files_.back()) {
    drop_read_file();
  }
  return message;
}

}  // namespace polybus::nsq::testing::detail
