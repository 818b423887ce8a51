#pragma once
// A fake of the swap engine and the forward pass for SchedulerCore tests.
// Every tier's memory is simulated cell by cell: a KV cell holds the token
// and position it was computed for. The forward pass checks that every
// position a planned sequence attends over holds its history's token (so a
// stale, poisoned, half-copied or reused block is caught) and writes the
// fed tokens. swap_in runs at once; swap_out, spill and restore stay in
// flight until reported and copy only then, so a block or slot reused
// before its report shows up as wrong KV. Every plan is also checked for
// writes to slots a transfer in flight still reads or writes.
#include "actors/scheduler_core.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pensieve::testing {

using actors::DeviceHostCopy;
using actors::HostDiskCopy;
using actors::IterationPlan;
using actors::TransfersDone;
using actors::TurnId;

struct KvCell {
  std::int32_t token = -1;
  std::int32_t pos = -1;
  friend bool operator==(const KvCell&, const KvCell&) = default;
};

class FakeSwapEngine {
 public:
  FakeSwapEngine(std::int32_t num_blocks, std::int32_t host_slots, std::int32_t disk_slots, std::int32_t bt)
      : bt_(bt),
        device_(std::size_t(num_blocks), Block(std::size_t(bt))),
        host_(std::size_t(host_slots), Block(std::size_t(bt))),
        disk_(std::size_t(disk_slots), Block(std::size_t(bt))) {}

  // Runs one plan against `history` (each turn's tokens so far).
  void execute(const IterationPlan& plan, const std::map<TurnId, std::vector<std::int32_t>>& history) {
    check_conflicts(plan);
    for (kv::BlockId b : plan.freed_blocks) device_[b.value] = Block(std::size_t(bt_));  // poison
    for (const kv::CopyOnWrite& c : plan.copies) {
      std::copy_n(device_[c.src.value].begin(), c.tokens, device_[c.dst.value].begin());
    }
    for (const DeviceHostCopy& c : plan.transfers.swap_in) device_[c.device.value] = host_[c.host.value];
    for (const auto& p : plan.sequences) forward(p, history.at(p.turn));
    for (const auto& c : plan.transfers.swap_out) swap_outs_.push_back(c);
    for (const auto& c : plan.transfers.spill) spills_.push_back(c);
    for (const auto& c : plan.transfers.restore) restores_.push_back(c);
    swap_in_total_ += plan.transfers.swap_in.size();
  }

  // Completes every transfer in flight, copying now.
  TransfersDone report_all() { return report(true); }

  // Completes the swap-outs and spills in flight; restores stay in flight
  // unless `restores`.
  TransfersDone report(bool restores) {
    TransfersDone done;
    for (const auto& c : swap_outs_) {
      host_[c.host.value] = device_[c.device.value];
      done.swap_out.push_back(c);
    }
    for (const auto& c : spills_) {
      disk_[c.disk.value] = host_[c.host.value];
      disk_tokens_[c.disk.value] = c.tokens;
      done.spill.push_back(c);
    }
    for (const auto& c : restores ? restores_ : std::vector<HostDiskCopy>{}) {
      const bool bad = corrupt_disk.count(c.disk.value) > 0 || disk_tokens_[c.disk.value] != c.tokens;
      if (bad) {
        done.corrupt.push_back(c);
      } else {
        host_[c.host.value] = disk_[c.disk.value];
        done.restored.push_back(c);
      }
    }
    swap_outs_.clear();
    spills_.clear();
    if (restores) restores_.clear();
    return done;
  }

  bool idle() const { return swap_outs_.empty() && spills_.empty() && restores_.empty(); }
  std::size_t in_flight() const { return swap_outs_.size() + spills_.size() + restores_.size(); }
  std::size_t swap_in_total() const { return swap_in_total_; }
  std::int64_t stale_reads() const { return stale_reads_; }
  std::int64_t conflicts() const { return conflicts_; }
  std::int64_t checked_reads() const { return checked_reads_; }

