// proxy_command.h — the memory layout of the GPU→CPU command FIFO (DESIGN.md "Inter-node").
//
// Plain C++ (no CUDA): the device producers (primitives/fifo.cuh) and the host proxy
// (ffi/src/proxy/) include the same definitions, so there is one layout.
//
// A FIFO is one block of pinned, host-mapped memory (plain aligned host memory when there is no
// GPU), laid out as:
//
//   byte 0     FifoControl (256 B): four 64-bit words, each on its own 64-byte line so that the
//              producers' line (head) and the proxy's lines (tail, completed, error) never share
//              a cache line:
//                [  0,   8) head       tickets claimed by host producers (CAS). Device producers
//                                      claim from a counter in device memory instead (see fifo.cuh)
//                [ 64,  72) tail       every ticket < tail has been copied out by the proxy: its
//                                      slot may be rewritten. Proxy: release store. Producers:
//                                      acquire load before writing a slot (backpressure).
//                [128, 136) completed  every ticket < completed is done (PUT: data delivered and
//                                      its signal raised at the target). Proxy: release store.
//                [192, 200) error      0 while healthy; else the failing WEFT_E_* status (negative,
//                                      as int64). Set once by the proxy; waiters stop waiting.
//   byte 256   capacity slots of 64 B (capacity a power of two); ticket t lives in slot t % capacity.
//
// A slot (struct Command, 64 B, one cache line, written by one producer):
//
//   [ 0,  8) header         bits 0..7 opcode (never 0), bits 8..63 ticket mod 2^56.
//                           Written LAST with a release store; the proxy reads it with an acquire
//                           load and takes the slot only when the ticket matches the one it
//                           expects, so a slot left over from the previous lap is never mistaken
//                           for a new one and nothing ever needs clearing.
//   [ 8, 12) peer           destination rank
//   [12, 13) src_region     transport region of the source bytes (this rank)
//   [13, 14) dst_region     transport region of the destination bytes (peer)
//   [14, 15) signal_region  transport region holding the signal word (peer)
//   [15, 16) flags          kFlagSignal: a PUT raises the signal after its data
//   [16, 24) src_offset     byte offset in src_region
//   [24, 32) dst_offset     byte offset in dst_region
//   [32, 40) bytes          PUT length (may be 0 with kFlagSignal: a pure ordered signal)
//   [40, 48) signal_offset  byte offset of the 64-bit signal word (8-byte aligned)
//   [48, 56) signal_value   the value the signal is raised to (an epoch: values only grow)
//   [56, 64) cookie         opaque to the proxy; quoted in error messages (op id, tile, ...)
//
// Opcodes:
//   kPut      write bytes [src_offset, +bytes) of src_region to the peer's dst_region at dst_offset;
//             with kFlagSignal, then raise the peer's signal word to signal_value. The signal is
//             visible only after this PUT's data and after every earlier PUT's data to the same
//             peer from the same FIFO.
//   kSignal   raise the peer's signal word to signal_value, ordered as above (after all earlier
//             PUT data to that peer).
//   kFence    commands after it start only once every command before it has completed.
//   kBarrier  a fence, then a barrier with every other rank's proxy (their barrier commands pair
//             up in order). Completes when all ranks have arrived.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define WEFT_PROXY_HD __host__ __device__
#else
#define WEFT_PROXY_HD
#endif

namespace weft::proxy {

enum Opcode : uint8_t {
  kOpNone = 0,  // an empty or never-written slot
  kOpPut = 1,
  kOpSignal = 2,
  kOpFence = 3,
  kOpBarrier = 4,
};
constexpr uint8_t kOpLast = kOpBarrier;

enum CommandFlags : uint8_t {
  kFlagSignal = 1,
};

struct alignas(64) Command {
  uint64_t header;
  uint32_t peer;
  uint8_t src_region;
  uint8_t dst_region;
  uint8_t signal_region;
  uint8_t flags;
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t bytes;
  uint64_t signal_offset;
  uint64_t signal_value;
  uint64_t cookie;
};

static_assert(sizeof(Command) == 64, "a command is one 64-byte line");
static_assert(offsetof(Command, peer) == 8 && offsetof(Command, src_region) == 12 &&
                  offsetof(Command, flags) == 15 && offsetof(Command, src_offset) == 16 &&
                  offsetof(Command, bytes) == 32 && offsetof(Command, signal_value) == 48 &&
                  offsetof(Command, cookie) == 56,
              "the slot layout documented above");

constexpr unsigned kTicketShift = 8;
constexpr uint64_t kTicketMask = (uint64_t{1} << (64 - kTicketShift)) - 1;

// The header that commits ticket `t` with opcode `op`.
WEFT_PROXY_HD constexpr uint64_t command_header(uint64_t ticket, uint8_t op) {
  return ((ticket & kTicketMask) << kTicketShift) | op;
}
WEFT_PROXY_HD constexpr uint8_t header_opcode(uint64_t header) { return static_cast<uint8_t>(header & 0xff); }
WEFT_PROXY_HD constexpr bool header_commits(uint64_t header, uint64_t ticket) {
  return header_opcode(header) != kOpNone && (header >> kTicketShift) == (ticket & kTicketMask);
}

struct FifoControl {
  uint64_t head;
  uint64_t pad0[7];
  uint64_t tail;
  uint64_t pad1[7];
  uint64_t completed;
  uint64_t pad2[7];
  int64_t error;
  uint64_t pad3[7];
};

static_assert(sizeof(FifoControl) == 256, "control block: four 64-byte lines");
static_assert(offsetof(FifoControl, tail) == 64 && offsetof(FifoControl, completed) == 128 &&
                  offsetof(FifoControl, error) == 192,
              "one control word per cache line");

constexpr size_t kSlotsOffset = sizeof(FifoControl);

// What a kernel needs to push into a proxy's device lane (primitives/fifo.cuh).
struct FifoDevice {
  Command* slots;            // device alias of the lane's slots (host memory)
  unsigned long long* head;  // ticket counter, device memory
  const uint64_t* control;   // device alias of the lane's FifoControl (host memory)
  uint32_t capacity;         // slots, a power of two
};

constexpr size_t fifo_bytes(uint32_t capacity) {
  return kSlotsOffset + size_t{capacity} * sizeof(Command);
}

}  // namespace weft::proxy
