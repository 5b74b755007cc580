// SPDX-License-Identifier: Apache-2.0
// What a topic or channel holds beyond nsqd's --mem-queue-size, in files, as nsqd's diskqueue
// keeps it: files named NAME.diskqueue.NNNNNN.dat of at most max_bytes_per_file, each record a
// 4-byte big-endian size and the message as nsqd writes it (timestamp, attempts, id, body). A
// file goes once its last record is read. The files are this process's own (a folder of its own
// under the data path, removed with the broker): nsqd's metadata file is not written, and
// nothing is read back after a restart of the process.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace polybus::nsq::testing::detail {

struct Message;
struct MemoryAccount;

// Bytes of records waiting on disk, across the broker, against NsqdOptions::max_disk_bytes.
struct DiskAccount {
  std::uint64_t used = 0;
  std::uint64_t limit = 0;
};

// Where the broker's queues keep their files, and what they share: made once, at the first
// message that does not fit in memory.
class DiskFolder {
 public:
  // `data_path` empty: the system's temporary folder. `log` is told of failed reads and writes.
  DiskFolder(std::string data_path, std::uint64_t max_disk_bytes, std::uint64_t max_bytes_per_file,
             std::function<void(const std::string&)> log);
  ~DiskFolder();
  DiskFolder(const DiskFolder&) = delete;
  DiskFolder& operator=(const DiskFolder&) = delete;

  // The folder, made on first use; throws std::system_error when it cannot be.
  const std::filesystem::path& path();
  DiskAccount& account() { return account_; }
  const DiskAccount& account() const { return account_; }
  std::uint64_t max_bytes_per_file() const { return max_bytes_per_file_; }
  void log(const std::string& line) const {
    if (log_) log_(line);
  }

 private:
  std::string data_path_;
  std::uint64_t max_bytes_per_file_;
  std::function<void(const std::string&)> log_;
  DiskAccount account_;
  std::filesystem::path path_;
};

// The record's size on disk: what the account counts.
std::uint64_t disk_record_bytes(std::size_t body_size);

class DiskQueue {
 public:
  // `name` is nsqd's: the topic's, or "topic:channel".
  DiskQueue(DiskFolder& folder, std::string name);
  ~DiskQueue();  // removes its files
  DiskQueue(const DiskQueue&) = delete;
  DiskQueue& operator=(const DiskQueue&) = delete;

  // False, keeping nothing, when the disk bound would be passed or the write failed (logged).
  bool push(const Message& message);
  // The oldest record, its body counted in `memory`; nothing when empty. A record that cannot be
  // read drops what the queue held (logged): the files are corrupt or gone.
  std::optional<Message> pop(const std::shared_ptr<MemoryAccount>& memory);
  std::uint64_t depth() const { return depth_; }
  bool empty() const { return depth_ == 0; }
  void clear();

 private:
  struct File {
    std::uint64_t number = 0;
    std::uint64_t records = 0;  // not yet read
    std::uint64_t bytes = 0;    // written
  };
  std::filesystem::path file_path(std::uint64_t number) const;
  void close_files();
  void drop_read_file();

  DiskFolder& folder_;
  std::string name_;
  std::deque<File> files_;  // oldest first; the last is written to
  std::uint64_t next_number_ = 0;
  std::FILE* writer_ = nullptr;
  std::FILE* reader_ = nullptr;
  bool writer_dirty_ = false;
  std::uint64_t depth_ = 0;
  std::uint64_t bytes_ = 0;  // counted in the account
  std::string scratch_;
};

}  // namespace polybus::nsq::testing::detail