  std::set<std::uint32_t> corrupt_disk;  // restores from these slots fail verification

 private:
  using Block = std::vector<KvCell>;

  void forward(const actors::PlannedSequence& p, const std::vector<std::int32_t>& hist) {
    const std::int64_t end = p.start_pos + std::int64_t(p.tokens.size());
    REQUIRE(end <= std::int64_t(hist.size()));
    CHECK(std::equal(p.tokens.begin(), p.tokens.end(), hist.begin() + p.start_pos));
    REQUIRE(std::int64_t(p.blocks.size()) * bt_ >= end);
    for (std::int32_t q = 0; q < p.start_pos; ++q) {
      const KvCell& c = device_[p.blocks[std::size_t(q / bt_)].value][std::size_t(q % bt_)];
      ++checked_reads_;
      if (!(c == KvCell{hist[std::size_t(q)], q})) ++stale_reads_;
    }
    for (std::int32_t i = 0; i < std::int32_t(p.tokens.size()); ++i) {
      const std::int32_t q = p.start_pos + i;
      device_[p.blocks[std::size_t(q / bt_)].value][std::size_t(q % bt_)] = KvCell{p.tokens[std::size_t(i)], q};
    }
  }

  void check_conflicts(const IterationPlan& plan) {
    // What the transfers in flight read and write.
    std::set<std::uint32_t> dev_read, host_read, host_written, disk_read, disk_written;
    for (const auto& c : swap_outs_) dev_read.insert(c.device.value), host_written.insert(c.host.value);
    for (const auto& c : spills_) host_read.insert(c.host.value), disk_written.insert(c.disk.value);
    for (const auto& c : restores_) disk_read.insert(c.disk.value), host_written.insert(c.host.value);
    auto write = [&](const std::set<std::uint32_t>& read, const std::set<std::uint32_t>& written, std::uint32_t v) {
      conflicts_ += std::int64_t(read.count(v) + written.count(v));
    };
    for (kv::BlockId b : plan.freed_blocks) write(dev_read, {}, b.value);
    for (const auto& c : plan.copies) write(dev_read, {}, c.dst.value);
    for (const auto& c : plan.transfers.swap_in) write(dev_read, {}, c.device.value);
    for (const auto& p : plan.sequences) {
      for (std::size_t i = 0; i < p.tokens.size(); ++i) {
        write(dev_read, {}, p.blocks[std::size_t((p.start_pos + std::int64_t(i)) / bt_)].value);
      }
    }
    std::set<std::uint32_t> swap_in_src;
    for (const auto& c : plan.transfers.swap_in) {
      conflicts_ += std::int64_t(host_written.count(c.host.value));  // reading what is not there yet
      swap_in_src.insert(c.host.value);
    }
    for (const auto& c : plan.transfers.swap_out) {
      write(host_read, host_written, c.host.value);
      conflicts_ += std::int64_t(swap_in_src.count(c.host.value));
    }
    for (const auto& c : plan.transfers.restore) {
      write(host_read, host_written, c.host.value);
      conflicts_ += std::int64_t(swap_in_src.count(c.host.value) + disk_written.count(c.disk.value));
    }
    for (const auto& c : plan.transfers.spill) {
      write(disk_read, disk_written, c.disk.value);
      conflicts_ += std::int64_t(host_written.count(c.host.value));
    }
  }

  std::int32_t bt_;
  std::vector<Block> device_, host_, disk_;
  std::map<std::uint32_t, std::vector<std::int32_t>> disk_tokens_;
  std::vector<DeviceHostCopy> swap_outs_;
  std::vector<HostDiskCopy> spills_;
  std::vector<HostDiskCopy> restores_;
  std::size_t swap_in_total_ = 0;
  std::int64_t stale_reads_ = 0, conflicts_ = 0, checked_reads_ = 0;
};

}  // namespace pensieve::testing
